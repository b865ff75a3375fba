"""What the NaN origin costs (docs/performance.md, "NaN origin"): the step time of a hook whose
exploding_tensor rule stops training (origin armed: a forward hook keeping the inputs, the
output's gradient hook, a fused finiteness pass over the gradients at backward end) against
the same rule without stop_training (nothing armed), interleaved in one run; and the replay's
own time at an injected NaN (forward: log of a negative number; backward: sqrt at 0), from the
nonfinite_origin event.

    .venv/bin/python bench/nan_origin_cost.py [--steps 400] [--trials 5]
"""
import argparse
import json
import statistics
import tempfile
import time

import torch
from torch import nn

import trainscope as ts


class Fault(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind, self.armed = kind, False

    def forward(self, x):
        if not self.armed:
            return x
        if self.kind == "log":
            return torch.log(x - 10)
        return x + torch.sqrt((x * 0) ** 2)


def model(width, depth, fault=None):
    torch.manual_seed(0)
    layers = [nn.Linear(32, width), nn.ReLU()]
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    if fault is not None:
        layers.append(fault)
    return nn.Sequential(*layers, nn.Linear(width, 4))


def loop(m, steps, actions, fault=None, fault_step=None):
    with tempfile.TemporaryDirectory() as d:
        hook = ts.Hook(d, system_monitor_interval_ms=0,
                       rules=[ts.Rule("exploding_tensor", actions=actions)])
        hook.register_module(m)
        crit = hook.register_loss(nn.MSELoss())
        opt = torch.optim.SGD(m.parameters(), lr=1e-3)
        x, y = torch.randn(16, 32), torch.randn(16, 4)
        t0 = time.perf_counter_ns()
        for i in range(steps):
            if fault is not None:
                fault.armed = i == fault_step
            loss = crit(m(x), y)
            opt.zero_grad()
            loss.backward()
            if hook.should_stop:
                break
            opt.step()
        per_step = (time.perf_counter_ns() - t0) / max(1, i + 1) / 1000
        hook.close()
        origin = ts.open_run(d).events("nonfinite_origin")
    return per_step, origin


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--trials", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(1)
    out = {}
    for name, (width, depth) in {"mlp 32x64x2": (64, 2), "mlp 32x512x6": (512, 6)}.items():
        m = model(width, depth)
        off, on = [], []
        for _ in range(a.trials):
            off.append(loop(m, a.steps, [])[0])
            on.append(loop(m, a.steps, ["stop_training"])[0])
        row = {"unarmed_us": round(statistics.median(off), 1),
               "armed_us": round(statistics.median(on), 1)}
        for kind in ("log", "sqrt"):
            f = Fault(kind)
            _, origin = loop(model(width, depth, f), 10, ["stop_training"], f, 5)
            row[f"replay_ms_{kind}"] = origin[0]["replay_ms"] if origin else None
            row[f"origin_{kind}"] = origin[0]["summary"] if origin else None
        out[name] = row
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

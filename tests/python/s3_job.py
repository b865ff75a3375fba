"""A tiny training whose run goes to OUT (a folder or s3://bucket/prefix), started by
tests/python/test_s3.py:

    python s3_job.py --out s3://bkt/run1 --steps 60 --nan-at 25 --result result.json

With --nan-at K the loss turns NaN at step K (exploding_tensor + stop_training stop it). The
result file gets the steps taken and the stop reason."""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import trainscope as ts  # noqa: E402

torch.set_num_threads(1)


class Crit(torch.nn.Module):
    """Cross entropy whose value turns NaN at call `nan_at` (0-based; -1: never)."""

    def __init__(self, nan_at):
        super().__init__()
        self.nan_at, self.calls = nan_at, 0

    def forward(self, out, y):
        loss = torch.nn.functional.cross_entropy(out, y)
        if self.calls == self.nan_at:
            loss = loss + torch.tensor(float("nan"))  # a constant: backward stays finite
        self.calls += 1
        return loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--nan-at", type=int, default=-1)
    p.add_argument("--step-ms", type=float, default=0.0)
    p.add_argument("--result", default="")
    a = p.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    hook = ts.Hook(out_dir=a.out, save_interval=1, collections=["losses"],
                   rules=[ts.Rule("exploding_tensor", actions=["stop_training"])],
                   system_monitor_interval_ms=0)
    hook.register_module(model)
    hook.register_optimizer(opt)
    crit = Crit(a.nan_at)
    hook.register_loss(crit)
    for step in range(a.steps):
        x, y = torch.randn(8, 8, generator=g), torch.randint(0, 3, (8,), generator=g)
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if a.step_ms:
            time.sleep(a.step_ms / 1000)
        if hook.should_stop:
            break
    result = {"steps": hook.step_count, "reason": hook.stop_reason, "spool": hook.out_dir}
    hook.close()
    if a.result:
        with open(a.result, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()

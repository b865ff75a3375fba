"""How late an in-process rule's stop reaches the training loop (docs/performance.md).

1. Core: records handed to the core (PyWriter.commit(), what the hook's committer does) ->
   RuleRunner (woken by the writer's flush listener) -> stop_training -> the flag
   hook.should_stop reads. Measured per trial with a fresh run; prints p50/p95/max in ms.
2. Hook, NaN loss: a fast loop (tiny MLP) whose loss turns NaN at step K with exploding_tensor
   + stop_training; prints the step at which should_stop became True and the ms from the
   criterion call to it.
3. Hook, another rule (vanishing_gradient + stop_training, zeroed weights from step K): the
   steps and ms from the end of step K to should_stop (includes the committer's period).

    PYTHONPATH=python python bench/rule_latency.py [trials]
"""
import json
import math
import os
import sys
import tempfile
import time


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def core_latency(trials):
    from trainscope import _core
    cfg = json.dumps({"rules": [{"name": "exploding_tensor", "actions": ["stop_training"]}]})
    out = []
    for i in range(trials):
        d = tempfile.mkdtemp(prefix="ts-lat-")
        w = _core.Writer(d, "worker-0", flush_interval_ms=20)
        w.staging = True
        w.flush_on_commit = True
        r = _core.RuleRunner(d, cfg, w, streams=["worker-0"], poll_ms=20, wake_on_write=True)
        for s in range(5):  # some healthy steps first
            now = int(time.time() * 1e6)
            w.add_scalar("losses/loss", s, 0, s, 1.0)
            w.add_step(s, 0, s, now, now + 10)
        w.commit()
        time.sleep(0.05)
        now = int(time.time() * 1e6)
        w.add_scalar("losses/loss", 5, 0, 5, math.nan)
        w.add_step(5, 0, 5, now, now + 10)
        t0 = time.perf_counter()
        w.commit()
        while not r.stop_requested():
            if time.perf_counter() - t0 > 5:
                break
        out.append((time.perf_counter() - t0) * 1e3)
        r.stop()
        w.close()
    return out


def hook_nan(k=200):
    import torch
    import trainscope as ts
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    x = torch.randn(4, 8)
    d = tempfile.mkdtemp(prefix="ts-nan-")
    with ts.Hook(d, rules=[ts.Rule("exploding_tensor", actions=["stop_training"])],
                 system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        for i in range(10 * k):
            t0 = time.perf_counter()
            loss = crit(model(x), torch.full((4, 1), math.nan if i >= k else 0.0))
            stop = hook.should_stop
            dt = (time.perf_counter() - t0) * 1e3
            if stop:
                return i - k, dt
            loss.backward()
            opt.step()
            opt.zero_grad()
    return None, None


def hook_other(k=300):
    import torch
    import trainscope as ts
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    d = tempfile.mkdtemp(prefix="ts-vg-")
    with ts.Hook(d, rules=[ts.Rule("vanishing_gradient", actions=["stop_training"])],
                 save_interval=1, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        t_end = None
        for i in range(100 * k):
            if i == k:
                with torch.no_grad():
                    for p in model.parameters():
                        p.zero_()
            if hook.should_stop:
                return i - k - 1, (time.perf_counter() - t_end) * 1e3
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if i == k:
                t_end = time.perf_counter()
    return None, None


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    lat = core_latency(trials)
    print(f"core commit -> stop flag, {trials} trials: p50 {pct(lat, 50):.2f} ms, "
          f"p95 {pct(lat, 95):.2f} ms, max {max(lat):.2f} ms")
    for _ in range(3):
        steps, ms = hook_nan()
        print(f"hook NaN loss: stopped {steps} steps after the NaN step, "
              f"{ms:.3f} ms after the criterion call")
    for _ in range(3):
        steps, ms = hook_other()
        print(f"hook vanishing_gradient: should_stop {steps} steps after the violating step, "
              f"{ms:.1f} ms after its end")


if __name__ == "__main__":
    main()

"""How late an in-process rule's stop reaches the training loop (docs/performance.md).

1. Core: records handed to the core -> exploding_tensor fires -> stop_training -> the flag
   hook.should_stop reads, in four set-ups (TOPOLOGIES, core_latency's docstring): the hook's
   committer (writes and evaluates on its own thread) or the writer's and rules' threads,
   with the polling thread spinning or every core busy. Prints p50/p95/max in ms.
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


TOPOLOGIES = {
    # name: (who commits, what the polling thread does between checks)
    "hook": ("committer", "spin"),
    "hook, cores busy": ("committer", "matmul"),
    "writer+rules threads": ("self", "spin"),
    "writer+rules threads, cores busy": ("self", "matmul"),
}


def core_latency(trials, topology="hook"):
    """Records handed to the core -> the runtime's stop flag (exploding_tensor + stop_training
    on a NaN loss), through the hook's own objects (_core.Runtime, start_rules, a staging
    writer that flushes on commit). Per trial a fresh run; returns the latencies in ms.

    "committer": another thread hands the burst over with Runtime.commit_and_evaluate(), as
    the hook's committer does (it writes and evaluates the rules itself). "self": the polling
    thread calls writer.commit(), and the writer's and the rules' threads are woken (the path
    the C++ Session and a Python run without a committer take). Between checks the polling
    thread spins on stop_requested(), or runs a 2-thread matmul of ~0.5 ms (every core busy,
    as in training: each thread wake-up then waits for a core's time slice).
    """
    import threading
    from trainscope import _core
    who, load = TOPOLOGIES[topology]
    work = None
    if load == "matmul":
        import torch
        torch.set_num_threads(2)
        a = torch.randn(256, 256)
        work = lambda: a @ a  # noqa: E731
    cfg = json.dumps({"rules": [{"name": "exploding_tensor", "actions": ["stop_training"]}]})
    out = []
    for i in range(trials):
        d = tempfile.mkdtemp(prefix="ts-lat-")
        rt = _core.Runtime(d, "worker-0", writer_options={"flush_interval_ms": 20})
        w = rt.writer
        w.staging = True
        w.flush_on_commit = True
        rt.start_rules(cfg, poll_ms=20)
        for s in range(5):  # some healthy steps first
            now = int(time.time() * 1e6)
            w.add_scalar("losses/loss", s, 0, s, 1.0)
            w.add_step(s, 0, s, now, now + 10)
        w.commit()
        time.sleep(0.05)
        now = int(time.time() * 1e6)
        w.add_scalar("losses/loss", 5, 0, 5, math.nan)
        w.add_step(5, 0, 5, now, now + 10)
        t0 = [None]
        th = None
        if who == "committer":
            go = threading.Event()

            def committer():  # waits like the hook's (on its 20 ms timer), then commits
                go.wait()
                t0[0] = time.perf_counter()
                rt.commit_and_evaluate()

            th = threading.Thread(target=committer)
            th.start()
            time.sleep(0.005)  # the committer is waiting
            go.set()
        else:
            t0[0] = time.perf_counter()
            w.commit()
        while not rt.stop_requested():
            if work is not None:
                work()
            if t0[0] is not None and time.perf_counter() - t0[0] > 5:
                break
        out.append((time.perf_counter() - t0[0]) * 1e3)
        if th is not None:
            th.join()
        rt.close()
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
    for topology in TOPOLOGIES:
        lat = core_latency(trials, topology)
        print(f"core commit -> stop flag ({topology}), {trials} trials: p50 "
              f"{pct(lat, 50):.2f} ms, p95 {pct(lat, 95):.2f} ms, max {max(lat):.2f} ms")
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

#!/usr/bin/env python3
"""Cost of the framework-profiling window (ts.ProfilerConfig) on the reference CPU training of
bench/step_overhead.py (MLP 64-256-256-10 on digits, batch 64, SGD momentum, 2 threads).

Two measurements:

  outside   the default hook with and without a ProfilerConfig whose window has not started
            (it starts at step 10**9), interleaved in blocks of 20 steps in one process: the
            ratio of their median step times. Expected: 1.00 (one integer comparison per step).
  inside    one hook with a window of --window steps starting after --window steps; per round,
            the median step time inside the window against the median of the same number of
            steps just before and just after it, in the same hook. torch.profiler and cProfile
            are process-wide, so this cannot be interleaved with a hook outside its window.
            Also: the one-off cost of the step that closes the window (exporting the Chrome
            trace and the function table).

  python3 bench/profiler_overhead.py [--rounds 5] [--window 40] [--json out.json]
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_overhead as so  # noqa: E402  (reference model, data and Runner)

try:
    import trainscope as ts
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
    import trainscope as ts


class ProfiledRunner(so.Runner):
    """so.Runner's default configuration, plus a profiler window."""

    def __init__(self, batches, tmp, start_step, num_steps):
        self._profiler = ts.ProfilerConfig(start_step=start_step, num_steps=num_steps)
        super().__init__("default", batches, tmp)

    def _make_hook(self, d, colls):
        return ts.Hook(d, collections=colls, system_monitor_interval_ms=0,
                       profiler=self._profiler)


def outside(batches, tmp, rounds, steps, block):
    a = so.Runner("default", batches, tmp)
    b = ProfiledRunner(batches, tmp, start_step=10**9, num_steps=10)
    for r in (a, b):
        r.run(30, record=False)
    for i in range(rounds * max(1, steps // block)):
        for r in ((a, b) if i % 2 == 0 else (b, a)):
            r.run(1, record=False)
            r.run(block)
    ratio = statistics.median(b.times) / statistics.median(a.times)
    med_a = statistics.median(a.times) / 1000
    a.close()
    b.close()
    return med_a, ratio


def inside(batches, tmp, rounds, window):
    rows = []
    for _ in range(rounds):
        warm = 30
        r = ProfiledRunner(batches, tmp, start_step=warm + window, num_steps=window)
        r.run(warm, record=False)
        r.run(window)              # before the window
        before = r.times
        r.times = []
        r.run(window)              # inside (the window opens at the first of these steps)
        inside_t = r.times
        r.times = []
        r.run(1)                   # the step whose end closes the window: writes the files
        closing = r.times[0]
        r.times = []
        r.run(window)              # after
        after = r.times
        r.close()
        base = statistics.median(before + after)
        rows.append({"outside_us": base / 1000, "inside_us": statistics.median(inside_t) / 1000,
                     "ratio": statistics.median(inside_t) / base,
                     "closing_step_ms": closing / 1e6})
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--block", type=int, default=20)
    p.add_argument("--window", type=int, default=40)
    p.add_argument("--json", default="")
    args = p.parse_args()
    torch.set_num_threads(2)
    batches = so.data(64)
    tmp = tempfile.mkdtemp(prefix="ts-prof-bench-")
    try:
        med, ratio_out = outside(batches, tmp, args.rounds, args.steps, args.block)
        rows = inside(batches, tmp, args.rounds, args.window)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratio_in = statistics.median(r["ratio"] for r in rows)
    closing = statistics.median(r["closing_step_ms"] for r in rows)
    print("reference: MLP 64-256-256-10 (ReLU) on digits, batch 64, default hook, 2 threads")
    print(f"  outside the window: {ratio_out:.3f}x the same hook without a profiler "
          f"(median step {med:.1f} us)")
    print(f"  inside a {args.window}-step window (torch.profiler + cProfile): {ratio_in:.2f}x "
          f"the steps around it (rounds {min(r['ratio'] for r in rows):.2f}-"
          f"{max(r['ratio'] for r in rows):.2f})")
    print(f"  step that closes the window (trace + function table written): {closing:.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"outside_ratio": ratio_out, "inside_ratio": ratio_in,
                       "closing_step_ms": closing, "rounds": rows, "window": args.window}, f,
                      indent=2)


if __name__ == "__main__":
    main()

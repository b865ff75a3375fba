#!/usr/bin/env python3
"""trainscope against TraceML (PyPI traceml-ai, automatic mode) on the anchor training.

TraceML's automatic mode patches torch process-wide and reports to an aggregator that its
launcher starts (`traceml run script.py`), so the tools cannot share one process: each round
runs one process per tool (none, trainscope, traceml) in a rotating order, and each tool's
ratio is its median step time over the plain loop's in the same round. The table gives the
median of the per-round ratios and their range.

  python3 bench/vs_traceml.py [--rounds 5] [--steps 1000] [--json out.json]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = ("none", "trainscope", "traceml")


def run_one(tool, steps, tmp, rnd):
    out = os.path.join(tmp, f"{tool}-{rnd}.json")
    loop = [os.path.join(HERE, "anchor_loop.py"), "--tool", tool, "--steps", str(steps),
            "--json", out]
    if tool == "traceml":
        traceml = shutil.which("traceml") or os.path.join(os.path.dirname(sys.executable),
                                                           "traceml")
        cmd = [traceml, "run", "--mode", "summary", "--logs-dir", os.path.join(tmp, "traceml"),
               "--run-name", f"r{rnd}", loop[0], "--args"] + loop[1:]
    else:
        cmd = [sys.executable] + loop
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=600)
    if r.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"{tool} failed (rc {r.returncode}):\n{r.stdout[-3000:]}")
    with open(out) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--json", default="")
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="ts-vs-traceml-")
    per = {t: [] for t in TOOLS}
    try:
        for rnd in range(a.rounds):
            order = TOOLS[rnd % 3:] + TOOLS[:rnd % 3]
            got = {t: run_one(t, a.steps, tmp, rnd) for t in order}
            for t in TOOLS:
                per[t].append(got[t]["median_us"])
            print(f"round {rnd}: " + ", ".join(f"{t} {got[t]['median_us']:.0f} us"
                                              for t in TOOLS), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {"model": "MLP 784-512-256-10, batch 64, 1 thread", "rounds": a.rounds,
              "steps": a.steps, "tools": {}}
    print("anchor MLP 784-512-256-10, batch 64, 1 thread; one process per tool per round")
    for t in TOOLS:
        ratios = [x / b for x, b in zip(per[t], per["none"])]
        result["tools"][t] = {"median_step_us": round(statistics.median(per[t]), 1),
                              "ratio": round(statistics.median(ratios), 4),
                              "round_ratios": [round(r, 4) for r in ratios]}
        print(f"  {t:<11} median step {statistics.median(per[t]):8.1f} us   ratio "
              f"{statistics.median(ratios):.3f}x (rounds {min(ratios):.3f}-{max(ratios):.3f})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()

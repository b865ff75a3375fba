#!/usr/bin/env python3
"""Cost of zero-code capture against the explicit hook, on the reference training of
bench/step_overhead.py (MLP 64-256-256-10 on digits, batch 512, SGD, 2 threads).

Zero-code capture patches process-wide torch functions, so the configurations cannot share a
process: each round starts one process per configuration, in a rotating order, every one
under `trainscope run` (same system monitor, same environment):

  none      a plain loop, `trainscope run --no-instrument`
  explicit  the loop with ts.Hook defaults (register_module, register_loss,
            register_optimizer, should_stop every step), `--no-instrument`
  zero      the plain loop, unmodified, under `trainscope run` (zero-code capture)

Each process runs --warmup steps, then times --steps steps (batch request to the end of
optimizer.step(), and the hook's should_stop check for `explicit`). Prints the median step
time of each configuration over all rounds, its ratio to `none`, and zero/explicit.

  python3 bench/zero_code_overhead.py [--rounds 5] [--steps 1500] [--json out.json]
Target: zero-code within 2% of the explicit hook (zero / explicit <= 1.02).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(mode: str, steps: int, warmup: int, out: str) -> None:
    import itertools
    import torch
    sys.path.insert(0, HERE)
    import step_overhead as so
    torch.set_num_threads(2)
    batches = so.data(512)
    model, opt, crit = so.make()
    loader = (batches[i % len(batches)] for i in itertools.count())
    hook = None
    if mode == "explicit":
        import trainscope as ts
        hook = ts.Hook(system_monitor_interval_ms=0)
        hook.register_module(model)
        crit = hook.register_loss(crit)
        hook.register_optimizer(opt)
        loader = hook.wrap(loader)
    it = iter(loader)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter_ns()
        x, y = next(it)
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if hook is not None and hook.should_stop:
            break
        if i >= warmup:
            times.append(time.perf_counter_ns() - t0)
    if hook is not None:
        hook.close()
    with open(out, "w") as f:
        json.dump(times, f)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--warmup", type=int, default=150)
    p.add_argument("--json", default="")
    p.add_argument("--worker", default="")
    p.add_argument("--out", default="")
    a = p.parse_args()
    if a.worker:
        worker(a.worker, a.steps, a.warmup, a.out)
        return
    cli = os.environ.get("TRAINSCOPE_BIN") or shutil.which("trainscope") or "trainscope"
    modes = ["none", "explicit", "zero"]
    times = {m: [] for m in modes}
    rounds = {m: [] for m in modes}
    tmp = tempfile.mkdtemp(prefix="ts-zero-code-")
    try:
        for r in range(a.rounds):
            order = modes[r % 3:] + modes[:r % 3]
            for m in order:
                run = os.path.join(tmp, f"{m}-{r}")
                out = os.path.join(tmp, f"{m}-{r}.json")
                cmd = [cli, "run", "--out", run, "--quiet", "--interval-ms", "60000"]
                if m != "zero":
                    cmd.append("--no-instrument")
                cmd += ["--", sys.executable, os.path.abspath(__file__), "--worker", m,
                        "--steps", str(a.steps), "--warmup", str(a.warmup), "--out", out]
                subprocess.run(cmd, check=True, timeout=600)
                t = json.load(open(out))
                times[m] += t
                rounds[m].append(statistics.median(t) / 1000.0)
                shutil.rmtree(run, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {m: statistics.median(times[m]) / 1000.0 for m in modes}
    result = {"median_step_us": med,
              "ratio_to_none": {m: med[m] / med["none"] for m in modes},
              "zero_over_explicit": med["zero"] / med["explicit"],
              "per_round_zero_over_explicit": [z / e for z, e in zip(rounds["zero"],
                                                                     rounds["explicit"])],
              "rounds": a.rounds, "steps": a.steps}
    for m in modes:
        print(f"{m:9s} median step {med[m]:8.1f} us   x{med[m] / med['none']:.3f}")
    print(f"zero-code / explicit hook: x{result['zero_over_explicit']:.3f}  (per round: "
          + ", ".join(f"{v:.3f}" for v in result["per_round_zero_over_explicit"]) + ")")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Step overhead of the trainscope PyTorch hook on a reference CPU training.

Reference training: an MLP 64-256-256-10 (ReLU) on scikit-learn's digits, batch 512 (about
1.8 ms per step here), SGD with momentum, CrossEntropyLoss, torch.set_num_threads(2).
`--batch 64` (about 0.5 ms per step, 85k parameters) is the stress case: the same per-step
cost is four times the share of the step, and summarising every parameter and gradient
every step costs about a tenth of it in the statistics kernel alone. Configurations, interleaved round by
round in one process (each round runs every configuration for --steps steps, in a rotating
order) so drifts in machine load hit all of them alike:

  none              no hook
  default           ts.Hook defaults (losses every step; weights and gradients summaries
                    every 100 steps), wrap(loader), register_optimizer
  grads_every_step  gradient summaries every step (weights on the default schedule)
  every_step        weights and gradients summaries every step

Prints the median step time of each configuration and its ratio to `none` (over all steps
of all rounds; the per-round ratios show the spread), the step time each adds, and the hook's
own time on a non-save step: the time inside its callbacks (forward pre/post hooks with the
step close/open bookkeeping and the StepRecord, the loss hook with its .item(), the optimizer
wrapper, the loader iterator), measured by the hook's C step clock at each callback's entry
and exit.

  python3 bench/step_overhead.py [--rounds 7] [--steps 200] [--json out.json]
  python3 bench/step_overhead.py --model anchor --batch 64 --threads 1   # the anchor model
Targets (reference): default <= 1.01x, every_step <= 1.10x, non-save step hook time < 5 us.
Targets (anchor, torch 2.13): default <= 1.01x, grads_every_step <= 1.08x, every_step <= 1.15x.
"""
import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

try:
    import trainscope as ts
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
    import trainscope as ts


def data(batch):
    if MODEL == "anchor":  # MNIST-shaped fixed random data (no download)
        g = torch.Generator().manual_seed(0)
        return [(torch.rand(batch, 784, generator=g), torch.randint(0, 10, (batch,), generator=g))
                for _ in range(16)]
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.from_numpy((d.data / 16.0).astype(np.float32))
    y = torch.from_numpy(d.target.astype(np.int64))
    n = (len(x) // batch) * batch
    return [(x[i:i + batch], y[i:i + batch]) for i in range(0, n, batch)]


MODEL = "mlp"


def make():
    torch.manual_seed(0)
    nn = torch.nn
    if MODEL == "cnn":
        model = nn.Sequential(nn.Unflatten(1, (1, 8, 8)),
                              nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(64 * 4 * 4, 128), nn.ReLU(),
                              nn.Linear(128, 10))
    elif MODEL == "anchor":
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(),
                              nn.Linear(512, 256), nn.ReLU(),
                              nn.Linear(256, 10))
    else:
        model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(),
                              nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, opt, torch.nn.CrossEntropyLoss()


class Runner:
    """One configuration: its own model, optimizer, loader and (but for "none") hook, run a
    block of steps at a time so that configurations can be interleaved finely."""

    def __init__(self, name, batches, tmp):
        self.name = name
        self.model, self.opt, self.crit = make()
        self.hook = None
        n = len(batches)
        loader = (batches[i % n] for i in itertools.count())
        if name != "none":
            colls = None
            if name == "every_step":
                colls = ["losses", ts.Collection("weights", save_interval=1),
                         ts.Collection("gradients", save_interval=1)]
            elif name == "grads_every_step":
                colls = ["losses", "weights", ts.Collection("gradients", save_interval=1)]
            d = os.path.join(tmp, f"{name}-{time.monotonic_ns()}")
            self.hook = self._make_hook(d, colls)
            self.hook.register_module(self.model)
            self.hook.register_loss(self.crit)
            self.hook.register_optimizer(self.opt)
            loader = self.hook.wrap(loader)
        self.it = iter(loader)
        self.times = []

    def _make_hook(self, d, colls):
        return ts.Hook(d, collections=colls, system_monitor_interval_ms=0)

    def run(self, steps, record=True):
        """Runs `steps` training steps; each is timed from the batch request (which is where
        the hook closes the previous step) to the end of optimizer.step() and, with a hook,
        the loop's `hook.should_stop` check."""
        model, opt, crit, it, hook = self.model, self.opt, self.crit, self.it, self.hook
        for _ in range(steps):
            t0 = time.perf_counter_ns()
            x, y = next(it)
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if hook is not None and hook.should_stop:  # as the README's loop does
                break
            if record:
                self.times.append(time.perf_counter_ns() - t0)

    def close(self):
        if self.hook is not None:
            self.hook.close()
            shutil.rmtree(self.hook.out_dir, ignore_errors=True)


def hook_time_non_save(batches, steps, tmp):
    """The hook's own time per non-save step, in µs: the time spent inside its callbacks
    (the model's forward pre/post hooks, the criterion's forward hook with the loss's
    .item(), the optimizer wrapper and the loader iterator; all in C, see
    python/stepclock/), as measured by the step clock itself with
    CLOCK_MONOTONIC at each callback's entry and exit. Returns (median, mean, cost of the
    instrumentation per step), the last measured on warm callbacks and *not* subtracted."""
    r = Runner("default", batches, tmp)
    r.run(30, record=False)
    clock = r.hook._clock
    # the instrumentation: two clock reads per callback, five callbacks per step
    clock.timing = True
    n = 200000
    clock.self_ns = 0
    for _ in range(n):
        clock.model_post(None, None, None)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        clock.model_post(None, None, None)
    with_timing = (time.perf_counter_ns() - t0) / n
    clock.timing = False
    t0 = time.perf_counter_ns()
    for _ in range(n):
        clock.model_post(None, None, None)
    without = (time.perf_counter_ns() - t0) / n
    instrumentation_ns = max(0.0, with_timing - without) * 5
    clock.timing = True
    si = r.hook.save_interval
    per_step = []
    parts = {}
    for _ in range(steps):
        clock.self_ns = 0
        clock.self_breakdown = None
        # the step about to run is mode step ms + 1; it also closes step ms
        saves = (r.hook.mode_step + 1) % si in (0, 1)
        r.run(1, record=False)
        if not saves:
            per_step.append(clock.self_ns)
            for k, v in clock.self_breakdown.items():
                parts.setdefault(k, []).append(v)
    clock.timing = False
    r.close()
    breakdown = {k: round(statistics.median(v) / 1000.0, 2) for k, v in parts.items()
                 if any(v)}
    return (statistics.median(per_step) / 1000.0, statistics.mean(per_step) / 1000.0,
            instrumentation_ns / 1000.0, breakdown)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model", choices=("mlp", "cnn", "anchor"), default="mlp",
                   help="anchor: MLP 784-512-256-10 on MNIST-shaped random data (use with "
                        "--batch 64 --threads 1, about 1.7 ms a step)")
    p.add_argument("--block", type=int, default=20,
                   help="steps a configuration runs before the next one takes over")
    p.add_argument("--json", default="")
    args = p.parse_args()
    global MODEL
    MODEL = args.model
    torch.set_num_threads(args.threads)
    batches = data(args.batch)
    tmp = tempfile.mkdtemp(prefix="ts-bench-")
    configs = ["none", "default", "grads_every_step", "every_step"]
    per = {c: [] for c in configs}  # per round: median step time (us)
    all_times = {c: [] for c in configs}
    try:
        runners = {c: Runner(c, batches, tmp) for c in configs}
        for r in runners.values():  # warm-up (first save step, allocations, caches)
            r.run(30, record=False)
        blocks = max(1, args.steps // args.block)
        for rnd in range(args.rounds):
            for b in range(blocks):
                k = (rnd * blocks + b) % len(configs)
                for c in configs[k:] + configs[:k]:
                    r = runners[c]
                    r.run(1, record=False)  # the step that spans the pause between blocks
                    r.run(args.block)
            for c in configs:
                per[c].append(statistics.median(runners[c].times) / 1000.0)
                all_times[c].extend(runners[c].times)
                runners[c].times = []
        for r in runners.values():
            r.close()
        hook_us, hook_mean_us, instr_us, parts = hook_time_non_save(batches,
                                                             max(args.steps * 5, 1000), tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = per["none"]
    model_desc = {
        "mlp": "MLP 64-256-256-10 (ReLU)",
        "cnn": "CNN conv3x3(1->32)-conv3x3(32->64)-maxpool-fc(1024->128)-fc(128->10) (ReLU)",
        "anchor": "anchor MLP 784-512-256-10 (ReLU)",
    }[args.model]
    dataset = "random MNIST-shaped data" if args.model == "anchor" else "scikit-learn digits"
    result = {"model": "%s on %s, batch %d, SGD momentum, CrossEntropyLoss, "
                       "%d threads" % (model_desc, dataset, args.batch, args.threads),
              "rounds": args.rounds, "steps_per_round": blocks * args.block,
              "block": args.block, "configs": {}}
    print(f"reference: {result['model']}")
    print(f"  {args.rounds} rounds x {blocks * args.block} steps per configuration, "
          f"interleaved in blocks of {args.block} steps")
    none_all = statistics.median(all_times["none"])
    for c in configs:
        ratios = [a / b for a, b in zip(per[c], base)]
        med = statistics.median(all_times[c]) / 1000.0
        ratio = statistics.median(all_times[c]) / none_all
        result["configs"][c] = {"median_step_us": round(med, 1), "ratio": round(ratio, 4),
                                "round_ratios": [round(x, 4) for x in ratios]}
        print(f"  {c:<16} median step {med:8.1f} us   ratio {ratio:.3f}x   "
              f"(rounds {min(ratios):.3f}-{max(ratios):.3f})")
    result["hook_us_non_save_step"] = round(hook_us, 2)
    result["hook_us_non_save_step_mean"] = round(hook_mean_us, 2)
    result["instrumentation_us"] = round(instr_us, 3)
    result["hook_us_by_callback_median"] = parts
    extra = {c: statistics.median(all_times[c]) / 1000.0 - none_all / 1000.0 for c in configs}
    result["added_us_per_step"] = {c: round(v, 1) for c, v in extra.items()}
    print(f"  hook time on a non-save step (inside its callbacks, default hook): median "
          f"{hook_us:.2f} us, mean {hook_mean_us:.2f} us (includes {instr_us:.2f} us of "
          f"instrumentation)")
    print("    by callback (medians): " + ", ".join(f"{k} {v:.2f} us" for k, v in parts.items()))
    print("  median step time added: " + ", ".join(f"{c} {extra[c]:.1f} us" for c in configs[1:])
          + " (includes torch's hook dispatch)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()

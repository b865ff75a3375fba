#!/usr/bin/env python3
"""One process of bench/vs_traceml.py: the anchor training (MLP 784-512-256-10, ReLU, batch 64,
SGD momentum, CrossEntropyLoss, 1 thread, fixed random data standing in for MNIST) under one
tool, timing every step from the batch request to the end of optimizer.step().

  --tool none        plain loop
  --tool trainscope  ts.Hook defaults (losses every step, weights + gradients every 100 steps),
                     register_module/loss/optimizer, wrap(loader), `if hook.should_stop`
  --tool traceml     TraceML's automatic mode as its README shows it: traceml.init(mode="auto")
                     and `with traceml.trace_step(model):` around the step; must be started by
                     `traceml run` (its aggregator), which vs_traceml.py does

Writes {"tool", "median_us", "steps", "mean_us"} as JSON to --json.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def batches(n=32, batch=64):
    g = torch.Generator().manual_seed(0)
    return [(torch.rand(batch, 784, generator=g), torch.randint(0, 10, (batch,), generator=g))
            for _ in range(n)]


def model_and_opt():
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), nn.CrossEntropyLoss()


def cycle(data):
    while True:
        yield from data


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", choices=("none", "trainscope", "traceml"), required=True)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--json", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    model, opt, crit = model_and_opt()
    loader = cycle(batches())
    hook = None
    step_ctx = None
    if a.tool == "trainscope":
        try:
            import trainscope as ts
        except ImportError:
            sys.path.insert(0, os.path.join(HERE, "..", "python"))
            import trainscope as ts
        hook = ts.Hook(tempfile.mkdtemp(prefix="ts-anchor-"), system_monitor_interval_ms=500)
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        loader = hook.wrap(loader)
    elif a.tool == "traceml":
        import traceml_ai as traceml
        traceml.init(mode="auto", on_missing_aggregator="raise")
        step_ctx = traceml.trace_step
    it = iter(loader)
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter_ns()
        if step_ctx is not None:
            with step_ctx(model):
                x, y = next(it)
                loss = crit(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        else:
            x, y = next(it)
            loss = crit(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if hook is not None and hook.should_stop:
                break
        if i >= a.warmup:
            times.append(time.perf_counter_ns() - t0)
    if hook is not None:
        hook.close()
    with open(a.json, "w") as f:
        json.dump({"tool": a.tool, "steps": len(times),
                   "median_us": statistics.median(times) / 1000.0,
                   "mean_us": statistics.mean(times) / 1000.0}, f)


if __name__ == "__main__":
    main()

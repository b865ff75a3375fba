#!/usr/bin/env python3
"""Rollback on divergence: a learning-rate spike at --spike-at makes the loss non-finite; the
exploding_tensor rule fires, and the rollback action restores the last checkpoint taken
before the problem (its learning rate scaled by --lr-factor) and the training goes on. The
run records a "rollback" event; the loss series (last record wins) ends finite.

  python examples/pytorch/rollback.py --out runs/rollback
  python -c "import trainscope as ts; print(ts.open_run('runs/rollback').events('rollback'))"

The loop is driven by ``ckpt.step`` (the data of step s is a function of s), so after a
rollback it replays the same batches from the restored step; ``ckpt.finished()`` gives the
rules time to see the last steps before the training ends.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn

try:
    import trainscope as ts
except ImportError:  # running from a source tree without installing
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import trainscope as ts


def batch(seed: int, step: int, n: int = 16):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.randn(n, 20, generator=g)
    y = (x[:, :5].sum(1) > 0).long() + (x[:, 5] > 1).long()
    return x, y


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="run directory")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--every", type=int, default=10, help="checkpoint every N steps")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--spike-at", type=int, default=60, help="step of the learning-rate spike")
    ap.add_argument("--spike", type=float, default=1e20, help="learning-rate multiplier")
    ap.add_argument("--lr-factor", type=float, default=0.5)
    ap.add_argument("--max-rollbacks", type=int, default=3)
    ap.add_argument("--step-sleep-ms", type=float, default=2.0,
                    help="simulated extra work per step")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    crit = nn.CrossEntropyLoss()
    action = ts.Rollback(lr_factor=args.lr_factor, max_rollbacks=args.max_rollbacks)
    with ts.Hook(args.out, save_interval=20, system_monitor_interval_ms=0,
                 rules=["exploding_tensor"], actions=[action],
                 writer_options={"flush_interval_ms": 50}) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        ckpt = ts.Checkpointer(os.path.join(args.out, "checkpoints"), model, opt, hook=hook,
                               every_steps=args.every, keep_last=3)
        ckpt.resume()
        spiked = False
        iterations = 0
        loss = torch.tensor(float("nan"))
        while iterations < 20 * args.steps:
            s = ckpt.step
            if s >= args.steps:
                if ckpt.finished(settle_s=3.0):
                    break
                continue                     # rolled back: go on from ckpt.step
            if s == args.spike_at and not spiked:
                spiked = True                # a one-off bad setting, e.g. a warm-up bug
                for g in opt.param_groups:
                    g["lr"] *= args.spike
                print(f"step {s}: learning rate spiked to {opt.param_groups[0]['lr']:g}",
                      flush=True)
            x, y = batch(args.seed, s)
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            hook.step()                      # a rollback happens here, at the boundary
            iterations += 1
            if args.step_sleep_ms:
                time.sleep(args.step_sleep_ms / 1000.0)
            if hook.should_stop:
                print(f"stopped: {hook.stop_reason}", flush=True)
                break
        final = float(loss)
        print(f"done: step {ckpt.step}, {iterations} iterations, final loss {final:.4f}, "
              f"lr {opt.param_groups[0]['lr']:g}, rollbacks {ckpt.stats()['rollbacks']}",
              flush=True)
    return 0 if math.isfinite(final) else 1


if __name__ == "__main__":
    sys.exit(main())

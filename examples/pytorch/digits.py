#!/usr/bin/env python3
"""A small PyTorch training on scikit-learn's bundled digits (8x8 images, 10 classes; no
download), instrumented with trainscope. Healthy by default; --fault injects a problem:

  nan          learning rate far too high -> the loss becomes NaN
  vanishing    deep sigmoid network -> vanishing gradients in the first layers
  frozen       learning rate 0 -> the loss does not decrease
  overfit      tiny training set, evaluation every --eval-every steps -> overfitting
  slow_loader  a data loader that sleeps per batch -> data-bound steps

  python examples/pytorch/digits.py --out runs/digits
  python examples/pytorch/digits.py --out runs/nan --fault nan --rules exploding_tensor \
      --actions stop_training
  trainscope run --out runs/x -- python examples/pytorch/digits.py --fault slow_loader

A few hundred steps take a few seconds on 2 CPU cores. Seeds are fixed (deterministic).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

try:
    import trainscope as ts
except ImportError:  # running from a source tree without installing
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import trainscope as ts

FAULTS = ("none", "nan", "vanishing", "frozen", "overfit", "slow_loader")


def load_data(seed: int, train_size=None):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    rng = np.random.RandomState(seed)
    idx = rng.permutation(len(x))
    n_val = 360
    val, train = idx[:n_val], idx[n_val:]
    if train_size:
        train = train[:train_size]
    return (torch.from_numpy(x[train]), torch.from_numpy(y[train]),
            torch.from_numpy(x[val]), torch.from_numpy(y[val]))


class Batches:
    """Shuffled minibatches for a number of steps; optionally sleeps per batch."""

    def __init__(self, x, y, batch, steps, seed, sleep_s=0.0):
        self.x, self.y, self.batch, self.steps, self.sleep_s = x, y, batch, steps, sleep_s
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self):
        return self.steps

    def __iter__(self):
        n = len(self.x)
        perm = torch.randperm(n, generator=self.gen)
        pos = 0
        for _ in range(self.steps):
            if pos + self.batch > n:
                perm = torch.randperm(n, generator=self.gen)
                pos = 0
            i = perm[pos:pos + min(self.batch, n)]
            pos += self.batch
            if self.sleep_s:
                time.sleep(self.sleep_s)
            yield self.x[i], self.y[i]


def make_model(kind: str, fault: str) -> nn.Module:
    if fault == "vanishing":
        layers, width = [], 32
        dims = [64] + [width] * 12
        for a, b in zip(dims, dims[1:]):
            layers += [nn.Linear(a, b), nn.Sigmoid()]
        layers.append(nn.Linear(width, 10))
        return nn.Sequential(*layers)
    if kind == "cnn":
        return nn.Sequential(
            nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
            nn.Linear(32 * 4 * 4, 10))
    if fault == "overfit":
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                         nn.Linear(32, 10))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=None, help="run directory (default: trainscope's)")
    p.add_argument("--fault", default="none", choices=FAULTS)
    p.add_argument("--model", default="mlp", choices=("mlp", "cnn"))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--save-interval", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--rules", default="", help="comma-separated built-in rules")
    p.add_argument("--actions", default="", help="comma-separated actions, e.g. stop_training")
    p.add_argument("--collections", default="", help="comma-separated collections "
                   "(default: trainscope's defaults plus what the rules need)")
    p.add_argument("--no-hook", action="store_true", help="train without trainscope")
    p.add_argument("--raise-on-stop", action="store_true")
    p.add_argument("--sleep-ms", type=float, default=20.0, help="slow_loader: sleep per batch")
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="sleep per step (gives live rules time to act on tiny trainings)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--monitor-ms", type=int, default=500)
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    fault = args.fault
    train_size = 64 if fault == "overfit" else None
    xtr, ytr, xval, yval = load_data(args.seed, train_size)
    lr = args.lr
    if lr is None:
        lr = {"nan": 1000.0, "frozen": 0.0, "vanishing": 0.05, "overfit": 0.05}.get(fault, 0.02)
    model = make_model(args.model, fault)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9 if fault != "frozen" else 0.0)
    criterion = nn.CrossEntropyLoss()
    batch = min(args.batch, len(xtr))
    loader = Batches(xtr, ytr, batch, args.steps, args.seed,
                     args.sleep_ms / 1000.0 if fault == "slow_loader" else 0.0)

    hook = None
    if not args.no_hook:
        colls = None
        if args.collections:
            colls = [c for c in args.collections.split(",") if c]
        hook = ts.Hook(out_dir=args.out, save_interval=args.save_interval, collections=colls,
                       rules=[r for r in args.rules.split(",") if r] or None,
                       actions=[a for a in args.actions.split(",") if a] or None,
                       system_monitor_interval_ms=args.monitor_ms,
                       raise_on_stop=args.raise_on_stop)
        hook.register_module(model)
        hook.register_loss(criterion)
        hook.register_optimizer(opt)
        loader = hook.wrap(loader)

    step = 0
    stopped = False
    t0 = time.perf_counter()
    losses = []
    try:
        for x, y in loader:
            model.train()
            if hook:
                hook.set_mode(ts.Mode.TRAIN)
            loss = criterion(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
            step += 1
            if args.step_ms:
                time.sleep(args.step_ms / 1000.0)
            if args.eval_every and step % args.eval_every == 0:
                model.eval()
                if hook:
                    hook.set_mode(ts.Mode.EVAL)
                with torch.no_grad():
                    out = model(xval)
                    val_loss = criterion(out, yval)
                    acc = float((out.argmax(1) == yval).float().mean())
                if hook:
                    hook.save_scalar("val_acc", acc)
                    hook.set_mode(ts.Mode.TRAIN)
            if hook and hook.should_stop:
                stopped = True
                break
    except ts.TrainingStopped:
        stopped = True
    finally:
        if hook:
            hook.close()
    dt = time.perf_counter() - t0
    summary = {"steps": step, "stopped": stopped, "seconds": round(dt, 3),
               "final_loss": losses[-1] if losses else None,
               "run_dir": hook.out_dir if hook else None,
               "stop_reason": hook.stop_reason if hook else None}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

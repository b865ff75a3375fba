#!/usr/bin/env python3
"""A training that survives preemption: checkpoints every --every steps, and on SIGTERM (a spot
reclaim notice) finishes the current step, checkpoints, flushes the run and exits with status
ts.PREEMPTED_EXIT_CODE (75). Run the same command again to resume: the recorded series
continues, and the final weights equal those of an uninterrupted run (CPU, same seed).

  python examples/pytorch/preemptible.py --out runs/pre --steps 300
  kill -TERM <pid>                      # or the whole group, data-loader workers included
  python examples/pytorch/preemptible.py --out runs/pre --steps 300   # resumes

The data of step s is a function of (seed, s), so resuming at step s sees the same batches;
dropout uses the global torch RNG, which the checkpoint restores.
"""
import argparse
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


class StepData(torch.utils.data.Dataset):
    """Item i is the batch of step start + i (so a resumed loader starts where it stopped)."""

    def __init__(self, seed: int, start: int, steps: int):
        self.seed, self.start, self.steps = seed, start, steps

    def __len__(self):
        return self.steps - self.start

    def __getitem__(self, i):
        return batch(self.seed, self.start + i)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="run directory")
    ap.add_argument("--ckpt-dir", help="checkpoint directory (default OUT/checkpoints)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=int, default=20, help="checkpoint every N steps")
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step-sleep-ms", type=float, default=0.0,
                    help="simulated extra work per step")
    ap.add_argument("--workers", type=int, default=0, help="data-loader worker processes")
    ap.add_argument("--save-weights", help="torch.save the final state_dict here")
    ap.add_argument("--pause-in-checkpoint", type=int, default=-1, metavar="STEP",
                    help="(tests) sleep 60 s inside the checkpoint of STEP, after writing the "
                         "temporary file and before renaming it")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 3))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.7)
    crit = nn.CrossEntropyLoss()

    with ts.Hook(args.out, save_interval=50, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        ckpt = ts.Checkpointer(args.ckpt_dir or os.path.join(args.out, "checkpoints"), model,
                               opt, hook=hook, every_steps=args.every, keep_last=args.keep,
                               scheduler=sched)
        if args.pause_in_checkpoint >= 0:
            def pause(stage, path):
                if stage == "payload" and ckpt.step == args.pause_in_checkpoint:
                    print(f"pausing in checkpoint {ckpt.step}: {path}", flush=True)
                    time.sleep(60)
            ckpt._before_commit = pause
        start = ckpt.resume()
        print(f"start step {start}", flush=True)
        loss = None
        # its own generator: creating the iterator must not draw from the global torch RNG
        # (restored by resume()), or a resumed run would not match an uninterrupted one
        loader = torch.utils.data.DataLoader(
            StepData(args.seed, start, args.steps), batch_size=None, num_workers=args.workers,
            generator=torch.Generator().manual_seed(args.seed))
        for x, y in ckpt.wrap(loader):  # workers ignore SIGTERM; the main process decides
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            if args.step_sleep_ms:
                time.sleep(args.step_sleep_ms / 1000.0)
        st = ckpt.stats()
        print(f"done: {args.steps} steps, last loss {float(loss) if loss is not None else 'n/a'}"
              f", {st['checkpoints']} checkpoints, {st['total_s']:.3f} s "
              f"({100 * st['share']:.2f}% of the time)", flush=True)
    if args.save_weights:
        torch.save(model.state_dict(), args.save_weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())

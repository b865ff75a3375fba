"""A plain DDP training (gloo, CPU) with no trainscope in it, for `torchrun` under
`trainscope run`. Prints `loss RANK STEP VALUE`."""
import argparse
import os

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--fault-step", type=int, default=-1)
p.add_argument("--fault-rank", type=int, default=1)
p.add_argument("--losses", default="", help="also write each rank's losses to LOSSES-RANK")
args = p.parse_args()
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
torch.set_num_threads(1)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(args.steps):
    x = torch.randn(32, 16)
    loss = ((model(x) - x[:, :1]) ** 2).mean()
    if rank == args.fault_rank and 0 <= args.fault_step <= step:
        loss = loss * float("nan")
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"loss {rank} {step} {loss.item()!r}", flush=True)
    if args.losses:
        with open(f"{args.losses}-{rank}", "a") as f:
            f.write(f"{loss.item()!r}\n")
dist.destroy_process_group()

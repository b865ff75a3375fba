"""A plain PyTorch training with no trainscope in it (the zero-code capture tests run it
under `trainscope run`). Prints `loss STEP VALUE` for every optimizer step.

    python plain_digits.py [--steps N] [--fault-step K] [--accumulate A] [--gan] [--broken]
"""
import argparse

import numpy as np
import torch
from sklearn.datasets import load_digits

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--fault-step", type=int, default=-1, help="the loss becomes NaN from here")
p.add_argument("--accumulate", type=int, default=1)
p.add_argument("--gan", action="store_true", help="a second model and optimizer step first")
p.add_argument("--broken", action="store_true", help="a model whose parameters() raises")
p.add_argument("--loader", action="store_true", help="iterate a DataLoader")
p.add_argument("--closure", action="store_true", help="optimizer.step(closure), as Lightning")
p.add_argument("--compile", action="store_true", help="torch.compile the model")
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
x, y = load_digits(return_X_y=True)
x = torch.tensor(x / 16.0, dtype=torch.float32)
y = torch.tensor(y)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, v):
        return self.fc2(torch.relu(self.fc1(v)))


class Broken(Net):
    def parameters(self, recurse=True):
        raise RuntimeError("this model hides its parameters")


model = Broken() if args.broken else Net()
params = list(Net.parameters(model))
if args.compile:
    model = torch.compile(model)
opt = torch.optim.SGD(params, lr=0.1)
if args.gan:
    critic = torch.nn.Sequential(torch.nn.Linear(10, 1))
    critic_opt = torch.optim.SGD(critic.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()

if args.loader:
    ds = torch.utils.data.TensorDataset(x, y)
    dl = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True)

    def batches():
        while True:
            yield from dl
    source = batches()
else:
    def batches():
        g = np.random.default_rng(0)
        while True:
            idx = torch.tensor(g.integers(0, len(x), 32))
            yield x[idx], y[idx]
    source = batches()

if args.closure:
    for step in range(args.steps):
        xb, yb = next(source)

        def closure():
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            if 0 <= args.fault_step <= step:
                loss = loss * float("nan")
            loss.backward()
            return loss
        loss = opt.step(closure)
        print(f"loss {step} {loss.item()!r}", flush=True)
    print("finished", flush=True)
    raise SystemExit(0)

for step in range(args.steps):
    total = 0.0
    for _ in range(args.accumulate):
        xb, yb = next(source)
        if args.gan:  # the critic steps first, on the model's detached output
            critic_opt.zero_grad()
            c_loss = critic(model(xb).detach()).mean() ** 2
            c_loss.backward()
            critic_opt.step()
        out = model(xb)
        loss = loss_fn(out, yb)
        if 0 <= args.fault_step <= step:
            loss = loss * float("nan")
        (loss / args.accumulate).backward()
        total += loss.item() / args.accumulate
    opt.step()
    opt.zero_grad()
    print(f"loss {step} {total!r}", flush=True)
print("finished", flush=True)

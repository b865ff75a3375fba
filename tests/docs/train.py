"""The training script that the documentation's commands name (`python train.py ...`): a tiny
MLP (fc1, relu, fc2) on made-up separable data, plain PyTorch, a few dozen steps on one CPU
thread. With --hook DIR it records itself with ts.Hook (raw gradients, a profiler window at
steps 5..14): the finished run that the examples read (tests/docs/conftest.py).

    python train.py [--epochs N] [--hook DIR]
"""
import argparse

import torch

BATCH = 8
BATCHES_PER_EPOCH = 5


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 32)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def data(n_batches: int = BATCHES_PER_EPOCH, seed: int = 1):
    """(x, y) batches: the class is the argmax of ten fixed projections (learnable)."""
    g = torch.Generator().manual_seed(seed)
    proj = torch.randn(64, 10, generator=g)
    x = torch.randn(n_batches * BATCH, 64, generator=g)
    y = (x @ proj).argmax(1)
    return [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x), BATCH)]


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--hook", help="record with ts.Hook into this run directory")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    criterion = torch.nn.CrossEntropyLoss()
    batches = data()
    hook = None
    if a.hook:
        import trainscope as ts
        hook = ts.Hook(out_dir=a.hook, save_interval=5, system_monitor_interval_ms=100,
                       collections=["losses", "scalars", "weights",
                                    ts.Collection("gradients", save_interval=5, raw=True)],
                       profiler=ts.ProfilerConfig(start_step=5, num_steps=10))
        hook.register_module(model)
        criterion = hook.register_loss(criterion)
        hook.register_optimizer(opt)
    for _ in range(a.epochs):
        for x, y in (hook.wrap(batches) if hook else batches):
            loss = criterion(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    if hook:
        hook.save_scalar("val_acc", 0.9)
        hook.close()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()

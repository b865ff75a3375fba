"""Helpers shared by the GPU checks (bench/gpu_check.py runs them, one process each)."""
import math
import os
import time

NO_CUDA = "SKIP (no CUDA)"


def _torch():
    import torch
    return torch


def _ts():
    import trainscope as ts
    return ts


def cuda_ok():
    torch = _torch()
    return torch.cuda.is_available()


def mlp(sizes, seed=0):
    torch = _torch()
    torch.manual_seed(seed)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def batches(n, batch, d_in, classes, device, seed=1, dtype=None):
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randn(batch, d_in, generator=g)
        y = torch.randint(0, classes, (batch,), generator=g)
        if dtype is not None:
            x = x.to(dtype)
        out.append((x.to(device), y.to(device)))
    return out


def run_dir(work, name):
    d = os.path.join(work, "runs", f"{name}-{os.getpid()}-{time.monotonic_ns()}")
    os.makedirs(os.path.dirname(d), exist_ok=True)
    return d


def f64(t):
    """A CPU float64 numpy copy of a tensor (bfloat16/float16 widened exactly)."""
    torch = _torch()
    t = t.detach()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.cpu().double().numpy() if t.is_floating_point() else t.cpu().numpy().astype("f8")


def median(xs):
    xs = sorted(x for x in xs if x is not None and not math.isnan(x))
    if not xs:
        return float("nan")
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def fmt(x, nd=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{nd}f}"

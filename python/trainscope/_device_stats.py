"""Tensor summaries computed with torch ops on the tensor's own device (the CUDA path).

Each tensor gives one row of ``_core.STATS_TABLE_COLUMNS`` as a float64 tensor on its device;
rows are stacked and copied to the host once per step (``DeviceBatch.flush``), never one
``.item()`` per tensor. Values are computed in float64 and follow the core's conventions
(min/max/mean/var/l1/l2 over finite elements; NaN/±Inf counted separately).
"""
from __future__ import annotations

from typing import List, Tuple


def stats_row(t):
    """float64 tensor of 13 values (STATS_TABLE_COLUMNS order) on t's device; no sync."""
    import torch
    x = t.detach().reshape(-1)
    if x.dtype != torch.float64:
        x = x.to(torch.float64)
    n = x.numel()
    dev = x.device
    if n == 0:
        nan = float("nan")
        return torch.tensor([0, nan, nan, nan, nan, 0, 0, 0, 0, 0, 0, 0, 0],
                            dtype=torch.float64, device=dev)
    finite = torch.isfinite(x)
    nf = finite.sum().to(torch.float64)
    xf = torch.where(finite, x, torch.zeros((), dtype=x.dtype, device=dev))
    denom = torch.clamp(nf, min=1.0)
    mean = xf.sum() / denom
    d = torch.where(finite, x - mean, torch.zeros((), dtype=x.dtype, device=dev))
    var = (d * d).sum() / denom
    inf = torch.full((), float("inf"), dtype=x.dtype, device=dev)
    mn = torch.where(finite, x, inf).min()
    mx = torch.where(finite, x, -inf).max()
    l1 = xf.abs().sum()
    l2 = torch.sqrt((xf * xf).sum())
    isnan = torch.isnan(x).sum()
    pinf = (x == float("inf")).sum()
    ninf = (x == float("-inf")).sum()
    zeros = (x == 0).sum()
    neg = (x < 0).sum()
    pos = (x > 0).sum()
    count = torch.full((), float(n), dtype=torch.float64, device=dev)
    return torch.stack([count, mn, mx, mean, var, l1, l2] +
                       [v.to(torch.float64) for v in (isnan, pinf, ninf, zeros, neg, pos)])


class DeviceBatch:
    """Collects rows for one step and writes them with one device-to-host copy."""

    def __init__(self):
        self.names: List[str] = []
        self.dtypes: List[int] = []
        self.shapes: List[Tuple[int, ...]] = []
        self.rows = []

    def add(self, name: str, t, code: int) -> None:
        self.names.append(name)
        self.dtypes.append(code)
        self.shapes.append(tuple(t.shape))
        self.rows.append(stats_row(t))

    def __len__(self) -> int:
        return len(self.rows)

    def table(self):
        """(N, 13) numpy float64 array: one copy per device (one in the common case)."""
        import numpy as np
        import torch
        by_dev = {}
        for i, r in enumerate(self.rows):
            by_dev.setdefault(r.device, []).append(i)
        out = np.empty((len(self.rows), 13), dtype=np.float64)
        for _, idx in by_dev.items():
            host = torch.stack([self.rows[i] for i in idx]).cpu().numpy()
            out[idx] = host
        return out

    def table_with_scalars(self, scalars):
        """(table, scalar values): rows and 0-d float64 device scalars copied together when
        they all live on one device (the common case: one copy per step)."""
        import torch
        devs = {r.device for r in self.rows} | {v.device for v in scalars}
        if len(devs) != 1 or not scalars:
            table = self.table()
            values = torch.stack(scalars).cpu().tolist() if scalars else []
            return table, values
        rows = torch.stack(self.rows)
        sc = torch.stack([v.reshape(()) for v in scalars]).reshape(-1, 1)
        pad = torch.zeros((sc.shape[0], rows.shape[1] - 1), dtype=torch.float64, device=sc.device)
        host = torch.cat([rows, torch.cat([sc, pad], dim=1)]).cpu().numpy()
        n = rows.shape[0]
        return host[:n], host[n:, 0].tolist()

    def clear(self) -> None:
        self.names, self.dtypes, self.shapes, self.rows = [], [], [], []

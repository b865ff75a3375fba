"""Tensor summaries computed with torch ops on the tensor's own device (the CUDA path).

Each tensor gives one row of ``_core.STATS_TABLE_COLUMNS`` as a float64 tensor on its device;
rows are stacked and copied to the host once per step (``DeviceBatch.copy_with_scalars``),
never one ``.item()`` per tensor. Values are computed in float64 and follow the core's
conventions (min/max/mean/var/l1/l2 over finite elements; NaN/±Inf counted separately).

Copies from a CUDA device do not wait for the device: they go into pinned host memory with
``non_blocking=True`` and a CUDA event marks when they have landed (``HostCopy``); the hook
writes them once ``ready()``. A ``.cpu()`` would synchronise the device and drain the queue
of work the CPU had launched ahead of it, every time.
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


class HostCopy:
    """A device tensor on its way to host memory: ``ready()`` without waiting, ``numpy()``
    waits if it must. CUDA: a non-blocking copy into pinned memory plus an event recorded
    after it on the current stream; elsewhere (and if that fails) a synchronous copy."""

    def __init__(self, t):
        self.event = None
        if getattr(t, "is_cuda", False):
            try:
                import torch
                host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                host.copy_(t, non_blocking=True)
                event = torch.cuda.Event()
                event.record(torch.cuda.current_stream(t.device))
                self.host, self.event = host, event
                return
            except Exception:
                self.event = None
        self.host = t.cpu()

    def ready(self) -> bool:
        return self.event is None or bool(self.event.query())

    def numpy(self):
        if self.event is not None:
            self.event.synchronize()
        return self.host.numpy()


class PendingTable:
    """The summary rows of one save step and its device losses, copied together when they
    live on one device (the common case: one copy per step). ``result()`` gives
    (table as an (N, 13) numpy array, list of the scalars' values)."""

    def __init__(self, rows, scalars):
        import torch
        self._n = len(rows)
        self._k = len(scalars)
        devs = {r.device for r in rows} | {v.device for v in scalars}
        self._copies = []
        if len(devs) == 1:
            parts = []
            if rows:
                parts.append(torch.stack(rows))
            if scalars:
                vals = [v.reshape(()) for v in scalars]  # as the training computed them
                if len({v.dtype for v in vals}) == 1:
                    sc = torch.stack(vals).to(torch.float64).reshape(-1, 1)  # two kernels
                else:
                    sc = torch.stack([v.to(torch.float64) for v in vals]).reshape(-1, 1)
                width = parts[0].shape[1] if parts else 13
                pad = torch.zeros((sc.shape[0], width - 1), dtype=torch.float64,
                                  device=sc.device)
                parts.append(torch.cat([sc, pad], dim=1))
            if parts:
                both = parts[0] if len(parts) == 1 else torch.cat(parts)
                self._copies.append((list(range(self._n + self._k)), HostCopy(both)))
        else:  # several devices (model parallel): one copy per device
            by_dev = {}
            for i, r in enumerate(rows):
                by_dev.setdefault(r.device, ([], []))[0].append(i)
            for j, v in enumerate(scalars):
                by_dev.setdefault(v.device, ([], []))[1].append(j)
            for _, (ri, si) in by_dev.items():
                t = [rows[i] for i in ri]
                for j in si:
                    pad = torch.zeros(12, dtype=torch.float64, device=scalars[j].device)
                    t.append(torch.cat([scalars[j].reshape(1).to(torch.float64), pad]))
                self._copies.append((ri + [self._n + j for j in si],
                                     HostCopy(torch.stack(t))))

    def ready(self) -> bool:
        return all(c.ready() for _, c in self._copies)

    def result(self):
        import numpy as np
        out = np.empty((self._n + self._k, 13), dtype=np.float64)
        for idx, c in self._copies:
            out[idx] = c.numpy()
        return out[:self._n], out[self._n:, 0].tolist()


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

    def copy_with_scalars(self, scalars) -> PendingTable:
        """Starts the copy of the rows and of 0-d float64 device scalars to the host."""
        return PendingTable(self.rows, scalars)

    def clear(self) -> None:
        self.names, self.dtypes, self.shapes, self.rows = [], [], [], []

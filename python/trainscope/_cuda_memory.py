"""What filled CUDA memory (docs/report.md, "Out of memory"). A component of the Hook.

PyTorch's caching allocator can keep a history of every allocation with its stack
(``torch.cuda.memory._record_memory_history``) and write it out as a snapshot that PyTorch's
memory viewer (https://pytorch.org/memory_viz) draws. Recording costs time on every allocation,
so it is armed only ahead of trouble: when the device's reserved memory reaches ``arm_fraction``
of its total (checked every ``check_every`` steps), or at the start when
``TRAINSCOPE_CUDA_MEMORY_HISTORY=1``. An out-of-memory error that leaves the training
(``torch.cuda.OutOfMemoryError``, seen by the hook's ``__exit__`` or the excepthook) writes
``RUN/memory/snapshot-<worker>.pickle`` (with the history when armed, the allocator's segments
otherwise) and a ``cuda_out_of_memory`` event that the report turns into a finding.

``TRAINSCOPE_CUDA_MEMORY_HISTORY``: ``auto`` (default: armed when near full), ``1`` (from the
start), ``0`` (never; the OOM event is still written, without a snapshot).
Never raises into the training: every failure goes to ``fail(where, exc)``.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Optional

from ._schema import EVENT

MAX_ENTRIES = 100_000     # allocation events the history keeps (the newest)
ARM_FRACTION = 0.85       # of the device's total memory, reserved by the allocator
CHECK_EVERY = 25          # steps between two looks at the device's memory
SNAPSHOT_DIR = "memory"   # RUN/memory/snapshot-<worker>.pickle


def _mode() -> str:
    v = os.environ.get("TRAINSCOPE_CUDA_MEMORY_HISTORY", "auto").strip().lower()
    return {"1": "always", "true": "always", "always": "always", "0": "off", "false": "off",
            "off": "off"}.get(v, "auto")


def is_cuda_oom(exc: BaseException) -> bool:
    try:
        import torch
        oom = getattr(torch.cuda, "OutOfMemoryError", None)
        if oom is not None and isinstance(exc, oom):
            return True
    except Exception:
        pass
    return isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc)


class CudaMemoryWatch:
    def __init__(self, run_dir: str, worker: str, writer: Callable[[], Any],
                 step: Callable[[], int], fail: Callable[[str, BaseException], None],
                 arm_fraction: float = ARM_FRACTION, check_every: int = CHECK_EVERY):
        self.run_dir = run_dir
        self.worker = worker
        self.mode = _mode()
        self.arm_fraction = arm_fraction
        self.check_every = check_every
        self.armed_at: Optional[int] = None   # the step the history was armed at
        self.reported = False                 # one OOM event per hook
        self._writer = writer
        self._step = step
        self._fail = fail
        self._next_check = 0
        self._device = None
        self._torch = None
        try:
            import torch
            if torch.cuda.is_available():
                self._torch = torch
        except Exception:
            self._torch = None
        if self._torch is not None and self.mode == "always":
            self.arm("TRAINSCOPE_CUDA_MEMORY_HISTORY=1")

    @property
    def active(self) -> bool:
        return self._torch is not None

    def on_step(self, step: int) -> None:
        """At a step boundary: one integer compare, and every check_every steps a look at the
        device's memory (two allocator counters)."""
        if self._torch is None or step < self._next_check or self.mode != "auto" or \
                self.armed_at is not None:
            return
        self._next_check = step + self.check_every
        try:
            torch = self._torch
            if not torch.cuda.is_initialized():
                return
            dev = torch.cuda.current_device()
            total = torch.cuda.get_device_properties(dev).total_memory
            reserved = torch.cuda.memory_reserved(dev)
            if total > 0 and reserved >= self.arm_fraction * total:
                self.arm(f"device memory {reserved / total:.0%} reserved "
                         f"(>= {self.arm_fraction:.0%})", reserved=reserved, total=total)
        except Exception as e:
            self._fail("cuda memory check", e)
            self._torch = None  # once: a device that cannot answer is not asked again

    def arm(self, reason: str, reserved: int = 0, total: int = 0) -> None:
        if self._torch is None or self.armed_at is not None:
            return
        try:
            self._torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES)
            self.armed_at = self._step()
            self._event(EVENT.CUDA_MEMORY_HISTORY, {
                "step": self.armed_at, "reason": reason, "worker": self.worker,
                "reserved_bytes": reserved, "total_bytes": total, "max_entries": MAX_ENTRIES})
        except Exception as e:
            self._fail("cuda memory history", e)

    def on_exception(self, exc: BaseException) -> None:
        """An exception left the training: a CUDA out-of-memory error gets its snapshot and
        event (once)."""
        if self.reported or exc is None or not is_cuda_oom(exc):
            return
        self.reported = True
        info = {"step": self._step(), "worker": self.worker,
                "message": str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__,
                "history": self.armed_at is not None, "armed_at_step": self.armed_at}
        torch = self._torch
        if torch is None:
            try:
                import torch  # noqa: F811 - an OOM says CUDA is there, whatever was seen before
            except Exception:
                torch = None
        if torch is not None:
            try:
                dev = torch.cuda.current_device()
                info["allocated_bytes"] = int(torch.cuda.memory_allocated(dev))
                info["reserved_bytes"] = int(torch.cuda.memory_reserved(dev))
                info["peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated(dev))
                info["total_bytes"] = int(torch.cuda.get_device_properties(dev).total_memory)
                info["device"] = int(dev)
            except Exception as e:
                self._fail("cuda memory counters", e)
            if self.mode != "off":
                try:
                    d = os.path.join(self.run_dir, SNAPSHOT_DIR)
                    os.makedirs(d, exist_ok=True)
                    path = os.path.join(d, f"snapshot-{self.worker}.pickle")
                    torch.cuda.memory._dump_snapshot(path)
                    info["snapshot"] = os.path.relpath(path, self.run_dir)
                except Exception as e:
                    self._fail("cuda memory snapshot", e)
        self._event(EVENT.CUDA_OUT_OF_MEMORY, info)

    def close(self) -> None:
        if self.armed_at is None or self._torch is None:
            return
        try:
            self._torch.cuda.memory._record_memory_history(enabled=None)
        except Exception:
            pass
        self.armed_at = None

    def _event(self, kind: str, fields: dict) -> None:
        w = self._writer()
        if w is None:
            return
        try:
            w.add_event(kind, json.dumps(fields))
        except Exception as e:
            self._fail("cuda memory event", e)

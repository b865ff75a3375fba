"""How long a DDP rank waits for the others in the gradient all-reduce, per step.

In DistributedDataParallel the gradient all-reduce runs during backward, bucket by bucket, and
backward returns only when the last bucket is reduced. A rank that the others wait for (the
straggler) arrives last and waits least; the ranks waiting for it spend that time inside their
backward phase. The ``straggler`` rule (src/rules/builtin/straggler.cc) subtracts this wait so
that waiting is not counted as work.

The measurement is a DDP communication hook that calls the hook DDP would run anyway (the
default all-reduce, or one the user registers later: ``register_comm_hook`` of the wrapped
model is replaced by one that puts the user's hook inside ours) and notes, per step, when the
last bucket was handed over (backward compute done) and when the last reduction completed. The
exposed wait of a step is the difference. It costs one Python call per bucket per step (a few
µs; buckets are 25 MB by default) and one scalar record per step, ``dist/comm_wait_us``
(written with the step records, in step order, at the hook's commit cadence).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, Optional

log = logging.getLogger("trainscope")

COMM_WAIT = "dist/comm_wait_us"  # rules/builtin/straggler.h kCommWaitScalar
MAX_PENDING = 10000


class CommTiming:
    """The timing communication hook of one DDP model (see the module docstring)."""

    def __init__(self, hook, ddp):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        self._hook = hook
        self._pg = ddp.process_group
        self._inner = default_hooks.allreduce_hook
        self._inner_state: Any = self._pg
        self._lock = threading.Lock()
        self._steps: Dict[int, list] = {}  # step -> [mode, mode_step, last_launch, last_done]
        self.buckets = 0
        ddp.register_comm_hook(self, CommTiming._comm_hook)
        ddp._trainscope_comm_timing = self  # a later Hook on the same model takes it over
        ddp.register_comm_hook = self._user_hook  # the user's hook runs inside ours
        ddp._register_builtin_comm_hook = self._user_builtin

    # ---------------------------------------------------------- the user's own hook
    def _user_hook(self, state: object, hook) -> None:
        self._inner, self._inner_state = hook, state
        log.info("trainscope: DDP comm hook %s runs inside trainscope's timing hook",
                 getattr(hook, "__qualname__", hook))

    def _user_builtin(self, comm_hook_type) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        name = str(comm_hook_type).rsplit(".", 1)[-1]
        if name == "FP16_COMPRESS":
            self._user_hook(self._pg, default_hooks.fp16_compress_hook)
        else:
            self._user_hook(self._pg, default_hooks.allreduce_hook)

    # ------------------------------------------------------- DDP's calls (backward)
    @staticmethod
    def _comm_hook(self: "CommTiming", bucket):
        h = self._hook
        if h is None:  # its hook closed: DDP's own reduction, untimed
            return self._inner(self._inner_state, bucket)
        now = time.perf_counter_ns()
        step = h.step_count
        with self._lock:
            rec = self._steps.get(step)
            if rec is None:
                if len(self._steps) >= MAX_PENDING:  # nobody flushes: keep memory bounded
                    self._steps.pop(next(iter(self._steps)))
                rec = self._steps[step] = [int(h.mode), h.mode_step, now, 0]
            rec[2] = now
        self.buckets += 1
        fut = self._inner(self._inner_state, bucket)

        def done(f, rec=rec):
            t = time.perf_counter_ns()
            with self._lock:
                if t > rec[3]:
                    rec[3] = t
            return f.value()

        return fut.then(done)

    # ------------------------------------------------------------ training thread
    def detach(self, hook) -> None:
        """``hook`` closes: stop timing for it (a later Hook may attach again)."""
        if self._hook is hook:
            self._hook = None
            with self._lock:
                self._steps.clear()

    def flush(self, writer, current_step: int) -> None:
        """Writes the waits of the steps before ``current_step`` (their backward is over)."""
        if not self._steps:
            return
        with self._lock:
            done = [(s, r) for s, r in self._steps.items() if s < current_step]
            for s, _ in done:
                del self._steps[s]
        for s, (mode, ms, launch, end) in done:
            if end:
                writer.add_scalar(COMM_WAIT, s, mode, ms, max(0, end - launch) / 1000.0)


def is_ddp(module) -> bool:
    """``module`` is a torch DistributedDataParallel (torch is imported by then)."""
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:
        return False
    return isinstance(module, DistributedDataParallel)


def attach(hook, module) -> Optional[CommTiming]:
    """A CommTiming for ``module`` when it is a DistributedDataParallel of several ranks."""
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:
        return None
    if not isinstance(module, DistributedDataParallel):
        return None
    ct = getattr(module, "_trainscope_comm_timing", None)
    if isinstance(ct, CommTiming):
        ct._hook = hook
        return ct
    if getattr(module, "_comm_hooks", None):
        log.info("trainscope: this DDP model has a comm hook already; collective waits are "
                 "not measured (the straggler rule counts them as backward time)")
        return None
    return CommTiming(hook, module)

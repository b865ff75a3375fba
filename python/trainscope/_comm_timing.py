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
import math
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
        check = (bool(h._nonfinite_stops) and not h._scalers and _first_bucket(bucket)
                 and self._poison(h, bucket, step))
        fut = self._inner(self._inner_state, bucket)
        # Without a registered optimizer (whose step ends the backward phase) the phase would
        # end before DDP waits for the reductions: the last one's end extends it (steps.cc).
        extend = None if h._optimizers else h._clock.extend_backward_end

        def done(f, rec=rec):
            t = time.perf_counter_ns()
            with self._lock:
                if t > rec[3]:
                    rec[3] = t
            v = f.value()
            if extend is not None:
                extend(t)
            if check:
                self._check_reduced(h, v, step)
            return v

        return fut.then(done)

    # ------------------------------------------------- non-finite stops at the same step
    # A rank whose loss turned NaN/Inf (with a rule that stops on one) sets the first element
    # of the step's first gradient bucket to NaN before the all-reduce; every rank reads that
    # element of the reduced bucket (the same value on every rank) and stops at this step's
    # boundary without waiting for the ranks' stop agreement (_distributed.py, 100-200 ms).
    # The element read is set to 0 then, so the mark never reaches the weights.
    # A NaN gradient that reaches that element by itself stops the job the same way (not with
    # a registered GradScaler, whose skipped steps have such gradients by design). CPU (gloo)
    # buckets only: on a device the read would synchronise the stream, and the stop is agreed
    # as any other (1-2 agreement intervals later).
    @staticmethod
    def _poison(h, bucket, step) -> bool:
        try:
            buf = bucket.buffer()
            if buf.device.type != "cpu" or buf.numel() == 0:
                return False
            if h._nonfinite_local_step == step:
                buf.view(-1)[0] = float("nan")
            return True
        except Exception as e:  # never into DDP's backward
            log.debug("trainscope: non-finite check off: %s", e)
            return False

    @staticmethod
    def _check_reduced(h, value, step) -> None:
        try:
            x = float(value.view(-1)[0])
        except Exception:
            return
        if not math.isfinite(x):
            try:  # the mark is ours: the optimizer step of this last step gets 0 there, not NaN
                value.view(-1)[0] = 0.0
            except Exception:
                pass
            rule = h._nonfinite_stops[0].rule_id if h._nonfinite_stops else "trainscope"
            h._request_stop_inprocess(
                f"{rule}: non-finite gradient after the all-reduce of step {step} (a rank's "
                "loss or gradients turned NaN/Inf); every rank stops at this step",
                source="rule", agreed=True)

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


def _first_bucket(bucket) -> bool:
    """The bucket DDP reduces first in every step (index 0: DDP launches buckets in index
    order, the same on every rank)."""
    try:
        return bucket.index() == 0
    except Exception:
        return False


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

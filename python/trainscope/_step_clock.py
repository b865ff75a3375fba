"""The step clock's Python side: the interface with the C step clock (``_core.StepClock``,
python/stepclock/) and the methods of the Hook it calls.

The per-step fast path (counting, timing, reading the loss) is C; when a step needs more (a save
step begins or ends, a stop check is due, the profiling window opens or closes, a loss lives on a
device, the ranks agree on a stop) the clock calls a method of the hook. ``UPCALLS`` below lists
every such method (python/stepclock/upcalls.h is the C side of the same table;
tests/python/test_step_clock.py checks that the two agree and that the Hook has each); most are
in ``ClockUpcalls``. The constants the hook passes to the clock (``CALLBACK_*`` for
``clock.callback``, ``COUNTER_*`` for ``clock.get``/``set``) are the clock's own, read once here.
"""
from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import TYPE_CHECKING, Optional

from . import _core
from ._modes import Mode, TrainingStopped
from ._schema import EVENT
from .collection import NEVER

if TYPE_CHECKING:
    from ._capture import _Plan

log = logging.getLogger("trainscope")

MODES = (Mode.TRAIN, Mode.EVAL, Mode.PREDICT)  # training modes (GLOBAL is for readers)

# ---- the interface with the C clock (python/stepclock/upcalls.h) ------------------------------
# The torch hook objects of clock.callback(kind, index=None):
CALLBACK_MODEL_PRE = _core.StepClock.CALLBACK_MODEL_PRE    # the model's forward pre-hook
CALLBACK_MODEL_POST = _core.StepClock.CALLBACK_MODEL_POST  # the model's forward hook
CALLBACK_LOSS = _core.StepClock.CALLBACK_LOSS              # a criterion's (index: the loss's)
CALLBACK_GRADIENT = _core.StepClock.CALLBACK_GRADIENT      # post-accumulate-grad (index: param)
# The per-mode counter arrays of clock.get(kind, mode) / clock.set(kind, mode, value):
COUNTER_MODE_STEPS = _core.StepClock.COUNTER_MODE_STEPS  # steps of each mode
COUNTER_NEXT_SAVE = _core.StepClock.COUNTER_NEXT_SAVE    # first mode step that saves a tensor
COUNTER_LOSS_NEXT = _core.StepClock.COUNTER_LOSS_NEXT    # first mode step that saves the loss

# Every method of the Hook the clock calls, with its arguments, in the order of upcalls.h. The
# clock calls nothing else by name; the `_slow_*` ones (and _queue_backward_end) are below in
# ClockUpcalls, _fail and _maybe_raise_stop in _run.RunLifecycle.
UPCALLS = {
    "_fail": ("where", "exc"),                  # an Exception in the clock or a slow path
    "_slow_close_pre": (),                      # a step closes with a save or device losses
    "_slow_close_post": (),                     # a step in the profiling window closed
    "_run_step_callbacks": ("event",),          # "step": after a boundary (step callbacks)
    "_slow_stop_check": (),                     # every stop_check_ns at a step start
    "_slow_profile_start": (),                  # the profiling window's first step begins
    "_slow_sync": (),                           # the TRAIN step of the ranks' stop agreement
    "_slow_begin_save": ("mode", "ms"),         # a save step begins
    "_slow_loss_next": ("mode", "ms"),          # -> (next, every, end) of the losses
    "_slow_loss": ("index", "output"),          # a loss the clock does not read itself
    "_slow_nonfinite_loss": ("index", "value"),  # NaN/Inf while a rule stops on one
    "_slow_dev_losses": (),                     # 16 device losses are kept
    "_slow_opt_flush": (),                      # optimizer.step() begins on a save step
    "_slow_grads": (),                          # the last hooked gradient arrived
    "_queue_backward_end": (),                  # the first hooked gradient arrived
    "_maybe_raise_stop": (),                    # a stop is pending with raise_on_stop
    "_slow_scaler_optimizer": ("optimizer",),   # scaler.step() of an unregistered optimizer
    "_slow_backward_end": (),                   # backward ended with work for the hook left
}


class _ModeArray:
    """One per-mode counter array of the step clock (a COUNTER_* kind), with the dict surface
    the hook uses."""

    __slots__ = ("_clock", "_kind")

    def __init__(self, clock, kind: int):
        self._clock = clock
        self._kind = kind

    def __getitem__(self, mode) -> int:
        return self._clock.get(self._kind, int(mode))

    def __setitem__(self, mode, value) -> None:
        self._clock.set(self._kind, int(mode), int(value))

    def get(self, mode, default=None):
        try:
            return self[mode]
        except ValueError:
            return default

    def __iter__(self):
        return iter(MODES)

    def items(self):
        return [(m, self[m]) for m in MODES]

    def update(self, values: dict) -> None:
        for m, v in values.items():
            self[m] = v

    def __repr__(self) -> str:
        return repr({m.name: v for m, v in self.items()})


def _clock_field(name: str, doc: str) -> property:
    return property(lambda self: getattr(self._clock, name),
                    lambda self, v: setattr(self._clock, name, v), doc=doc)


def _now_us() -> int:
    return time.time_ns() // 1000


class ClockUpcalls:
    """The methods and flags of the Hook that the C step clock uses (a mixin of Hook)."""

    _open = _clock_field("open", "A step is open.")
    _auto_step = _clock_field("auto_step", "Forward calls of the model end steps.")
    _explicit_mode = _clock_field("explicit_mode", "set_mode() was called.")

    @property
    def _plan(self) -> "Optional[_Plan]":
        """The plan of the save step in progress (the clock ends and begins the steps of a
        repeated save step itself: see Capture._set_repeat)."""
        return self._plan_ if self._clock.plan_active else None

    @_plan.setter
    def _plan(self, plan) -> None:
        self._plan_ = plan
        self._clock.plan_active = plan is not None
        if plan is None:
            self._clock.set_repeat(None)

    @property
    def _profiling(self):
        return self._profiling_

    @_profiling.setter
    def _profiling(self, window) -> None:
        self._profiling_ = window
        self._clock.profiling = window is not None

    def _slow_sync(self) -> None:
        """The step clock at TRAIN step clock.sync_step: the ranks' agreement on stops."""
        if self._dist is None:
            self._clock.sync_step = -1
        else:
            self._dist.on_boundary()

    def _slow_scaler_optimizer(self, optimizer) -> None:
        """scaler.step(optimizer) of an optimizer not registered yet: registered now (the
        scaler then calls the new wrapper)."""
        self.register_optimizer(optimizer)

    # ========================================================================== torch hooks
    # The model's forward pre/post hooks, the criterion's forward hook, the optimizer wrapper
    # and the loader iterator are the clock's (C). They call the _slow_* methods below when a
    # step needs more than counting, timing and the loss.
    def _slow_close_pre(self) -> None:
        """Closing a step with a save in progress or device losses queued."""
        if self._plan is not None:
            self._end_save()
        if len(self._device_scalars) >= 16:
            self._flush_device_scalars()
        elif self._host_copies:
            self._drain_host_copies()
        self._clock.dev_scalars = bool(self._device_scalars) or bool(self._host_copies)

    def _slow_close_post(self) -> None:
        """A step closed inside the profiling window: the window ends with it (its last step,
        or the hook is closing) or goes on to the next step."""
        p = self._profiling
        if p is None:
            return
        if self._closed or self.step_count + 1 >= self.profiler.end_step:
            self._stop_profiler()
        else:
            p.step(self.step_count)

    def _slow_stop_check(self) -> None:
        """Every stop_check_interval_ms at a step start: hands the step records over to the
        core. The committer thread commits them and polls for stops at its own cadence; without
        it, or when stops are to be checked more often, the training thread does that too."""
        if self._host_copies:
            self._drain_host_copies()
        self._take_lane_counts()  # the gradient lane's summaries, for the storage account
        if self._committing:
            self._flush_pending()
        else:
            self._commit()
        if self._poll_often or not self._committing:
            self._poll_stop()
        if self._cuda_memory is not None:
            self._cuda_memory.on_step(self.step_count)

    def _slow_profile_start(self) -> None:
        if self.profiler is not None and self._profiling is None:
            self._start_profiler()

    def _slow_begin_save(self, mode: int, ms: int) -> None:
        """A step at or past the next save step of its mode begins."""
        mode = Mode(mode)
        if self._saving and self._writer is not None:
            self._next_save[mode] = self._compute_next_save(mode, ms + 1)
            self._begin_save(mode, ms)
        else:
            self._next_save[mode] = NEVER

    def _slow_loss_next(self, mode: int, ms: int) -> tuple:
        """(next, every, end): the losses save at `next` >= ms and, when every > 0, every
        `every` steps after it while below `end` (the clock follows that without asking)."""
        c = self._loss_coll
        if c is None:
            return NEVER, 0, NEVER
        nxt = c.next_save(Mode(mode), ms, self.save_interval)
        if nxt >= NEVER or c.save_steps is not None:
            return nxt, 0, NEVER
        return nxt, c.interval(self.save_interval), NEVER if c.end_step is None else c.end_step

    def _slow_loss(self, index: int, output) -> None:
        """A loss on a device (summed there, copied in a batch) or with several elements."""
        name = self._loss_names[index]
        mode = self.mode
        ms = self._mode_steps[mode]
        if self.device_stats == "torch" or not output.is_cpu:
            out = output.detach()
            if out.numel() != 1:
                out = out.float().mean()
            self._device_scalars.append((name, out.reshape(()), self.step_count, mode, ms))
            self._clock.dev_scalars = True
        else:
            raw = float(output.detach().float().mean())
            v = self._step_mean(name, self.step_count, mode, raw)
            self._clock.pend_scalar(name, self.step_count, int(mode), ms, v, _now_us())
            if self._nonfinite_stops:
                self._check_nonfinite(name, raw, self.step_count)

    def _slow_nonfinite_loss(self, index: int, value: float) -> None:
        """The clock read a NaN/Inf loss while a rule stops training on one
        (clock.nonfinite_stop): stop at this step's boundary."""
        self._check_nonfinite(self._loss_names[index], value, self.step_count)

    _nonfinite_stops: list = []  # rules.NonfiniteStop of the rules that stop on a NaN loss
    _nonfinite_local_step = None  # the step whose loss was non-finite on this rank

    _origin_tracer = None  # _nan_origin.OriginTracer while a rule stops on a NaN

    def _check_nonfinite(self, name: str, value: float, step: int) -> None:
        if math.isfinite(value) or self._stop_reason is not None:
            return
        # found at the first non-finite value; a rule that needs several in a row
        # (min_consecutive, dead_loss's num_steps) stops with it later
        origin = self._nonfinite_origin(name, step) or getattr(self._origin_tracer, "origin",
                                                               None)
        for ns in self._nonfinite_stops:
            if ns.violated(name, value, step):
                reason = f"{ns.rule_id}: {name} is {value} at step {step}"
                if origin is not None:
                    reason += f"; where it began: {origin['summary']}"
                self._nonfinite_local_step = step  # DDP: told to the ranks (_comm_timing.py)
                try:
                    if self._writer is not None:
                        self._writer.add_event(EVENT.NONFINITE_LOSS_STOP, json.dumps({
                            "rule": ns.rule_id, "tensor": name, "value": str(value),
                            "step": step}))
                except Exception:
                    pass
                self._request_stop_inprocess(reason, source="rule")
                return

    def _arm_origin(self) -> None:
        """A rule stops on a NaN and a model is registered: the origin of the first non-finite
        value will be searched by replaying its step (_nan_origin.py)."""
        if not self._nonfinite_stops or self._model is None or self._origin_tracer is not None:
            return
        try:
            from ._nan_origin import OriginTracer
            self._origin_tracer = OriginTracer(self, self._model)
            self._handles.append(self._origin_tracer)  # removed at close
        except Exception as e:
            self._fail("nan origin", e)

    def _nonfinite_origin(self, name: str, step: int) -> Optional[dict]:
        """The first non-finite value of the run: its step replayed (once), the origin written
        as a nonfinite_origin event and said in the log; None when not armed or done before."""
        tracer = self._origin_tracer
        if tracer is None or tracer.origin is not None:
            return None
        from ._run import _worker_rank
        # the model runs on the training thread only (a loss copied from a device may be
        # written from another)
        origin = tracer.find(name, step, _worker_rank(),
                             threading.get_ident() == self._owner_thread)
        tracer.remove()  # nothing more to keep: the origin is found once per run
        # said at info level: the stop that follows says it (one line for a stop)
        log.info("trainscope: non-finite %s; where it began: %s", name, origin["summary"])
        try:
            if self._writer is not None:
                self._writer.add_event(EVENT.NONFINITE_ORIGIN, json.dumps(origin, default=str))
        except Exception as e:
            self._fail("nan origin", e)
        return origin

    def _slow_dev_losses(self) -> None:
        """The clock kept 16 one-element device losses: start their copy to the host."""
        self._flush_device_scalars()

    def _slow_opt_flush(self) -> None:
        if self._plan is not None:
            self._slow_grads(final=True)
            self._flush_batches(device=False)

    def _slow_grads(self, final: bool = False) -> None:
        """Queues the gradients the clock kept (its hooks fire on save steps) and writes the
        CPU summaries: when the last hooked gradient arrived, at backward end, at
        optimizer.step() and at the end of the step, whichever comes first. For a DDP model
        only the last two (``final``): DDP replaces each local gradient in place with the
        ranks' average when its all-reduce completes, after the gradient hooks fired."""
        if self._grads_final_only and not final:
            return
        clock = self._clock
        if clock.grad_lane:  # some parameters got no gradient (yet): the lane takes those kept
            clock.lane_grads()
        items = clock.take_grads()
        if self._shards is not None:  # FSDP1: the reduce-scattered shards (_fsdp1.py)
            items = self._shards.grads(self.step_count)
        plan = self._plan
        if not items or plan is None:
            return
        names = self._params
        scale = self._grad_scale() if self._scalers else None
        batch = []
        for index, grad in items:
            if scale is not None:  # GradScaler: the gradients the optimizer will use
                if not isinstance(scale, float) and scale.device != grad.device:
                    scale = scale.to(grad.device)
                grad = grad / scale
            for full, flags, coll in plan.grads.get(names[index][0], ()):
                batch.append((full, grad, flags, coll))
        self._save_items(batch)
        self._flush_batches(device=False)

    def _grad_scale(self):
        """The loss scale of this step's backward (a float, or a device tensor: no sync) of
        the first enabled registered GradScaler; None without one or at scale 1."""
        for scaler in self._scalers:
            t = getattr(scaler, "_scale", None)
            if t is None:
                continue
            if t.is_cpu and self.device_stats != "torch":
                v = float(t)
                return None if v == 1.0 else v
            return t  # divided on its device (no sync)
        return None

    def _queue_backward_end(self) -> None:
        """Asks autograd to call _on_backward_end when this backward pass finishes."""
        try:
            queue = self._queue_callback
            if queue is None:
                import torch
                queue = self._queue_callback = \
                    torch.autograd.Variable._execution_engine.queue_callback
            queue(self._on_backward_end)
        except Exception as e:
            self._fail("backward callback", e)

    _queue_callback = None

    def _slow_backward_end(self) -> None:
        """The clock's end of backward (gradient lane on) found work for the hook: gradients
        the lane left to Python (summarised before optimizer.step())."""
        self._slow_grads()
        self._flush_batches(device=False)

    def _on_backward_end(self) -> None:
        try:
            if not self._optimizers:  # else backward ends where optimizer.step() starts
                self._clock.mark_backward_end(time.perf_counter_ns())
            self._slow_grads()
            self._flush_batches(device=False)
        except Exception as e:
            self._fail("gradients", e)
    # ====================================================================== step machinery
    def _advance(self) -> None:
        self._clock.advance()

    def _open_step(self, now_us: int) -> None:
        """Begins the current step: timing, stop checks, and on save steps the save plan."""
        self._clock.open_step(now_us)

    def _close_step(self, now_us: int) -> None:
        self._clock.close_step(now_us)

    def _run_step_callbacks(self, event: str) -> None:
        for fn in self._step_callbacks:
            try:
                fn(event)
            except TrainingStopped:
                raise
            except Exception as e:
                self._fail("step callback", e)

    def _advance_quiet(self) -> None:
        self._clock.advance(True)

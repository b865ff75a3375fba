"""What the framework callbacks share: one ts.Hook driven from a framework's own step events.

A framework (Lightning, the Hugging Face Trainer) owns the loop, so the callbacks cannot let the
model's forward calls define steps: a LightningModule's forward may never run, and evaluation
forwards run between training steps. The driver registers the model with
``forward_steps=False`` and opens and closes steps itself (``Hook.begin_step`` / ``Hook.step``),
numbering TRAIN steps by the framework's optimizer steps.

Failure policy (the hook's): nothing here raises into the training. Each callback entry point
runs under ``guard``: an exception is logged once per place, counted, written as a
``hook_error`` event, and after ``max_errors`` of them the driver stops driving (the training
goes on unmonitored).
"""
from __future__ import annotations

import logging
import numbers
from typing import Any, Dict, Optional

from .._modes import Mode
from .._schema import EVENT

log = logging.getLogger("trainscope")

#: The loss name an explicit ``hook.register_loss(criterion)`` gives (losses/loss).
LOSS_NAME = "loss"


def _identity(value):
    return value


def as_float(value) -> Optional[float]:
    """A Python float of a number, a one-element tensor or numpy value; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    try:
        if hasattr(value, "numel") and value.numel() == 1:
            return float(value.detach().float().item())
        if hasattr(value, "item") and getattr(value, "size", 2) == 1:
            return float(value.item())
    except Exception:
        return None
    return None


class Driver:
    """Owns one ts.Hook (created lazily from the callback's keyword arguments) and drives its
    steps. Framework callbacks translate their events into the calls below."""

    def __init__(self, framework: str, hook_kwargs: Dict[str, Any], max_errors: int = 20):
        check_hook_kwargs(hook_kwargs)
        self.framework = framework
        self.hook_kwargs = dict(hook_kwargs)
        # The framework stops the training: the hook must not raise TrainingStopped into it.
        self.hook_kwargs["raise_on_stop"] = False
        self.hook = None
        self._record_loss = None
        self._state: Optional[dict] = None  # counters of a closed hook, for the next one
        self._out_dir: Optional[str] = None
        self._errors: Dict[str, int] = {}
        self._max_errors = max_errors
        self.disabled = False
        self.stop_honoured = False

    # ---- failure policy ---------------------------------------------------------------------
    def fail(self, where: str, exc: BaseException) -> None:
        try:
            n = self._errors.get(where, 0) + 1
            self._errors[where] = n
            if n == 1:
                log.warning("trainscope: %s integration: internal error in %s (training "
                            "continues): %s: %s", self.framework, where, type(exc).__name__, exc)
            h = self.hook
            if h is not None:
                h._fail(f"{self.framework} {where}", exc)
            if sum(self._errors.values()) >= self._max_errors and not self.disabled:
                self.disabled = True
                log.warning("trainscope: %s integration: %d internal errors; it stops "
                            "recording (training continues)", self.framework,
                            sum(self._errors.values()))
                self.close()  # run_end written; the callbacks see no hook from now on
        except Exception:
            pass

    @property
    def errors(self) -> Dict[str, int]:
        return dict(self._errors)

    # ---- the hook's lifetime ------------------------------------------------------------------
    def open(self, model=None, worker: Optional[str] = None) -> Optional[Any]:
        """The hook (created on first use, or again after close() into the same run, its step
        counters continuing). None when the integration is disabled or creation failed."""
        if self.disabled:
            return None
        if self.hook is not None:
            return self.hook
        import trainscope as ts
        kwargs = dict(self.hook_kwargs)
        if worker is not None and "worker" not in kwargs:
            kwargs["worker"] = worker
        if self._out_dir is not None:
            kwargs["out_dir"] = self._out_dir  # a second fit/test/evaluate: the same run
        try:
            hook = ts.Hook(**kwargs)
        except Exception as e:
            if kwargs.get("strict"):
                raise
            self.disabled = True
            log.warning("trainscope: %s integration could not create its hook; training runs "
                        "unmonitored: %s: %s", self.framework, type(e).__name__, e)
            return None
        self.hook = hook
        self._out_dir = hook.out_dir
        self._record_loss = hook.register_loss(_identity, name=LOSS_NAME)
        if self._state is not None:
            hook.load_state_dict(self._state)
        if model is not None:
            hook.register_module(model, forward_steps=False)
        hook.add_event(EVENT.INTEGRATION, {"framework": self.framework, "worker": hook.worker})
        return hook

    def close(self) -> None:
        h, self.hook = self.hook, None
        if h is None:
            return
        try:
            self._state = h.state_dict()
        except Exception as e:
            self.fail("close", e)
        try:
            h.close()
        except Exception as e:
            self.fail("close", e)

    @property
    def out_dir(self) -> Optional[str]:
        return self._out_dir

    # ---- steps ------------------------------------------------------------------------------
    def begin(self, mode: Mode, mode_step: Optional[int] = None) -> None:
        """Opens a step of `mode` (unless one of that mode is open). With `mode_step`, the
        step is numbered so: the hook's counters jump to it (the global step by the same
        amount), e.g. to the framework's global step after a resume."""
        h = self.hook
        if h is None:
            return
        if h.mode != mode:
            h.set_mode(mode)  # ends an open step of the other mode
        if h._open:
            return
        if mode_step is not None and h.mode_step != mode_step:
            state = h.state_dict()
            delta = int(mode_step) - h.mode_step
            state["step_count"] = max(0, state["step_count"] + delta)
            state["mode_steps"][str(int(mode))] = int(mode_step)
            h.load_state_dict(state)
        h.begin_step()

    def end(self) -> None:
        """Ends the open step (nothing when none is open)."""
        h = self.hook
        if h is not None and h._open:
            h.step()

    @property
    def step_open(self) -> bool:
        h = self.hook
        return h is not None and bool(h._open)

    def loss(self, value) -> None:
        """Records `value` (a tensor or a number) as losses/loss of the current step; several
        calls in one step record their mean (the loss of an accumulated batch)."""
        if self.hook is None or value is None:
            return
        if not hasattr(value, "detach"):
            v = as_float(value)
            if v is None:
                return
            import torch
            value = torch.tensor(v, dtype=torch.float64)
        self._record_loss(value.detach())

    def scalars(self, metrics: Dict[str, Any], prefix: str = "") -> None:
        """Records each numeric metric as scalars/<prefix><name> at the current step."""
        h = self.hook
        if h is None or not metrics:
            return
        for name, value in metrics.items():
            v = as_float(value)
            if v is None:
                continue
            h.save_scalar(_scalar_name(prefix + str(name)), v)

    # ---- stops and checkpoints -----------------------------------------------------------------
    @property
    def should_stop(self) -> bool:
        h = self.hook
        return h is not None and h.should_stop

    @property
    def stop_reason(self) -> str:
        h = self.hook
        return (h.stop_reason if h is not None else None) or "stop requested"

    def event(self, kind: str, fields: dict) -> None:
        h = self.hook
        if h is not None:
            h.add_event(kind, dict(fields, framework=self.framework))


def check_hook_kwargs(kwargs: Dict[str, Any]) -> None:
    """TypeError naming the valid ones when a keyword is not a ts.Hook argument (a typo must
    fail when the callback is built, not leave the training unmonitored)."""
    import difflib
    import inspect
    from ..hook import Hook
    valid = [n for n in inspect.signature(Hook.__init__).parameters if n != "self"]
    for name in kwargs:
        if name not in valid:
            near = difflib.get_close_matches(name, valid, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise TypeError(f"TrainscopeCallback: unknown argument {name!r}; {hint}"
                            f"ts.Hook takes: {', '.join(valid)}")


def _scalar_name(name: str) -> str:
    """scalars/<name> for a metric name; a name with '/' (``val/loss``) keeps its parts under
    scalars/ (``scalars/val/loss``): the collection prefix is always ``scalars``."""
    name = name.strip() or "metric"
    return "scalars/" + name


class DriverProperties:
    """What both framework callbacks expose about their hook (they keep a Driver in `_d`)."""

    _d: Driver

    @property
    def hook(self):
        """The ts.Hook (None before training and after it ended)."""
        return self._d.hook

    @property
    def out_dir(self) -> Optional[str]:
        """The run directory (kept after the hook closed)."""
        return self._d.out_dir

    @property
    def errors(self) -> Dict[str, int]:
        """Internal errors of the callback and its hook, by where they happened."""
        return self._d.errors

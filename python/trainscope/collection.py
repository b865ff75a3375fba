"""Collections: which tensors the hook saves, and when.

A collection selects tensors (by its kind and an optional ``include`` regex) and has a save
configuration (interval, explicit steps, a step range, modes). Save decisions use the step
counted within the current mode (``mode_step``), like SageMaker Debugger.

The catalogue of built-in collections, the default collections and the save schedule are the
core's (include/trainscope/collections.h, schedule.h), shared with the C++ Session: this module
checks the arguments (ConfigError) and translates a Collection to a core SaveSchedule.

    >>> import trainscope as ts
    >>> c = ts.Collection("gradients", include=r"fc1", save_interval=10)
    >>> [s for s in range(35) if c.saves_at(ts.Mode.TRAIN, s)]
    [0, 10, 20, 30]
    >>> c.next_save(ts.Mode.TRAIN, 11)
    20
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional, Sequence, Union

from . import _core
from ._errors import ConfigError, check_bool, check_int
from ._modes import Mode

#: The step of "never saves" (the core's kNeverSaves, 2**62: past any step a training reaches).
NEVER = _core.NEVER_SAVES
# Bumped whenever a collection's schedule changes: a hook then rebuilds its ScheduleSet.
SCHEDULE_EPOCH = [0]
MAX_HISTOGRAM_BUCKETS = 1 << 20  # the core's limit (src/stats/stats_kernels.h)


def _compile_includes(where: str, include) -> list:
    """``include`` as compiled regexes; a bad one is a ConfigError naming it."""
    allowed = "None, a regular expression (str or re.Pattern) or a list of them"
    if include is None:
        return []
    items = [include] if isinstance(include, (str, re.Pattern)) else include
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise ConfigError(where, "include", include, allowed)
    out = []
    for p in items:
        if isinstance(p, re.Pattern):
            out.append(p)
            continue
        if not isinstance(p, str):
            raise ConfigError(where, "include", include, allowed)
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise ConfigError(where, "include", p, allowed,
                              f"not a valid regular expression: {e}") from None
    return out


def _parse_modes(where: str, modes):
    allowed = "None or a list of modes (TRAIN, EVAL, PREDICT; names or ts.Mode)"
    if modes is None:
        return None
    if isinstance(modes, (str, bytes)) or not hasattr(modes, "__iter__"):
        raise ConfigError(where, "modes", modes, allowed, "a list is expected, even of one mode")
    out = set()
    for m in modes:
        try:
            mode = Mode.parse(m)
        except (ValueError, TypeError):
            raise ConfigError(where, "modes", modes, allowed) from None
        if mode == Mode.GLOBAL:
            raise ConfigError(where, "modes", modes, allowed, "GLOBAL is not a training mode")
        out.add(mode)
    return frozenset(out)

# Built-in collections (the core's catalogue): name -> (source kind, module type names for
# activation kinds). Sources: "loss", "scalar", "param" (weights/biases values), "grad",
# "output", "input". Biases are their own collection, not a default one (collections.h).
BUILTIN = {name: (source, types) for name, source, types in _core.builtin_collections()}

DEFAULT_COLLECTIONS = _core.default_collections()

Pattern = Union[str, "re.Pattern[str]"]


class Collection:
    """A named selection of tensors with its save configuration.

    Args:
        name: a built-in name (losses, scalars, weights, biases, gradients, activations, inputs,
            relu_input, relu_output, tanh_input, tanh_output, sigmoid_input, sigmoid_output) or
            any other name: a custom collection selects, among every tensor the hook can see
            (weights, biases, gradients, layer outputs and inputs), those whose full name
            ("gradients/fc1.weight") matches ``include``; they keep their own names.
        include: regex or list of regexes searched in the full tensor name *and* in the
            parameter/module name; None selects everything of the collection's kind.
        save_interval: save every N steps of the mode (None: the hook's save_interval; 1 for
            losses and scalars).
        reductions: save summaries (min, max, mean, std, l1, l2, nan/inf counts...).
        raw: also save the whole tensor (bit-exact; bounded by the storage budget).
        save_steps: explicit mode steps to save at (overrides save_interval).
        start_step / end_step: save only in [start_step, end_step).
        modes: modes to save in (default: all).
        histogram_buckets: buckets of a histogram kept with each summary (0: none).
    """

    def __init__(self, name: str, include: Union[None, Pattern, Sequence[Pattern]] = None,
                 save_interval: Optional[int] = None, reductions: bool = True, raw: bool = False,
                 save_steps: Optional[Iterable[int]] = None, start_step: int = 0,
                 end_step: Optional[int] = None, modes: Optional[Iterable] = None,
                 histogram_buckets: int = 0):
        w = f"Collection({name!r})" if isinstance(name, str) else "Collection"
        if not isinstance(name, str) or not name or "/" in name:
            raise ConfigError("Collection", "name", name, "a non-empty string without '/'")
        self.name = name
        self.include_patterns = _compile_includes(w, include)
        self.save_interval = check_int(w, "save_interval", save_interval, minimum=1,
                                       allow_none=True)
        self.reductions = check_bool(w, "reductions", reductions)
        self.raw = check_bool(w, "raw", raw)
        if save_steps is None:
            self.save_steps = None
        elif isinstance(save_steps, (str, bytes)) or not hasattr(save_steps, "__iter__"):
            raise ConfigError(w, "save_steps", save_steps,
                              "None or a list of integer mode steps >= 0")
        else:
            try:
                self.save_steps = sorted({check_int(w, "save_steps", s, minimum=0)
                                          for s in save_steps})
            except ConfigError:
                raise ConfigError(w, "save_steps", save_steps,
                                  "None or a list of integer mode steps >= 0") from None
        self.start_step = check_int(w, "start_step", start_step, minimum=0, allow_none=True) or 0
        self.end_step = check_int(w, "end_step", end_step, minimum=0, allow_none=True)
        if self.end_step is not None and self.end_step <= self.start_step:
            raise ConfigError(w, "end_step", end_step,
                              f"None or a step greater than start_step ({self.start_step})",
                              "the collection would never save")
        self.modes = _parse_modes(w, modes)
        self.histogram_buckets = check_int(w, "histogram_buckets", histogram_buckets, minimum=0,
                                           maximum=MAX_HISTOGRAM_BUCKETS)

    # ---- Its schedule: the core's SaveSchedule, one per default interval -------------------
    # The attributes the schedule is made of drop the cached schedules when set.
    def _schedule_attr(name):
        def get(self):
            return self.__dict__[name]

        def set_(self, value):
            self.__dict__[name] = value
            self.__dict__["_schedules"] = {}
            SCHEDULE_EPOCH[0] += 1  # hooks ask their schedules again (_schedule.py)
        return property(get, set_)

    save_interval = _schedule_attr("save_interval")
    save_steps = _schedule_attr("save_steps")
    start_step = _schedule_attr("start_step")
    end_step = _schedule_attr("end_step")
    modes = _schedule_attr("modes")
    del _schedule_attr

    def _schedule(self, default_interval: int):
        sched = self._schedules.get(default_interval)
        if sched is None:
            sched = _core.SaveSchedule(
                self.interval(default_interval), self.save_steps or [], self.start_step,
                -1 if self.end_step is None else self.end_step,
                [] if self.modes is None else sorted(int(m) for m in self.modes))
            self._schedules[default_interval] = sched
        return sched

    def __getstate__(self) -> dict:  # copy/pickle: the core schedules are rebuilt on use
        return dict(self.__dict__, _schedules={})

    # ---- What it selects ------------------------------------------------------------------
    @property
    def builtin(self) -> bool:
        return self.name in BUILTIN

    @property
    def source(self) -> Optional[str]:
        """"loss", "scalar", "param", "grad", "output", "input", or None (custom: any)."""
        return BUILTIN[self.name][0] if self.builtin else None

    @property
    def module_types(self):
        return BUILTIN[self.name][1] if self.builtin else None

    def matches(self, full_name: str, short_name: str = "") -> bool:
        """True when the tensor is selected (no include: everything of the kind)."""
        if not self.include_patterns:
            return True
        for p in self.include_patterns:
            if p.search(full_name) or (short_name and p.search(short_name)):
                return True
        return False

    # ---- When it saves ----------------------------------------------------------------------
    def interval(self, default: int) -> int:
        if self.save_interval is not None:
            return self.save_interval
        return _core.default_save_interval(self.name, default)  # 1 for losses and scalars

    def saves_at(self, mode, mode_step: int, default_interval: int = 100) -> bool:
        return self._schedule(default_interval).should_save(Mode.parse(mode), mode_step)

    def next_save(self, mode, mode_step: int, default_interval: int = 100) -> int:
        """Smallest step >= mode_step at which this collection saves in `mode` (NEVER if none)."""
        return self._schedule(default_interval).next_save(Mode.parse(mode), mode_step)

    def to_config(self, default_interval: int = 100) -> dict:
        return {"name": self.name, "include": [p.pattern for p in self.include_patterns],
                "save_interval": self.interval(default_interval), "reductions": self.reductions,
                "raw": self.raw, "save_steps": self.save_steps, "start_step": self.start_step,
                "end_step": self.end_step,
                "modes": None if self.modes is None else sorted(m.name for m in self.modes),
                "histogram_buckets": self.histogram_buckets}

    def __repr__(self) -> str:
        inc = [p.pattern for p in self.include_patterns]
        return (f"Collection({self.name!r}, include={inc!r}, save_interval={self.save_interval}, "
                f"reductions={self.reductions}, raw={self.raw})")


def as_collections(spec, save_interval: int) -> List[Collection]:
    """Normalises the hook's ``collections=`` argument: None -> the defaults; names -> built-in
    collections; Collection objects as given. Later entries with the same name win."""
    if spec is None:
        spec = DEFAULT_COLLECTIONS
    if isinstance(spec, (str, Collection)):
        spec = [spec]
    allowed = ("built-in collection names (" + ", ".join(BUILTIN) + ") or ts.Collection "
               "objects (a custom collection: ts.Collection(name, include=...)), or one of them")
    if not hasattr(spec, "__iter__"):
        raise ConfigError("Hook", "collections", spec, allowed)
    out = {}
    for c in spec:
        if isinstance(c, str):
            if c not in BUILTIN:
                from ._modes import nearest
                near = nearest(c, list(BUILTIN))
                raise ConfigError("Hook", "collections", c, allowed,
                                  "no built-in collection of that name" +
                                  (f"; did you mean {', '.join(map(repr, near))}?" if near
                                   else ""))
            c = Collection(c)
        if not isinstance(c, Collection):
            raise ConfigError("Hook", "collections", c, allowed)
        out[c.name] = c
    return list(out.values())

"""Collections: which tensors the hook saves, and when.

A collection selects tensors (by its kind and an optional ``include`` regex) and has a save
configuration (interval, explicit steps, a step range, modes). Save decisions use the step
counted within the current mode (``mode_step``), like SageMaker Debugger.

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

from ._modes import Mode

NEVER = 1 << 62

# Built-in collections: name -> (source kind, module type names for activation kinds).
# Sources: "loss", "scalar", "param" (weights/biases values), "grad", "output", "input".
BUILTIN = {
    "losses": ("loss", None),
    "scalars": ("scalar", None),
    "weights": ("param", None),
    "biases": ("param", None),
    "gradients": ("grad", None),
    "activations": ("output", None),
    "inputs": ("input", None),
    "relu_input": ("input", ("ReLU", "ReLU6", "LeakyReLU")),
    "relu_output": ("output", ("ReLU", "ReLU6", "LeakyReLU")),
    "tanh_input": ("input", ("Tanh",)),
    "tanh_output": ("output", ("Tanh",)),
    "sigmoid_input": ("input", ("Sigmoid",)),
    "sigmoid_output": ("output", ("Sigmoid",)),
}

DEFAULT_COLLECTIONS = ("losses", "scalars", "weights", "gradients")

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
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"collection name must be a non-empty string without '/': {name!r}")
        self.name = name
        if include is None or isinstance(include, (str, re.Pattern)):
            include = [] if include is None else [include]
        self.include_patterns = [p if isinstance(p, re.Pattern) else re.compile(p) for p in include]
        if save_interval is not None and int(save_interval) < 1:
            raise ValueError(f"collection {name}: save_interval must be >= 1, got {save_interval}")
        self.save_interval = None if save_interval is None else int(save_interval)
        self.reductions = bool(reductions)
        self.raw = bool(raw)
        self.save_steps = None if save_steps is None else sorted({int(s) for s in save_steps})
        self._save_steps_set = None if self.save_steps is None else set(self.save_steps)
        self.start_step = int(start_step or 0)
        self.end_step = None if end_step is None else int(end_step)
        self.modes = None if modes is None else frozenset(Mode.parse(m) for m in modes)
        self.histogram_buckets = int(histogram_buckets)

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
        return 1 if self.name in ("losses", "scalars") else default

    def saves_at(self, mode, mode_step: int, default_interval: int = 100) -> bool:
        mode = Mode.parse(mode)
        if self.modes is not None and mode not in self.modes:
            return False
        if mode_step < self.start_step or (self.end_step is not None and mode_step >= self.end_step):
            return False
        if self._save_steps_set is not None:
            return mode_step in self._save_steps_set
        return mode_step % self.interval(default_interval) == 0

    def next_save(self, mode, mode_step: int, default_interval: int = 100) -> int:
        """Smallest step >= mode_step at which this collection saves in `mode` (NEVER if none)."""
        mode = Mode.parse(mode)
        if self.modes is not None and mode not in self.modes:
            return NEVER
        s = max(mode_step, self.start_step)
        if self.save_steps is not None:
            import bisect
            i = bisect.bisect_left(self.save_steps, s)
            s = self.save_steps[i] if i < len(self.save_steps) else NEVER
        else:
            k = self.interval(default_interval)
            s = ((s + k - 1) // k) * k
        if self.end_step is not None and s >= self.end_step:
            return NEVER
        return s

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
    out = {}
    for c in spec:
        if isinstance(c, str):
            c = Collection(c)
        if not isinstance(c, Collection):
            raise TypeError(f"collections: expected names or ts.Collection objects, got {c!r}")
        out[c.name] = c
    return list(out.values())

"""Training modes and errors shared by the hook and the reader."""
from __future__ import annotations

import difflib
import enum
from typing import Iterable, Optional


class Mode(enum.IntEnum):
    """Training phase a record belongs to (same numbers as the C++ core and the files)."""

    TRAIN = 0
    EVAL = 1
    PREDICT = 2
    GLOBAL = 3  #: readers: any mode

    @classmethod
    def parse(cls, value) -> "Mode":
        """Accepts a Mode, its number, or its name in any case ("eval")."""
        if value is None:
            return cls.GLOBAL
        if isinstance(value, Mode):
            return value
        if isinstance(value, str):
            try:
                return cls[value.upper()]
            except KeyError:
                raise ValueError(f"unknown mode {value!r}; use TRAIN, EVAL, PREDICT or GLOBAL") from None
        return cls(int(value))


class NotFoundError(KeyError):
    """A tensor, scalar, step or reduction that is not in the run.

    The message names what is missing and the nearest things that exist::

        >>> raise NotFoundError("tensor", "gradients/fc.weight", ["gradients/fc1.weight"])
        Traceback (most recent call last):
        ...
        trainscope._modes.NotFoundError: no tensor 'gradients/fc.weight' in the run; did you mean: 'gradients/fc1.weight'?
    """

    def __init__(self, what: str, name, existing: Optional[Iterable] = (),
                 context: str = "in the run", hint: Optional[str] = None):
        self.what = what
        self.name = name
        # existing=None: a list of alternatives makes no sense here (say nothing about them)
        listed = existing is not None
        existing = list(existing or ())
        self.nearest = nearest(name, existing)
        msg = f"no {what} {name!r} {context}"
        if self.nearest:
            msg += "; did you mean: " + ", ".join(repr(n) for n in self.nearest) + "?"
        elif existing:
            shown = existing[:8]
            msg += "; existing: " + ", ".join(repr(n) for n in shown)
            if len(existing) > len(shown):
                msg += f", ... ({len(existing)} in all)"
        elif listed:
            msg += f" (there is no {what} at all)"
        if hint:
            msg += (". " if listed else ": ") + hint
        self.message = msg
        super().__init__(msg)

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return self.message


def nearest(name, existing: list, n: int = 3) -> list:
    """Closest existing names (difflib) or, for numbers, the closest numbers."""
    if not existing:
        return []
    if isinstance(name, (int,)) and all(isinstance(e, int) for e in existing):
        return sorted(sorted(existing, key=lambda e: (abs(e - name), e))[:n])
    return difflib.get_close_matches(str(name), [str(e) for e in existing], n=n, cutoff=0.5)


class TrainingStopped(RuntimeError):
    """Raised at a step boundary by ``Hook(raise_on_stop=True)`` once a stop was requested
    (a rule's stop_training action, ``trainscope watch``, the dashboard)."""

    def __init__(self, reason: str = ""):
        self.reason = reason
        super().__init__(f"training stopped by trainscope: {reason}" if reason else
                         "training stopped by trainscope")


class RuleFired(Exception):
    """Raise from a custom rule's ``invoke_at_step`` to report a violation with a message
    (returning True does the same without one)."""

    def __init__(self, message: str = "", value: float = float("nan"),
                 threshold: float = float("nan"), tensors=()):
        self.message = message
        self.value = value
        self.threshold = threshold
        self.tensors = list(tensors)
        super().__init__(message)

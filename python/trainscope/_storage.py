"""The hook's storage accounting: the bytes it has written (an estimate, by collection), the
projection of the run's bytes over ``expected_steps`` with the current configuration, and the
byte budget of the worker's stream (a warning once the projection passes it; raw tensors are no
longer saved once 90% of it is used).

A collection's bytes per save are those of its first save step (known from the shapes at
registration for weights, biases and gradients); the projection only grows when those do.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable

SUMMARY_BYTES = 160  # approximate bytes on disk of one summary record (for projections)
GB = 1000 ** 3


class StorageAccount:
    """Bytes written and projected against a budget (0: none). ``warn(key, message)`` says a
    warning once per key (the hook logs it and records a storage_warning event)."""

    def __init__(self, budget_bytes: int, expected_steps: int,
                 warn: Callable[[str, str], None]):
        self.budget_bytes = budget_bytes
        self.expected_steps = expected_steps
        self.bytes = 0                            # written so far (estimate)
        self.by_collection: Dict[str, int] = {}
        self.raw_disabled = False                 # 90% of the budget used: no raw tensors
        self._warn = warn
        self._first_save_bytes: Dict[str, int] = {}  # bytes of one save, by collection
        self._first_save_step: Dict[str, int] = {}   # the step they were counted at (-1: known)
        self._projection_warned = False

    def add(self, coll: str, nbytes: int, step: int, collections: Iterable,
            save_interval: int) -> None:
        """`nbytes` of collection `coll` written at global step `step`."""
        if not nbytes:
            return
        self.bytes += nbytes
        self.by_collection[coll] = self.by_collection.get(coll, 0) + nbytes
        budget = self.budget_bytes
        if not budget:
            return
        if not self.raw_disabled and self.bytes >= budget * 0.9:
            self.raw_disabled = True
            self._warn("budget", f"trainscope: storage budget {budget} bytes nearly used "
                       f"({self.bytes} bytes); raw tensors are no longer saved")
        if not self._projection_warned:
            if self._first_save_step.setdefault(coll, step) != step:
                return
            self._first_save_bytes[coll] = self._first_save_bytes.get(coll, 0) + nbytes
            self.check_projection(collections, save_interval)

    def per_save(self, coll: str, nbytes: int) -> None:
        """Collection `coll` writes `nbytes` at each save (sizes known at registration)."""
        self._first_save_bytes[coll] = nbytes
        self._first_save_step[coll] = -1

    def projected(self, collections: Iterable, save_interval: int) -> int:
        """The bytes of expected_steps steps with these collections."""
        total = 0
        by_name = {c.name: c for c in collections}
        for coll, b in self._first_save_bytes.items():
            c = by_name.get(coll)
            interval = c.interval(save_interval) if c is not None else save_interval
            saves = self.expected_steps // interval + 1
            if c is not None and c.save_steps is not None:
                saves = len(c.save_steps)
            total += b * saves
        return total

    def check_projection(self, collections: Iterable, save_interval: int) -> None:
        """Warns once when the projection passes the budget."""
        budget = self.budget_bytes
        if not budget or self._projection_warned:
            return
        projected = self.projected(collections, save_interval)
        if projected > budget:
            self._projection_warned = True
            self._warn("projection", (
                f"trainscope: this configuration projects to {projected / GB:.1f} GB "
                f"over {self.expected_steps} steps, past the budget of {budget / GB:.1f} GB "
                "(storage_budget_bytes); raw tensors will be dropped first"))

"""The hook's own failures: internal errors (counted by place, logged once per place, recorded
as hook_error events, and after ``max_errors`` of them the hook stops saving tensors) and
one-time warnings (logged and recorded as storage_warning events). Never raises: whatever goes
wrong in here is dropped, so reporting a failure cannot become one for the training.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, Set

from ._schema import EVENT

log = logging.getLogger("trainscope")


class FailureLog:
    """A component of the Hook (like StorageAccount). ``writer()`` gives the stream's writer or
    None, ``step()`` the global step; ``stop_saving()`` is called once ``max_errors`` errors were
    counted and says whether the hook was still saving (it stops and the log says so)."""

    def __init__(self, max_errors: int, writer: Callable[[], Any], step: Callable[[], int],
                 stop_saving: Callable[[], bool]):
        self.max_errors = max_errors
        self.count = 0                       # every internal error
        self.by_place: Dict[str, int] = {}   # internal errors by place
        self._warned: Set[str] = set()       # keys of the warnings said
        self._writer = writer
        self._step = step
        self._stop_saving = stop_saving

    def fail(self, where: str, exc: BaseException) -> None:
        """Counts an internal error, logs it once per place, records it, degrades."""
        try:
            self.count += 1
            n = self.by_place.get(where, 0) + 1
            self.by_place[where] = n
            msg = f"{type(exc).__name__}: {exc}"
            if n == 1:
                log.warning("trainscope: internal error in %s (training continues): %s",
                            where, msg)
            w = self._writer()
            if w is not None and (n == 1 or n % 100 == 0):
                w.add_event(EVENT.HOOK_ERROR, json.dumps({
                    "where": where, "message": msg, "count": n, "total": self.count,
                    "step": self._step()}))
            if self.count >= self.max_errors and self._stop_saving():
                log.warning("trainscope: %d internal errors; the hook stops saving tensors",
                            self.count)
        except Exception:
            pass

    def degraded(self, where: str) -> None:
        """Notes a place that works degraded for a known, non-bug reason (an unwritable run
        directory): listed in ``by_place`` like an error, not counted towards ``max_errors``,
        nothing logged or recorded here (the caller says it once)."""
        self.by_place[where] = self.by_place.get(where, 0) + 1

    def warn_once(self, key: str, message: str) -> None:
        """Logs `message` and records it as a storage_warning event, the first time for `key`."""
        if key in self._warned:
            return
        self._warned.add(key)
        log.warning(message)
        try:
            w = self._writer()
            if w is not None:
                w.add_event(EVENT.STORAGE_WARNING, json.dumps({"message": message}))
        except Exception:
            pass

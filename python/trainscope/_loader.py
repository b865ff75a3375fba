"""The loader wrapper of Hook.wrap()."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .hook import Hook

class _TimedLoader:
    """Iterates a loader, recording how long each batch took to arrive (the iterator is the
    clock's: in automatic stepping it also ends the open step when the next batch is asked)."""

    def __init__(self, hook: Hook, loader):
        self._hook = hook
        self._loader = loader

    def __len__(self):
        return len(self._loader)

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def __iter__(self):
        return self._hook._clock.timed_iter(self._loader)

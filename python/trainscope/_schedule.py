"""The hook's save schedule: which collections save at a mode step, and the next save steps
of each mode that the step clock waits for (the clock follows a regular loss schedule itself).
"""
from __future__ import annotations

from typing import Dict

from ._modes import Mode
from ._step_clock import MODES
from .collection import NEVER


class SaveSchedule:
    """The hook's save schedule (a mixin of Hook)."""

    def _index_collections(self) -> None:
        self._tensor_colls = [c for c in self.collections if c.source not in ("loss", "scalar")]
        self._loss_coll = next((c for c in self.collections if c.name == "losses"), None)
        self._scalar_coll = next((c for c in self.collections if c.name == "scalars"), None)
        self._targets: Dict[str, dict] = {}
        self._reset_save_schedule()
        self._plan_cache.clear()
        self._active_memo = None

    def _reset_save_schedule(self) -> None:
        """The next tensor and loss save step of each mode from its current mode step (the
        clock follows a regular loss schedule on from there by itself)."""
        c = self._loss_coll
        for m in MODES:
            ms = self._mode_steps[m]
            self._next_save[m] = self._compute_next_save(m, ms)
            self._loss_next[m] = NEVER if c is None else c.next_save(m, ms, self.save_interval)

    def _compute_next_save(self, mode: Mode, from_step: int) -> int:
        return min((c.next_save(mode, from_step, self.save_interval) for c in
                    getattr(self, "_tensor_colls", ())), default=NEVER)

    def _active_collections(self, mode: Mode, ms: int) -> tuple:
        key = (int(mode), ms)  # asked twice per step when consecutive steps save
        memo = self._active_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        active = tuple(c.name for c in self._tensor_colls
                       if c.saves_at(mode, ms, self.save_interval))
        self._active_memo = (key, active)
        return active

    _active_memo = None

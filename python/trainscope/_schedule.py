"""The hook's save schedule: which collections save at a mode step, and the next save steps
of each mode that the step clock waits for (the clock follows a regular loss schedule itself).
"""
from __future__ import annotations

from typing import Dict

from . import _core
from ._modes import Mode
from ._step_clock import MODES
from .collection import NEVER, SCHEDULE_EPOCH


class SaveSchedule:
    """The hook's save schedule (a mixin of Hook)."""

    def _index_collections(self) -> None:
        self._tensor_colls = [c for c in self.collections if c.source not in ("loss", "scalar")]
        self._loss_coll = next((c for c in self.collections if c.name == "losses"), None)
        self._scalar_coll = next((c for c in self.collections if c.name == "scalars"), None)
        self._targets: Dict[str, dict] = {}
        self._schedule_set = None
        self._active_memo = None
        self._reset_save_schedule()
        self._plan_cache.clear()

    def _reset_save_schedule(self) -> None:
        """The next tensor and loss save step of each mode from its current mode step (the
        clock follows a regular loss schedule on from there by itself)."""
        c = self._loss_coll
        for m in MODES:
            ms = self._mode_steps[m]
            self._next_save[m] = self._compute_next_save(m, ms)
            self._loss_next[m] = NEVER if c is None else c.next_save(m, ms, self.save_interval)

    def _compute_next_save(self, mode: Mode, from_step: int) -> int:
        ss = self._schedules()
        if ss is not None:
            return ss[2].next_save(int(mode), from_step)
        return min((c.next_save(mode, from_step, self.save_interval) for c in
                    getattr(self, "_tensor_colls", ())), default=NEVER)

    def _active_collections(self, mode: Mode, ms: int) -> tuple:
        key = (int(mode), ms, SCHEDULE_EPOCH[0])  # asked twice a step when consecutive steps save
        memo = self._active_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        ss = self._schedules()
        if ss is not None:
            mask = ss[2].active(key[0], ms)
            active = ss[3].get(mask)
            if active is None:
                active = ss[3][mask] = tuple(c.name for i, c in enumerate(self._tensor_colls)
                                             if mask >> i & 1)
        else:
            active = tuple(c.name for c in self._tensor_colls
                           if c.saves_at(mode, ms, self.save_interval))
        self._active_memo = (key, active)
        return active

    def _schedules(self):
        """(epoch, save_interval, _core.ScheduleSet of the tensor collections, {mask: names}),
        rebuilt when a collection's schedule or the default interval changed; None with more
        collections than a ScheduleSet takes (each is then asked on its own)."""
        ss = self._schedule_set
        if ss is not None and ss[0] == SCHEDULE_EPOCH[0] and ss[1] == self.save_interval:
            return ss
        colls = getattr(self, "_tensor_colls", None)
        if colls is None or len(colls) > 62:
            return None
        ss = self._schedule_set = (
            SCHEDULE_EPOCH[0], self.save_interval,
            _core.ScheduleSet([c._schedule(self.save_interval) for c in colls]), {})
        return ss

    _active_memo = None
    _schedule_set = None

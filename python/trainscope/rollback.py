"""The rollback action: when a rule fires, restore the last checkpoint taken before the problem
appeared, scale the learning rate, skip some batches, and go on (docs/checkpoints.md).

``Rollback`` is the action's spec (its parameters travel in the rules config like any action's);
``RollbackExecutor`` carries it out at the Checkpointer's step boundaries, on the training
thread: the firing's first bad step comes from the engine (the firing event's ``first_step``,
which counts the rule's own look-back such as dead_loss's num_steps), the state from the
Checkpointer's committed checkpoints.
"""
from __future__ import annotations

import json
import logging
import os
import time
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from ._schema import EVENT

if TYPE_CHECKING:  # pragma: no cover
    from .checkpoint import Checkpointer

log = logging.getLogger("trainscope")

_ROLLBACK_FIELDS = ("lr_factor", "skip_batches", "max_rollbacks", "recovery_steps",
                    "margin_steps")


class Rollback:
    """The rollback action: when a rule fires, restore the last checkpoint taken before the
    problem appeared, scale the learning rate by ``lr_factor``, skip the next ``skip_batches``
    batches (of ``ckpt.wrap(loader)``) and continue. After ``max_rollbacks`` rollbacks without
    recovery (``recovery_steps`` steps past the firing without a new one; default every_steps)
    the training is stopped.

    Use it as an action (``ts.Hook(..., actions=[ts.Rollback(lr_factor=0.1)])``, or the string
    ``"rollback"`` for the defaults), or give it to the Checkpointer with the rules that trigger
    it: ``ts.Checkpointer(..., rollback=ts.Rollback(rules=["exploding_tensor"]))``.
    ``margin_steps`` moves the target further back (for rules that fire some steps after the
    problem began)."""

    type = "rollback"

    def __init__(self, lr_factor: float = 0.5, skip_batches: int = 0, max_rollbacks: int = 3,
                 recovery_steps: Optional[int] = None, margin_steps: int = 0,
                 rules: Optional[Sequence[str]] = None):
        self.lr_factor = float(lr_factor)
        self.skip_batches = max(0, int(skip_batches))
        self.max_rollbacks = max(0, int(max_rollbacks))
        self.recovery_steps = None if recovery_steps is None else max(1, int(recovery_steps))
        self.margin_steps = max(0, int(margin_steps))
        self.rules = [str(r) for r in rules or []]

    def to_config(self) -> dict:
        return {"type": "rollback", "lr_factor": self.lr_factor,
                "skip_batches": self.skip_batches, "max_rollbacks": self.max_rollbacks,
                "recovery_steps": self.recovery_steps, "margin_steps": self.margin_steps}

    def __str__(self) -> str:
        return "rollback"

    def __repr__(self) -> str:
        return (f"Rollback(lr_factor={self.lr_factor}, skip_batches={self.skip_batches}, "
                f"max_rollbacks={self.max_rollbacks})")


def is_rollback_action(a) -> bool:
    if isinstance(a, Rollback):
        return True
    if isinstance(a, str):
        return a == "rollback"
    return isinstance(a, dict) and a.get("type") == "rollback"


def _as_rollback(a) -> Rollback:
    if isinstance(a, Rollback):
        return a
    if isinstance(a, dict):
        return Rollback(**{k: v for k, v in a.items() if k != "type"})
    return Rollback()


def split_rollback(rules, actions) -> Tuple[list, list, Optional[dict]]:
    """Takes the rollback action out of a hook's rule and action specs (the rules engine does
    not know it). Returns (rules, actions, {"rules": [ids], "action": Rollback}) or None."""
    rules = list(rules or [])
    actions = list(actions or [])
    default_rb = [a for a in actions if is_rollback_action(a)]
    actions = [a for a in actions if not is_rollback_action(a)]
    ids: List[str] = []
    action = _as_rollback(default_rb[0]) if default_rb else None
    out = []
    for r in rules:
        if isinstance(r, str):
            if default_rb:
                ids.append(r)
            out.append(r)
            continue
        is_dict = isinstance(r, dict)
        if is_dict:
            own, rid = r.get("actions"), r.get("id") or r.get("name")
        else:
            own = getattr(r, "actions", None)
            rid = getattr(r, "id", None) or getattr(r, "name", str(r))
        if own is None:
            if default_rb:
                ids.append(rid)
        elif any(is_rollback_action(a) for a in own):
            ids.append(rid)
            action = action or _as_rollback(next(a for a in own if is_rollback_action(a)))
            kept = [a for a in own if not is_rollback_action(a)]
            if is_dict:
                r = dict(r, actions=kept)
            else:
                r.actions = kept
        out.append(r)
    if not ids and action is None:
        return out, actions, None
    return out, actions, {"rules": ids, "action": action or Rollback()}


class RollbackExecutor:
    """Carries out rollbacks for one Checkpointer (``ckpt``): at each step boundary ``check()``
    looks for new firings of the rules that roll back (the hook's rule statuses), and rolls the
    state back to the newest finite checkpoint before the firing's first bad step; after
    ``max_rollbacks`` without recovery it stops the training instead."""

    def __init__(self, ckpt: "Checkpointer"):
        self.ckpt = ckpt
        self._seen_firings: Dict[str, int] = {}
        self._next_poll_ns = 0
        self._reader = None

    def poll_now(self) -> None:
        self._next_poll_ns = 0

    def check_agreed(self) -> bool:
        """A rollback the ranks of a distributed job agreed on at the last boundary: every
        rank's executor runs it here, at the same TRAIN step (True when it acted)."""
        link = self.ckpt._link
        d = link.coordinator() if link is not None else None
        if d is None:
            return False
        info = d.take_agreed_rollback()
        if info is None:
            return False
        if not info.get("agreed"):  # held when agreement turned off: this rank alone
            rb = Rollback(**{k: v for k, v in (info.get("params") or {}).items()
                             if k in _ROLLBACK_FIELDS})
            return self._rollback(info.get("rule") or "rule", 0, {}, rb,
                                  int(info["bad_step"]), alone=True)
        return self._agreed(d, info)

    def check(self) -> bool:
        """True when the state was rolled back (or the training stopped) at this boundary."""
        ck = self.ckpt
        h = ck.hook
        if h is None or ck._gave_up:
            return False
        now = time.monotonic_ns()
        if now < self._next_poll_ns:
            return False
        self._next_poll_ns = now + ck._poll_ns
        # Firings the engine dispatched the rollback action for (their first bad step and the
        # action's parameters come with them) ...
        take = getattr(h, "take_rollbacks", None)
        for req in (take() if take is not None else ()):
            rid, n = req["rule"], int(req["firing"])
            if n <= self._seen_firings.get(rid, 0):
                continue
            self._seen_firings[rid] = n
            details = json.loads(req.get("details_json") or "{}")
            params = {k: v for k, v in json.loads(req.get("action_json") or "{}").items()
                      if k in _ROLLBACK_FIELDS}
            return self._rollback(rid, n, {"last_step": req["step"]}, Rollback(**params),
                                  details.get("first_step"))
        # ... and new firings of the rules that roll back, from their statuses (rules given
        # to the Checkpointer as Rollback(rules=[...]), or a dispatch not taken yet).
        statuses = h.rule_statuses()
        for rid in ck._rb_rules:
            st = statuses.get(rid)
            if not st:
                continue
            n = int(st.get("firings", 0))
            if n > self._seen_firings.get(rid, 0):
                self._seen_firings[rid] = n
                return self._rollback(rid, n, st)
        if ck._rb_count and h.step_count >= ck._rb_recover_at:
            ck._event(EVENT.ROLLBACK_RECOVERED, {"step": h.step_count, "after": ck._rb_count})
            ck._rb_count = 0
        return False

    def firing_step(self, rid: str, firing: int, st: dict) -> int:
        """Global step of the firing's first bad step (its rule event's ``first_step``, which
        the engine derives from the consecutive count and the rule's look-back)."""
        ck = self.ckpt
        h = ck.hook
        for _ in range(3):
            try:
                h.flush()
                if self._reader is None:
                    from .reader import open_run
                    self._reader = open_run(h.out_dir, refresh_interval_s=0)
                self._reader.refresh()
                evs = [e for e in self._reader.rule_events()
                       if e["rule"] == rid and e["status"] == "IssuesFound"
                       and int(e["firing"]) == firing and e["wall_us"] >= ck._created_us
                       and not e["details"].get("reminder")]
                if evs:
                    d = evs[-1]["details"]
                    if "first_step" in d:
                        return int(d["first_step"])
                    return int(evs[-1]["step"]) - max(0, int(d.get("consecutive", 1)) - 1)
            except Exception as e:
                log.debug("trainscope: rollback: rule events not read: %s", e)
            time.sleep(0.02)
        return int(st.get("last_step", h.step_count))

    def _rollback(self, rid: str, firing: int, st: dict, rb: Optional[Rollback] = None,
                  first_step: Optional[int] = None, alone: bool = False) -> bool:
        ck = self.ckpt
        h = ck.hook
        rb = rb or ck.rollback
        from_step = h.step_count
        if alone:
            bad = int(first_step)
        else:
            first = ck._firing_step(rid, firing, st) if first_step is None else int(first_step)
            bad = first - rb.margin_steps
        if bad >= from_step:
            log.info("trainscope: %s fired for step %d, not yet run here; ignored", rid, bad)
            return False
        if ck._rb_count >= rb.max_rollbacks:
            return self._give_up(rid, from_step, bad,
                                 f"{ck._rb_count} rollbacks without recovery")
        d = ck._link.coordinator() if not alone else None
        if d is not None and d.coordinating:
            # One rank restoring alone would leave the ranks on different weights and step
            # counters: the request is held until every rank agrees on it, then every rank
            # restores the same checkpoint (check_agreed). In TRAIN steps, which all ranks
            # count alike: a checkpoint of TRAIN step s is before the bad step iff s < bound.
            bound = ck.step - (from_step - bad)
            if d.defer_rollback({"rule": rid, "bound": bound, "bad_step": bad,
                                 "from_step": from_step, "params": rb.to_config()}):
                return False
        try:
            found = ck._load_latest(lambda m: int(m.get("global_step", m["step"])) < bad
                                    and m.get("finite", True))
        except Exception as e:
            ck._failed("rollback", e)
            found = None
        if found is None:
            return self._give_up(rid, from_step, bad, f"no valid checkpoint before step {bad}")
        meta, state = found
        return self._restore_to(meta, state, rb, rid, from_step, bad, {})

    def _agreed(self, d, info: dict) -> bool:
        """Every rank at the same boundary: agree on the newest checkpoint that every rank has
        below the agreed bound (ranks may have committed different steps), restore it."""
        from .checkpoint import list_checkpoints
        ck = self.ckpt
        from_step = ck.hook.step_count
        bound = int(info["bound"])
        bad = from_step - (ck.step - bound)  # the bound in this rank's global steps
        rid = str(info.get("rule") or "rule")
        rb = Rollback(**{k: v for k, v in (info.get("params") or {}).items()
                         if k in _ROLLBACK_FIELDS})
        cks = {c["step"]: c for c in list_checkpoints(ck.dir)
               if not c.get("invalid") and c.get("finite", True)}

        def newest_below(step: int) -> int:
            return max((s for s in cks if s < step), default=-1)

        def has(step: int) -> bool:  # cheap: committed, its data file of the recorded size
            meta = cks.get(step)
            try:
                return meta is not None and os.path.getsize(meta["path"]) == int(meta["bytes"])
            except (OSError, KeyError, ValueError):
                return False

        mine = newest_below(bound)  # this rank's own newest before the bound
        t0 = time.perf_counter()
        rounds, found, target, upper = 0, None, -1, bound
        try:
            while True:
                target, n = d.agree_checkpoint(upper, newest_below, has)
                rounds += n
                if target < 0:
                    break
                # verified (checksum) and loaded only once agreed; if it fails on any rank,
                # every rank looks for the next older one it lacks nothing of
                found = ck._load_checkpoint(cks[target])
                rounds += 1
                if d.all_ok(found is not None):
                    break
                cks.pop(target, None)
                upper, found = target, None
        except Exception as e:
            ck._failed("rollback agreement", e)
            d.rollback_done(False)
            return self._give_up(rid, from_step, bad, "the ranks could not agree on a "
                                 f"checkpoint ({type(e).__name__}: {e})")
        if target < 0 or found is None:
            d.rollback_done(False)
            return self._give_up(rid, from_step, bad, "no checkpoint that every rank has "
                                 f"before TRAIN step {bound}")
        meta, state = found
        try:
            ok = self._restore_to(meta, state, rb, rid, from_step, bad, {
            "rank": info.get("rank"), "requested_by": info.get("requester"),
            "bound_train_step": bound,
            "requested_at_step": info.get("step"), "agreed_at_step": info.get("agreed_at_step"),
            "agreement_rounds": rounds, "agreement_ms": (time.perf_counter() - t0) * 1e3,
            "newest_here": mine})
        except Exception as e:  # the state may be half restored: the training cannot go on
            ck._failed("rollback", e)
            ok = False
        # every rank restored, or every rank stops (one more tiny collective, same boundary)
        try:
            ok = d.all_ok(ok)
        except Exception as e:
            ck._failed("rollback agreement", e)
            ok = False
        d.rollback_done(ok)
        if not ok:
            return self._give_up(rid, from_step, bad, "a rank could not restore the agreed "
                                 f"checkpoint of TRAIN step {target}")
        return True

    def _restore_to(self, meta: dict, state: dict, rb: Rollback, rid: str, from_step: int,
                    bad: int, extra: dict) -> bool:
        from .checkpoint import list_checkpoints
        ck = self.ckpt
        cur_scale = ck.lr_scale             # in effect in the diverged timeline
        ck._restore(state)                  # lr_scale := the checkpoint's (baked into its lr)
        target = cur_scale * rb.lr_factor
        self._scale_lr(target / ck.lr_scale if ck.lr_scale else rb.lr_factor)
        ck.lr_scale = target
        ck._rb_count += 1
        ck._rollbacks += 1
        ck.skip_pending = rb.skip_batches
        for c in list_checkpoints(ck.dir):   # the abandoned timeline
            if c["step"] > ck.step:
                ck._delete(c)
        ck._last_saved = ck.step
        ck._stop_saved = False
        ck._rb_recover_at = bad + (rb.recovery_steps or ck.every_steps or 100)
        to_step = int(meta.get("global_step", ck.step))
        ck._event(EVENT.ROLLBACK, {
            "rule": rid, "from_step": from_step, "to_step": to_step, "bad_step": bad,
            "train_step": ck.step, "lr_factor": rb.lr_factor, "lr_scale": ck.lr_scale,
            "skip_batches": rb.skip_batches, "count": ck._rb_count,
            "checkpoint": meta["path"], **extra})
        log.warning("trainscope: %s fired (first bad step %d): rolled back from step %d to %d "
                    "(lr x%g, rollback %d of %d)", rid, bad, from_step, to_step,
                    ck.lr_scale, ck._rb_count, rb.max_rollbacks)
        return True

    def _scale_lr(self, factor: float) -> None:
        ck = self.ckpt
        for o in ck.optimizers:
            for g in getattr(o, "param_groups", ()):
                if "lr" in g:
                    g["lr"] = g["lr"] * factor
                if "initial_lr" in g:
                    g["initial_lr"] = g["initial_lr"] * factor
        s = ck.scheduler
        if s is not None and hasattr(s, "base_lrs"):
            s.base_lrs = [b * factor for b in s.base_lrs]
        if s is not None and hasattr(s, "_last_lr"):
            s._last_lr = [g["lr"] for o in ck.optimizers for g in o.param_groups]

    def _give_up(self, rid: str, from_step: int, bad: int, why: str) -> bool:
        ck = self.ckpt
        ck._gave_up = True
        ck._event(EVENT.ROLLBACK_FAILED, {"rule": rid, "from_step": from_step, "bad_step": bad,
                                      "reason": why, "count": ck._rb_count})
        log.warning("trainscope: rollback for %s impossible (%s); stopping", rid, why)
        ck._link.request_stop(f"rollback: {rid}: {why}", source="rollback")
        return True

"""A stop that every rank of a torch.distributed job takes at the same step.

A rank that leaves the training loop while the others enter the next all-reduce hangs the job
until the collective times out. So in a job of several ranks no rank acts on a stop request
(a rule's stop_training action, control/stop.json, a preemption signal) by itself: the request
is held (``StopCoordinator.defer``) and the ranks agree on it at a step boundary that every rank
knows in advance, and there every rank's ``hook.should_stop`` becomes True (and, with
``raise_on_stop``, TrainingStopped is raised in the forward of that same step, before any of
its collectives).

How the ranks agree (docs/distributed.md):
- The boundaries are TRAIN mode steps (a rank that alone runs extra eval forwards keeps the same
  boundaries). The C step clock calls ``Hook._slow_sync`` at the start of the TRAIN step
  ``clock.sync_step``; every other step costs one integer comparison there.
- Probe: at TRAIN step 1 each rank adds itself to a counter in the job's own store (the default
  process group's TCPStore); 16 steps later each rank reads it. Only when every rank has a hook
  does it create one gloo process group of all ranks (CPU, beside whatever backend the job
  uses). With hooks on fewer ranks (say on rank 0 only) stops stay local, said once.
- Rounds: at each boundary a rank waits for the previous round's all_reduce (launched one
  round earlier with ``async_op=True``, so long done), reads the agreed result and launches
  the next round with its own state: [stop wanted, requesting rank + 1, -proposed interval]
  and four rollback fields (below), reduced with MAX. A stop agreed in round r is taken at
  the boundary where round r is read, by every rank. The next interval is the smallest proposed: each rank proposes the number of
  steps that lasts about ``TRAINSCOPE_STOP_SYNC_MS`` (100 ms) at its measured step time, so
  a round costs the training one launch of a one-element-per-field gloo all_reduce per ~100 ms
  and a stop is taken 1-2 intervals (~100-200 ms) after a rank asked for it.
- Rollbacks (rollback.py) ride on the same rounds: [rollback wanted, requesting rank + 1,
  -bound, this rank has no Checkpointer]. At the boundary where a round says "rollback" every
  rank stops launching rounds; at the next step boundary every rank's Checkpointer agrees on
  the newest checkpoint that all ranks have below the bound (``agree_checkpoint``: blocking
  two-integer all_reduces, every rank at the same boundary), restores it, and the rounds start
  again from the restored TRAIN step (``rollback_done``). docs/distributed.md, "Rollback".
- Failures degrade to local stops: a wait that times out (a rank left the loop early), an
  error from torch.distributed, a missing store. Never an exception into the training loop.

Environment: TRAINSCOPE_DISTRIBUTED=0 turns coordination off; TRAINSCOPE_STOP_SYNC_MS sets the
target interval between agreements (ms, default 100); TRAINSCOPE_STOP_SYNC_TIMEOUT_S how long a
rank waits for a round that is not complete (default 600, as torch's own default timeout).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Optional, Tuple

from ._modes import Mode
from ._schema import EVENT

log = logging.getLogger("trainscope")

PROBE_STEP = 1        # TRAIN step at which each rank announces its hook in the store
PROBE_WAIT = 16       # TRAIN steps later the ranks read the count (and create the group)
RETRY_EVERY = 64      # TRAIN steps between probes while torch.distributed is not initialized
FIRST_INTERVAL = 4    # TRAIN steps from the first round to the second (before any timing)
MAX_INTERVAL = 1000
STORE_PREFIX = "trainscope/"
NO_BOUND = 1 << 62    # a rank that asks for no rollback
# Hooks made in this process so far: every rank makes its hooks in the same order, so the n-th
# hook of each rank meets the others' n-th under the same store keys.
_hooks_made = [0]


def _env_world() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


# Built-in rules that compare the ranks with each other: they read every rank's stream and run
# in the training process of rank 0 only (trainscope watch runs them over every stream too).
CROSS_RANK_RULES = ("straggler",)


def split_cross_rank(rules) -> tuple:
    """(rules of this rank's own stream, rules comparing the ranks)."""
    local = [r for r in rules if getattr(r, "name", None) not in CROSS_RANK_RULES]
    cross = [r for r in rules if getattr(r, "name", None) in CROSS_RANK_RULES]
    return local, cross


def wanted() -> bool:
    """Whether a hook made in this process should coordinate its stops: launched as one of
    several ranks (torchrun's WORLD_SIZE, or an initialized process group of size > 1) and not
    turned off with TRAINSCOPE_DISTRIBUTED=0."""
    if os.environ.get("TRAINSCOPE_DISTRIBUTED", "1") == "0":
        return False
    if _env_world() > 1:
        return True
    try:
        import torch.distributed as dist
        return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    except Exception:
        return False


class StopCoordinator:
    """Holds a rank's stop requests until the ranks agree on them (see the module docstring).

    Thread-safety: ``defer`` may be called from any thread (rule runner, committer, signal
    handler); ``on_boundary`` and ``close`` only from the training thread (the step clock)."""

    def __init__(self, hook):
        self._hook = hook
        self._clock = hook._clock
        self._lock = threading.Lock()
        self._local: Optional[tuple] = None   # (reason, source, step) held until agreed
        self._rb_local: Optional[dict] = None  # a rollback held until agreed (rollback.py)
        self._rb_published = False
        self._rb_agreed: Optional[dict] = None  # agreed, to be executed by the Checkpointer
        self._rb_seq = 0                      # rollbacks agreed so far (the same on all ranks)
        self._published = False               # the local reason is in the store
        self._agreeing = False                # on_boundary is applying an agreed stop
        self._state = "probe"                 # probe -> count -> rounds -> off
        self._group = None
        self._store = None
        self._work = None
        self._buf = None
        self._interval = FIRST_INTERVAL
        self._last_ns = 0
        self._rank = 0
        self._world = 1
        self._key = ""
        self.rounds = 0
        self.sync_ns = 0                      # time spent in rounds (training thread)
        self.setup_ns = 0                     # probe, count and creating the gloo group
        self.max_sync_ns = 0
        self.agreed_step: Optional[int] = None
        try:
            self._target_ms = max(1.0, float(os.environ.get("TRAINSCOPE_STOP_SYNC_MS", "100")))
        except ValueError:
            self._target_ms = 100.0
        try:
            self._timeout_s = max(1.0, float(os.environ.get("TRAINSCOPE_STOP_SYNC_TIMEOUT_S",
                                                            "600")))
        except ValueError:
            self._timeout_s = 600.0
        self._seq = _hooks_made[0]
        _hooks_made[0] += 1
        try:  # torch's flight recorder, where the job's group is not made yet (NCCL only)
            from . import _flight_recorder
            _flight_recorder.configure(hook.out_dir)
        except Exception:
            pass
        self._clock.sync_step = PROBE_STEP

    # ------------------------------------------------------------------ any thread
    def defer(self, reason: str, source: str) -> bool:
        """True when the request is held for agreement (the caller must not stop now); False
        when the hook should act on it directly (coordination off, or the agreed stop)."""
        if self._agreeing or self._state not in ("count", "rounds", "rollback"):
            return False  # no agreement possible (yet, or any more): the hook acts on it
        with self._lock:
            if self._local is None:
                self._local = (reason or "stop requested", source, self._hook.step_count)
                first = True
            else:
                first = False
        if first:
            log.warning("trainscope: stop requested (%s): %s; held until all ranks agree at "
                        "a step boundary", source, reason)
            self._event(EVENT.STOP_DEFERRED, {"reason": reason, "source": source,
                                          "step": self._hook.step_count})
        return True

    def defer_rollback(self, request: dict) -> bool:
        """Holds a rollback of this rank (rollback.py: {"rule", "bound", "params", "bad_step",
        "from_step"}; ``bound``: restore a checkpoint of a TRAIN step below it) until the ranks
        agree on it at a boundary. False when no agreement is possible (the caller rolls back
        alone, as in a job of one rank)."""
        if self._state not in ("count", "rounds"):
            return False
        with self._lock:
            if self._rb_local is not None:
                # one held at a time: the earliest bound covers both
                self._rb_local["bound"] = min(self._rb_local["bound"], int(request["bound"]))
                return True
            self._rb_local = dict(request, step=self._hook.step_count)
        log.warning("trainscope: rollback requested (%s, to a checkpoint before TRAIN step "
                    "%d); held until all ranks agree at a step boundary", request.get("rule"),
                    request["bound"])
        return True

    def take_agreed_rollback(self) -> Optional[dict]:
        """The rollback every rank agreed on at the last boundary (once; training thread), with
        "requester", "bound", "rule", "params": every rank's Checkpointer executes it at its
        next step boundary through ``agree_checkpoint`` and ``rollback_done``. With
        "agreed": False: a request that was held when agreement turned off (do it alone)."""
        rb, self._rb_agreed = self._rb_agreed, None
        return rb

    def agree_checkpoint(self, bound: int, newest_below, has) -> Tuple[int, int]:
        """(TRAIN step of the newest checkpoint every rank has below `bound`, or -1 when there
        is none; rounds it took). Blocking all_reduces on the agreement's gloo group, run by
        every rank at the same boundary (the one after an agreed rollback): each round sends
        [this rank lacks the candidate, -(its newest below the candidate)], reduced with MAX,
        so the next candidate is the smallest of the ranks' newest, until no rank lacks it.
        ``newest_below(step)`` -> the rank's newest valid checkpoint step < step (-1: none);
        ``has(step)`` -> whether the rank can restore that one."""
        import torch
        import torch.distributed as dist
        t0 = time.perf_counter_ns()
        buf = torch.zeros(2, dtype=torch.int64)
        v = buf.numpy()
        cand, rounds = None, 0
        while True:
            lacks = 1 if cand is None or not has(cand) else 0
            p = int(newest_below(bound if cand is None else cand))
            v[0], v[1] = lacks, -max(-1, p)
            dist.all_reduce(buf, op=dist.ReduceOp.MAX, group=self._group)
            rounds += 1
            if cand is not None and not int(v[0]):
                break
            cand = -int(v[1])
            if cand < 0:
                break
        self.sync_ns += time.perf_counter_ns() - t0
        return cand, rounds

    def all_ok(self, ok: bool) -> bool:
        """Whether `ok` holds on every rank (a blocking all_reduce, every rank at the same
        boundary)."""
        import torch
        import torch.distributed as dist
        buf = torch.tensor([0 if ok else 1], dtype=torch.int64)
        dist.all_reduce(buf, op=dist.ReduceOp.MAX, group=self._group)
        return not int(buf[0])

    def rollback_done(self, restored: bool) -> None:
        """After an agreed rollback (every rank, same boundary): rounds go on from the restored
        TRAIN step (the same on every rank), or, when nothing was restored (every rank gives up
        together and stops), they end."""
        self._rb_seq += 1
        if self._state != "rollback":
            return
        if not restored:
            self._state = "stopped"
            self._clock.sync_step = -1
            return
        self._state = "rounds"
        self._interval = FIRST_INTERVAL
        self._launch(FIRST_INTERVAL)

    @property
    def coordinating(self) -> bool:
        """Stops are (or are about to be) agreed across ranks."""
        return self._state in ("count", "rounds", "stopped", "rollback")

    def stats(self) -> dict:
        return {"state": self._state, "rank": self._rank, "world_size": self._world,
                "rounds": self.rounds, "interval_steps": self._interval,
                "sync_ns_total": self.sync_ns, "sync_ns_max": self.max_sync_ns,
                "setup_ns": self.setup_ns, "agreed_step": self.agreed_step,
                "rollbacks": self._rb_seq,
                "requested_at_step": None if self._local is None else self._local[2]}

    # ------------------------------------------------------------- training thread
    def on_boundary(self) -> None:
        """Called by the step clock at the start of TRAIN step clock.sync_step."""
        t0 = time.perf_counter_ns()
        rounds = self._state == "rounds"
        try:
            if self._state == "probe":
                self._probe()
            elif self._state == "count":
                self._count()
            elif rounds:
                self._round()
        except Exception as e:  # never into the loop: stops become local
            self._off("torch.distributed failed (%s: %s)" % (type(e).__name__, e))
        finally:
            dt = time.perf_counter_ns() - t0
            if rounds:
                self.sync_ns += dt
                self.max_sync_ns = max(self.max_sync_ns, dt)
            else:
                self.setup_ns += dt

    def close(self) -> None:
        self._clock.sync_step = -1
        self._work = None
        if self._state != "off":
            self._state = "off"
        self._event(EVENT.STOP_SYNC_STATS, self.stats())

    # -------------------------------------------------------------------- phases
    def _next(self, steps: int) -> None:
        self._clock.sync_step = self._hook._mode_steps[Mode.TRAIN] + max(1, int(steps))

    def _probe(self) -> None:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            self._next(RETRY_EVERY)  # every rank sees the same: it initializes at one place
            return
        self._world = dist.get_world_size()
        self._rank = dist.get_rank()
        if self._world <= 1:
            self._off(None)
            return
        from torch.distributed import distributed_c10d as c10d
        self._store = c10d._get_default_store()
        gen = "%s/%s" % (os.environ.get("TORCHELASTIC_RUN_ID", "run"),
                         os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        self._key = STORE_PREFIX + gen + "/%d/" % self._seq
        self._store.add(self._key + "hooks", 1)
        self._state = "count"
        self._next(PROBE_WAIT)

    def _count(self) -> None:
        n = int(self._store.add(self._key + "hooks", 0))
        if n < self._world:
            self._off("hooks on %d of %d ranks" % (n, self._world))
            return
        import datetime
        import torch.distributed as dist
        self._group = dist.new_group(backend="gloo",
                                     timeout=datetime.timedelta(seconds=self._timeout_s))
        self._state = "rounds"
        self._hook_event(EVENT.STOP_SYNC_ON, {"rank": self._rank, "world_size": self._world,
                                          "target_ms": self._target_ms})
        self._launch(FIRST_INTERVAL)

    def _launch(self, proposed: int) -> None:
        import torch
        import torch.distributed as dist
        want, who = 0, 0
        rb, rb_who, rb_bound = 0, 0, NO_BOUND  # -bound under MAX: the smallest bound wins
        if self._rb_local is not None:
            rb, rb_who, rb_bound = 1, self._rank + 1, int(self._rb_local["bound"])
            if not self._rb_published:
                self._rb_published = True
                self._store.set(self._rb_key(self._rank), json.dumps(self._rb_local, default=str))
        if self._local is not None:
            want, who = 1, self._rank + 1
            if not self._published:
                self._published = True
                self._store.set(self._key + "reason/%d" % self._rank,
                                json.dumps({"reason": self._local[0], "source": self._local[1],
                                            "step": self._local[2]}))
        if self._buf is None:  # one buffer for every round (filled through a numpy view)
            self._buf = torch.zeros(7, dtype=torch.int64)
            self._view = self._buf.numpy()
        v = self._view
        v[0], v[1], v[2] = want, who, -int(proposed)
        # a rollback: [wanted, requesting rank + 1, -bound, a rank cannot roll back]
        unable = 0 if getattr(self._hook, "_checkpointer", None) is not None else 1
        v[3], v[4], v[5], v[6] = rb, rb_who, -rb_bound, unable
        self._work = dist.all_reduce(self._buf, op=dist.ReduceOp.MAX, group=self._group,
                                     async_op=True)
        self._last_ns = time.perf_counter_ns()
        self._next(self._interval)

    def _round(self) -> None:
        import datetime
        now = time.perf_counter_ns()
        # this rank's step time since the last round -> its proposal for the next interval
        step_ms = (now - self._last_ns) / 1e6 / max(1, self._interval)
        proposed = min(MAX_INTERVAL, max(1, int(self._target_ms / max(step_ms, 1e-3))))
        work, self._work = self._work, None
        if work is not None and not work.is_completed():
            work.wait(datetime.timedelta(seconds=self._timeout_s))
        self.rounds += 1
        want, who, neg_interval, rb, rb_who, neg_bound, unable = (int(x) for x in self._view)
        if want:
            self._take(who - 1)
            return
        if rb:
            self._take_rollback(rb_who - 1, -neg_bound, bool(unable))
            return
        self._interval = max(1, min(MAX_INTERVAL, -neg_interval))
        self._launch(proposed)

    def _take(self, requester: int) -> None:
        """Every rank runs this at the same boundary: the agreed stop."""
        self._clock.sync_step = -1
        self._state = "stopped"
        step = self._hook.step_count
        self.agreed_step = step
        mine = self._local
        if requester == self._rank and mine is not None:
            reason, source, asked = mine
        else:
            reason, source, asked = "stop requested", "rule", None
            try:
                info = json.loads(self._store.get(self._key + "reason/%d" % requester))
                reason = info.get("reason") or reason
                source = info.get("source") or source
                asked = info.get("step")
            except Exception:
                pass
            reason = "rank %d: %s" % (requester, reason)
        self._hook_event(EVENT.STOP_AGREED, {"rank": self._rank, "step": step,
                                         "requested_by": requester,
                                         "requested_at_step": asked, "rounds": self.rounds,
                                         "reason": reason})
        self._agreeing = True
        try:
            self._hook._request_stop_inprocess(reason, source=source)
        finally:
            self._agreeing = False

    def _rb_key(self, rank: int) -> str:
        return self._key + "rb/%d/%d" % (self._rb_seq, rank)

    def _take_rollback(self, requester: int, bound: int, unable: bool) -> None:
        """Every rank runs this at the same boundary: the agreed rollback, executed by every
        rank's Checkpointer at its next step boundary (the end of this step), where all ranks
        are again at the same TRAIN step. No round is launched until it is done."""
        self._clock.sync_step = -1
        with self._lock:
            mine, self._rb_local = self._rb_local, None
            self._rb_published = False
        info = mine if requester == self._rank and mine is not None else None
        if info is None:
            try:
                info = json.loads(self._store.get(self._rb_key(requester)))
            except Exception:
                info = {}
        info = dict(info, requester=requester, bound=bound, agreed=True, rank=self._rank,
                    agreed_at_step=self._hook.step_count, rounds=self.rounds)
        if unable:  # some rank has no Checkpointer to restore from: all stop together
            self._rb_seq += 1
            self._state = "stopped"
            self.agreed_step = self._hook.step_count
            reason = ("rank %d asked for a rollback (%s), but not every rank has a "
                      "ts.Checkpointer; all ranks stop together" % (requester,
                                                                     info.get("rule")))
            self._hook_event(EVENT.STOP_AGREED, {"rank": self._rank, "step": self.agreed_step,
                                                 "requested_by": requester,
                                                 "rounds": self.rounds, "reason": reason})
            self._agreeing = True
            try:
                self._hook._request_stop_inprocess(reason, source="rollback")
            finally:
                self._agreeing = False
            return
        self._state = "rollback"
        self._rb_agreed = info

    def _off(self, why: Optional[str]) -> None:
        self._state = "off"
        self._clock.sync_step = -1
        self._work = None
        if why:
            log.warning("trainscope: stops are not coordinated across ranks (%s): a stop "
                        "request ends this rank's loop alone", why)
            self._hook_event(EVENT.STOP_SYNC_OFF, {"reason": why})
        with self._lock:
            pending, self._local = self._local, None
        if pending is not None:  # a request held so far is honoured locally now
            self._hook._request_stop_inprocess(pending[0], source=pending[1])
        with self._lock:
            rb, self._rb_local = self._rb_local, None
        if rb is not None:  # ... and a held rollback by this rank alone
            self._rb_agreed = dict(rb, agreed=False)

    # ----------------------------------------------------------------- records
    def _event(self, kind: str, fields: dict) -> None:
        try:
            w = self._hook._writer
            if w is not None:
                w.add_event(kind, json.dumps(fields, default=str))
        except Exception:
            pass

    def _hook_event(self, kind: str, fields: dict) -> None:
        self._event(kind, fields)

"""Preemption-safe checkpoints, resume, and rollback on divergence.

    import trainscope as ts
    hook = ts.Hook("runs/exp1", rules=["exploding_tensor"], actions=["rollback"])
    hook.register_module(model)
    ckpt = ts.Checkpointer("runs/exp1/checkpoints", model, optimizer, hook=hook,
                           every_steps=500, keep_last=3, scheduler=scheduler)
    start = ckpt.resume()                       # 0 when there is no checkpoint yet
    for step in range(start, total_steps):
        ...                                     # the usual loop; nothing else to call

Files (docs/checkpoints.md, docs/format.md §10): ``ckpt-<step:012d>.pt`` is a plain
``torch.save`` file (loadable with ``torch.load``) and ``ckpt-<step:012d>.json`` its commit
record (step, bytes, crc32c: the core's record, shared with the LibTorch front end;
_checkpoint_files.py). A checkpoint exists once its .json does; both are written to a temporary
file in the same directory, fsynced, renamed, and the directory fsynced. A .pt whose size or
checksum does not match its .json, or that torch.load rejects, is skipped in favour of the
previous one. What the .pt holds: _checkpoint_state.py; preemption signals: _preemption.py.

Steps: ``ckpt.step`` counts completed TRAIN steps; a checkpoint at step s holds the state before
step s runs, and ``resume()`` returns s (the step to continue from). With ``hook=`` the
Checkpointer follows the hook's step boundaries; without, the loop calls
``ckpt.after_step(step)`` after step ``step`` (0-based).

Preemption: SIGTERM (configurable) sets a flag; at the next step boundary the Checkpointer
writes a checkpoint, records a ``preempted`` event, closes the hook (flushing the run) and raises
SystemExit(PREEMPTED_EXIT_CODE) (75, EX_TEMPFAIL: "try again").

Nothing here raises into the training except that SystemExit; failures are logged, counted
and recorded as ``checkpoint_failed`` events.
"""
from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import _core
from ._checkpoint_files import (clean_temp, delete_checkpoint, list_checkpoints,  # noqa: F401
                                verify_checkpoint, write_checkpoint)
from ._checkpoint_files import now_us as _now_us
from ._checkpoint_state import _TRAIN, FORMAT, VERSION, CheckpointState  # noqa: F401
from ._hook_link import HookLink
from ._preemption import (PREEMPTED_EXIT_CODE, PreemptionSignals,  # noqa: F401
                          preemption_safe_worker_init)
from ._errors import ConfigError
from ._schema import EVENT
from .rollback import Rollback, RollbackExecutor, is_rollback_action, split_rollback  # noqa: F401

log = logging.getLogger("trainscope")


# ============================================================================ checkpointer
class Checkpointer(CheckpointState, PreemptionSignals):
    """Saves and restores a training's state; see the module docs and docs/checkpoints.md.

    Args:
        dir: the checkpoint directory (created; one Checkpointer writes a directory at a time).
        model: a torch.nn.Module (anything with state_dict/load_state_dict).
        optimizer: an optimizer, a list of them, or None.
        hook: a ts.Hook to follow (step boundaries, events, counters, rule firings).
        every_steps: a checkpoint every this many TRAIN steps (0: only on demand/preemption).
        keep_last: committed checkpoints kept (older ones are deleted).
        scheduler: an LR scheduler (or anything with state_dict/load_state_dict).
        extra_state: {name: object}; objects with state_dict/load_state_dict are restored in
            place, other (picklable) values are saved as they are and put back into this dict.
        auto_resume: call resume() now (its result is ``start_step``).
        handle_preemption: install the SIGTERM handler (main thread of the main process only).
        preempt_signals: signals that mean "preempted" (default SIGTERM).
        exit_on_preempt: raise SystemExit(PREEMPTED_EXIT_CODE) after the preemption
            checkpoint; False: request a stop (hook.should_stop) and set ``preempted``.
        rollback: a ts.Rollback; default the hook's rollback action, if any.
        check_finite: never save non-finite parameters (a diverged state).
    """

    def __init__(self, dir: str, model, optimizer=None, hook=None, every_steps: int = 500,
                 keep_last: int = 3, scheduler=None, extra_state: Optional[dict] = None, *,
                 auto_resume: bool = False, handle_preemption: bool = True,
                 preempt_signals: Optional[Sequence[int]] = None, exit_on_preempt: bool = True,
                 rollback: Optional[Rollback] = None, check_finite: bool = True,
                 rollback_poll_ms: int = 10):
        bad = _core.check_run_location(str(dir))
        if not bad and _core.is_object_store_location(str(dir)):
            bad = (f"{dir}: checkpoints in object storage (s3://) are not supported yet: give a "
                   "local or shared folder (a run's records can go to s3://, docs/storage.md)")
        if bad:  # s3://..., gs://...: a clear error, never a local folder named "s3:"
            raise ConfigError("Checkpointer", "dir", dir, "a directory path", bad)
        self.dir = os.path.abspath(str(dir))
        self.model = model
        if optimizer is None:
            self.optimizers: list = []
        elif isinstance(optimizer, (list, tuple)):
            self.optimizers = list(optimizer)
        else:
            self.optimizers = [optimizer]
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.extra_state = extra_state if extra_state is not None else {}
        self.hook = hook
        self.every_steps = max(0, int(every_steps))
        self.keep_last = max(1, int(keep_last))
        self.exit_on_preempt = bool(exit_on_preempt)
        self.check_finite = bool(check_finite)
        self.step = 0                 # completed TRAIN steps: the step to continue from
        self.start_step = 0
        self.preempted = False
        self.lr_scale = 1.0           # product of the rollbacks' lr factors so far
        self.skip_pending = 0         # batches ckpt.wrap() still drops after a rollback
        self._pid = os.getpid()
        self._created_us = _now_us()
        self._t0 = time.monotonic()
        self._last_saved = -1         # step of the newest committed checkpoint of this process
        self._stop_saved = False
        self._gave_up = False
        self._preempt_signal = 0
        self._preempt_us = 0
        self._prev_handlers: Dict[int, Any] = {}
        self._closed = False
        self._busy = False
        self._errors = 0
        self._before_commit = None    # test hook: called with the stage name before renames
        self._durations: List[float] = []
        self._bytes_last = 0
        self._rollbacks = 0           # total
        self._rb_count = 0            # since the last recovery
        self._rb_recover_at = -1
        self._poll_ns = max(0, int(rollback_poll_ms)) * 1_000_000
        os.makedirs(self.dir, exist_ok=True)
        self._clean_temp()

        # what this Checkpointer uses of the hook, beside its public API (_hook_link.py)
        self._link: Optional[HookLink] = HookLink(hook) if hook is not None else None
        hook_rb = self._link.rollback_spec() if self._link is not None else None
        self.rollback = rollback or (hook_rb or {}).get("action")
        ids = list((hook_rb or {}).get("rules") or [])
        if rollback is not None:
            ids += [r for r in rollback.rules if r not in ids]
        self._rb_rules = ids
        if ids and self.rollback is None:
            self.rollback = Rollback()
        self._rb = RollbackExecutor(self)
        if hook is not None:
            try:
                hook.add_step_callback(self._on_hook_event)
                self._link.attach(self)
            except Exception as e:
                log.warning("trainscope: this hook has no step callbacks (%s); call "
                            "ckpt.after_step(step) from the loop", e)
                self.hook = None
                self._link = None
        self._signals = tuple(preempt_signals or (signal.SIGTERM,))
        if handle_preemption:
            self._install_signals(self._signals)
        if auto_resume:
            self.start_step = self.resume()

    # ================================================================== public: the loop
    def after_step(self, step: int) -> None:
        """Without a hook: call once per TRAIN step, after step ``step`` (0-based) is done."""
        if self.hook is not None:
            return  # the hook drives us
        self.step = int(step) + 1
        self._boundary(global_step=self.step, train_boundary=True)

    def resume(self) -> int:
        """Restores the newest valid checkpoint (skipping torn or corrupt ones) into the model,
        optimizer, scheduler, extra state, RNGs and the hook's counters; records a "resumed"
        event. Returns the step to continue from (0 when there is no valid checkpoint)."""
        try:
            found = self._load_latest(lambda meta: True)
        except Exception as e:
            self._failed("resume", e)
            return 0
        if found is None:
            self.start_step = 0
            return 0
        meta, state = found
        self._restore(state)
        self.start_step = self.step
        self._last_saved = self.step
        self._event(EVENT.RESUMED, self._resume_fields(meta))
        log.info("trainscope: resumed from %s (step %d)", meta["path"], self.step)
        return self.step

    def save(self, reason: str = "manual") -> Optional[str]:
        """Writes a checkpoint of the current state now (call it at a step boundary)."""
        return self._save(reason)

    def wrap(self, iterable: Iterable) -> Iterable:
        """Yields the batches of `iterable`, dropping ``skip_batches`` of them after each
        rollback (the rollback action's skip). A torch DataLoader with worker processes gets
        a worker_init_fn that makes its workers ignore the preemption signal (see
        ``preemption_safe_worker_init``)."""
        if getattr(iterable, "num_workers", 0) and hasattr(iterable, "worker_init_fn"):
            try:
                if not getattr(iterable.worker_init_fn, "_trainscope_safe", False):
                    iterable.worker_init_fn = preemption_safe_worker_init(
                        iterable.worker_init_fn, self._signals)
            except Exception as e:
                log.warning("trainscope: DataLoader workers not protected from SIGTERM: %s", e)
        return self._skipping(iterable)

    def _skipping(self, iterable: Iterable) -> Iterable:
        for item in iterable:
            if self.skip_pending > 0:
                self.skip_pending -= 1
                continue
            yield item

    def finished(self, settle_s: float = 1.5) -> bool:
        """For loops with rollback: call when the last step is done. Flushes the run, gives
        the rules ``settle_s`` seconds to evaluate the last steps (the engine completes the
        newest step after ~1 s idle), and returns False when a rule fired and the state was
        rolled back (the loop must go on from ``ckpt.step``), True when the run may end."""
        if not self._rb_rules or self.hook is None:
            return True
        try:
            self.hook.flush()
        except Exception:
            pass
        deadline = time.monotonic() + max(0.0, settle_s)
        while True:
            self._rb.poll_now()
            if self._check_rollback():
                return False
            if self._gave_up or time.monotonic() >= deadline:
                return True
            time.sleep(0.05)

    def stats(self) -> dict:
        """Time spent checkpointing in this process and its share of the elapsed time."""
        total = sum(self._durations)
        elapsed = max(1e-9, time.monotonic() - self._t0)
        n = len(self._durations)
        return {"checkpoints": n, "total_s": total, "last_s": self._durations[-1] if n else 0.0,
                "mean_s": total / n if n else 0.0, "max_s": max(self._durations, default=0.0),
                "last_bytes": self._bytes_last, "elapsed_s": elapsed, "share": total / elapsed,
                "rollbacks": self._rollbacks, "errors": self._errors,
                "start_step": self.start_step, "step": self.step}

    def checkpoints(self) -> List[dict]:
        """The committed checkpoints of the directory, oldest first."""
        return list_checkpoints(self.dir)

    @property
    def latest(self) -> Optional[str]:
        c = self.checkpoints()
        return c[-1]["path"] if c else None

    def close(self) -> None:
        """Restores the previous signal handlers and detaches from the hook (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._restore_signals()
        if self.hook is not None:
            try:
                self.hook.remove_step_callback(self._on_hook_event)
                self._link.detach(self)
            except Exception:
                pass

    # ============================================================== hook step boundaries
    def _on_hook_event(self, event: str) -> None:
        h, link = self.hook, self._link
        if h is None or self._busy:
            return
        self._busy = True
        try:
            self.step = link.train_steps()
            if event == "step" and not link.closed:
                self._boundary(h.step_count, link.in_train())
            elif event == "stop":
                self._save_for_stop()
            elif event in ("step", "close"):
                if self._preempt_signal and not self.preempted:
                    self._preempt(closing=True)
                else:
                    self._save_for_stop()
                if event == "close":
                    self.close()
        finally:
            self._busy = False

    def _boundary(self, global_step: int, train_boundary: bool) -> None:
        # first a rollback the ranks agreed on: every rank runs it at this same boundary
        if self._link is not None and self._rb.check_agreed():
            return
        if self._preempt_signal and not self.preempted:
            self._preempt(closing=False)
            return
        if self._rb_rules and self._check_rollback():
            return
        if self._link is not None and self._link.stop_pending:
            self._save_for_stop()
            return
        s = self.step
        if (train_boundary and self.every_steps and s > 0 and s % self.every_steps == 0
                and s != self._last_saved):
            self._save("interval")

    def _save_for_stop(self) -> None:
        if (self._stop_saved or self._gave_up or self._link is None
                or not self._link.stop_pending):
            return
        self._stop_saved = True
        if self.step != self._last_saved:
            self._save("stop")

    # ======================================================================== preemption
    def _preempt(self, closing: bool) -> None:
        self.preempted = True
        path = None
        if self.step == self._last_saved:
            c = self.checkpoints()
            path = c[-1]["path"] if c else None
        else:
            path = self._save("preempt")
        self._event(EVENT.PREEMPTED, {
            "signal": self._preempt_signal, "step": self.step,
            "global_step": self.hook.step_count if self.hook is not None else self.step,
            "checkpoint": path,
            "notice_to_exit_s": (_now_us() - self._preempt_us) / 1e6})
        if closing:
            return
        h = self.hook
        if self.exit_on_preempt:
            log.warning("trainscope: preempted at step %d; exiting with status %d",
                        self.step, PREEMPTED_EXIT_CODE)
            if h is not None:
                try:
                    h.close()
                except Exception:
                    pass
            self.close()
            raise SystemExit(PREEMPTED_EXIT_CODE)
        self._stop_saved = True
        if self._link is not None:
            self._link.request_stop(f"preempted (signal {self._preempt_signal})",
                                    source="signal")

    # ============================================================================ saving
    def _save(self, reason: str) -> Optional[str]:
        t0 = time.perf_counter()
        step = self.step
        try:
            if self.check_finite and not self._finite():
                log.warning("trainscope: step %d: parameters are not finite; checkpoint "
                            "skipped", step)
                self._event(EVENT.CHECKPOINT_SKIPPED, {"step": step, "reason": "non-finite "
                                                   "parameters", "trigger": reason})
                return None
            import torch
            state = self._state()
            pt, meta = write_checkpoint(
                self.dir, step, self._pid, lambda f: torch.save(state, f), self._stage,
                global_step=state["trainscope"]["global_step"],
                wall_us=state["trainscope"]["wall_us"], reason=reason,
                extra={"lr_scale": self.lr_scale, "finite": True})
            self._last_saved = step
            self._retain()
            dur = time.perf_counter() - t0
            self._durations.append(dur)
            self._bytes_last = meta["bytes"]
            st = self.stats()
            self._event(EVENT.CHECKPOINT, {
                "step": step, "global_step": meta["global_step"], "path": pt,
                "bytes": meta["bytes"], "duration_us": int(dur * 1e6), "reason": reason,
                "total_s": st["total_s"], "share": st["share"]})
            log.info("trainscope: checkpoint %s (%d bytes, %.3f s)", pt, meta["bytes"], dur)
            return pt
        except SystemExit:
            raise
        except Exception as e:
            self._failed("save", e, {"step": step, "trigger": reason})
            return None

    def _stage(self, stage: str, path: str) -> None:
        cb = self._before_commit
        if cb is not None:
            cb(stage, path)

    def _retain(self) -> None:
        cks = [c for c in list_checkpoints(self.dir)]
        for c in cks[:-self.keep_last] if len(cks) > self.keep_last else []:
            self._delete(c)

    def _delete(self, c: dict) -> None:
        delete_checkpoint(c)

    def _clean_temp(self) -> None:
        clean_temp(self.dir, self._pid)

    # ========================================================================== rollback
    # The rollback action's executor: rollback.py (RollbackExecutor), over this Checkpointer.
    def _check_rollback(self) -> bool:
        return self._rb.check()

    def _firing_step(self, rid: str, firing: int, st: dict) -> int:
        return self._rb.firing_step(rid, firing, st)

    # ============================================================================ events
    def _event(self, kind: str, fields: dict) -> None:
        h = self.hook
        if h is None:
            return
        try:
            h.add_event(kind, fields)
        except Exception:
            pass

    def _failed(self, where: str, exc: BaseException, fields: Optional[dict] = None) -> None:
        self._errors += 1
        msg = f"{type(exc).__name__}: {exc}"
        if self._errors == 1 or self._errors % 100 == 0:
            log.warning("trainscope: checkpoint %s failed (training continues): %s", where, msg)
        self._event(EVENT.CHECKPOINT_FAILED, dict(fields or {}, where=where, message=msg))

"""Preemption-safe checkpoints, resume, and rollback on divergence.

    import trainscope as ts
    hook = ts.Hook("runs/exp1", rules=["exploding_tensor"], actions=["rollback"])
    hook.register_module(model)
    ckpt = ts.Checkpointer("runs/exp1/checkpoints", model, optimizer, hook=hook,
                           every_steps=500, keep_last=3, scheduler=scheduler)
    start = ckpt.resume()                       # 0 when there is no checkpoint yet
    for step in range(start, total_steps):
        ...                                     # the usual loop; nothing else to call

Files (docs/checkpoints.md): ``ckpt-<step:012d>.pt`` is a plain ``torch.save`` file (loadable
with ``torch.load``) and ``ckpt-<step:012d>.json`` its commit record (step, bytes, sha256). A
checkpoint exists once its .json does; both are written to a temporary file in the same
directory, fsynced, renamed, and the directory fsynced. A .pt whose size or sha256 does not
match its .json, or that torch.load rejects, is skipped in favour of the previous one.

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

import hashlib
import json
import logging
import os
import random
import re
import signal
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ._modes import Mode
from ._schema import EVENT

log = logging.getLogger("trainscope")

#: Exit status of a training that checkpointed and exited on a preemption notice (SIGTERM).
#: 75 is EX_TEMPFAIL of sysexits.h ("temporary failure; the user is invited to retry"):
#: distinct from 0 (done), 1 (error) and 143 (killed by SIGTERM without a checkpoint).
PREEMPTED_EXIT_CODE = 75

FORMAT = "trainscope-checkpoint"
VERSION = 1
_NAME_RE = re.compile(r"^ckpt-(\d{12})\.json$")
_TMP_RE = re.compile(r"^\.ckpt-\d{12}\.(pt|json)\.tmp-(\d+)$")
_TRAIN = 0  # Mode.TRAIN


def _now_us() -> int:
    return time.time_ns() // 1000


# ================================================================================ rollback
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
        if isinstance(r, dict):
            own = r.get("actions")
            rid = r.get("id") or r.get("name")
            if own is None:
                if default_rb:
                    ids.append(rid)
            elif any(is_rollback_action(a) for a in own):
                ids.append(rid)
                action = action or _as_rollback(next(a for a in own if is_rollback_action(a)))
                r = dict(r, actions=[a for a in own if not is_rollback_action(a)])
            out.append(r)
            continue
        own = getattr(r, "actions", None)
        rid = getattr(r, "id", None) or getattr(r, "name", str(r))
        if own is None:
            if default_rb:
                ids.append(rid)
        elif any(is_rollback_action(a) for a in own):
            ids.append(rid)
            action = action or _as_rollback(next(a for a in own if is_rollback_action(a)))
            r.actions = [a for a in own if not is_rollback_action(a)]
        out.append(r)
    if not ids and action is None:
        return out, actions, None
    return out, actions, {"rules": ids, "action": action or Rollback()}


# ====================================================================== data-loader workers
class _SafeWorkerInit:
    """A DataLoader worker_init_fn: the worker ignores the preemption signals, then calls the
    user's init function. torch's workers install a SIGTERM handler that kills them, so a
    SIGTERM sent to the whole process group (Slurm, `kill -TERM -PGID`) would kill them in the
    middle of the main process's last step; ignoring it lets the main process finish the step,
    checkpoint, and shut its workers down itself."""

    _trainscope_safe = True

    def __init__(self, fn=None, signals=(signal.SIGTERM,)):
        self.fn = fn
        self.signals = tuple(int(s) for s in signals)

    def __call__(self, worker_id: int):
        for s in self.signals:
            try:
                signal.signal(s, signal.SIG_IGN)
            except (ValueError, OSError):
                pass
        if self.fn is not None:
            self.fn(worker_id)


def preemption_safe_worker_init(fn=None, signals=(signal.SIGTERM,)):
    """worker_init_fn for a torch DataLoader whose workers must survive the preemption notice
    (``DataLoader(..., worker_init_fn=ts.checkpoint.preemption_safe_worker_init(my_init))``;
    ``ckpt.wrap(loader)`` sets it for you). Picklable (works with spawn)."""
    return _SafeWorkerInit(fn, signals)


# ============================================================================ file helpers
class _HashingWriter:
    """A file object for torch.save that hashes and counts the bytes on their way out."""

    def __init__(self, f):
        self._f = f
        self.sha = hashlib.sha256()
        self.bytes = 0

    def write(self, b) -> int:
        self.sha.update(b)
        self.bytes += len(b)
        return self._f.write(b)

    def flush(self) -> None:
        self._f.flush()


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_sha256(path: str) -> Tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
            n += len(b)
    return h.hexdigest(), n


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_checkpoints(dir: str) -> List[dict]:
    """Committed checkpoints of `dir` (their .json records, with "json" and "path" added),
    oldest first. Validity of the .pt files is not checked here (see verify_checkpoint)."""
    out = []
    try:
        names = os.listdir(dir)
    except FileNotFoundError:
        return out
    for n in names:
        m = _NAME_RE.match(n)
        if not m:
            continue
        jp = os.path.join(dir, n)
        try:
            with open(jp) as f:
                meta = json.load(f)
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise ValueError("not a trainscope checkpoint record")
            meta["step"] = int(meta["step"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            meta = {"step": int(m.group(1)), "invalid": f"bad record: {e}"}
        meta["json"] = jp
        meta["path"] = os.path.join(dir, n[:-5] + ".pt")
        out.append(meta)
    out.sort(key=lambda d: d["step"])
    return out


def verify_checkpoint(meta: dict) -> Optional[str]:
    """None when the .pt matches its record (size and sha256); else why not."""
    if meta.get("invalid"):
        return meta["invalid"]
    try:
        digest, n = _file_sha256(meta["path"])
    except OSError as e:
        return f"unreadable: {e}"
    if n != int(meta.get("bytes", -1)):
        return f"size {n} != recorded {meta.get('bytes')} bytes (torn write)"
    if digest != meta.get("sha256"):
        return "sha256 mismatch (corrupt file)"
    return None


# ============================================================================ checkpointer
class Checkpointer:
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
        self._seen_firings: Dict[str, int] = {}
        self._next_poll_ns = 0
        self._poll_ns = max(0, int(rollback_poll_ms)) * 1_000_000
        self._reader = None
        os.makedirs(self.dir, exist_ok=True)
        self._clean_temp()

        hook_rb = getattr(hook, "_rollback", None) if hook is not None else None
        self.rollback = rollback or (hook_rb or {}).get("action")
        ids = list((hook_rb or {}).get("rules") or [])
        if rollback is not None:
            ids += [r for r in rollback.rules if r not in ids]
        self._rb_rules = ids
        if ids and self.rollback is None:
            self.rollback = Rollback()
        if hook is not None:
            try:
                hook.add_step_callback(self._on_hook_event)
                hook._checkpointer = self
            except Exception as e:
                log.warning("trainscope: this hook has no step callbacks (%s); call "
                            "ckpt.after_step(step) from the loop", e)
                self.hook = None
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
            self._next_poll_ns = 0
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
        if os.getpid() == self._pid and threading.current_thread() is threading.main_thread():
            for sig, prev in self._prev_handlers.items():
                try:
                    signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
                except (ValueError, OSError, TypeError):
                    pass
        self._prev_handlers = {}
        if self.hook is not None:
            try:
                self.hook.remove_step_callback(self._on_hook_event)
            except Exception:
                pass

    # ============================================================== hook step boundaries
    def _on_hook_event(self, event: str) -> None:
        h = self.hook
        if h is None or self._busy:
            return
        self._busy = True
        try:
            self.step = int(h._mode_steps.get(Mode.TRAIN, 0))
            if event == "step" and not h._closed:
                self._boundary(h.step_count, int(h.mode) == _TRAIN)
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
        if self._preempt_signal and not self.preempted:
            self._preempt(closing=False)
            return
        if self._rb_rules and self._check_rollback():
            return
        h = self.hook
        if h is not None and h._stop_reason is not None:
            self._save_for_stop()
            return
        s = self.step
        if (train_boundary and self.every_steps and s > 0 and s % self.every_steps == 0
                and s != self._last_saved):
            self._save("interval")

    def _save_for_stop(self) -> None:
        h = self.hook
        if self._stop_saved or self._gave_up or h is None or h._stop_reason is None:
            return
        self._stop_saved = True
        if self.step != self._last_saved:
            self._save("stop")

    # ======================================================================== preemption
    def _install_signals(self, sigs) -> None:
        if threading.current_thread() is not threading.main_thread():
            log.warning("trainscope: Checkpointer created outside the main thread; no "
                        "preemption (SIGTERM) handler installed")
            return
        for sig in sigs:
            try:
                self._prev_handlers[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError) as e:
                log.warning("trainscope: cannot handle signal %s: %s", sig, e)

    def _on_signal(self, signum, frame) -> None:
        if os.getpid() != self._pid:
            return  # a forked data-loader worker: the main process handles the notice
        if not self._preempt_signal:
            self._preempt_signal = int(signum)
            self._preempt_us = _now_us()
            log.warning("trainscope: signal %d (preemption notice): checkpointing at the end "
                        "of the current step", signum)
        prev = self._prev_handlers.get(signum)
        if callable(prev) and prev not in (signal.SIG_DFL, signal.SIG_IGN,
                                           signal.default_int_handler):
            prev(signum, frame)

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
        if h is not None:
            h._request_stop_inprocess(f"preempted (signal {self._preempt_signal})",
                                      source="signal")

    # ============================================================================ saving
    def _state(self) -> dict:
        import torch
        h = self.hook
        rng = {"python": random.getstate(), "torch": torch.get_rng_state()}
        try:
            import numpy as np
            # as a tensor and plain values: torch.load(weights_only=True) takes no ndarrays
            name, keys, pos, has_gauss, gauss = np.random.get_state()
            rng["numpy"] = (str(name), torch.from_numpy(keys.astype(np.int64)), int(pos),
                            int(has_gauss), float(gauss))
        except Exception:
            pass
        try:
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                rng["cuda"] = torch.cuda.get_rng_state_all()
        except Exception:
            pass
        extra = {}
        for k, v in self.extra_state.items():
            extra[k] = v.state_dict() if hasattr(v, "state_dict") else v
        return {
            "format": FORMAT, "version": VERSION,
            "trainscope": {"step": self.step,
                           "global_step": h.step_count if h is not None else self.step,
                           "wall_us": _now_us(), "lr_scale": self.lr_scale,
                           "rollbacks": self._rollbacks},
            "hook": h.state_dict() if h is not None else None,
            "model": self.model.state_dict(),
            "optimizer": [o.state_dict() for o in self.optimizers],
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "extra": extra, "rng": rng,
        }

    def _finite(self) -> bool:
        import torch
        by_dev: Dict[Any, list] = {}
        for p in self.model.parameters() if hasattr(self.model, "parameters") else ():
            if p.is_floating_point() or p.is_complex():
                by_dev.setdefault(p.device, []).append(torch.isfinite(p.detach()).all())
        return all(bool(torch.stack(v).all()) for v in by_dev.values())

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
            name = f"ckpt-{step:012d}"
            pt = os.path.join(self.dir, name + ".pt")
            js = os.path.join(self.dir, name + ".json")
            tmp = os.path.join(self.dir, f".{name}.pt.tmp-{self._pid}")
            with open(tmp, "wb") as f:
                w = _HashingWriter(f)
                torch.save(state, w)
                f.flush()
                os.fsync(f.fileno())
            self._stage("payload", tmp)
            if os.path.exists(js):
                os.unlink(js)   # uncommit the one being replaced (after a rollback)
            os.replace(tmp, pt)
            _fsync_dir(self.dir)
            self._stage("renamed", pt)
            meta = {"format": FORMAT, "version": VERSION, "step": step,
                    "global_step": state["trainscope"]["global_step"],
                    "file": os.path.basename(pt), "bytes": w.bytes,
                    "sha256": w.sha.hexdigest(), "wall_us": state["trainscope"]["wall_us"],
                    "reason": reason, "lr_scale": self.lr_scale, "finite": True}
            jtmp = os.path.join(self.dir, f".{name}.json.tmp-{self._pid}")
            with open(jtmp, "w") as f:
                json.dump(meta, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(jtmp, js)
            _fsync_dir(self.dir)
            self._last_saved = step
            self._retain()
            dur = time.perf_counter() - t0
            self._durations.append(dur)
            self._bytes_last = w.bytes
            st = self.stats()
            self._event(EVENT.CHECKPOINT, {
                "step": step, "global_step": meta["global_step"], "path": pt,
                "bytes": w.bytes, "duration_us": int(dur * 1e6), "reason": reason,
                "total_s": st["total_s"], "share": st["share"]})
            log.info("trainscope: checkpoint %s (%d bytes, %.3f s)", pt, w.bytes, dur)
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
        for p in (c["json"], c["path"]):   # the record first: uncommitted, then the data
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def _clean_temp(self) -> None:
        """Removes temporary files of dead writers and .pt files without a record."""
        try:
            names = os.listdir(self.dir)
        except OSError:
            return
        committed = {n[:-5] for n in names if _NAME_RE.match(n)}
        for n in names:
            m = _TMP_RE.match(n)
            p = os.path.join(self.dir, n)
            try:
                if m and (int(m.group(2)) == self._pid or not _pid_alive(int(m.group(2)))):
                    os.unlink(p)
                elif n.startswith("ckpt-") and n.endswith(".pt") and n[:-3] not in committed:
                    os.unlink(p)
            except OSError:
                pass

    # =========================================================================== loading
    def _load_latest(self, accept) -> Optional[Tuple[dict, dict]]:
        import torch
        for meta in reversed(list_checkpoints(self.dir)):
            if not accept(meta):
                continue
            why = verify_checkpoint(meta)
            state = None
            if why is None:
                try:
                    # weights_only: a run directory may be writable by others, and a pickle
                    # could run their code; our state is tensors and plain values only
                    state = torch.load(meta["path"], map_location="cpu", weights_only=True)
                    if not isinstance(state, dict) or state.get("format") != FORMAT:
                        why = "not a trainscope checkpoint"
                except Exception as e:
                    why = f"torch.load failed: {type(e).__name__}: {e}"
            if why is not None:
                log.warning("trainscope: skipping checkpoint %s: %s", meta["path"], why)
                self._event(EVENT.CHECKPOINT_INVALID, {"path": meta["path"],
                                                   "step": meta["step"], "reason": why})
                continue
            return meta, state
        return None

    def _restore(self, state: dict) -> None:
        import torch
        self.model.load_state_dict(state["model"])
        for o, s in zip(self.optimizers, state.get("optimizer") or []):
            o.load_state_dict(s)
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        for k, v in (state.get("extra") or {}).items():
            cur = self.extra_state.get(k)
            if cur is not None and hasattr(cur, "load_state_dict"):
                cur.load_state_dict(v)
            else:
                self.extra_state[k] = v
        rng = state.get("rng") or {}
        if "python" in rng:
            random.setstate(rng["python"])
        if "torch" in rng:
            torch.set_rng_state(rng["torch"])
        if "numpy" in rng:
            try:
                import numpy as np
                name, keys, pos, has_gauss, gauss = rng["numpy"]
                keys = np.asarray(keys.numpy() if hasattr(keys, "numpy") else keys,
                                  dtype=np.uint32)
                np.random.set_state((name, keys, pos, has_gauss, gauss))
            except Exception:
                pass
        if "cuda" in rng:
            try:
                if torch.cuda.is_available() and torch.cuda.device_count() == len(rng["cuda"]):
                    torch.cuda.set_rng_state_all(rng["cuda"])
            except Exception as e:
                log.warning("trainscope: CUDA RNG state not restored: %s", e)
        ts_ = state.get("trainscope") or {}
        self.step = int(ts_.get("step", 0))
        self.lr_scale = float(ts_.get("lr_scale", 1.0))
        self._rollbacks = max(self._rollbacks, int(ts_.get("rollbacks", 0)))
        h = self.hook
        if h is not None:
            hs = state.get("hook") or {"step_count": int(ts_.get("global_step", self.step)),
                                        "mode_steps": {str(_TRAIN): self.step}}
            h.load_state_dict(hs)

    def _resume_fields(self, meta: dict) -> dict:
        fields = {"from_step": self.step, "global_step": meta.get("global_step", self.step),
                  "checkpoint": meta["path"], "lost_steps": None, "lost_time_s": None,
                  "down_time_s": None}
        h = self.hook
        if h is None:
            return fields
        try:
            from .reader import open_run
            h.flush()
            recs = [r for r in open_run(h.out_dir, refresh_interval_s=0).step_records(h.worker)
                    if int(r["mode"]) == _TRAIN and r["end_us"] < self._created_us]
            if recs:
                last = max(recs, key=lambda r: r["end_us"])
                fields["lost_steps"] = max(0, int(last["mode_step"]) + 1 - self.step)
                fields["lost_time_s"] = max(0.0, (last["end_us"] - int(meta["wall_us"])) / 1e6)
                fields["down_time_s"] = max(0.0, (_now_us() - last["end_us"]) / 1e6)
        except Exception as e:
            log.debug("trainscope: resume: previous steps not read: %s", e)
        return fields

    # ========================================================================== rollback
    def _check_rollback(self) -> bool:
        h = self.hook
        if h is None or self._gave_up:
            return False
        now = time.monotonic_ns()
        if now < self._next_poll_ns:
            return False
        self._next_poll_ns = now + self._poll_ns
        statuses = h.rule_statuses()
        for rid in self._rb_rules:
            st = statuses.get(rid)
            if not st:
                continue
            n = int(st.get("firings", 0))
            if n > self._seen_firings.get(rid, 0):
                self._seen_firings[rid] = n
                return self._rollback(rid, n, st)
        if self._rb_count and h.step_count >= self._rb_recover_at:
            self._event(EVENT.ROLLBACK_RECOVERED, {"step": h.step_count, "after": self._rb_count})
            self._rb_count = 0
        return False

    def _firing_step(self, rid: str, firing: int, st: dict) -> int:
        """Global step of the firing's first bad step (from its rule event)."""
        h = self.hook
        for _ in range(3):
            try:
                h.flush()
                if self._reader is None:
                    from .reader import open_run
                    self._reader = open_run(h.out_dir, refresh_interval_s=0)
                self._reader.refresh()
                evs = [e for e in self._reader.rule_events()
                       if e["rule"] == rid and e["status"] == "IssuesFound"
                       and int(e["firing"]) == firing and e["wall_us"] >= self._created_us
                       and not e["details"].get("reminder")]
                if evs:
                    e = evs[-1]
                    return int(e["step"]) - max(0, int(e["details"].get("consecutive", 1)) - 1)
            except Exception as e:
                log.debug("trainscope: rollback: rule events not read: %s", e)
            time.sleep(0.02)
        return int(st.get("last_step", h.step_count))

    def _margin(self, rid: str) -> int:
        m = self.rollback.margin_steps
        for r in getattr(self.hook, "_builtin_rules", ()) or ():
            if getattr(r, "id", None) == rid:
                n = r.params.get("num_steps", 5 if r.name == "dead_loss" else 0)
                try:
                    m += max(0, int(n) - 1)
                except (TypeError, ValueError):
                    pass
        return m

    def _rollback(self, rid: str, firing: int, st: dict) -> bool:
        h = self.hook
        rb = self.rollback
        d = getattr(h, "_dist", None)
        if d is not None and d.coordinating:
            # One rank restoring alone would leave the ranks on different weights and step
            # counters (their agreed boundaries with them): stop every rank together instead.
            return self._give_up(rid, h.step_count, h.step_count,
                                 "rollback of one rank in a distributed job is not supported; "
                                 "all ranks stop together")
        from_step = h.step_count
        bad = self._firing_step(rid, firing, st) - self._margin(rid)
        if bad >= from_step:
            log.info("trainscope: %s fired for step %d, not yet run here; ignored", rid, bad)
            return False
        if self._rb_count >= rb.max_rollbacks:
            return self._give_up(rid, from_step, bad,
                                 f"{self._rb_count} rollbacks without recovery")
        try:
            found = self._load_latest(lambda m: int(m.get("global_step", m["step"])) < bad
                                      and m.get("finite", True))
        except Exception as e:
            self._failed("rollback", e)
            found = None
        if found is None:
            return self._give_up(rid, from_step, bad, f"no valid checkpoint before step {bad}")
        meta, state = found
        cur_scale = self.lr_scale           # in effect in the diverged timeline
        self._restore(state)                # lr_scale := the checkpoint's (baked into its lr)
        target = cur_scale * rb.lr_factor
        self._scale_lr(target / self.lr_scale if self.lr_scale else rb.lr_factor)
        self.lr_scale = target
        self._rb_count += 1
        self._rollbacks += 1
        self.skip_pending = rb.skip_batches
        for c in list_checkpoints(self.dir):   # the abandoned timeline
            if c["step"] > self.step:
                self._delete(c)
        self._last_saved = self.step
        self._stop_saved = False
        self._rb_recover_at = bad + (rb.recovery_steps or self.every_steps or 100)
        to_step = int(meta.get("global_step", self.step))
        self._event(EVENT.ROLLBACK, {
            "rule": rid, "from_step": from_step, "to_step": to_step, "bad_step": bad,
            "train_step": self.step, "lr_factor": rb.lr_factor, "lr_scale": self.lr_scale,
            "skip_batches": rb.skip_batches, "count": self._rb_count,
            "checkpoint": meta["path"]})
        log.warning("trainscope: %s fired (first bad step %d): rolled back from step %d to %d "
                    "(lr x%g, rollback %d of %d)", rid, bad, from_step, to_step,
                    self.lr_scale, self._rb_count, rb.max_rollbacks)
        return True

    def _scale_lr(self, factor: float) -> None:
        for o in self.optimizers:
            for g in getattr(o, "param_groups", ()):
                if "lr" in g:
                    g["lr"] = g["lr"] * factor
                if "initial_lr" in g:
                    g["initial_lr"] = g["initial_lr"] * factor
        s = self.scheduler
        if s is not None and hasattr(s, "base_lrs"):
            s.base_lrs = [b * factor for b in s.base_lrs]
        if s is not None and hasattr(s, "_last_lr"):
            s._last_lr = [g["lr"] for o in self.optimizers for g in o.param_groups]

    def _give_up(self, rid: str, from_step: int, bad: int, why: str) -> bool:
        self._gave_up = True
        self._event(EVENT.ROLLBACK_FAILED, {"rule": rid, "from_step": from_step, "bad_step": bad,
                                        "reason": why, "count": self._rb_count})
        log.warning("trainscope: rollback for %s impossible (%s); stopping", rid, why)
        self.hook._request_stop_inprocess(f"rollback: {rid}: {why}", source="rollback")
        return True

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

"""The run the hook records into, and everything around the step: the run directory and its
stream (writer, crash journal), the background threads (committer, rules, system monitor,
stack watch, distributed stop agreement), stop requests, the profiling window, internal
errors, and the close at the end (also at interpreter exit).
"""
from __future__ import annotations

import atexit
import copy
import json
import logging
import os
import socket
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Optional

from . import _core
from ._errors import ConfigError
from ._grad_norm import _GradNormRecorder
from ._modes import TrainingStopped
from ._schema import EVENT, FILE, worker_stream
from ._step_clock import _now_us

if TYPE_CHECKING:
    from .hook import Hook

log = logging.getLogger("trainscope")

# Commit, flush and poll period while in-process rules run (each; a few wake-ups per 20 ms).
_RULES_LATENCY_MS = 20


MIN_TORCH = (2, 1)


def _torch_version(text: str) -> tuple:
    """(major, minor) of a torch version string such as '2.13.0+cpu' or '2.6.0a0+git1234'."""
    parts = []
    for piece in text.split("+", 1)[0].split(".")[:2]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits or 0))
    while len(parts) < 2:
        parts.append(0)
    return tuple(parts)


def _require_torch() -> None:
    """Raises one clear error when torch is missing or older than MIN_TORCH (2.1)."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("trainscope.Hook needs PyTorch >= %d.%d (pip install torch); "
                          "torch is not importable: %s" % (MIN_TORCH + (e,))) from e
    found = getattr(torch, "__version__", "0")
    if _torch_version(str(found)) < MIN_TORCH:
        raise RuntimeError("trainscope.Hook needs PyTorch >= %d.%d; found torch %s at %s"
                           % (MIN_TORCH + (found, os.path.dirname(torch.__file__ or "?"))))


def _set_eval_frame():
    """torch._C._dynamo.eval_frame.set_eval_frame (what torch._dynamo.disable uses), or None
    where torch has no dynamo (platforms without torch.compile)."""
    try:
        import torch
        return torch._C._dynamo.eval_frame.set_eval_frame
    except (ImportError, AttributeError):
        return None


# (real run directory, stream) of the streams this process has opened: a second Hook of the
# same process (train, then evaluate) goes on writing its stream.
_streams_opened: set = set()

# Set by a distributed launcher (torchrun, torch.distributed.launch, SLURM-style wrappers): the
# stream is the rank's, and a restarted rank appends to it.
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")


def own_stream(run_dir: str, stream: str) -> str:
    """The stream a training writes under `trainscope run` (docs/python.md, "Several trainings
    under one run"): its rank's, unless another training of the run — at the same time (its
    writer holds the stream) or before it (the stream holds records) — already has it; then
    ``<stream>-t2``, ``-t3``, ... in order. A rank of a distributed job keeps its rank's stream
    (a restarted rank resumes it), and so does a process that opened the stream itself."""
    from ._profiler import _distributed_initialized
    if any(os.environ.get(v) for v in _RANK_VARIABLES) or _distributed_initialized():
        return stream
    real = os.path.realpath(run_dir)
    name, k = stream, 1
    while True:
        if (real, name) in _streams_opened or not _stream_taken(os.path.join(run_dir, name)):
            _streams_opened.add((real, name))
            return name
        k += 1
        name = f"{stream}-t{k}"


def _stream_taken(path: str) -> bool:
    try:
        return any(True for _ in os.scandir(path))
    except OSError:  # none yet (or unreadable: the writer will say why)
        return False


def _worker_rank() -> int:
    """The global rank: torch.distributed's once its process group exists (mp.spawn jobs set
    no RANK variable), else $RANK or $LOCAL_RANK, else 0."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # noqa: BLE001 - a half-initialised group: fall back to the environment
        pass
    for var in ("RANK", "LOCAL_RANK"):
        v = os.environ.get(var)
        if v is not None:
            try:
                return int(v)
            except ValueError:
                pass
    return 0


class RunLifecycle:
    """The run, background threads, stops, profiler, errors and close (a mixin of Hook)."""

    def _configure_rules(self) -> None:
        """Splits the rules into built-in and custom ones (and rollback's) and adds the
        collections the built-in ones read."""
        try:
            from . import rules as _rules
            from .rollback import split_rollback
            # The engine dispatches "rollback" like any action (to take_rollbacks()); which
            # rules roll back, and how, is also what a Checkpointer following the hook needs.
            self._builtin_rules, self._custom_rules = _rules.split_rules(self._rules_spec,
                                                                         self._actions_spec)
            _, _, self._rollback = split_rollback(  # copies: it strips the action it finds
                [copy.copy(r) for r in self._rules_spec or []], self._actions_spec)
            for c in _rules.required_collections(self._builtin_rules, self.collections,
                                                 self.save_interval):
                self.collections.append(c)
        except (ValueError, TypeError, KeyError) as e:  # the engine refused the configuration
            if isinstance(e, ConfigError):
                raise
            raise ConfigError("Hook", "rules", _rules.redact_actions(self._rules_spec),
                              "a configuration the rules "
                              "engine accepts", str(e)) from e
        except Exception as e:
            if self.strict:
                raise
            self._fail("rules config", e)
            self._builtin_rules, self._custom_rules = [], []

    def _open_run(self, writer_options: dict) -> None:
        import torch  # importable: _require_torch() checked it
        framework = f"pytorch {torch.__version__}"
        opts = dict(byte_budget=self.storage_budget_bytes)
        if self._builtin_rules or self._custom_rules:
            # In-process rules read what the writer has flushed: keep the path from a record to
            # its evaluation short (commit + flush + poll ~ 60 ms instead of ~ 400 ms).
            opts["flush_interval_ms"] = _RULES_LATENCY_MS
        opts.update(writer_options)
        # The core's training runtime (include/trainscope/runtime.h), as in the C++ Session:
        # run.json, this worker's stream, run_start, the system sampler, stop requests, close.
        ms = self._system_monitor_interval_ms
        sampler_ms = (ms if ms > 0 and os.environ.get("TRAINSCOPE_MONITORED") != "1"
                      and getattr(_core, "HAVE_SYSMON", False) else 0)
        self._runtime = _core.Runtime(
            self.out_dir, self.worker, name="", command=list(sys.argv),
            config_json=json.dumps(self.config(), default=str), framework=framework,
            run_start_json=json.dumps({"worker": self.worker, "pid": os.getpid(),
                                       "host": socket.gethostname(), "framework": framework}),
            system_monitor_interval_ms=sampler_ms, root_pid=os.getpid(), writer_options=opts)
        self._writer = self._runtime.writer
        self._opened_us = _now_us()
        self._writer.staging = True  # handed over in bursts: see _commit()
        # Crash journal: step records and losses survive a SIGKILL from the moment they are
        # recorded (docs/format.md §9); without it a crash loses what was not flushed yet.
        err = (self._writer.open_journal() if os.environ.get("TRAINSCOPE_JOURNAL") != "0"
               else None)  # TRAINSCOPE_JOURNAL=0: none (an escape hatch, and for A/B costs)
        if err:
            self._warn_once("journal", f"trainscope: no crash journal ({err}); a crash loses "
                            "the records of the last ~0.4 s")
        # In-process built-in rules are woken by each write: a commit is written at once.
        self._writer.flush_on_commit = bool(self._builtin_rules)
        self._clock.set_writer(self._writer)

    def _start_background(self) -> None:
        if self._builtin_rules or self._custom_rules:
            # the training thread hands its deferred records over at this cadence too
            self._clock.stop_check_ns = min(self._clock.stop_check_ns,
                                            _RULES_LATENCY_MS * 1_000_000)
        try:
            self._commit_interval_s = (_RULES_LATENCY_MS if (self._builtin_rules or
                                                             self._custom_rules) else 100) / 1000
            self._poll_often = self._clock.stop_check_ns < self._commit_interval_s * 1e9
            self._committer = threading.Thread(target=self._commit_loop,
                                               name="trainscope-commit", daemon=True)
            self._committing = True
            self._committer.start()
        except Exception as e:
            self._committing = False
            self._fail("committer", e)
            self._writer.staging = False
        if self._builtin_rules:
            try:
                from . import rules as _rules
                self._nonfinite_stops = _rules.nonfinite_stops(self._builtin_rules)
                self._clock.nonfinite_stop = bool(self._nonfinite_stops)
            except Exception as e:
                self._fail("rules", e)
        if self._builtin_rules or self._custom_rules:
            try:
                from . import _distributed
                from . import rules as _rules
                # The core runtime's rule runners (as the C++ Session's): rules that compare
                # ranks (straggler) run on rank 0 only, over every stream; custom Python rules
                # run in the worker's engine (their trampoline)
                local, cross = _distributed.split_cross_rank(self._builtin_rules)
                if local or self._custom_rules:
                    _rules.start_in_runtime(self._runtime, local, [self.worker],
                                            poll_ms=_RULES_LATENCY_MS, custom=self._custom_rules)
                if cross and _worker_rank() == 0:
                    _rules.start_in_runtime(self._runtime, cross, [], all_streams=True,
                                            poll_ms=_RULES_LATENCY_MS)
            except Exception as e:
                if self.strict:
                    raise
                self._fail("rules", e)
        # the system sampler is the runtime's (_open_run)

    _dist = None  # the StopCoordinator of a job of several ranks (_distributed.py)
    _stack_watch = None  # captures Python stacks when the loop stalls (_stacks.py)
    _comm_timing = None  # a DDP model's collective waits (_comm_timing.py)
    _grads_final_only = False  # DDP: gradients are read once all-reduced (_slow_grads)

    def _start_distributed(self) -> None:
        """In a torch.distributed job, stops are agreed by all ranks (_distributed.py); in any
        job, a hang's Python stacks are captured into the run (_stacks.py)."""
        try:
            from . import _distributed
            if _distributed.wanted():
                self._dist = _distributed.StopCoordinator(self)
        except Exception as e:
            self._fail("distributed", e)
        try:
            from ._stacks import StackWatch
            self._stack_watch = StackWatch(self)
            self._stack_watch.start()
        except Exception as e:
            self._stack_watch = None
            self._fail("stacks", e)

    _cuda_memory = None  # what filled CUDA memory, on a CUDA machine (_cuda_memory.py)

    def _start_cuda_memory(self) -> None:
        try:
            from ._cuda_memory import CudaMemoryWatch
            w = CudaMemoryWatch(self.out_dir, self.worker, writer=lambda: self._writer,
                                step=lambda: self.step_count, fail=self._fail)
            self._cuda_memory = w if w.active else None
        except Exception as e:
            self._fail("cuda memory", e)

    def _note_exception(self, exc) -> None:
        """An exception left the training (the hook's __exit__, the excepthook)."""
        if exc is None or isinstance(exc, (TrainingStopped, GeneratorExit)):
            return
        self._exit_status = "crashed"  # recorded so in the history at close
        try:
            from ._cuda_memory import is_cuda_oom
            if is_cuda_oom(exc):
                if self._cuda_memory is None:  # a device seen late (or only now)
                    from ._cuda_memory import CudaMemoryWatch
                    self._cuda_memory = CudaMemoryWatch(
                        self.out_dir, self.worker, writer=lambda: self._writer,
                        step=lambda: self.step_count, fail=self._fail)
                self._cuda_memory.on_exception(exc)
        except Exception as e:
            self._fail("cuda memory", e)

    # ================================================================================ stops
    def _poll_stop(self) -> None:
        if self._stop_reason is not None:
            return
        self._poll_profile_request()
        try:
            # Through the runtime: a rule's stop_training (its flag, seen first), else
            # control/stop.json (a malformed request is said once per distinct problem: a
            # warning and a stop_request_invalid event, and ignored)
            rt = self._runtime
            reason = rt.poll_stop(self.step_count) if rt is not None else None
            if reason is not None:
                if rt.stop_source == "rule":
                    self._request_stop_inprocess(reason or "rule stop_training action")
                else:
                    self._request_stop_inprocess(reason or "stop requested", source="control")
        except Exception as e:
            self._fail("stop check", e)

    _runtime = None  # the core's TrainingRuntime (_core.Runtime) once the run is open

    def _request_stop_inprocess(self, reason: str, source: str = "rule",
                                agreed: bool = False) -> None:
        """Stops at the next step boundary; in a job of several ranks held until the ranks
        agree (``agreed``: every rank decided the same from the same data at this step)."""
        d = self._dist
        if not agreed and d is not None and d.defer(reason, source):
            return  # all ranks take it together at the next agreed boundary
        with self._lock:
            if self._stop_reason is not None:
                return
            self._stop_reason = reason or "stop requested"
            self._clock.raise_stop = self.raise_on_stop  # at the next step boundary
        # with raise_on_stop, or under zero-code capture, the stop itself is said (one line)
        # where it is taken
        (log.info if self.raise_on_stop or self._stop_said_later else log.warning)(
            "trainscope: stop requested (%s): %s", source, reason)
        try:
            if self._writer is not None:
                self._writer.add_event(EVENT.STOP_REQUESTED, json.dumps({
                    "reason": reason, "source": source, "step": self.step_count}))
        except Exception:
            pass

    _stop_said_later = False  # zero-code capture says the stop as it takes it (_autorun.py)

    def _maybe_raise_stop(self) -> None:
        if self._stop_reason is not None and self.raise_on_stop and not self._stop_raised:
            self._stop_raised = True
            self._clock.raise_stop = False
            if self._step_callbacks:
                self._run_step_callbacks("stop")  # e.g. a final checkpoint
            try:
                if self._writer is not None:
                    self._writer.add_event(EVENT.STOP_HONOURED, json.dumps({
                        "reason": self._stop_reason, "step": self.step_count}))
            except Exception:
                pass
            log.warning("trainscope: stopping the training at step %d: %s", self.step_count,
                        self._stop_reason)
            raise TrainingStopped(self._stop_reason)

    # ============================================================================= profiler
    _profile_seen = None     # (mtime_ns, size) of the request file last looked at
    _profile_request = None  # the request whose window is armed or open
    _profile_pending = None  # a request taken while a window was open: armed when it closes
    _opened_us = 0           # when the run was opened: older requests are not for this hook

    def _poll_profile_request(self) -> None:
        """RUN/control/profile.json (`trainscope profile`, a step-time rule that fired:
        trainscope/profile_request.h): a window of its steps from the next step, taken once
        per request by each hook it names. One stat() when nothing changed."""
        try:
            path = os.path.join(self.out_dir, FILE.CONTROL_DIR, FILE.PROFILE_REQUEST)
            try:
                st = os.stat(path)
            except OSError:
                return
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            if key == self._profile_seen:
                return
            self._profile_seen = key
            req = _core.profile_request(self.out_dir)
            if req is None:
                return
            if isinstance(req, str):
                self._warn_once("profile request: " + req,
                                f"trainscope: ignoring the profile request: {req}")
                return
            if req["requested_at_us"] < self._opened_us or \
                    (req["workers"] and self.worker not in req["workers"]):
                return
            taken = (self._profile_request, self._profile_pending)
            if any(t is not None and t["id"] == req["id"] for t in taken):
                return
            if self._profiling is not None:
                self._profile_pending = req
            else:
                self._arm_profile(req)
        except Exception as e:
            self._fail("profile request", e)

    def _arm_profile(self, req: dict) -> None:
        """A window of req["steps"] steps opens when the next step begins (the step clock's
        profile_start_step), with the profilers of the hook's ProfilerConfig if it has one."""
        from ._profiler import ProfilerConfig
        base = self.profiler
        # the next step: from another thread (the committer) the training thread may be
        # beginning it now, so one more
        start = self.step_count + (1 if threading.get_ident() == self._owner_thread else 2)
        self.profiler = ProfilerConfig(
            start_step=start, num_steps=int(req["steps"]),
            torch_profiler=base.torch_profiler if base is not None else True,
            python_profiler=base.python_profiler if base is not None else True,
            record_shapes=base.record_shapes if base is not None else False,
            top_functions=base.top_functions if base is not None else 50)
        self._profile_request = req
        self._clock.profile_start_step = start
        log.info("trainscope: profiling steps %d-%d of %s (%s)", start,
                 start + int(req["steps"]) - 1, self.worker, req["reason"] or
                 req["requested_by"])

    def _profile_role(self) -> str:
        """A window asked of several named workers: the first is the one a rule named (the
        culprit), the others its references (rules/runner.cc's ProfilingSink)."""
        req = self._profile_request
        workers = (req or {}).get("workers") or []
        if len(workers) < 2 or self.worker not in workers:
            return ""
        return "culprit" if workers[0] == self.worker else "reference"

    def _start_profiler(self) -> None:
        try:
            from ._profiler import ProfilerWindow
            self._profiling = ProfilerWindow(self.profiler, self.out_dir, self.worker,
                                             self._profile_role())
            self._profiling.start(self.step_count)
        except Exception as e:
            self._profiling = None
            self._fail("profiler", e)

    def _stop_profiler(self) -> None:
        p, self._profiling = self._profiling, None
        if p is None:
            return
        try:
            info = p.stop(self.step_count)
            req, self._profile_request = self._profile_request, None
            if req is not None:  # a window asked for (trainscope profile, a rule)
                info = dict(info, request_id=req["id"], requested_by=req["requested_by"],
                            reason=req["reason"])
            if self._writer is not None:
                self._flush_pending()  # keep records in step order
                self._writer.add_event(EVENT.PROFILER_WINDOW, json.dumps(info))
        except Exception as e:
            self._fail("profiler", e)
        pending, self._profile_pending = self._profile_pending, None
        if pending is not None:
            try:
                self._arm_profile(pending)
            except Exception as e:
                self._fail("profile request", e)

    # =============================================================================== errors
    def _fail(self, where: str, exc: BaseException) -> None:
        """Counts an internal error, logs it once per place, records it, degrades (the
        FailureLog; also the step clock's upcall)."""
        self._failures.fail(where, exc)

    def _warn_once(self, key: str, message: str) -> None:
        self._failures.warn_once(key, message)

    def _stop_saving(self) -> bool:
        """After max_errors internal errors: no more tensors (False when already stopped)."""
        if not self._saving:
            return False
        self._saving = False
        if threading.get_ident() == self._owner_thread:
            self._plan = None  # else the training thread's next save check sees it
        return True

    def _disarm_in_child(self) -> None:
        """In a child made by os.fork() (a DataLoader worker, multiprocessing's fork start
        method, a script's own fork): the hook is the parent's. Its threads are not here and
        its locks may be held for good, so nothing of it is waited for, flushed or closed:
        it is marked closed (close() and the atexit close do nothing), its torch hooks and
        patches come off (the child's own use of the model records nothing and costs
        nothing), and its core objects (stream, journal, runtime) are kept, untouched, for the
        life of the child. The child may make a Hook of its own."""
        self._closed = True
        self._saving = False
        self._committing = False
        self._step_callbacks = []
        _forked_leftovers.append((self._writer, self._runtime, self._clock,
                                  getattr(self, "_shipper", None)))
        try:
            self._clock.set_writer(None)  # a wrapped loader or step in the child records nothing
        except Exception:
            pass
        self._writer = None
        self._runtime = None
        self._dist = None
        self._stack_watch = None
        self._comm_timing = None
        self._remove_torch_patches()

    def _remove_torch_patches(self) -> None:
        """Takes off what the hook put on torch's objects: module hooks, step hooks, the
        optimizers' and scalers' step wrappers, the gradient-norm recorder (close, and a
        forked child's disarm)."""
        for h in self._handles:
            try:
                h.remove()
            except Exception:
                pass
        self._handles = []
        try:
            self._remove_step_hooks()
        except Exception:  # not _fail: in a forked child nothing may touch the writer
            pass
        for obj in self._optimizers + self._scalers:
            try:
                del obj.step  # back to the class's method
            except Exception:
                pass
        try:
            _GradNormRecorder.remove(self)
        except Exception:
            pass

    def _close_run(self) -> None:
        """The work of close() (called once)."""
        try:
            if self._open:
                self._close_step(_now_us())
                self._advance()
        except Exception as e:
            self._fail("close step", e)
        if self._step_callbacks:
            self._run_step_callbacks("close")
        try:
            self._take_lane_counts()  # a repeated save step the clock closed (accounting)
            self._flush_batches()
            self._flush_device_scalars()
            self._drain_host_copies(wait=True)
        except Exception as e:
            self._fail("close", e)
        try:
            self._stop_profiler()
        except Exception as e:
            self._fail("profiler", e)
        self._remove_torch_patches()
        if self._dist is not None:
            self._dist.close()
        if self._stack_watch is not None:
            self._stack_watch.stop()
        if self._cuda_memory is not None:
            self._cuda_memory.close()
        if self._comm_timing is not None:
            try:
                self._flush_pending()
                self._comm_timing.detach(self)
            except Exception as e:
                self._fail("comm timing", e)
        w = self._writer
        if w is not None:
            try:
                self._flush_pending()
            except Exception as e:
                self._fail("close", e)
            try:
                w.add_event(EVENT.RUN_END, json.dumps({
                    "worker": self.worker, "steps": self.step_count,
                    "mode_steps": {m.name: s for m, s in self._mode_steps.items()},
                    "hook_errors": self.error_count, "errors": self.errors}))
                w.flush()
            except Exception as e:
                self._fail("close", e)
            self._committer_stop.set()
            if self._committer is not None:
                self._committer.join()
            try:
                w.commit()
            except Exception as e:
                self._fail("close", e)
            if self._runtime is not None:
                try:  # the rules finish (final statuses), then the system monitor stops
                    self._runtime.stop_background()
                except Exception as e:
                    self._fail("rules", e)
            try:
                err = w.close()
                if err:
                    log.warning("trainscope: writer closed with an error: %s", err)
                if self._runtime is not None:
                    self._runtime.close()  # run_end is the hook's (above): the rest is closed
            except Exception as e:
                self._fail("close", e)
            self._clock.set_writer(None)  # a loader wrapper used after close records nothing
            self._record_history()
        if getattr(self, "_shipper", None) is not None:  # s3://: the spool reaches the bucket
            from ._object_store import stop_shipper
            stop_shipper(self._shipper)
        _unregister_atexit(self._atexit)

    _exit_status = None  # "crashed" once an exception left the training (see _excepthook)

    def _record_history(self) -> None:
        """The run joins the history (trainscope ls) when it ends: recorded by the hook of
        rank 0, unless `trainscope run` launched it (it records the run with the child's exit)
        or TRAINSCOPE_HISTORY=0. Never an error into the training."""
        if (os.environ.get("TRAINSCOPE_MONITORED") == "1" or self.worker != worker_stream(0)
                or self._writer is None):
            return
        status = self._exit_status or ("stopped" if self._stop_reason is not None else "ended")
        try:
            if _core.history_enabled():
                _core.record_run_in_history(self.out_dir, status)
        except Exception as e:
            log.warning("trainscope: run not recorded in the history: %s", e)


# ---- close at exit -------------------------------------------------------------------------
_live_hooks: "weakref.WeakSet[Hook]" = weakref.WeakSet()
_atexit_installed = False


# What the hooks of the parent held, in a forked child (Hook._disarm_in_child): kept, never
# closed. Their core objects are fork-aware too (include/trainscope/fork.h).
_forked_leftovers: list = []


def _disarm_after_fork() -> None:
    """os.register_at_fork(after_in_child=...): the parent's hooks are left alone in a child."""
    hooks = list(_live_hooks)
    _live_hooks.clear()
    for h in hooks:
        try:
            h._disarm_in_child()
        except Exception:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_disarm_after_fork)


def _close_all() -> None:
    for h in list(_live_hooks):
        try:
            h.close()
        except Exception:
            pass


def _register_atexit(hook: Hook):
    global _atexit_installed
    _live_hooks.add(hook)
    if not _atexit_installed:
        atexit.register(_close_all)
        _chain_excepthook()
        _atexit_installed = True
    return hook


def _chain_excepthook() -> None:
    """An exception that ends the script marks the open hooks' runs as crashed (their close
    at exit records that in the history); the previous excepthook runs as before."""
    prev = sys.excepthook

    def _excepthook(t, v, tb):
        try:
            if not (t is not None and issubclass(t, TrainingStopped)):
                for h in list(_live_hooks):
                    h._note_exception(v if v is not None else t())
        except Exception:
            pass
        prev(t, v, tb)

    sys.excepthook = _excepthook


def _unregister_atexit(hook) -> None:
    try:
        _live_hooks.discard(hook)
    except Exception:
        pass

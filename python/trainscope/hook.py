"""The PyTorch hook: captures losses, scalars, weights, gradients and layer inputs/outputs from
a training, writes them into a run directory, times every step, and stops the job when asked.

    import trainscope as ts
    with ts.Hook(out_dir="runs/exp1", save_interval=100) as hook:
        hook.register_module(model)
        hook.register_loss(criterion)
        hook.register_optimizer(optimizer)          # optional: optimizer phase timing
        for x, y in hook.wrap(loader):              # optional: data-wait timing
            loss = criterion(model(x), y)
            optimizer.zero_grad(); loss.backward(); optimizer.step()
            if hook.should_stop:
                break

Steps: every forward call of the registered top-level module starts a new step (in the mode of
``set_mode``, or TRAIN/EVAL from ``model.training`` when set_mode was never called) until the
user calls ``hook.step()``, after which only ``hook.step()`` ends steps. Steps are counted
globally (``step``) and per mode (``mode_step``); save decisions use ``mode_step``.

Cost: on a step where no collection saves, no Python of the hook runs: the callbacks torch
calls are the C step clock's (python/bindings/step_clock.cc), which counts and times the step,
reads the loss and queues one StepRecord and one scalar (about 2-3 µs). Gradient hooks and
layer forward hooks are registered only for the steps that save them and removed after them.

PyTorch 2.1 or later: torch.compile'd models (either registration order), autocast and
low-precision tensors, torch.amp.GradScaler (``register_scaler``) and clip_grad_norm_
(``grad_norm/total``) are covered in docs/python.md.

Failure policy: nothing the hook does raises into the training loop (except TrainingStopped
when ``raise_on_stop=True``). Internal errors are logged once per place, counted, written as
``hook_error`` events, and after ``max_errors`` errors the hook stops saving tensors.
"""
from __future__ import annotations

import atexit
import functools
import json
import logging
import math
import os
import socket
import sys
import threading
import time
import types
import weakref
from collections import deque
from typing import Any, Dict, Iterable, List, Optional, Sequence

from . import _core
from ._dtypes import _torch_codes, torch_to_buffer
from ._errors import (ConfigError, check_bool, check_callable, check_hook_arguments,
                      check_int)
from ._modes import Mode, TrainingStopped
from .collection import NEVER, as_collections

log = logging.getLogger("trainscope")

SUMMARY_BYTES = 160  # approximate bytes on disk of one summary record (for projections)
GB = 1000 ** 3
# Commit, flush and poll period while in-process rules run (each; a few wake-ups per 20 ms).
_RULES_LATENCY_MS = 20


MIN_TORCH = (2, 1)

# Scalars the hook records besides losses (docs/python.md). The amp ones are named in
# src/rules/builtin/amp_scalars.h (the rules read them).
AMP_LOSS_SCALE = _core.AMP_LOSS_SCALE
AMP_SKIPPED = _core.AMP_SKIPPED
GRAD_NORM_TOTAL = "grad_norm/total"


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


def _now_us() -> int:
    return time.time_ns() // 1000


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


class ProfilerConfig:
    """A framework-profiling window: ``num_steps`` global steps from ``start_step``.

    Inside the window the hook records operator timings with torch.profiler (Chrome trace JSON
    at RUN/profile/trace-<worker>.json) and Python function timings with cProfile
    (RUN/profile/functions-<worker>.json). Outside it costs one integer comparison per step.
    """

    def __init__(self, start_step: int = 5, num_steps: int = 10, torch_profiler: bool = True,
                 python_profiler: bool = True, record_shapes: bool = False,
                 top_functions: int = 50):
        w = "ProfilerConfig"
        self.start_step = check_int(w, "start_step", start_step, minimum=0)
        self.num_steps = check_int(w, "num_steps", num_steps, minimum=1, maximum=1_000_000)
        self.torch_profiler = check_bool(w, "torch_profiler", torch_profiler)
        self.python_profiler = check_bool(w, "python_profiler", python_profiler)
        self.record_shapes = check_bool(w, "record_shapes", record_shapes)
        self.top_functions = check_int(w, "top_functions", top_functions, minimum=0,
                                       maximum=1_000_000)

    @property
    def end_step(self) -> int:  # exclusive
        return self.start_step + self.num_steps

    def to_config(self) -> dict:
        return {"start_step": self.start_step, "num_steps": self.num_steps,
                "torch_profiler": self.torch_profiler, "python_profiler": self.python_profiler}


class _Plan:
    """What one save step captures: tensors by source, with flags (raw, reductions, buckets)."""

    __slots__ = ("params", "grads", "outputs", "inputs")

    def __init__(self):
        self.params: List[tuple] = []          # (full_name, param, flags, collection)
        self.grads: Dict[str, list] = {}       # param name -> [(full_name, flags, collection)]
        self.outputs: Dict[str, list] = {}     # module name -> [(full_name, flags, collection)]
        self.inputs: Dict[str, list] = {}

    def empty(self) -> bool:
        return not (self.params or self.grads or self.outputs or self.inputs)


MODES = (Mode.TRAIN, Mode.EVAL, Mode.PREDICT)  # training modes (GLOBAL is for readers)


class _ModeArray:
    """One per-mode counter array of the step clock, with the dict surface the hook uses:
    kind 0 = steps of each mode, 1 = next tensor save step, 2 = next loss save step."""

    __slots__ = ("_clock", "_kind")

    def __init__(self, clock, kind: int):
        self._clock = clock
        self._kind = kind

    def __getitem__(self, mode) -> int:
        return self._clock.get(self._kind, int(mode))

    def __setitem__(self, mode, value) -> None:
        self._clock.set(self._kind, int(mode), int(value))

    def get(self, mode, default=None):
        try:
            return self[mode]
        except ValueError:
            return default

    def __iter__(self):
        return iter(MODES)

    def items(self):
        return [(m, self[m]) for m in MODES]

    def update(self, values: dict) -> None:
        for m, v in values.items():
            self[m] = v

    def __repr__(self) -> str:
        return repr({m.name: v for m, v in self.items()})


def _clock_field(name: str, doc: str) -> property:
    return property(lambda self: getattr(self._clock, name),
                    lambda self, v: setattr(self._clock, name, v), doc=doc)


class Hook:
    """Captures tensors and timings from a PyTorch training into a run directory.

    Args:
        out_dir: the run directory. Under ``trainscope run`` ($TRAINSCOPE_RUN_DIR) the hook
            writes into that run instead. Default: ./trainscope-runs/<date>-<time>-<pid>.
        save_interval: default save interval (steps of the mode) of every collection.
        collections: names or ts.Collection objects; default losses, scalars, weights and
            gradients (summaries every save_interval steps; losses every step).
        rules: built-in rule names, ts.Rule(name, **params) objects, or custom ts.Rule
            subclasses (Python, evaluated on a background thread).
        actions: actions of rules that name none, e.g. ["stop_training"].
        system_monitor_interval_ms: system sampling period (0 disables; skipped under
            ``trainscope run``, which monitors the job itself).
        raise_on_stop: raise ts.TrainingStopped at the next step boundary once a stop is
            requested (otherwise only ``should_stop`` becomes True).
        profiler: a ts.ProfilerConfig window.
        storage_budget_bytes: byte budget of this worker's stream (default 10 GB): a warning
            when the configuration projects past it; raw tensors are dropped first.
        expected_steps: steps the projection assumes (default 100000).
        device_stats: "auto" (CPU tensors -> C++ kernel, others -> batched torch ops), "torch"
            (always the batched torch path; to test it on CPU) or "core".
        record_phases: time forward/backward/optimizer phases.
        strict: raise configuration errors instead of logging them and degrading.
        auto_step: each forward of the registered module starts a step until the first
            ``hook.step()`` call; False: only ``hook.step()`` ends steps (use it when one
            step has several forward calls, e.g. gradient accumulation).
        worker: stream name (default worker-<RANK or LOCAL_RANK or 0>).
        max_errors: internal errors after which the hook stops saving tensors.
    """

    # ---- step state, kept by the C step clock (see __init__) -----------------------------
    step_count = _clock_field("step", "The global step (the current one).")
    _open = _clock_field("open", "A step is open.")
    _auto_step = _clock_field("auto_step", "Forward calls of the model end steps.")
    _explicit_mode = _clock_field("explicit_mode", "set_mode() was called.")
    record_phases = _clock_field("record_phases", "Time forward, backward and optimizer.")

    @property
    def mode(self) -> Mode:
        """The current mode (TRAIN, EVAL or PREDICT)."""
        return MODES[self._clock.mode]

    @mode.setter
    def mode(self, mode) -> None:
        self._clock.mode = int(mode)

    @property
    def _plan(self) -> "Optional[_Plan]":
        return self._plan_

    @_plan.setter
    def _plan(self, plan) -> None:
        self._plan_ = plan
        self._clock.plan_active = plan is not None

    @property
    def _profiling(self):
        return self._profiling_

    @_profiling.setter
    def _profiling(self, window) -> None:
        self._profiling_ = window
        self._clock.profiling = window is not None

    def __init__(self, out_dir: Optional[str] = None, save_interval: int = 100,
                 collections=None, rules=None, actions=None,
                 system_monitor_interval_ms: int = 500, *, raise_on_stop: bool = False,
                 profiler: Optional[ProfilerConfig] = None,
                 storage_budget_bytes: int = 10 * GB, expected_steps: int = 100_000,
                 device_stats: str = "auto", record_phases: bool = True,
                 stop_check_interval_ms: int = 100, strict: bool = False,
                 auto_step: bool = True,
                 worker: Optional[str] = None, run_name: str = "", max_errors: int = 50,
                 writer_options: Optional[dict] = None):
        # Zero-code capture (`trainscope run`, python/trainscope/_autorun.py) yields to a hook
        # the script makes itself: nothing is recorded twice.
        auto = sys.modules.get("_trainscope_autorun")
        if auto is not None:
            auto.yield_to(self)
        _require_torch()
        # Wrong arguments raise ConfigError here, whatever `strict` says (docs/python.md).
        args = check_hook_arguments(dict(
            out_dir=out_dir, save_interval=save_interval, rules=rules, actions=actions,
            system_monitor_interval_ms=system_monitor_interval_ms, raise_on_stop=raise_on_stop,
            profiler=profiler, storage_budget_bytes=storage_budget_bytes,
            expected_steps=expected_steps, device_stats=device_stats,
            record_phases=record_phases, stop_check_interval_ms=stop_check_interval_ms,
            strict=strict, auto_step=auto_step, worker=worker, run_name=run_name,
            max_errors=max_errors, writer_options=writer_options))
        out_dir, rules, actions = args["out_dir"], args["rules"], args["actions"]
        # ---- state that must exist even when setup fails -------------------------------
        # The per-step fast path in C (python/bindings/step_clock.cc) owns the step state:
        # counters, mode, the open step and its phase timings, the next save steps, and the
        # queue of StepRecords and losses. The properties below read and write it there.
        self._clock = _core.StepClock(self)
        self._clock.set_stop_type(TrainingStopped)
        self._clock.set_dynamo(_set_eval_frame())  # calls into the hook run uncompiled
        self._mode_steps = _ModeArray(self._clock, 0)
        self._next_save = _ModeArray(self._clock, 1)  # first mode step that saves a tensor
        self._loss_next = _ModeArray(self._clock, 2)  # first mode step that saves the loss
        self._loss_names: List[str] = []
        self._errors: Dict[str, int] = {}
        self.error_count = 0
        self._max_errors = args["max_errors"]
        self._lock = threading.Lock()
        self._writer = None
        self._closed = False
        self._saving = True
        self._handles: List[Any] = []      # permanent torch hook handles
        self._step_handles: List[Any] = []  # handles removed at the end of the step
        self._model = None
        self._params: List[tuple] = []
        self._param_index: Dict[str, int] = {}
        self._modules: Dict[str, Any] = {}
        self._compiled_modules: set = set()  # layers inside torch.compile'd code (no hooks)
        self._compiled = False  # save steps were seen to begin inside torch.compile'd code
        self._scalers: List[Any] = []  # registered GradScalers
        self._amp_names: List[int] = []  # clock indexes of amp/loss_scale and amp/skipped
        self._step_means: Dict[str, list] = {}  # name -> [step, mode, sum, n] (losses in Python)
        self._optimizers: List[Any] = []
        self._stop_reason: Optional[str] = None
        self._stop_raised = False
        self._rule_runner = None
        self._py_rules = None
        self._sampler = None
        self._profiling = None
        self.raise_on_stop = args["raise_on_stop"]
        self.strict = args["strict"]
        self._auto_step = args["auto_step"]
        self._plan: Optional[_Plan] = None
        self._plan_cache: Dict[tuple, _Plan] = {}
        self._hooked_plan = None  # the plan whose step hooks are installed (_step_handles)
        self._hooked_grads = 0  # how many gradient hooks it installed
        self._hooked_params: List[Any] = []  # the parameters those hooks are on
        self._seen_outputs: set = set()
        self._cpu_batch: List[tuple] = []
        self._unaccounted: Dict[str, int] = {}  # summary bytes queued, by collection
        # Records from this thread are staged in the core (Writer.staging) and handed to the
        # writer thread in bursts by a committer thread every commit_interval_ms (and at
        # flush/close): waking an idle writer thread for every step's first record costs far
        # more than the record itself on a busy machine.
        # Records of every step (StepRecord, the loss) wait in the clock and are handed to the
        # core in bursts (at the commit cadence, before other records, at flush/close): one
        # burst runs with warm caches, where one call per step found them cold after the
        # model's forward and backward and cost several times more. Training thread only.
        self._owner_thread = threading.get_ident()
        self._committer = None
        self._committer_stop = threading.Event()
        self._device_batch = None
        self._device_scalars: List[tuple] = []
        # copies from the device still landing in host memory, each with what writes it
        # (FIFO, so each series stays in step order): see _device_stats.HostCopy
        self._host_copies: "deque[tuple]" = deque()
        self._bytes_projected_warned = False
        self._bytes_estimate = 0
        self._bytes_by_collection: Dict[str, int] = {}
        self._first_save_bytes: Dict[str, int] = {}
        self._first_save_step: Dict[str, int] = {}
        self._raw_disabled = False
        self._clock.stop_check_ns = args["stop_check_interval_ms"] * 1_000_000
        self.record_phases = args["record_phases"]
        self.device_stats = args["device_stats"]
        self._clock.loss_on_device = self.device_stats == "torch"
        self.save_interval = args["save_interval"]
        self.storage_budget_bytes = args["storage_budget_bytes"]
        self.expected_steps = args["expected_steps"]
        self.profiler = profiler
        self._clock.profile_start_step = int(profiler.start_step) if profiler is not None else -1
        self._system_monitor_interval_ms = args["system_monitor_interval_ms"]

        env_dir = os.environ.get("TRAINSCOPE_RUN_DIR")
        if env_dir:
            if out_dir and os.path.abspath(out_dir) != os.path.abspath(env_dir):
                log.info("trainscope: running under `trainscope run`; writing into %s "
                         "instead of %s", env_dir, out_dir)
            out_dir = env_dir
        if not out_dir:
            out_dir = os.path.join("trainscope-runs",
                                   time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}")
        self.out_dir = str(out_dir)
        self.worker = worker or f"worker-{_worker_rank()}"

        self.collections = as_collections(collections, self.save_interval)  # or ConfigError
        self._rules_spec = rules
        self._actions_spec = actions
        try:
            from . import rules as _rules
            from .checkpoint import split_rollback  # "rollback" is the Checkpointer's action
            rules_, actions_, self._rollback = split_rollback(self._rules_spec,
                                                              self._actions_spec)
            self._builtin_rules, self._custom_rules = _rules.split_rules(rules_, actions_)
            for c in _rules.required_collections(self._builtin_rules, self.collections,
                                                 self.save_interval):
                self.collections.append(c)
        except (ValueError, TypeError, KeyError) as e:  # the engine refused the configuration
            if isinstance(e, ConfigError):
                raise
            raise ConfigError("Hook", "rules", self._rules_spec, "a configuration the rules "
                              "engine accepts", str(e)) from e
        except Exception as e:
            if self.strict:
                raise
            self._fail("rules config", e)
            self._builtin_rules, self._custom_rules = [], []
        self._index_collections()

        try:
            self._open_run(writer_options or {})
        except Exception as e:
            if self.strict:
                raise
            self._fail("open run", e)
            self._saving = False
        if self._writer is not None:
            self._start_background()
            self._start_distributed()
        self._atexit = _register_atexit(self)

    # =============================================================================== setup
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

    def config(self) -> dict:
        """The hook's configuration (written into run.json)."""
        return {
            "out_dir": self.out_dir, "worker": self.worker, "save_interval": self.save_interval,
            "collections": [c.to_config(self.save_interval) for c in self.collections],
            "rules": [getattr(r, "to_config", lambda: str(r))() for r in self._rules_spec],
            "actions": self._actions_spec,
            "system_monitor_interval_ms": self._system_monitor_interval_ms,
            "storage_budget_bytes": self.storage_budget_bytes,
            "raise_on_stop": self.raise_on_stop, "device_stats": self.device_stats,
            "profiler": self.profiler.to_config() if self.profiler else None,
        }

    def _open_run(self, writer_options: dict) -> None:
        import torch  # importable: _require_torch() checked it
        framework = f"pytorch {torch.__version__}"
        _core.create_or_open_run(self.out_dir, name="", command=list(sys.argv),
                                 config_json=json.dumps(self.config(), default=str),
                                 framework=framework)
        opts = dict(byte_budget=self.storage_budget_bytes)
        if self._builtin_rules or self._custom_rules:
            # In-process rules read what the writer has flushed: keep the path from a record to
            # its evaluation short (commit + flush + poll ~ 60 ms instead of ~ 400 ms).
            opts["flush_interval_ms"] = _RULES_LATENCY_MS
        opts.update(writer_options)
        self._writer = _core.Writer(self.out_dir, self.worker, **opts)
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
        self._writer.add_event("run_start", json.dumps({
            "worker": self.worker, "pid": os.getpid(), "host": socket.gethostname(),
            "framework": framework}))

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
            try:
                from . import _distributed
                from . import rules as _rules
                # rules that compare ranks (straggler) run on rank 0 only, over every stream
                local, cross = _distributed.split_cross_rank(self._builtin_rules)
                if local:
                    self._rule_runner = _rules.start_builtin_runner(
                        self.out_dir, local, self._writer, [self.worker],
                        poll_ms=_RULES_LATENCY_MS)
                if cross and _worker_rank() == 0:
                    self._cross_runner = _rules.start_builtin_runner(
                        self.out_dir, cross, self._writer, [], poll_ms=_RULES_LATENCY_MS)
            except Exception as e:
                if self.strict:
                    raise
                self._fail("rules", e)
        if self._custom_rules:
            try:
                from . import rules as _rules
                self._py_rules = _rules.PythonRuleThread(
                    self.out_dir, self._custom_rules, self._writer, self.worker,
                    on_stop=self._request_stop_inprocess)
                self._py_rules.start()
            except Exception as e:
                if self.strict:
                    raise
                self._fail("custom rules", e)
        ms = self._system_monitor_interval_ms
        if ms > 0 and os.environ.get("TRAINSCOPE_MONITORED") != "1":
            if getattr(_core, "HAVE_SYSMON", False):
                try:
                    self._sampler = _core.SystemSampler(self._writer,
                                                        interval_ms=max(100, min(60000, ms)),
                                                        root_pid=os.getpid())
                    self._sampler.start()
                except Exception as e:
                    self._fail("system monitor", e)
                    self._sampler = None

    _dist = None  # the StopCoordinator of a job of several ranks (_distributed.py)
    _stack_watch = None  # captures Python stacks when the loop stalls (_stacks.py)
    _cross_runner = None  # rank 0: rules comparing the ranks (straggler), over every stream
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

    def _slow_sync(self) -> None:
        """The step clock at TRAIN step clock.sync_step: the ranks' agreement on stops."""
        if self._dist is None:
            self._clock.sync_step = -1
        else:
            self._dist.on_boundary()

    # ========================================================================= registration
    def register_module(self, module, *, forward_steps: bool = True) -> None:
        """Registers the top-level model: its forward calls define steps; its parameters and
        submodules are the weights/biases/gradients and activations/inputs.

        forward_steps=False: the model's forward calls neither open nor time steps; the caller
        drives them with ``begin_step()`` and ``step()`` (the framework integrations do: a
        LightningModule's forward may never be called, an evaluation's forwards may run
        between training steps).

        Registering the same model again does nothing (said once in the log); another model
        while one is registered is a ConfigError (one hook follows one model)."""
        import torch
        if not isinstance(module, torch.nn.Module):
            raise ConfigError("register_module", "module", module,
                              "a torch.nn.Module (the top-level model)")
        if self._model is not None:
            if module is self._model:
                if not getattr(self, "_warned_reregister", False):
                    self._warned_reregister = True
                    log.info("trainscope: register_module: this model is already registered; "
                             "the repeated call does nothing (steps are counted once)")
                return
            raise ConfigError("register_module", "module", module,
                              f"the model already registered ({type(self._model).__name__}); "
                              "one hook follows one model: register the top-level module that "
                              "contains both", "a model is already registered")
        try:
            self._register_module(module, forward_steps)
        except Exception as e:
            if self.strict:
                raise
            self._fail("register_module", e)
        try:
            from . import _comm_timing, _distributed
            self._grads_final_only = _comm_timing.is_ddp(module)
            if self._comm_timing is None and _distributed.wanted():
                self._comm_timing = _comm_timing.attach(self, module)
        except Exception as e:
            self._fail("comm timing", e)

    def _register_module(self, module, forward_steps: bool = True) -> None:
        self._model = module
        self._params = [(_plain_name(n), p) for n, p in module.named_parameters()]
        self._param_index = {n: i for i, (n, _) in enumerate(self._params)}
        self._modules, self._compiled_modules = _modules_of(module)
        # the clock's hook objects (copies of the module get inert ones: see step_clock.cc).
        # On a torch.compile'd model (OptimizedModule) they go on the wrapper, whose hooks run
        # outside the compiled code (its `training` is the original module's).
        if forward_steps:
            self._handles.append(module.register_forward_pre_hook(self._clock.callback(0)))
            self._handles.append(module.register_forward_hook(self._clock.callback(1)))
        _GradNormRecorder.add(self)
        self._targets = self._compute_targets()
        self._plan_cache.clear()
        self._active_memo = None
        self._project_storage()

    def register_loss(self, criterion, name: str = "loss"):
        """Records the criterion's output as ``losses/<name>`` (every step by default).

        For an nn.Module criterion a forward hook is added and the module returned; for a plain
        function (F.cross_entropy) a wrapper that records is returned: use it instead."""
        check_callable("register_loss", "criterion", criterion,
                       "a callable: an nn.Module criterion or a loss function")
        if not isinstance(name, str) or not name or "/" in name:
            raise ConfigError("register_loss", "name", name, "a non-empty string without '/'")
        try:
            import torch
            self._clock.set_torch(torch.Tensor, torch.float32, torch.float64)
            index = self._clock.add_loss_name(f"losses/{name}")
            self._loss_names.append(f"losses/{name}")
            on_output = self._clock.callback(2, index)  # (module, inputs, output)
            if isinstance(criterion, torch.nn.Module):
                self._handles.append(criterion.register_forward_hook(on_output))
                return criterion

            @functools.wraps(criterion)
            def recorded(*args, **kwargs):
                out = criterion(*args, **kwargs)
                on_output(None, args, out)
                return out
            return recorded
        except Exception as e:
            if self.strict:
                raise
            self._fail("register_loss", e)
            return criterion

    def register_optimizer(self, optimizer) -> None:
        """Times ``optimizer.step()`` (StepRecord.optimizer_us) and ends the backward phase
        there (StepRecord.backward_us). Wraps the instance's step method; registering the
        same optimizer again does nothing."""
        if not callable(getattr(optimizer, "step", None)) or not hasattr(optimizer,
                                                                         "param_groups"):
            raise ConfigError("register_optimizer", "optimizer", optimizer,
                              "a torch.optim.Optimizer (an object with step() and param_groups)")
        if any(o is optimizer for o in self._optimizers):
            return
        try:
            # A callable bound like a method, so LR schedulers (which rebind optimizer.step
            # through __func__.__get__) keep working.
            optimizer.step = types.MethodType(self._clock.opt_step(optimizer.step), optimizer)
            self._optimizers.append(optimizer)
        except Exception as e:
            if self.strict:
                raise
            self._fail("register_optimizer", e)

    def register_scaler(self, scaler) -> None:
        """Follows a ``torch.amp.GradScaler``: records ``amp/loss_scale`` (the scale each step's
        backward used) at every ``scaler.step(optimizer)`` and ``amp/skipped`` = 1 on the steps
        it skipped because of inf/NaN gradients, and summarises gradients divided by the scale
        (the gradients the optimizer uses). The optimizers it steps are registered too (their
        step tells a skipped step). Wraps the instance's step method (C, like the optimizer's);
        registering the same scaler again does nothing."""
        if not callable(getattr(scaler, "step", None)) or not callable(
                getattr(scaler, "get_scale", None)):
            raise ConfigError("register_scaler", "scaler", scaler,
                              "a torch.amp.GradScaler (an object with step() and get_scale())")
        if any(s is scaler for s in self._scalers):
            return
        try:
            import torch
            self._clock.set_torch(torch.Tensor, torch.float32, torch.float64)
            if not self._amp_names:
                for name in (AMP_LOSS_SCALE, AMP_SKIPPED):  # their device values: loss path
                    self._amp_names.append(self._clock.add_loss_name(name))
                    self._loss_names.append(name)
            scaler.step = types.MethodType(
                self._clock.scaler_step(scaler.step, *self._amp_names), scaler)
            self._scalers.append(scaler)
        except Exception as e:
            if self.strict:
                raise
            self._fail("register_scaler", e)

    def _slow_scaler_optimizer(self, optimizer) -> None:
        """scaler.step(optimizer) of an optimizer not registered yet: registered now (the
        scaler then calls the new wrapper)."""
        self.register_optimizer(optimizer)

    def wrap(self, loader: Iterable) -> Iterable:
        """Wraps a data loader: each batch's wait is recorded (StepRecord.data_wait_us) and,
        in automatic stepping, the previous step ends when the next batch is requested."""
        return _TimedLoader(self, loader)

    # ============================================================================ user calls
    def set_mode(self, mode) -> None:
        """Sets TRAIN / EVAL / PREDICT; ends the open step (it belonged to the old mode)."""
        try:
            mode = Mode.parse(mode)
            if mode == Mode.GLOBAL:
                raise ValueError("set_mode: GLOBAL is not a training mode")
            self._explicit_mode = True
            if mode != self.mode:
                if self._open:
                    self._close_step(_now_us())
                    self._advance()
                self.mode = mode
        except Exception as e:
            self._fail("set_mode", e)

    def begin_step(self) -> None:
        """Opens the current step now unless one is open (a framework callback calls it at a
        batch start, so a save step's weights are read and its gradient hooks are in place
        before the backward pass). ``step()`` ends it; forward calls no longer end steps."""
        self._auto_step = False
        try:
            if not self._open:
                self._open_step(_now_us())
        except TrainingStopped:
            raise
        except Exception as e:
            self._fail("begin_step", e)

    def step(self) -> None:
        """Explicit step boundary: ends the current step (call it once per iteration, after
        optimizer.step()). From the first call on, forward calls no longer end steps."""
        self._auto_step = False
        try:
            if not self._open:
                self._open_step(_now_us())
            self._close_step(_now_us())
            self._advance()
        except TrainingStopped:
            raise
        except Exception as e:
            self._fail("step", e)
        self._maybe_raise_stop()

    def save_scalar(self, name: str, value, step: Optional[int] = None) -> None:
        """Records ``scalars/<name>`` at the current step (e.g. a validation metric)."""
        try:
            if self._writer is None or self._scalar_coll is None:
                return
            mode = self.mode
            ms = self._mode_steps[mode]
            if not self._scalar_coll.saves_at(mode, ms, self.save_interval):
                return
            full = name if "/" in name else f"scalars/{name}"
            self._write_scalar(full, value, self.step_count if step is None else int(step),
                               mode, ms)
        except Exception as e:
            self._fail("save_scalar", e)

    def save_tensor(self, name: str, tensor, raw: bool = False, reductions: bool = True) -> None:
        """Saves any tensor now (summary and/or raw) under ``name`` ("tensors/<name>" when
        it has no collection prefix)."""
        try:
            if self._writer is None or not self._saving:
                return
            full = name if "/" in name else f"tensors/{name}"
            self._save_items([(full, tensor, (raw, reductions, 0), full.split("/")[0])])
            self._flush_batches()
        except Exception as e:
            self._fail("save_tensor", e)

    @property
    def should_stop(self) -> bool:
        """True once a stop was requested (rule action, watcher, dashboard). Cheap enough to
        ask every step: the committer thread polls for stops (every 100 ms; 20 ms with rules),
        this only polls itself when that thread is not running or stops are to be checked
        more often (stop_check_interval_ms)."""
        if self._stop_reason is None:
            r = self._rule_runner
            if r is not None and r.stop_requested():  # an atomic load: a firing shows at once
                self._request_stop_inprocess(r.stop_reason() or "rule stop_training action")
            elif self._poll_often or not self._committing:
                self._poll_stop()
        return self._stop_reason is not None

    _committing = False   # the committer thread runs: it commits and polls for stops
    _poll_often = False   # stop_check_interval_ms is below its period: poll here too

    @property
    def stop_reason(self) -> Optional[str]:
        return self._stop_reason

    @property
    def mode_step(self) -> int:
        return self._mode_steps.get(self.mode, 0)

    def close(self) -> None:
        """Ends the open step, finishes rules, writes run_end, flushes and closes the stream.
        Idempotent; also called at interpreter exit."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._open:
                self._close_step(_now_us())
                self._advance()
        except Exception as e:
            self._fail("close step", e)
        if self._step_callbacks:
            self._run_step_callbacks("close")
        try:
            self._flush_batches()
            self._flush_device_scalars()
            self._drain_host_copies(wait=True)
        except Exception as e:
            self._fail("close", e)
        try:
            self._stop_profiler()
        except Exception as e:
            self._fail("profiler", e)
        for h in self._handles:
            try:
                h.remove()
            except Exception:
                pass
        self._handles = []
        self._remove_step_hooks()
        for obj in self._optimizers + self._scalers:
            try:
                del obj.step  # back to the class's method
            except Exception:
                pass
        _GradNormRecorder.remove(self)
        if self._dist is not None:
            self._dist.close()
        if self._stack_watch is not None:
            self._stack_watch.stop()
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
                w.add_event("run_end", json.dumps({
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
            for name, obj, method in (("rules", self._rule_runner, "stop"),
                                      ("rank rules", self._cross_runner, "stop"),
                                      ("custom rules", self._py_rules, "stop"),
                                      ("system monitor", self._sampler, "stop")):
                if obj is not None:
                    try:
                        getattr(obj, method)()
                    except Exception as e:
                        self._fail(name, e)
            try:
                err = w.close()
                if err:
                    log.warning("trainscope: writer closed with an error: %s", err)
            except Exception as e:
                self._fail("close", e)
            self._clock.set_writer(None)  # a loader wrapper used after close records nothing
        _unregister_atexit(self._atexit)

    def __enter__(self) -> "Hook":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def storage_estimate(self) -> dict:
        """Bytes written so far (estimate) and per collection, and the projection for
        expected_steps with the current configuration."""
        return {"bytes": self._bytes_estimate, "by_collection": dict(self._bytes_by_collection),
                "projected_bytes": self._projected_bytes(),
                "budget_bytes": self.storage_budget_bytes}

    def writer_stats(self) -> Optional[dict]:
        try:
            return self._writer.stats() if self._writer is not None else None
        except Exception:
            return None

    def rule_statuses(self) -> dict:
        """Current statuses of in-process rules: {rule: {"status", "message", ...}}."""
        out = {}
        try:
            for runner in (self._rule_runner, self._cross_runner):
                if runner is not None:
                    for s in runner.statuses():
                        out[s["rule"]] = s
            if self._py_rules is not None:
                out.update(self._py_rules.statuses())
        except Exception as e:
            self._fail("rule_statuses", e)
        return out

    # ========================================================================== torch hooks
    # The model's forward pre/post hooks, the criterion's forward hook, the optimizer wrapper
    # and the loader iterator are the clock's (C). They call the _slow_* methods below when a
    # step needs more than counting, timing and the loss.
    def _slow_close_pre(self) -> None:
        """Closing a step with a save in progress or device losses queued."""
        if self._plan is not None:
            self._end_save()
        if len(self._device_scalars) >= 16:
            self._flush_device_scalars()
        elif self._host_copies:
            self._drain_host_copies()
        self._clock.dev_scalars = bool(self._device_scalars) or bool(self._host_copies)

    def _slow_close_post(self) -> None:
        """A step closed inside the profiling window: the window ends with it (its last step,
        or the hook is closing) or goes on to the next step."""
        p = self._profiling
        if p is None:
            return
        if self._closed or self.step_count + 1 >= self.profiler.end_step:
            self._stop_profiler()
        else:
            p.step(self.step_count)

    def _slow_stop_check(self) -> None:
        """Every stop_check_interval_ms at a step start: hands the step records over to the
        core. The committer thread commits them and polls for stops at its own cadence; without
        it, or when stops are to be checked more often, the training thread does that too."""
        if self._host_copies:
            self._drain_host_copies()
        if self._committing:
            self._flush_pending()
        else:
            self._commit()
        if self._poll_often or not self._committing:
            self._poll_stop()

    def _slow_profile_start(self) -> None:
        if self.profiler is not None and self._profiling is None:
            self._start_profiler()

    def _slow_begin_save(self, mode: int, ms: int) -> None:
        """A step at or past the next save step of its mode begins."""
        mode = Mode(mode)
        if self._saving and self._writer is not None:
            self._next_save[mode] = self._compute_next_save(mode, ms + 1)
            self._begin_save(mode, ms)
        else:
            self._next_save[mode] = NEVER

    def _slow_loss_next(self, mode: int, ms: int) -> tuple:
        """(next, every, end): the losses save at `next` >= ms and, when every > 0, every
        `every` steps after it while below `end` (the clock follows that without asking)."""
        c = self._loss_coll
        if c is None:
            return NEVER, 0, NEVER
        nxt = c.next_save(Mode(mode), ms, self.save_interval)
        if nxt >= NEVER or c.save_steps is not None:
            return nxt, 0, NEVER
        return nxt, c.interval(self.save_interval), NEVER if c.end_step is None else c.end_step

    def _slow_loss(self, index: int, output) -> None:
        """A loss on a device (summed there, copied in a batch) or with several elements."""
        name = self._loss_names[index]
        mode = self.mode
        ms = self._mode_steps[mode]
        if self.device_stats == "torch" or not output.is_cpu:
            out = output.detach()
            if out.numel() != 1:
                out = out.float().mean()
            self._device_scalars.append((name, out.reshape(()), self.step_count, mode, ms))
            self._clock.dev_scalars = True
        else:
            raw = float(output.detach().float().mean())
            v = self._step_mean(name, self.step_count, mode, raw)
            self._clock.pend_scalar(name, self.step_count, int(mode), ms, v, _now_us())
            if self._nonfinite_stops:
                self._check_nonfinite(name, raw, self.step_count)

    def _slow_nonfinite_loss(self, index: int, value: float) -> None:
        """The clock read a NaN/Inf loss while a rule stops training on one
        (clock.nonfinite_stop): stop at this step's boundary."""
        self._check_nonfinite(self._loss_names[index], value, self.step_count)

    _nonfinite_stops: list = []  # rules.NonfiniteStop of the rules that stop on a NaN loss

    def _check_nonfinite(self, name: str, value: float, step: int) -> None:
        if math.isfinite(value) or self._stop_reason is not None:
            return
        for ns in self._nonfinite_stops:
            if ns.violated(name, value, step):
                reason = f"{ns.rule_id}: {name} is {value} at step {step}"
                try:
                    if self._writer is not None:
                        self._writer.add_event("nonfinite_loss_stop", json.dumps({
                            "rule": ns.rule_id, "tensor": name, "value": str(value),
                            "step": step}))
                except Exception:
                    pass
                self._request_stop_inprocess(reason, source="rule")
                return

    def _slow_dev_losses(self) -> None:
        """The clock kept 16 one-element device losses: start their copy to the host."""
        self._flush_device_scalars()

    def _take_dev_losses(self) -> None:
        """Moves the device losses the clock kept (detached, not yet copied) to
        _device_scalars."""
        for index, value, step, mode, ms in self._clock.take_dev_losses():
            self._device_scalars.append((self._loss_names[index], value, step, MODES[mode], ms))

    def _slow_opt_flush(self) -> None:
        if self._plan is not None:
            self._slow_grads(final=True)
            self._flush_batches(device=False)

    def _slow_grads(self, final: bool = False) -> None:
        """Queues the gradients the clock kept (its hooks fire on save steps) and writes the
        CPU summaries: when the last hooked gradient arrived, at backward end, at
        optimizer.step() and at the end of the step, whichever comes first. For a DDP model
        only the last two (``final``): DDP replaces each local gradient in place with the
        ranks' average when its all-reduce completes, after the gradient hooks fired."""
        if self._grads_final_only and not final:
            return
        items = self._clock.take_grads()
        plan = self._plan
        if not items or plan is None:
            return
        names = self._params
        scale = self._grad_scale() if self._scalers else None
        batch = []
        for index, grad in items:
            if scale is not None:  # GradScaler: the gradients the optimizer will use
                if not isinstance(scale, float) and scale.device != grad.device:
                    scale = scale.to(grad.device)
                grad = grad / scale
            for full, flags, coll in plan.grads.get(names[index][0], ()):
                batch.append((full, grad, flags, coll))
        self._save_items(batch)
        self._flush_batches(device=False)

    def _grad_scale(self):
        """The loss scale of this step's backward (a float, or a device tensor: no sync) of
        the first enabled registered GradScaler; None without one or at scale 1."""
        for scaler in self._scalers:
            t = getattr(scaler, "_scale", None)
            if t is None:
                continue
            if t.is_cpu and self.device_stats != "torch":
                v = float(t)
                return None if v == 1.0 else v
            return t  # divided on its device (no sync)
        return None

    def _record_grad_norm(self, norm) -> None:
        """clip_grad_norm_ returned `norm`: grad_norm/total at the current step
        (_GradNormRecorder)."""
        try:
            if self._writer is None or self._closed:
                return
            mode = self.mode
            ms, step = self._mode_steps[mode], self.step_count
            if norm.is_cpu and self.device_stats != "torch":
                self._clock.pend_scalar(GRAD_NORM_TOTAL, step, int(mode), ms, float(norm),
                                        _now_us())
            else:
                self._device_scalars.append((GRAD_NORM_TOTAL, norm.detach().reshape(()), step,
                                             mode, ms))
                self._clock.dev_scalars = True
        except Exception as e:
            self._fail("grad norm", e)

    def _step_mean(self, name: str, step: int, mode, value: float) -> float:
        """The mean of `name`'s values in (step, mode) so far, this one included: several
        calls of a criterion in one step (gradient accumulation) record their mean, as the
        clock does for CPU losses."""
        m = self._step_means.get(name)
        if m is None or m[0] != step or m[1] != int(mode):
            self._step_means[name] = [step, int(mode), value, 1]
            return value
        m[2] += value
        m[3] += 1
        return m[2] / m[3]

    def _queue_backward_end(self) -> None:
        """Asks autograd to call _on_backward_end when this backward pass finishes."""
        try:
            queue = self._queue_callback
            if queue is None:
                import torch
                queue = self._queue_callback = \
                    torch.autograd.Variable._execution_engine.queue_callback
            queue(self._on_backward_end)
        except Exception as e:
            self._fail("backward callback", e)

    _queue_callback = None

    def _on_backward_end(self) -> None:
        try:
            if not self._optimizers:  # else backward ends where optimizer.step() starts
                self._clock.mark_backward_end(time.perf_counter_ns())
            self._slow_grads()
            self._flush_batches(device=False)
        except Exception as e:
            self._fail("gradients", e)

    def _on_output(self, mname: str, module, inputs, output):
        try:
            if self._plan is None:
                return None
            key = ("o", mname)
            if key in self._seen_outputs:
                return None
            self._seen_outputs.add(key)
            items = []
            for full, flags, coll in self._plan.outputs.get(mname, ()):
                for suffix, t in _tensors_in(output):
                    items.append((full + suffix, t, flags, coll))
            self._save_items(items)
            # CPU summaries now: a later in-place op (ReLU(inplace)) may change the tensor;
            # device rows were already enqueued on the stream, they are copied at step end
            self._flush_batches(device=False)
        except Exception as e:
            self._fail("activations", e)
        return None

    def _on_input(self, mname: str, module, inputs):
        try:
            if self._plan is None:
                return None
            key = ("i", mname)
            if key in self._seen_outputs:
                return None
            self._seen_outputs.add(key)
            items = []
            value = inputs[0] if isinstance(inputs, tuple) and len(inputs) == 1 else inputs
            for full, flags, coll in self._plan.inputs.get(mname, ()):
                for suffix, t in _tensors_in(value):
                    items.append((full + suffix, t, flags, coll))
            self._save_items(items)
            self._flush_batches(device=False)
        except Exception as e:
            self._fail("inputs", e)
        return None

    # ====================================================================== step machinery
    def _advance(self) -> None:
        self._clock.advance()

    def _open_step(self, now_us: int) -> None:
        """Begins the current step: timing, stop checks, and on save steps the save plan."""
        self._clock.open_step(now_us)

    def _close_step(self, now_us: int) -> None:
        self._clock.close_step(now_us)

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

    def _begin_save(self, mode: Mode, ms: int) -> None:
        active = self._active_collections(mode, ms)
        if not active or self._model is None:
            return
        if self._clock.in_compiled and not self._compiled:
            # The model's forward runs inside torch.compile'd code (registered before
            # torch.compile, module.compile(), a compiled training step): layer hooks from now
            # on would be traced into it; those kept from an eager save step go.
            self._compiled = True
            self._remove_step_hooks()
        plan = self._plan_cache.get(active)
        if plan is None:
            plan = self._make_plan(active)
            self._plan_cache[active] = plan
        if plan.empty():
            return
        self._plan = plan
        self._seen_outputs.clear()
        if plan.params:
            # Summarised with the gradients (one core call, during backward and so still
            # before optimizer.step() changes them) when this step has gradient hooks.
            self._save_items(plan.params)
        if self._hooked_plan is plan:  # kept from the previous step, which saved the same
            self._clock.grad_begin(self._hooked_grads, len(self._params))
            if plan.params and not self._hooked_grads:
                self._flush_batches(device=False)
            return
        self._remove_step_hooks()
        self._hooked_plan = plan
        pending = 0
        if plan.grads:
            for pname in plan.grads:
                index = self._param_index.get(pname)
                p = None if index is None else self._params[index][1]
                if p is not None and p.requires_grad:
                    # after accumulation, reading .grad: a tensor hook keeping the incoming
                    # gradient makes torch copy it (see kGrad in step_clock.cc)
                    self._step_handles.append(p.register_post_accumulate_grad_hook(
                        self._clock.callback(3, index)))
                    self._hooked_params.append(p)
                    pending += 1
        self._hooked_grads = pending
        self._clock.grad_begin(pending, len(self._params))
        if plan.params and not pending:  # no gradient will come: now
            self._flush_batches(device=False)
        for names, pre, fn in ((plan.outputs, False, self._on_output),
                               (plan.inputs, True, self._on_input)):
            for mname in names:
                m = self._modules.get(mname)
                if m is None:
                    continue
                if self._compiled or mname in self._compiled_modules:
                    self._note_compiled_layer(mname)
                    continue
                register = m.register_forward_pre_hook if pre else m.register_forward_hook
                self._step_handles.append(register(functools.partial(fn, mname)))

    def _note_compiled_layer(self, mname: str) -> None:
        """A layer hook not installed because the layer runs in compiled code: said once."""
        if self._warned_compiled:
            return
        self._warned_compiled = True
        msg = (f"trainscope: layer {mname!r} (and any other) runs inside torch.compile'd code: "
               "its activations/inputs are not recorded (a hook there would be traced into "
               "the graph); the model's parameters and gradients are")
        log.warning(msg)
        self.add_event("torch_compile", {"message": msg, "layer": mname,
                                         "step": self.step_count})

    _warned_compiled = False

    def _end_save(self) -> None:
        self._slow_grads(final=True)
        plan, self._plan = self._plan, None
        if not self._next_step_saves(plan):
            self._remove_step_hooks()
        self._flush_batches()
        self._flush_device_scalars()

    def _next_step_saves(self, plan) -> bool:
        """True when the next step of this mode saves with the same plan: its step hooks
        (gradients, activations) then stay installed instead of being removed and added
        again, which costs more than the summaries themselves on small models."""
        mode = self.mode
        nxt = self._mode_steps[mode] + 1
        if self._next_save.get(mode) != nxt:
            return False
        return self._plan_cache.get(self._active_collections(mode, nxt)) is plan

    def _remove_step_hooks(self) -> None:
        for h in self._step_handles:
            try:
                h.remove()
            except Exception:
                pass
        self._step_handles = []
        self._hooked_plan = None
        self._hooked_grads = 0
        params, self._hooked_params = self._hooked_params, []
        for p in params:
            # Removing a tensor hook leaves torch's C++ hook on the parameter, which calls into
            # Python on every later backward to find the dict empty (~1 µs per parameter and
            # step). Setting the dict to None removes that too; a user's hooks are kept.
            try:
                if p._backward_hooks is not None and not p._backward_hooks:
                    p._backward_hooks = None
                if (p._post_accumulate_grad_hooks is not None
                        and not p._post_accumulate_grad_hooks):
                    p._post_accumulate_grad_hooks = None
            except Exception:
                pass

    # ============================================================================ selection
    def _compute_targets(self) -> Dict[str, dict]:
        """Per collection: the tensors it selects, by source."""
        out = {}
        leaf = self._leaf_modules()
        for c in self._tensor_colls:
            t = {"param": [], "grad": [], "output": [], "input": []}
            try:
                src = c.source
                if src == "param":
                    for pname, _ in self._params:
                        is_bias = pname.rsplit(".", 1)[-1].startswith("bias")
                        if (c.name == "biases") != is_bias:
                            continue
                        full = f"{c.name}/{pname}"
                        if c.matches(full, pname):
                            t["param"].append((pname, full))
                elif src == "grad":
                    for pname, p in self._params:
                        full = f"gradients/{pname}"
                        if p.requires_grad and c.matches(full, pname):
                            t["grad"].append((pname, full))
                elif src in ("output", "input"):
                    types_ = c.module_types
                    for mname, m in self._modules.items():
                        if types_ is not None:
                            if type(m).__name__ not in types_:
                                continue
                        elif not c.include_patterns and mname not in leaf:
                            continue
                        full = f"{c.name}/{mname}"
                        if c.matches(full, mname):
                            t[src].append((mname, full))
                elif c.include_patterns:  # custom: any canonical name matching include
                    for pname, p in self._params:
                        is_bias = pname.rsplit(".", 1)[-1].startswith("bias")
                        full = f"{'biases' if is_bias else 'weights'}/{pname}"
                        if c.matches(full):
                            t["param"].append((pname, full))
                        full = f"gradients/{pname}"
                        if p.requires_grad and c.matches(full):
                            t["grad"].append((pname, full))
                    for mname in self._modules:
                        for src2, pre in (("output", "activations"), ("input", "inputs")):
                            full = f"{pre}/{mname}"
                            if c.matches(full):
                                t[src2].append((mname, full))
            except Exception as e:
                if self.strict:
                    raise
                self._fail(f"collection {c.name}", e)
            out[c.name] = t
            if self._model is not None and not any(t.values()):
                log.warning("trainscope: collection %r selects no tensor of the model", c.name)
        return out

    def _leaf_modules(self) -> set:
        """Modules without submodules a hook can go on: the leaves, and the OptimizedModule
        wrapper of a compiled submodule (the layers inside it are leaves too, but get no hooks:
        see _modules_of)."""
        compiled = self._compiled_modules
        inner = set()  # modules with a hookable module below them
        for n in self._modules:
            if n not in compiled:
                parts = n.split(".")
                inner.update(".".join(parts[:i]) for i in range(1, len(parts)))
        return {n for n, m in self._modules.items()
                if (n not in compiled and n not in inner)
                or (n in compiled and not any(True for _ in m.children()))}

    def _make_plan(self, active: Sequence[str]) -> _Plan:
        plan = _Plan()
        by_name = {c.name: c for c in self._tensor_colls}
        params = dict(self._params)
        seen_params: Dict[str, int] = {}
        for cname in active:
            c = by_name[cname]
            flags = (c.raw, c.reductions, c.histogram_buckets)
            t = self._targets.get(cname) or {}
            for pname, full in t.get("param", ()):
                if full in seen_params:
                    i = seen_params[full]
                    plan.params[i] = plan.params[i][:2] + (_merge(plan.params[i][2], flags),
                                                           plan.params[i][3])
                    continue
                seen_params[full] = len(plan.params)
                plan.params.append((full, params[pname], flags, cname))
            for src, dest in (("grad", plan.grads), ("output", plan.outputs),
                              ("input", plan.inputs)):
                for key, full in t.get(src, ()):
                    lst = dest.setdefault(key, [])
                    for i, (f2, fl2, c2) in enumerate(lst):
                        if f2 == full:
                            lst[i] = (f2, _merge(fl2, flags), c2)
                            break
                    else:
                        lst.append((full, flags, cname))
        return plan

    # =============================================================================== saving
    def _save_items(self, items) -> None:
        """Queues tensors: CPU ones for one batched core call, others for the device batch."""
        if not items or not self._saving:
            return
        cpu_summaries = self.device_stats != "torch"
        cpu_batch = self._cpu_batch
        summary_bytes = self._unaccounted  # accounted at the next _flush_batches
        for full, t, (raw, red, buckets), coll in items:
            if _is_dtensor(t):
                # FSDP2 / tensor-parallel shards: this rank's shard, under the full name (a
                # DTensor's numel and data_ptr describe different tensors: never read in place)
                t = t.to_local()
            on_cpu = getattr(t, "is_cpu", True)
            if red:
                summary_bytes[coll] = summary_bytes.get(coll, 0) + SUMMARY_BYTES
                if on_cpu and cpu_summaries:
                    cpu_batch.append((full, t, buckets))
                else:
                    if self._device_batch is None:
                        from ._device_stats import DeviceBatch
                        self._device_batch = DeviceBatch()
                    code = torch_to_buffer_code(t)
                    self._device_batch.add(full, t, code)
            if raw and not self._raw_disabled:
                tc = t.detach()
                if not on_cpu:
                    tc = tc.to("cpu")
                arr, code, shape = torch_to_buffer(tc)
                self._flush_pending()  # keep records in step order
                self._writer.add_raw(full, self.step_count, int(self.mode),
                                     self._mode_steps[self.mode], arr, code, list(shape))
                self._account(coll, arr.nbytes)  # now: may switch raw saving off

    def _flush_batches(self, device: bool = True) -> None:
        """Writes queued CPU summaries (one core call) and, with device=True, the device
        table (one device-to-host copy, together with pending device losses)."""
        w = self._writer
        if self._unaccounted:
            pending_bytes, self._unaccounted = self._unaccounted, {}
            for coll, nbytes in pending_bytes.items():
                self._account(coll, nbytes)
        if w is None:
            self._cpu_batch = []
            return
        b = self._device_batch
        if not self._cpu_batch and not (device and b is not None and len(b)):
            return
        self._flush_pending()  # keep the records in step order
        clock = self._clock
        step, mode = clock.step, clock.mode
        ms = clock.get(0, mode)
        if self._cpu_batch:
            batch, self._cpu_batch = self._cpu_batch, []
            # Contiguous tensors of known dtypes are read in place by the core (one call; no
            # numpy array per tensor); it hands back the others.
            rest = w.add_summaries_batch(batch, step, mode, ms, _torch_codes())
            groups: Dict[int, tuple] = {}  # buckets -> names, arrays, codes, shapes (numpy)
            for i in rest:
                full, t, buckets = batch[i]
                arr, code, shape = torch_to_buffer(t)  # other dtypes, non-contiguous
                g = groups.setdefault(buckets, ([], [], [], []))
                g[0].append(full)
                g[1].append(arr)
                g[2].append(code)
                g[3].append(shape)
            for buckets, (names, arrs, codes, shapes) in groups.items():
                w.add_summaries(names, step, mode, ms, arrs, codes, shapes, buckets)
            del batch
        if device and b is not None and len(b):
            try:
                self._take_dev_losses()
                scalars, self._device_scalars = self._device_scalars, []
                pending = b.copy_with_scalars([v for _, v, _, _, _ in scalars])
                self._host_copies.append((pending, functools.partial(
                    self._write_table, b.names, step, mode, ms, b.dtypes,
                    [list(s) for s in b.shapes], scalars)))
            finally:
                b.clear()
            self._drain_host_copies()

    def _write_table(self, names, step, mode, ms, dtypes, shapes, scalars, result) -> None:
        self._writer.add_summary_table(names, step, mode, ms, dtypes, shapes, result[0])
        self._write_device_scalars(scalars, result)

    def _drain_host_copies(self, wait: bool = False) -> None:
        """Writes the device copies that have landed (all of them with wait=True), oldest
        first, stopping at the first still in flight."""
        q = self._host_copies
        while q and (wait or q[0][0].ready()):
            pending, write = q.popleft()
            try:
                if self._writer is not None:
                    write(pending.result())
            except Exception as e:
                self._fail("device copy", e)

    def _commit_loop(self) -> None:
        w = self._writer
        try:
            while not self._committer_stop.wait(self._commit_interval_s):
                try:
                    w.commit()  # releases the GIL
                except Exception:
                    return
                self._poll_stop()  # a rule's stop action, `trainscope stop`, the dashboard
        finally:
            self._committing = False  # the training thread commits and polls from now on

    def _commit(self) -> None:
        """Hands everything recorded so far to the writer thread (one wake-up)."""
        self._flush_pending()
        w = self._writer
        if w is not None:
            w.commit()

    def _flush_pending(self) -> None:
        self._clock.flush_pending()
        if self._comm_timing is not None and self._writer is not None:
            self._comm_timing.flush(self._writer, self.step_count)  # after its step records

    def _flush_device_scalars(self) -> None:
        """Starts the copy of the queued device losses (one per device, not waiting)."""
        self._take_dev_losses()
        if not self._device_scalars:
            return
        pending, self._device_scalars = self._device_scalars, []
        from ._device_stats import PendingTable
        by_dev: Dict[Any, list] = {}
        for item in pending:
            by_dev.setdefault(item[1].device, []).append(item)
        for _, items in by_dev.items():
            copy = PendingTable([], [v for _, v, _, _, _ in items])
            self._host_copies.append((copy, functools.partial(self._write_device_scalars,
                                                              items)))
        self._drain_host_copies()

    def _write_device_scalars(self, items, result) -> None:
        for (name, _, step, mode, ms), v in zip(items, result[1]):
            if name.startswith("losses/"):
                if self._nonfinite_stops:  # a device loss: seen once its copy arrived
                    self._check_nonfinite(name, float(v), step)
                v = self._step_mean(name, step, mode, float(v))
            elif name == AMP_SKIPPED:  # a fused optimizer's found_inf, every step
                v = 1.0 if v > 0 else 0.0
            self._write_scalar(name, v, step, mode, ms)

    def _write_scalar(self, name: str, value, step: int, mode: Mode, ms: int) -> None:
        w = self._writer
        if w is None:
            return
        self._flush_pending()
        try:
            v = float(value)
        except TypeError:
            v = float(value.detach().float().mean())
        w.add_scalar(name, step, int(mode), ms, v)

    # ============================================================================== storage
    def _account(self, coll: str, nbytes: int) -> None:
        if not nbytes:
            return
        self._bytes_estimate += nbytes
        self._bytes_by_collection[coll] = self._bytes_by_collection.get(coll, 0) + nbytes
        budget = self.storage_budget_bytes
        if not budget:
            return
        if not self._raw_disabled and self._bytes_estimate >= budget * 0.9:
            self._raw_disabled = True
            self._warn_once("budget", f"trainscope: storage budget {budget} bytes nearly used "
                            f"({self._bytes_estimate} bytes); raw tensors are no longer saved")
        if not self._bytes_projected_warned:
            # A collection's bytes per save are those of its first save step; the projection
            # only grows when those do.
            if self._first_save_step.setdefault(coll, self.step_count) != self.step_count:
                return
            self._first_save_bytes[coll] = self._first_save_bytes.get(coll, 0) + nbytes
            if self._projected_bytes() > budget:
                self._bytes_projected_warned = True
                self._warn_once("projection", (
                    f"trainscope: this configuration projects to {self._projected_bytes() / GB:.1f} GB "
                    f"over {self.expected_steps} steps, past the budget of {budget / GB:.1f} GB "
                    "(storage_budget_bytes); raw tensors will be dropped first"))

    def _projected_bytes(self) -> int:
        total = 0
        by_name = {c.name: c for c in self.collections}
        for coll, b in self._first_save_bytes.items():
            c = by_name.get(coll)
            interval = c.interval(self.save_interval) if c is not None else self.save_interval
            saves = self.expected_steps // interval + 1
            if c is not None and c.save_steps is not None:
                saves = len(c.save_steps)
            total += b * saves
        return total

    def _project_storage(self) -> None:
        """At registration: bytes per save of weights/biases/gradients (known shapes)."""
        sizes = {n: p.numel() * p.element_size() for n, p in self._params}
        for c in self._tensor_colls:
            t = self._targets.get(c.name) or {}
            b = 0
            for pname, _ in list(t.get("param", ())) + list(t.get("grad", ())):
                b += (SUMMARY_BYTES if c.reductions else 0) + (sizes.get(pname, 0) if c.raw else 0)
            if b and c.source in ("param", "grad"):  # sizes fully known: no need to observe
                self._first_save_bytes[c.name] = b
                self._first_save_step[c.name] = -1
        budget = self.storage_budget_bytes
        if budget and not self._bytes_projected_warned and self._projected_bytes() > budget:
            self._bytes_projected_warned = True
            self._warn_once("projection", (
                f"trainscope: this configuration projects to {self._projected_bytes() / GB:.1f} GB "
                f"over {self.expected_steps} steps, past the budget of {budget / GB:.1f} GB "
                "(storage_budget_bytes); raw tensors will be dropped first"))

    def _warn_once(self, key: str, message: str) -> None:
        if ("warn", key) in self._errors:
            return
        self._errors[("warn", key)] = 1
        log.warning(message)
        try:
            if self._writer is not None:
                self._writer.add_event("storage_warning", json.dumps({"message": message}))
        except Exception:
            pass

    # ================================================================================ stops
    def _poll_stop(self) -> None:
        if self._stop_reason is not None:
            return
        try:
            for r in (self._rule_runner, self._cross_runner):
                if r is not None and r.stop_requested():
                    self._request_stop_inprocess(r.stop_reason() or "rule stop_training action")
                    return
            req = _core.stop_request(self.out_dir)
            if req is None:
                return
            ok, text = req
            if ok:
                self._request_stop_inprocess(text or "stop requested", source="control")
            elif text != self._bad_stop_request:
                # anyone who can write the run directory can write this file: a malformed
                # request is said once (per distinct problem) and ignored, not a hook error
                self._bad_stop_request = text
                log.warning("trainscope: ignoring a malformed stop request: %s", text)
                if self._writer is not None:
                    self._writer.add_event("stop_request_invalid", json.dumps({
                        "message": text, "step": self.step_count}))
        except Exception as e:
            self._fail("stop check", e)

    _bad_stop_request: Optional[str] = None

    def _request_stop_inprocess(self, reason: str, source: str = "rule") -> None:
        d = self._dist
        if d is not None and d.defer(reason, source):
            return  # all ranks take it together at the next agreed boundary
        with self._lock:
            if self._stop_reason is not None:
                return
            self._stop_reason = reason or "stop requested"
            self._clock.raise_stop = self.raise_on_stop  # at the next step boundary
        log.warning("trainscope: stop requested (%s): %s", source, reason)
        try:
            if self._writer is not None:
                self._writer.add_event("stop_requested", json.dumps({
                    "reason": reason, "source": source, "step": self.step_count}))
        except Exception:
            pass

    def _maybe_raise_stop(self) -> None:
        if self._stop_reason is not None and self.raise_on_stop and not self._stop_raised:
            self._stop_raised = True
            self._clock.raise_stop = False
            if self._step_callbacks:
                self._run_step_callbacks("stop")  # e.g. a final checkpoint
            try:
                if self._writer is not None:
                    self._writer.add_event("stop_honoured", json.dumps({
                        "reason": self._stop_reason, "step": self.step_count}))
            except Exception:
                pass
            raise TrainingStopped(self._stop_reason)

    # ============================================================================= profiler
    def _start_profiler(self) -> None:
        try:
            from ._profiler import ProfilerWindow
            self._profiling = ProfilerWindow(self.profiler, self.out_dir, self.worker)
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
            if self._writer is not None:
                self._flush_pending()  # keep records in step order
                self._writer.add_event("profiler_window", json.dumps(info))
        except Exception as e:
            self._fail("profiler", e)

    # =============================================================================== errors
    def _fail(self, where: str, exc: BaseException) -> None:
        """Counts an internal error, logs it once per place, records it, degrades."""
        try:
            self.error_count += 1
            n = self._errors.get(where, 0) + 1
            self._errors[where] = n
            msg = f"{type(exc).__name__}: {exc}"
            if n == 1:
                log.warning("trainscope: internal error in %s (training continues): %s",
                            where, msg)
            if self._writer is not None and (n == 1 or n % 100 == 0):
                self._writer.add_event("hook_error", json.dumps({
                    "where": where, "message": msg, "count": n, "total": self.error_count,
                    "step": self.step_count}))
            if self.error_count >= self._max_errors and self._saving:
                self._saving = False
                if threading.get_ident() == self._owner_thread:
                    self._plan = None  # else the training thread's next save check sees it
                log.warning("trainscope: %d internal errors; the hook stops saving tensors",
                            self.error_count)
        except Exception:
            pass

    @property
    def errors(self) -> Dict[str, int]:
        """Internal errors by place (the hook's degraded operations)."""
        return {k: v for k, v in self._errors.items() if isinstance(k, str)}

    # ========================================================== checkpoints (checkpoint.py)
    _step_callbacks: tuple = ()  # set through add/remove_step_callback (the clock's flag)
    _rollback = None        # {"rules": [ids], "action": ts.Rollback} from rules/actions
    _checkpointer = None    # the ts.Checkpointer following this hook, if any

    def add_step_callback(self, fn) -> None:
        """Calls ``fn(event)`` on the training thread: "step" after every step boundary
        (counters already advanced), "stop" before TrainingStopped is raised, "close" when
        the hook closes. Exceptions are counted as hook errors; SystemExit passes."""
        self._step_callbacks = self._step_callbacks + (fn,)
        self._clock.step_callbacks = True

    def remove_step_callback(self, fn) -> None:
        self._step_callbacks = tuple(f for f in self._step_callbacks if f != fn)
        self._clock.step_callbacks = bool(self._step_callbacks)

    def _run_step_callbacks(self, event: str) -> None:
        for fn in self._step_callbacks:
            try:
                fn(event)
            except TrainingStopped:
                raise
            except Exception as e:
                self._fail("step callback", e)

    def add_event(self, kind: str, fields: Optional[dict] = None) -> bool:
        """Records a generic event (EventRecord) of `kind` with a JSON object of `fields`."""
        try:
            if self._writer is None:
                return False
            if self._clock.pending_count and threading.get_ident() == self._owner_thread:
                self._flush_pending()  # keep records in step order (training thread only)
            return bool(self._writer.add_event(kind, json.dumps(fields or {}, default=str)))
        except Exception as e:
            self._fail("event", e)
            return False

    def flush(self) -> None:
        """Blocks until everything recorded so far is written (not for every step)."""
        try:
            if self._writer is not None and not self._closed:
                self._flush_device_scalars()
                self._drain_host_copies(wait=True)
                self._flush_pending()
                self._writer.flush()
        except Exception as e:
            self._fail("flush", e)

    def state_dict(self) -> dict:
        """The step counters, so a resumed or rolled-back training continues the series: the
        step the next forward (or ``hook.step()``) begins. Taken in the loop after
        ``optimizer.step()``, the open step whose forward has run counts as done."""
        steps = {m: s for m, s in self._mode_steps.items()}
        step = self.step_count
        if self._open and self._clock.forward_done:
            step += 1
            steps[self.mode] += 1
        return {"step_count": step, "mode": int(self.mode),
                "mode_steps": {str(int(m)): s for m, s in steps.items()}}

    def load_state_dict(self, state: dict) -> None:
        """Restores the step counters (at a step boundary); the steps recorded next overwrite
        any recorded after them (the store's "last record wins")."""
        if self._open:
            self._close_step(_now_us())
            self._advance_quiet()
        self.step_count = int(state.get("step_count", 0))
        for m, s in (state.get("mode_steps") or {}).items():
            self._mode_steps[Mode(int(m))] = int(s)
        self._reset_save_schedule()
        self._plan = None

    def _advance_quiet(self) -> None:
        self._clock.advance(True)


def _is_dtensor(t) -> bool:
    """A torch.distributed DTensor (sharded or replicated parameters and gradients)."""
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def torch_to_buffer_code(t) -> int:
    from ._dtypes import FLOAT64, _torch_codes
    return _torch_codes().get(t.dtype, FLOAT64)


def _merge(a: tuple, b: tuple) -> tuple:
    return (a[0] or b[0], a[1] or b[1], max(a[2], b[2]))


def _tensors_in(value, prefix: str = "", depth: int = 0):
    """(suffix, tensor) pairs in a module's output: a tensor, or tuples/lists/dicts of them;
    anything else is ignored."""
    import torch
    if isinstance(value, torch.Tensor):
        yield prefix, value
    elif depth < 2 and isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from _tensors_in(v, f"{prefix}/{i}", depth + 1)
    elif depth < 2 and isinstance(value, dict):
        for k, v in value.items():
            yield from _tensors_in(v, f"{prefix}/{k}", depth + 1)


def _plain_name(name: str) -> str:
    """A parameter or module name without the ``_orig_mod`` parts torch.compile adds
    (``_orig_mod.fc1.weight`` -> ``fc1.weight``): names are those of the uncompiled model."""
    if "_orig_mod" not in name:
        return name
    return ".".join(p for p in name.split(".") if p != "_orig_mod")


def _modules_of(root):
    """({name: module}, {names of the modules whose forward runs inside compiled code}), named
    as in the uncompiled model. A submodule compiled with torch.compile is kept as its
    OptimizedModule wrapper, whose hooks run outside the compiled code; the modules inside it,
    every submodule of a compiled root, and modules compiled in place (``module.compile()``)
    with theirs are in the second set: hooks on them are traced by dynamo (graph breaks, and
    a hook removed after its save step would still be called by the compiled code)."""
    modules, compiled = {}, set()
    in_place = []  # names of modules compiled with module.compile()
    for name, m in root.named_modules():
        if getattr(m, "_compiled_call_impl", None) is not None:
            in_place.append(name)
        plain = _plain_name(name)
        if not plain or plain in modules:  # the root, or the module an OptimizedModule wraps
            continue
        modules[plain] = m
        if "_orig_mod" in name.split(".")[:-1] or any(
                not p or name == p or name.startswith(p + ".") for p in in_place):
            compiled.add(plain)
    return modules, compiled


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


class _GradNormRecorder:
    """Records the total norm of every ``torch.nn.utils.clip_grad_norm_`` call as
    ``grad_norm/total`` at the current step of each open hook with a registered model.

    While such a hook exists, the function clip_grad_norm_ looks up at each call to compute the
    norm (``torch.nn.utils.clip_grad._get_total_norm``) is replaced by one that also hands the
    norm to the hooks, so a clip_grad_norm_ imported before the hook was created is covered too;
    nothing of ours runs when clip_grad_norm_ is not called. Where torch has no such function,
    ``clip_grad_norm_`` itself is replaced in ``torch.nn.utils`` and its module (calls through
    a name imported earlier are then not seen). Restored when the last hook closes."""

    _hooks: "weakref.WeakSet[Hook]" = weakref.WeakSet()
    _patched: List[tuple] = []  # (module, attribute, original, ours)
    _NORM_FUNCTION = "_get_total_norm"  # in torch.nn.utils.clip_grad where torch has it

    @classmethod
    def add(cls, hook: Hook) -> None:
        cls._hooks.add(hook)
        if cls._patched:
            return
        import torch.nn.utils
        from torch.nn.utils import clip_grad
        if hasattr(clip_grad, cls._NORM_FUNCTION):
            targets = [(clip_grad, cls._NORM_FUNCTION)]
        else:
            targets = [(clip_grad, "clip_grad_norm_"), (torch.nn.utils, "clip_grad_norm_")]
        for module, attr in targets:
            orig = getattr(module, attr)
            ours = cls._recording(orig)
            setattr(module, attr, ours)
            cls._patched.append((module, attr, orig, ours))

    @classmethod
    def _recording(cls, orig):
        @functools.wraps(orig)
        def recording(*args, **kwargs):
            norm = orig(*args, **kwargs)
            for h in list(cls._hooks):
                h._record_grad_norm(norm)
            return norm
        return recording

    @classmethod
    def remove(cls, hook: Hook) -> None:
        cls._hooks.discard(hook)
        if cls._hooks:
            return
        kept = []
        for module, attr, orig, ours in cls._patched:
            if getattr(module, attr, None) is ours:
                setattr(module, attr, orig)
            else:  # someone wrapped ours since: it stays in use (and records nothing)
                kept.append((module, attr, orig, ours))
        cls._patched = kept


# ---- close at exit -------------------------------------------------------------------------
_live_hooks: "weakref.WeakSet[Hook]" = weakref.WeakSet()
_atexit_installed = False


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
        _atexit_installed = True
    return hook


def _unregister_atexit(hook) -> None:
    try:
        _live_hooks.discard(hook)
    except Exception:
        pass

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
calls are the C step clock's (python/stepclock/), which counts and times the step,
reads the loss and queues one StepRecord and one scalar (about 2-3 µs). Gradient hooks and
layer forward hooks are registered only for the steps that save them and removed after them.
A rule that stops on a NaN arms the search for its origin (_nan_origin.py: a forward hook
keeping the inputs, a gradient check at backward end; docs/performance.md, "NaN origin").

PyTorch 2.1 or later: torch.compile'd models (either registration order), autocast and
low-precision tensors, torch.amp.GradScaler (``register_scaler``) and clip_grad_norm_
(``grad_norm/total``) are covered in docs/python.md.

Failure policy: nothing the hook does raises into the training loop (except TrainingStopped
when ``raise_on_stop=True``). Internal errors are logged once per place, counted, written as
``hook_error`` events, and after ``max_errors`` errors the hook stops saving tensors.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import sys
import threading
import time
import types
from collections import deque
from typing import Any, Dict, Iterable, List, Optional

from . import _core
from ._capture import Capture
from ._errors import ConfigError, check_callable, check_hook_arguments
from ._failures import FailureLog
from ._loader import _TimedLoader
from ._modes import Mode, TrainingStopped
from ._object_store import start_shipper
from ._profiler import ProfilerConfig
from ._run import (RunLifecycle, _register_atexit, _require_torch, _set_eval_frame, _worker_rank,
                   own_stream)
from ._saving import Saving
from ._schedule import SaveSchedule
from ._schema import EVENT, worker_stream
from ._step_clock import (CALLBACK_LOSS, COUNTER_LOSS_NEXT, COUNTER_MODE_STEPS, COUNTER_NEXT_SAVE,
                          MODES, ClockUpcalls, _clock_field, _ModeArray, _now_us)
from ._storage import GB, StorageAccount
from .collection import as_collections
# Names importable from here as before the hook was split into the modules above:
from ._capture import (_Plan, _is_dtensor, _merge, _modules_of,  # noqa: F401,E402
                       _plain_name, _tensors_in)
from ._run import MIN_TORCH, _torch_version, _unregister_atexit  # noqa: F401,E402
from ._saving import (AMP_LOSS_SCALE, AMP_SKIPPED, GRAD_NORM_TOTAL,  # noqa: F401,E402
                      SUMMARY_BYTES, torch_to_buffer_code)
from ._grad_norm import _GradNormRecorder  # noqa: F401,E402
from .collection import NEVER  # noqa: F401,E402

log = logging.getLogger("trainscope")

# The Hook is this facade (its public API) over modules named for what they do: _run (the
# run, background threads, stops, close), _step_clock (what the C step clock calls), _schedule
# (save steps), _capture (which tensors, save plans, torch hooks), _saving (batches, device
# copies, commits, storage); _loader, _grad_norm and _profiler are the wrappers it installs.


class Hook(RunLifecycle, ClockUpcalls, SaveSchedule, Capture, Saving):
    """Captures tensors and timings from a PyTorch training into a run directory.

    Args:
        out_dir: the run directory. Under ``trainscope run`` ($TRAINSCOPE_RUN_DIR) the hook
            writes into that run instead. Default: ./trainscope-runs/<date>-<time>-<pid>.
            A URL (s3://, gs://, file:...) is a ConfigError: a directory is needed.
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
    record_phases = _clock_field("record_phases", "Time forward, backward and optimizer.")

    storage_budget_bytes = property(
        lambda self: self._storage.budget_bytes,
        lambda self, v: setattr(self._storage, "budget_bytes", v),
        doc="Byte budget of this worker's stream (the StorageAccount's).")
    expected_steps = property(
        lambda self: self._storage.expected_steps,
        lambda self, v: setattr(self._storage, "expected_steps", v),
        doc="Steps the storage projection assumes.")

    @property
    def mode(self) -> Mode:
        """The current mode (TRAIN, EVAL or PREDICT)."""
        return MODES[self._clock.mode]

    @mode.setter
    def mode(self, mode) -> None:
        self._clock.mode = int(mode)

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
        bad = _core.check_run_location(str(out_dir)) if out_dir else None
        if bad:  # s3://..., gs://...: a clear error, never a local folder named "s3:"
            raise ConfigError("Hook", "out_dir", out_dir, "a directory path", bad)
        # ---- state that must exist even when setup fails -------------------------------
        # The per-step fast path in C (python/stepclock/) owns the step state:
        # counters, mode, the open step and its phase timings, the next save steps, and the
        # queue of StepRecords and losses. The properties below read and write it there.
        self._clock = _core.StepClock(self)
        self._clock.set_stop_type(TrainingStopped)
        self._clock.set_dynamo(_set_eval_frame())  # calls into the hook run uncompiled
        self._mode_steps = _ModeArray(self._clock, COUNTER_MODE_STEPS)
        self._next_save = _ModeArray(self._clock, COUNTER_NEXT_SAVE)  # first tensor save step
        self._loss_next = _ModeArray(self._clock, COUNTER_LOSS_NEXT)  # first loss save step
        self._loss_names: List[str] = []
        self._failures = FailureLog(args["max_errors"], lambda: self._writer,
                                    lambda: self.step_count, self._stop_saving)
        self._unwritable: Optional[str] = None  # why the run could not be opened (an OSError)
        self._unwritable_drops = 0  # save_scalar values refused since (steps: step_count)
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
        # committing in bursts: see Saving._commit_loop
        self._owner_thread = threading.get_ident()
        self._committer = None
        self._committer_stop = threading.Event()
        self._device_batch = None
        self._device_scalars: List[tuple] = []
        # copies from the device still landing in host memory, each with what writes it
        # (FIFO, so each series stays in step order): see _device_stats.HostCopy
        self._host_copies: "deque[tuple]" = deque()
        self._clock.stop_check_ns = args["stop_check_interval_ms"] * 1_000_000
        self.record_phases = args["record_phases"]
        self.device_stats = args["device_stats"]
        self._clock.loss_on_device = self.device_stats == "torch"
        self.save_interval = args["save_interval"]
        self._storage = StorageAccount(args["storage_budget_bytes"], args["expected_steps"],
                                       self._failures.warn_once)
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
        # Where the run lives: out_dir, or s3://bucket/prefix, whose records are written into a
        # local spool (out_dir from here on) that a C++ thread ships (docs/storage.md).
        self.location = self.out_dir
        self._shipper = None
        if _core.is_object_store_location(self.out_dir):
            self._shipper = start_shipper(self.out_dir)  # or ConfigError naming the URL
            self.out_dir = self._shipper.spool_dir
        self.worker = worker or worker_stream(_worker_rank())
        if env_dir and not worker:  # one of several trainings under one `trainscope run`?
            self.worker = own_stream(self.out_dir, self.worker)

        self.collections = as_collections(collections, self.save_interval)  # or ConfigError
        self._rules_spec = rules
        self._actions_spec = actions
        self._configure_rules()
        self._index_collections()

        try:
            self._open_run(writer_options or {})
        except Exception as e:
            if self.strict:
                raise
            self._saving = False
            if isinstance(e, OSError):  # a read-only or full disk, no permission: not a bug
                self._unwritable = str(e)
                self._failures.degraded("unwritable run directory")
                log.warning("trainscope: cannot write the run directory %s (%s); the training "
                            "continues unrecorded, its records are dropped and counted "
                            "(hook.writer_stats())", self.out_dir, e)
            else:
                self._fail("open run", e)
        if self._writer is not None:
            self._start_background()
            self._start_distributed()
            self._start_cuda_memory()
        self._atexit = _register_atexit(self)

    def config(self) -> dict:
        """The hook's configuration (written into run.json)."""
        from .rules import redact_actions
        return {
            "out_dir": self.out_dir, "worker": self.worker, "save_interval": self.save_interval,
            "collections": [c.to_config(self.save_interval) for c in self.collections],
            # Action URLs redacted: a Slack or Teams webhook's URL is its secret.
            "rules": redact_actions(
                [getattr(r, "to_config", lambda: str(r))() for r in self._rules_spec]),
            "actions": redact_actions(self._actions_spec),
            "system_monitor_interval_ms": self._system_monitor_interval_ms,
            "storage_budget_bytes": self.storage_budget_bytes,
            "raise_on_stop": self.raise_on_stop, "device_stats": self.device_stats,
            "profiler": self.profiler.to_config() if self.profiler else None,
            **_instance_config(),
        }

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
        self._arm_origin()  # a rule stops on a NaN: where it began (_nan_origin.py)
        self._record_model(module)
        try:
            from . import _comm_timing, _distributed
            self._grads_final_only = _comm_timing.is_ddp(module) or self._shards is not None
            if self._comm_timing is None and _distributed.wanted():
                self._comm_timing = _comm_timing.attach(self, module)
        except Exception as e:
            self._fail("comm timing", e)

    def _record_model(self, module) -> None:
        """A model_registered event: which model this run trains (the Parquet runs table's
        `model`, the team's "which rules fire most, per model"). DDP/FSDP/compile wrappers are
        looked through."""
        w = self._writer
        if w is None:
            return
        try:
            inner = module
            for _ in range(4):
                nxt = getattr(inner, "module", None) or getattr(inner, "_orig_mod", None)
                if nxt is None or nxt is inner:
                    break
                inner = nxt
            n = sum(p.numel() for p in inner.parameters())
            cls = type(inner)
            w.add_event(EVENT.MODEL_REGISTERED, json.dumps({
                "name": cls.__name__, "class": f"{cls.__module__}.{cls.__qualname__}",
                "parameters": int(n), "worker": self.worker}))
        except Exception as e:
            self._fail("register_module", e)

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
            on_output = self._clock.callback(CALLBACK_LOSS, index)  # (module, inputs, output)
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
            # gradients are divided by its scale from now on: the hook's Python path reads
            # them (Capture._set_grad_lane), also in a save step or a repeat under way
            self._clock.set_grad_lane(None)
            self._clock.set_repeat(None)
            self._lane_rows_set = None
        except Exception as e:
            if self.strict:
                raise
            self._fail("register_scaler", e)

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
                if self._unwritable is not None and self._scalar_coll is not None:
                    self._unwritable_drops += self._scalar_coll.saves_at(
                        self.mode, self._mode_steps[self.mode], self.save_interval)
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
            rt = self._runtime
            # the runtime's stop flag is an atomic load: a rule's firing shows at once
            if (rt is not None and rt.stop_requested()) or self._poll_often \
                    or not self._committing:
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
        self._close_run()

    def __enter__(self) -> "Hook":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None and not issubclass(exc_type, (TrainingStopped, GeneratorExit)):
            self._note_exception(exc if exc is not None else exc_type())
        self.close()
        return False

    def storage_estimate(self) -> dict:
        """Bytes written so far (estimate) and per collection, and the projection for
        expected_steps with the current configuration."""
        try:
            self._take_lane_counts()  # the gradient lane's summaries so far
            self._account_pending()
        except Exception as e:
            self._fail("storage estimate", e)
        s = self._storage
        return {"bytes": s.bytes, "by_collection": dict(s.by_collection),
                "projected_bytes": s.projected(self.collections, self.save_interval),
                "budget_bytes": s.budget_bytes}

    def writer_stats(self) -> Optional[dict]:
        """The writer's counters (records and bytes written and dropped, I/O errors, queue high
        water); None without a writer. When the run directory could not be written at all, what
        was dropped: every step's record and each save_scalar value, with the reason."""
        if self._writer is None and self._unwritable is not None:
            return {"records_written": 0, "bytes_written": 0, "bytes_dropped": 0,
                    "records_dropped": self.step_count + self._unwritable_drops,
                    "io_errors": 1, "queue_high_water": 0, "error": self._unwritable}
        try:
            return self._writer.stats() if self._writer is not None else None
        except Exception:
            return None

    def take_rollbacks(self) -> list:
        """Rollback actions the rules engine dispatched since the last call: the firing
        events (rule, firing, step, details_json with first_step, action_json), oldest first.
        The ts.Checkpointer following this hook executes them (trainscope/rollback.py)."""
        rt = self._runtime
        if rt is None or not rt.has_rules:
            return []
        try:
            return rt.take_rollbacks()
        except Exception as e:
            self._fail("take_rollbacks", e)
            return []

    def rule_statuses(self) -> dict:
        """Current statuses of in-process rules: {rule: {"status", "message", ...}}."""
        out = {}
        try:
            rt = self._runtime
            if rt is not None and rt.has_rules:
                for s in rt.rule_statuses():
                    out[s["rule"]] = s
        except Exception as e:
            self._fail("rule_statuses", e)
        return out

    @property
    def errors(self) -> Dict[str, int]:
        """Internal errors by place (the hook's degraded operations)."""
        return dict(self._failures.by_place)

    @property
    def error_count(self) -> int:
        """Internal errors so far (after max_errors of them the hook stops saving tensors)."""
        return self._failures.count

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


def _instance_config() -> dict:
    """The machine type, when the environment names it: TRAINSCOPE_INSTANCE_TYPE, or SageMaker's
    SM_CURRENT_INSTANCE_TYPE (the report's cost lookup, data/instances.json)."""
    for var in ("TRAINSCOPE_INSTANCE_TYPE", "SM_CURRENT_INSTANCE_TYPE"):
        v = os.environ.get(var, "").strip()
        if v:
            return {"instance_type": v}
    return {}

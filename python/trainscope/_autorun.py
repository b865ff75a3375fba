"""Zero-code capture: what ``trainscope run -- python train.py`` loads into the child.

``trainscope run`` puts a bootstrap ``sitecustomize.py`` first on the child's PYTHONPATH (see
tools/cli/cmd_run.cc). The bootstrap runs the interpreter's own ``sitecustomize`` too, and
loads this file *as a standalone module* (``_trainscope_autorun``, without importing the
trainscope package, so Python processes that never import torch pay a few milliseconds and
nothing else) and calls :func:`install`.

What happens then, in order:

1. An import watcher waits for ``import torch`` to finish. Nothing else is done before.
2. Process-wide torch hooks are installed: module forward pre/post hooks (only to find the
   outermost modules that run, removed once the model is chosen), optimizer step pre/post
   hooks, a wrapper of ``torch.autograd.backward`` (the scalar on which ``backward()`` is
   called is the loss), of ``GradScaler.scale`` (to record the unscaled loss) and of the data
   loader iterator's ``__next__`` (the data wait of each batch).
3. At the first optimizer step the model and the optimizer are chosen: the optimizer is the
   first one stepped (or the one stepping the model ``--model-regex`` names) and the model is
   the outermost module run so far whose parameters that optimizer updates most. A
   ``trainscope.Hook`` is created on them exactly as a script would (``register_module``,
   ``register_optimizer``, ``register_scaler``), so the records, names and schedule are the
   explicit hook's. One step of the primary optimizer is one step.
4. Each step ends after the primary optimizer's ``step()`` returns (after ``scaler.step()``
   under a GradScaler); a stop request (a rule's stop_training, ``trainscope watch``, the
   dashboard) is honoured there: the hook is closed and the process exits with
   :data:`STOPPED_EXIT_CODE`, which ``trainscope run`` reports as a stop.
5. A ``trainscope.Hook`` created by the script itself (or by the Lightning / Hugging Face
   callbacks) wins: the automatic hook closes and every patch is undone, so nothing is
   recorded twice.

Anything that fails here is caught: the training runs on unmonitored and the reason is
written to ``RUN/instrument/<pid>.json`` (and the worker's stream when a hook exists), which
``trainscope run`` prints and records at the end.

The parts: this file (the bootstrap's entry, the import watcher, the patches, the hook and its
step boundaries, failure and exit), _autorun_search.py (finding the model and the optimizer)
and _autorun_loss.py (the loss), each loaded as a standalone module (_load_part).
"""
import json
import os
import sys
import threading
import time
import weakref
from types import SimpleNamespace as types_ns


def _load_part(name: str):
    """A sibling file of this one (the parts of zero-code capture), loaded like this one: as a
    standalone module, without importing the trainscope package."""
    import importlib.util
    full = f"_trainscope{name}"
    module = sys.modules.get(full)
    if module is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        spec = importlib.util.spec_from_file_location(full, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(full, None)
            raise
    return module


_search = _load_part("_autorun_search")
_loss = _load_part("_autorun_loss")
MAX_FORWARDS_WITHOUT_STEP = _search.MAX_FORWARDS_WITHOUT_STEP
MAX_CANDIDATES = _search.MAX_CANDIDATES
_undo_accumulation_scale = _loss._undo_accumulation_scale

# The exit status of a training that zero-code capture stopped because a stop was requested
# (sysexits' EX_CONFIG + 2; trainscope.checkpoint.PREEMPTED_EXIT_CODE is 75).
STOPPED_EXIT_CODE = 76

_state = None  # the one _AutoCapture of this process


def install(run_dir: str) -> None:
    """Arms zero-code capture in this process (called by the bootstrap). Never raises."""
    global _state
    if _state is not None:
        return
    try:
        _state = _AutoCapture(run_dir)
        _state.arm()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)
    except Exception as e:  # noqa: BLE001 - never break the child
        _write_status(run_dir, {"state": "failed", "message": f"install: {e!r}"})


def _after_fork_in_child() -> None:
    """A child forked once the capture made its hook (a DataLoader worker, a script's own
    fork) leaves that hook to the parent (trainscope's own at-fork handler disarms it): the
    capture is done here, its patches come off, nothing is reported (the status file is the
    parent's). A child forked while the capture still searches goes on searching."""
    st = _state
    if st is None or st.hook is None or st.done:
        return
    st.done = True
    st.hook = None
    try:
        st._unpatch()
    except Exception:  # noqa: BLE001
        pass


def yield_to(hook) -> None:
    """Called by trainscope.Hook.__init__: a hook the script made itself wins."""
    if _state is not None and not _state.creating:
        _state.stand_down("the script created its own trainscope.Hook; the automatic "
                          "capture stood down")


def _base_stream(stream: str) -> str:
    """worker-0-t2 -> worker-0: the rank's stream a later training of the run was kept off
    (_run.own_stream)."""
    head, sep, tail = stream.rpartition("-t")
    return head if sep and tail.isdigit() and head else stream


def _write_status(run_dir: str, fields: dict) -> None:
    try:
        d = os.path.join(run_dir, "instrument")
        os.makedirs(d, exist_ok=True)
        fields = dict(fields, pid=os.getpid(), argv=list(sys.argv), wall_us=time.time_ns() // 1000,
                      executable=sys.executable)
        path = os.path.join(d, f"{os.getpid()}.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(fields, f)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - a status we cannot write is not worth a crash
        pass


def _loud() -> bool:
    """Not with TRAINSCOPE_LOG_LEVEL=error or critical (`trainscope run --quiet`)."""
    return os.environ.get("TRAINSCOPE_LOG_LEVEL", "").strip().lower() not in ("error",
                                                                             "critical")


def _say(msg: str) -> None:
    """One line on stderr; in a job of several ranks rank 0 speaks for the job (the others
    too with TRAINSCOPE_LOG_LEVEL set: python/trainscope/_log.py)."""
    if not os.environ.get("TRAINSCOPE_LOG_LEVEL"):
        try:
            if int(os.environ.get("RANK", "0") or 0) > 0:
                return
        except ValueError:
            pass
    try:
        sys.stderr.write(f"trainscope: {msg}\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


class _PostExecLoader:
    """Delegates to the loader that finds torch and calls back once torch is imported."""

    def __init__(self, inner, on_loaded):
        self._inner = inner
        self._on_loaded = on_loaded

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._inner
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._inner
        self._inner.exec_module(module)
        self._on_loaded(module)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _TorchImportWatcher:
    """A meta path finder that only ever looks at ``torch`` and removes itself then."""

    def __init__(self, on_loaded):
        self._on_loaded = on_loaded

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PostExecLoader(spec.loader, self._on_loaded)
                return spec
        return None


class _AutoCapture(_search._ModelSearch, _loss._LossCapture):

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.creating = False      # making our own Hook (its yield_to call is ours)
        self.hook = None           # the trainscope.Hook, once chosen
        self.done = False          # stood down / failed / gave up: nothing more to do
        self.model_regex = os.environ.get("TRAINSCOPE_MODEL_REGEX") or None
        try:
            self.options = json.loads(os.environ.get("TRAINSCOPE_INSTRUMENT_OPTIONS") or "{}")
        except ValueError:
            self.options = {}
        self._handles = []         # torch RemovableHandles (global hooks)
        self._fwd_handles = []     # the search's forward hooks (removed once chosen)
        self._patches = []         # (owner, attribute, original)
        self._depth = 0            # nesting of module forward calls (outermost = 0)
        self._forwards = 0         # outermost forward calls so far
        self._candidates = {}      # id -> weakref of outermost modules, first seen first
        self._pending = []         # (loss detached, its scaling node) since the last step
        self._on_loss = None       # records one loss tensor
        self._loss_source = ""
        self._scaled = None        # (weakref to GradScaler, id(scaled loss), unscaled loss)
        self._optimizer = None     # weakref of the primary optimizer
        self._scaler = None        # the registered GradScaler
        self._in_scaler_step = False
        self._seen_optimizers = []  # weakrefs, first stepped first
        self._lock = threading.Lock()
        self._status = {"state": "armed", "message": "waiting for torch to be imported"}

    # ------------------------------------------------------------------------------ setup
    def arm(self) -> None:
        self._report()
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "optim"):
            self._on_torch(torch)
        else:
            sys.meta_path.insert(0, _TorchImportWatcher(self._on_torch))

    def _on_torch(self, torch) -> None:
        try:
            self._install_torch_hooks(torch)
            self._status = {"state": "searching",
                            "message": "waiting for the first optimizer step"}
            self._report()
        except Exception as e:  # noqa: BLE001
            self._fail("installing the torch hooks", e)

    def _install_torch_hooks(self, torch) -> None:
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim
        self._fwd_handles.append(nn_module.register_module_forward_pre_hook(self._fwd_pre))
        self._fwd_handles.append(nn_module.register_module_forward_hook(self._fwd_post,
                                                                        always_call=True))
        self._handles.append(optim.register_optimizer_step_pre_hook(self._opt_pre))
        self._handles.append(optim.register_optimizer_step_post_hook(self._opt_post))
        self._patch(torch.autograd, "backward", self._wrap_backward(torch.autograd.backward))
        scaler_cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if scaler_cls is not None:
            self._patch(scaler_cls, "scale", self._wrap_scale(scaler_cls.scale))
        from torch.utils.data import dataloader
        it_cls = dataloader._BaseDataLoaderIter
        self._patch(it_cls, "__next__", self._wrap_next(it_cls.__next__))

    def _patch(self, owner, name, new) -> None:
        self._patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, new)

    def _unpatch(self) -> None:
        for owner, name, orig in reversed(self._patches):
            try:
                if owner is None:  # a RemovableHandle
                    orig.remove()
                else:
                    setattr(owner, name, orig)
            except Exception:  # noqa: BLE001
                pass
        self._patches.clear()
        for h in self._fwd_handles + self._handles:
            try:
                h.remove()
            except Exception:  # noqa: BLE001
                pass
        self._fwd_handles.clear()
        self._handles.clear()

    def _wrap_next(self, orig):
        auto = self

        def __next__(it):
            hook = auto.hook
            if hook is None or auto.done:
                return orig(it)
            timed = it.__dict__.get("_trainscope_timed")
            if timed is None or timed[0] is not hook:
                timed = (hook, hook._clock.timed_iter(_Raw(it, orig)))
                it.__dict__["_trainscope_timed"] = timed
            return next(timed[1])
        __next__.__wrapped__ = orig
        return __next__

    def _opt_pre(self, optimizer, args, kwargs):
        if self.done:
            return None
        try:
            self._depth = 0  # an exception inside a forward may have left it raised
            if self.hook is None:
                self._note_optimizer(optimizer)
                if not self._start(optimizer, final=False):
                    if self._deferred is not optimizer:
                        self._pending.clear()
                    return None
            primary = self._optimizer() if self._optimizer is not None else None
            if optimizer is primary:
                self._feed_losses()
            else:
                self._pending.clear()
        except Exception as e:  # noqa: BLE001
            self._fail("at the optimizer step", e)
            return None
        hook = self.hook
        if hook is not None and optimizer is primary and hook._stop_reason is not None \
                and hook._dist is None:
            # a NaN loss this step (or a stop that arrived): leave before the optimizer
            # applies the update (in a job of several ranks, the agreed boundary decides)
            self._exit_stopped(hook)
        return None

    def _opt_post(self, optimizer, args, kwargs):
        if self.done:
            return
        if self.hook is None:
            if self._deferred is not optimizer:
                return
            # optimizer.step(closure): the forward ran inside the step, so the model could
            # only be found now
            self._deferred = None
            try:
                if not self._start(optimizer, final=True):
                    return
            except Exception as e:  # noqa: BLE001
                self._fail("at the optimizer step", e)
                return
        primary = self._optimizer() if self._optimizer is not None else None
        if optimizer is not primary:
            self._pending.clear()  # a closure's losses belong to that optimizer
            return
        # the step boundary of the first step (the hook's optimizer wrapper did not exist
        # when this step began); later ones come from the wrapper (_wrap_instance_step)
        if self._first_boundary and not self._in_scaler_step:
            self._first_boundary = False
            self._boundary()

    _first_boundary = False
    _deferred = None  # the optimizer whose first step found no model before it ran
    # ------------------------------------------------------------- the hook and its steps
    def _start(self, stepping, final: bool = True) -> bool:
        """Chooses the model and the optimizer and creates the Hook. False: not now."""
        optimizer, chosen, described = self._pick(stepping, final)
        if optimizer is None and self._deferred is stepping:
            return False
        if optimizer is None:  # only with --model-regex
            msg = (f"no model matching --model-regex {self.model_regex!r} is stepped by an "
                   f"optimizer yet; candidates: {'; '.join(described) or 'none'}")
            if self._status.get("message") != msg:
                self._status = {"state": "searching", "message": msg}
                self._report()
            return False
        model, var = chosen
        others = [type(o).__name__ for o in self._optimizers(stepping) if o is not optimizer]
        for h in self._fwd_handles:
            h.remove()
        self._fwd_handles.clear()
        self._candidates.clear()
        import trainscope
        opts = dict(self.options.get("hook") or {})
        opts.setdefault("auto_step", False)
        self.creating = True
        try:
            hook = trainscope.Hook(**opts)
        finally:
            self.creating = False
        if self.done:  # a script's hook appeared while ours was made
            hook.close()
            return False
        self.hook = hook
        self._arm_nonfinite_stops(hook)
        hook._stop_said_later = True  # _exit_stopped says it
        if model is not None:
            hook.register_module(model)
        loss_fn = hook.register_loss(lambda t: t, name="loss")
        # the clock's loss callback itself (what register_loss's wrapper calls), one call
        # per loss instead of three
        index = len(hook._loss_names) - 1
        if index >= 0 and hook._loss_names[index] == "losses/loss":
            from trainscope._step_clock import CALLBACK_LOSS
            on_output = hook._clock.callback(CALLBACK_LOSS, index)
            self._on_loss = lambda t: on_output(None, (), t)
        else:
            self._on_loss = loss_fn
        self._loss_source = "the scalar on which backward() is called"
        self._optimizer = weakref.ref(optimizer)
        scaler = self._scaler_seen
        if scaler is not None:
            hook.register_scaler(scaler)
            self._scaler = scaler
            self._wrap_instance_step(scaler, in_scaler=True)
        hook.register_optimizer(optimizer)
        self._wrap_instance_step(optimizer, in_scaler=False)
        # this step's boundary: the hook's wrappers did not exist when it began
        self._first_boundary = optimizer is stepping
        n_params = sum(p.numel() for p in model.parameters()) if model is not None else 0
        name = var or (type(model).__name__ if model is not None else "no model")
        self._status = {
            "state": "active", "worker": hook.worker,
            "model": {"name": name, "class": type(model).__name__, "parameters": n_params},
            "optimizer": type(optimizer).__name__, "scaler": scaler is not None,
            "model_regex": self.model_regex, "other_optimizers": others,
            "loss": self._loss_source,
            "candidates": described,
            "message": f"capturing model {name} ({type(model).__name__}, {n_params:,} "
                       f"parameters) stepped by {type(optimizer).__name__}"
                       + (f" into stream {hook.worker} (another training of this run has "
                          f"{_base_stream(hook.worker)})" if _base_stream(hook.worker)
                          != hook.worker else "")}
        self._report()
        hook.add_event("instrumentation", {k: v for k, v in self._status.items()
                                           if k != "state"})
        if not self.options.get("quiet") and _loud():  # --quiet: TRAINSCOPE_LOG_LEVEL=error
            _say(self._status["message"] + (" (candidates: " + ", ".join(described) + ")"
                                            if len(described) > 1 else ""))
        return True

    def _arm_nonfinite_stops(self, hook) -> None:
        """The rules `trainscope run` evaluates that stop on a NaN/Inf loss (exploding_tensor,
        dead_loss with stop_training): the hook checks each loss it reads against them, so the
        training stops at the step the NaN appeared, not when the launcher's rules see it
        (they still record the firing)."""
        specs = self.options.get("nonfinite_stops") or []
        if not specs:
            return
        from trainscope import rules as _rules
        stops = []
        for spec in specs:
            cfg = types_ns(name=spec.get("name", ""), _config={
                "id": spec.get("id"), "params": spec.get("params") or {},
                "min_consecutive": spec.get("min_consecutive", 1),
                "actions": ["stop_training"]})
            stops.append(_rules.NonfiniteStop(cfg))
        hook._nonfinite_stops = stops
        hook._clock.nonfinite_stop = True

    def _wrap_instance_step(self, obj, in_scaler: bool) -> None:
        """obj.step = ours around what is there now (the hook's wrapper): the step boundary
        comes after that wrapper has timed the step."""
        import types
        inner = obj.step
        auto = self

        def step(_self, *args, **kwargs):
            if in_scaler:
                auto._in_scaler_step = True
                try:
                    out = inner(*args, **kwargs)
                finally:
                    auto._in_scaler_step = False
            else:
                out = inner(*args, **kwargs)
            if not auto.done and (in_scaler or not auto._in_scaler_step):
                auto._boundary()
            return out
        step.__wrapped__ = inner
        obj.step = types.MethodType(step, obj)
        self._patches.append((obj, "step", inner))

    def _boundary(self) -> None:
        hook = self.hook
        if hook is None:
            return
        try:
            if self._pending:
                self._feed_losses()  # optimizer.step(closure): backward ran inside the step
            # hook.step() without its Python layers: the clock ends the step and begins the
            # next one's count (the hot path of every step)
            clock = hook._clock
            now = time.time_ns() // 1000
            try:
                if not clock.open:
                    clock.open_step(now)
                clock.close_step(now)
                clock.advance()
            except Exception as e:  # noqa: BLE001 - the hook's own errors: counted there
                hook._fail("step", e)
            stop = hook._stop_reason is not None or hook.should_stop
        except Exception as e:  # noqa: BLE001
            self._fail("ending the step", e)
            return
        if stop:
            self._exit_stopped(hook)

    def _exit_stopped(self, hook) -> None:
        reason = hook.stop_reason or "stop requested"
        step = hook.step_count
        self._status = dict(self._status, state="stopped", step=step,
                            message=f"stopped the training at step {step}: {reason}")
        self._report()
        _say(f"stopping the training at step {step} ({reason}); exit status "
             f"{STOPPED_EXIT_CODE}")
        self.done = True
        try:
            hook.close()
        except Exception:  # noqa: BLE001
            pass
        self._unpatch()
        raise SystemExit(STOPPED_EXIT_CODE)

    # ------------------------------------------------------------------- failure and exit
    def stand_down(self, why: str) -> None:
        with self._lock:
            if self.done:
                return
            self.done = True
        hook, self.hook = self.hook, None
        self._unpatch()
        if hook is not None:
            try:
                hook.add_event("instrumentation_stood_down", {"message": why})
                hook.close()
            except Exception:  # noqa: BLE001
                pass
        self._status = {"state": "stood_down", "message": why}
        self._report()

    def _fail(self, where: str, e: BaseException) -> None:
        with self._lock:
            if self.done:
                return
            self.done = True
        msg = (f"instrumentation failed {where}: {type(e).__name__}: {e}; the training runs "
               "on unmonitored")
        hook, self.hook = self.hook, None
        try:
            self._unpatch()
        except Exception:  # noqa: BLE001
            pass
        if hook is not None:
            try:
                hook.add_event("instrumentation_failed", {"message": msg})
                hook.close()
            except Exception:  # noqa: BLE001
                pass
        self._status = {"state": "failed", "message": msg}
        self._report()
        _say(msg)

    def _report(self) -> None:
        _write_status(self.run_dir, self._status)


class _Raw:
    """The data loader iterator as the clock's timed iterator sees it (calls the original
    __next__, not the patched one)."""

    __slots__ = ("_it", "_next")

    def __init__(self, it, orig_next):
        self._it = it
        self._next = orig_next

    def __iter__(self):
        return self

    def __next__(self):
        return self._next(self._it)

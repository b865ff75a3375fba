"""Where a NaN/Inf began: the failing step replayed with checks armed (docs/rules.md,
"exploding_tensor: where the NaN came from").

Armed only while a rule stops training on a non-finite value (exploding_tensor or dead_loss
with stop_training: the hook's ``_nonfinite_stops``); the default hook registers nothing here.
Armed, every forward of the registered model costs one Python forward hook that keeps
*references* to the step's inputs (no copies) and the autocast state, and, for a model whose
gradients live on the CPU outside DDP/FSDP and without a GradScaler, one hook on the model's
output that keeps the gradient it receives and, when backward ends, one fused pass over the
gradients (``torch._amp_foreach_non_finite_check_and_unscale_`` with a scale of 1.0) to see a
NaN/Inf that appeared in backward only.

At the first non-finite value (a loss the hook reads, or that gradient check) the step is
replayed once, eagerly, before the optimizer step:

1. the model's inputs and then its parameters and buffers are checked (a bad batch; weights
   already non-finite, e.g. exploded by a too large learning rate);
2. the forward runs again on the inner module (DDP's ``.module``, torch.compile's
   ``_orig_mod``, compiled code forced eager), inside the same autocast, with temporary forward
   hooks on every submodule and a TorchFunctionMode that checks every op: the first op whose
   output is non-finite while its inputs are finite, and the innermost module it ran in;
3. if the forward is finite and a gradient was not: the backward runs again with
   ``torch.autograd.grad`` (nothing reaches ``.grad``) from the gradient the model's output
   received, with full backward hooks on every submodule and a TorchDispatchMode naming the
   first aten op whose result is non-finite from finite inputs.

Everything is removed afterwards; buffers (BatchNorm statistics) and the RNG states are
restored, so the replay changes nothing the training sees. It never raises into the training:
a failure is logged once and written as the reason the origin is unknown. FSDP models are not
replayed (their sharded parameters need collectives): the origin names the rank and step only.
"""
from __future__ import annotations

import contextlib
import logging
import math
import time
import warnings
from typing import Any, Dict, List, Optional, Tuple

log = logging.getLogger("trainscope")


def _inner(model):
    """The module to replay: DDP's ``.module``, torch.compile's ``_orig_mod`` (repeatedly)."""
    for _ in range(8):
        nxt = getattr(model, "_orig_mod", None)
        if nxt is None and type(model).__name__ in ("DistributedDataParallel",
                                                    "DataParallel"):
            nxt = getattr(model, "module", None)
        if nxt is None:
            return model
        model = nxt
    return model


def _is_fsdp(model) -> bool:
    try:
        from ._capture import _is_dtensor
    except ImportError:  # pragma: no cover
        return False
    if type(model).__name__ == "FullyShardedDataParallel":
        return True
    for p in model.parameters():
        return _is_dtensor(p)
    return False


def _tensors(value, prefix: str = "", depth: int = 0):
    """(path, tensor) of the floating tensors in value (tuples, lists, dicts)."""
    import torch
    if depth > 4:
        return
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            yield prefix, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensors(v, f"{prefix}[{i}]" if prefix else str(i), depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _tensors(v, f"{prefix}[{k!r}]" if prefix else repr(k), depth + 1)


def _differentiable(output):
    """The model output whose gradient the tracer keeps: the first floating tensor with a
    grad_fn (a tensor, or in a tuple, list, dict or ModelOutput)."""
    for _, t in _tensors(output):
        if t.grad_fn is not None:
            return t
    return None


def _bad(t) -> bool:
    """t holds a NaN or Inf."""
    import torch
    return not bool(torch.isfinite(t).all())


def _any_bad(value) -> bool:
    return any(_bad(t) for _, t in _tensors(value))


def _what(t) -> str:
    import torch
    n_nan = int(torch.isnan(t).sum())
    n_inf = int(torch.isinf(t).sum())
    parts = ([f"{n_nan} NaN"] if n_nan else []) + ([f"{n_inf} Inf"] if n_inf else [])
    return " and ".join(parts) + f" of {t.numel()}"


def _op_name(func) -> str:
    name = getattr(func, "__name__", None) or str(func)
    qual = getattr(func, "__qualname__", "") or ""
    mod = getattr(func, "__module__", "") or ""
    if qual.startswith(("TensorBase.", "Tensor.")) or mod == "torch._tensor":
        return "Tensor." + name
    if mod in ("torch._C._nn", "torch.nn.functional"):
        return "F." + name
    if mod.startswith("torch._C._linalg") or mod == "torch.linalg":
        return "torch.linalg." + name
    return "torch." + name


def _autocast_state():
    """(device_type, dtype) of an enabled autocast, or None."""
    import torch
    for dev in ("cuda", "cpu"):
        try:
            if torch.is_autocast_enabled(dev):
                return dev, torch.get_autocast_dtype(dev)
        except Exception:  # an older torch or a device type it does not know
            continue
    return None


class _Trail:
    """What the replay saw: the module stack (names), the modules in forward order, and the
    first bad op / module of each direction."""

    def __init__(self):
        self.stack: List[str] = []
        self.order: List[str] = []
        self.op: Optional[Tuple[str, str]] = None      # (op, module) forward
        self.module: Optional[str] = None               # first module: finite in, bad out
        self.back_op: Optional[str] = None
        self.back_module: Optional[str] = None
        self.back_bad_out: Optional[str] = None         # first module that received a bad grad


def _mutates(name: str, kwargs) -> bool:
    """An op that writes into its inputs (``add_``, ``out=``): they are checked before it."""
    return (name.endswith("_") and not name.endswith("__")) or "out" in kwargs


def _first_bad_call(func, name: str, args, kwargs, on_bad) -> Any:
    """Calls func; on_bad() when its result is non-finite while its inputs were finite (the
    inputs are checked after the call, and only then, unless the op writes into them)."""
    before_ok = not _any_bad((args, kwargs)) if _mutates(name, kwargs) else None
    out = func(*args, **kwargs)
    try:
        if _any_bad(out) and (before_ok if before_ok is not None
                              else not _any_bad((args, kwargs))):
            on_bad()
    except Exception:
        pass
    return out


def _function_mode(trail: _Trail):
    from torch.overrides import TorchFunctionMode

    class FirstBadOp(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if trail.op is not None:
                return func(*args, **kwargs)

            def found():
                trail.op = (_op_name(func), trail.stack[-1] if trail.stack else "")
            return _first_bad_call(func, getattr(func, "__name__", ""), args, kwargs, found)

    return FirstBadOp()


def _dispatch_mode(trail: _Trail):
    from torch.utils._python_dispatch import TorchDispatchMode

    class FirstBadAten(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if trail.back_op is not None:
                return func(*args, **kwargs)
            name = func.overloadpacket.__name__

            def found():
                trail.back_op = "aten." + name
            return _first_bad_call(func, name, args, kwargs, found)

    return FirstBadAten()


class OriginTracer:
    """The armed origin search of one hook's registered model (see the module docstring)."""

    def __init__(self, hook, model):
        import torch
        self._hook = hook
        self._model = model
        self._inner = _inner(model)
        self._fsdp = _is_fsdp(model)
        from ._comm_timing import is_ddp
        self._check_grads = not self._fsdp and not is_ddp(model)
        self._queue = torch.autograd.Variable._execution_engine.queue_callback
        self._params: List[Tuple[str, Any]] = [(n, p) for n, p in self._inner.named_parameters()
                                               if p.requires_grad]
        self.args: Any = ()
        self.kwargs: Dict[str, Any] = {}
        self.step = -1
        self.autocast = None
        self.grad_out = None  # the gradient the model's first output received in backward
        self.origin: Optional[dict] = None  # what find() found (once per run)
        self._grad_step = -1
        self._found = self._one = None  # the gradient check's flag and its scale of 1.0
        self._handle = model.register_forward_hook(self._on_forward, with_kwargs=True)

    def remove(self) -> None:
        try:
            self._handle.remove()
        except Exception:
            pass
        self.args, self.kwargs, self.grad_out = (), {}, None

    def _broke(self, e: Exception) -> None:
        """A per-step part failed: counted once, and the tracer disarms (it would fail every
        step, and the hook degrades after max_errors); find() then says the inputs are gone."""
        self._hook._fail("nan origin", e)
        self._check_grads = False
        self.step = -2
        self.remove()

    # ----------------------------------------------------------------- every step (armed)
    def _on_forward(self, module, args, kwargs, output):
        try:
            h = self._hook
            self.args, self.kwargs, self.step = args, kwargs, h.step_count
            self.autocast = _autocast_state()
            self.grad_out = None
            if self._check_grads and self.origin is None and not h._scalers:
                t = _differentiable(output)
                if t is not None and t.is_cpu:  # on a device the check would synchronise
                    t.register_hook(self._on_grad_out)
        except Exception as e:
            self._broke(e)
        return None

    def _on_grad_out(self, grad):
        self.grad_out = grad
        if self._grad_step != self.step:
            self._grad_step = self.step
            try:
                self._queue(self._on_backward_end)
            except Exception as e:
                self._broke(e)
        return None

    def _on_backward_end(self) -> None:
        """Backward ended: one fused finiteness pass over the CPU gradients; a non-finite one goes
        to the hook's non-finite check (which replays the step and may stop the training)."""
        try:
            import torch
            h = self._hook
            if self.origin is not None or h._stop_reason is not None:
                return
            grads = [p.grad for _, p in self._params if p.grad is not None]
            if not grads or not grads[0].is_cpu:
                return
            if self._found is None:
                self._found, self._one = torch.zeros(1), torch.ones(1)
            try:  # one fused pass (GradScaler's; times exactly 1.0 leaves every value as it is)
                self._found.zero_()
                torch._amp_foreach_non_finite_check_and_unscale_(grads, self._found, self._one)
                if not float(self._found):
                    return
            except (RuntimeError, AttributeError):  # mixed devices, an older torch
                if math.isfinite(float(torch.stack(torch._foreach_norm(grads)).sum())):
                    return
            for name, p in self._params:
                if p.grad is not None and _bad(p.grad):
                    bad = p.grad[~torch.isfinite(p.grad)].view(-1)[0]
                    h._check_nonfinite(f"gradients/{name}", float(bad), self.step)
                    return
        except Exception as e:
            self._broke(e)

    # ------------------------------------------------------------ the replay (once)
    def find(self, trigger: str, step: int, rank: int, on_training_thread: bool = True) -> dict:
        """The origin of the non-finite `trigger` (a loss or gradient name) seen at `step`:
        a dict with rank, step, direction, module, op, bad_input, summary (plain words),
        replay_ms; never raises."""
        o = {"rank": rank, "worker": self._hook.worker, "step": step, "trigger": trigger,
             "direction": None, "module": None, "module_type": None, "op": None,
             "bad_input": None, "replayed": False}
        t0 = time.perf_counter()
        try:
            if self._fsdp:
                o["why"] = ("FSDP: sharded parameters need the ranks' collectives, the step is "
                            "not replayed")
            elif not on_training_thread:
                o["why"] = "the value was seen off the training thread; the step is not replayed"
            elif self.step == -1:
                o["why"] = ("the registered model's forward was never called (a "
                            "LightningModule's training_step may call its submodules "
                            "directly): no inputs to replay")
            elif self.step != step:
                o["why"] = (f"the inputs of step {step} are gone (the value was read at step "
                            f"{self.step}, e.g. a loss copied from the GPU later)")
            else:
                self._replay(o, trigger)
        except Exception as e:  # the training goes on whatever happens here
            log.warning("trainscope: the NaN origin replay failed: %s", e)
            o["why"] = f"the replay failed: {type(e).__name__}: {e}"
        o["replay_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        o["summary"] = _summary(o)
        self.origin = o
        self.args, self.kwargs, self.grad_out = (), {}, None  # references released
        return o

    def _replay(self, o: dict, trigger: str) -> None:
        import torch
        m = self._inner
        o["replayed"] = True
        # 1. the data
        named = [(f"input {i}", a) for i, a in enumerate(self.args)] + \
            [(f"keyword input {k}", v) for k, v in self.kwargs.items()]
        for what, value in named:
            for path, t in _tensors(value):
                if _bad(t):
                    o.update(direction="forward", module="", module_type=type(m).__name__,
                             bad_input=f"{what}{' ' + path if path else ''} of the model "
                                       f"({_what(t)} non-finite)")
                    return
        # 2. the weights
        for kind, items in (("parameter", m.named_parameters()), ("buffer", m.named_buffers())):
            for name, p in items:
                if (p.is_floating_point() or p.is_complex()) and _bad(p):
                    owner = name.rsplit(".", 1)[0] if "." in name else ""
                    o.update(direction="forward", module=owner,
                             module_type=type(m.get_submodule(owner)).__name__,
                             bad_input=f"{kind} {name} ({_what(p)} non-finite)")
                    if kind == "parameter" and p.grad is not None and _bad(p.grad):
                        o["note"] = ("its gradient is non-finite too: an earlier backward "
                                     "produced it")
                    return
        # 3. forward, then 4. backward
        trail = _Trail()
        # only a gradient's origin needs the backward: a loss's forward replays without a graph
        # (on a device nearly full, the step's own graph is still alive at that point)
        backward = not trigger.startswith("losses/") and self.grad_out is not None
        with _restored(m), torch.enable_grad() if backward else torch.no_grad():
            out = self._forward(m, trail)
            if trail.op is not None or trail.module is not None:
                op, opmod = trail.op or (None, None)
                name = opmod if opmod is not None else trail.module
                o.update(direction="forward", module=name, op=op,
                         module_type=type(m.get_submodule(name)).__name__)
                self._weights_note(o, m.get_submodule(name))
                return
            if trigger.startswith("losses/"):
                o.update(direction="forward", module=None, where="loss",
                         why="the model's forward replayed finite")
                return
            if self.grad_out is None:
                o["why"] = "the forward replayed finite and no gradient was kept"
                return
            self._backward(m, out, trail, o)

    def _forward(self, m, trail: _Trail):
        handles = []

        def pre(name):
            def fn(mod, args):
                trail.stack.append(name)
                trail.order.append(name)
            return fn

        def post(name):
            def fn(mod, args, out):
                if trail.stack and trail.stack[-1] == name:
                    trail.stack.pop()
                if trail.module is None and _any_bad(out) and not _any_bad(args):
                    trail.module = name
            return fn

        try:
            # the root's own forward is called, not the module: the hooks on it (the step
            # clock's, this tracer's) must not see the replay
            for name, mod in m.named_modules():
                if mod is m:
                    continue
                handles.append(mod.register_forward_pre_hook(pre(name)))
                handles.append(mod.register_forward_hook(post(name)))
            trail.stack.append("")
            trail.order.append("")
            with _eager(), _autocast(self.autocast), _function_mode(trail):
                out = m.forward(*self.args, **self.kwargs)
            if trail.module is None and _any_bad(out):
                trail.module = ""
            return out
        finally:
            for h in handles:
                h.remove()

    def _backward(self, m, out, trail: _Trail, o: dict) -> None:
        t = _differentiable(out)
        if t is None or tuple(t.shape) != tuple(self.grad_out.shape):
            o["why"] = "the forward replayed finite; its output cannot be differentiated again"
            return
        if _bad(self.grad_out):  # what the loss computation gave the model was already bad
            o.update(direction="backward", module=None, where="loss")
            return
        params = [p for _, p in self._params]
        refused = False
        with warnings.catch_warnings():
            # torch says that a module whose inputs need no gradient fires its hook with
            # its outputs' gradients: what is checked here
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            grads = self._grad(m, t, params, trail, hooks=True, o=o)
            if grads is None:  # full backward hooks refused (an in-place op on an output)
                refused = True
                grads = self._grad(m, t, params, trail, hooks=False, o=o)
        o["direction"] = "backward"
        name = trail.back_module
        if name is None and grads is not None:
            # by the parameter gradients: the last module in forward order with a non-finite
            # one (the NaN flows back into the modules before it)
            owners = {}
            for (pname, _), g in zip(self._params, grads):
                if g is not None and _bad(g):
                    owner = pname.rsplit(".", 1)[0] if "." in pname else ""
                    owners[owner] = pname
            for mod in reversed(trail.order):
                if mod in owners:
                    name = mod
                    o["by"] = "parameter gradients"
                    o["note"] = (
                        ("an in-place op refused module backward hooks: " if refused else
                         "no module turned a finite input gradient non-finite: ") +
                        "named as the last module in forward order whose parameters got a "
                        f"non-finite gradient ({owners[mod]}); it began there or in the code "
                        "after it")
                    break
        if name is None:
            o["why"] = ("the backward replayed finite: the non-finite gradient did not come "
                        "from this rank's step (another rank's, through the all-reduce?) or "
                        "does not reproduce")
            o["direction"] = None
            return
        o.update(module=name, op=trail.back_op, module_type=type(m.get_submodule(name)).__name__)

    def _grad(self, m, t, params, trail: _Trail, hooks: bool, o: dict):
        import torch
        handles = []

        def back(name):
            def fn(mod, grad_input, grad_output):
                if trail.back_module is not None:
                    return None
                out_ok = not _any_bad(grad_output)
                if out_ok and _any_bad(grad_input):
                    trail.back_module = name
                elif not out_ok and trail.back_bad_out is None:
                    trail.back_bad_out = name
                return None
            return fn

        try:
            if hooks:
                for name, mod in m.named_modules():
                    if mod is not m:  # the root's forward is called directly
                        handles.append(mod.register_full_backward_hook(back(name)))
                out = self._forward(m, _Trail())  # again: the hooks wrap the tensors
                t = _differentiable(out)
            with _dispatch_mode(trail):
                return torch.autograd.grad([t], params, grad_outputs=[self.grad_out],
                                           allow_unused=True)
        except RuntimeError as e:
            if not hooks:
                raise
            log.debug("trainscope: NaN origin: backward hooks refused (%s)", e)
            trail.back_module = trail.back_bad_out = trail.back_op = None
            return None
        finally:
            for h in handles:
                h.remove()

    @staticmethod
    def _weights_note(o: dict, mod) -> None:
        try:
            big = max((float(p.detach().abs().max()) for p in mod.parameters(recurse=False)
                       if p.numel()), default=0.0)
            if big > 1e10:
                o["note"] = (f"its weights are huge (max |w| = {big:.3g}): the weights "
                             "exploded (check the learning rate)")
        except Exception:
            pass


@contextlib.contextmanager
def _restored(m):
    """Buffers (BatchNorm running statistics), training modes and RNG states as they were."""
    import torch
    buffers = [(b, b.detach().clone()) for b in m.buffers()]
    modes = [(x, x.training) for x in m.modules()]
    cpu_rng = torch.get_rng_state()
    cuda_rng = None
    try:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            cuda_rng = torch.cuda.get_rng_state_all()
    except Exception:
        cuda_rng = None
    try:
        yield
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
        for x, training in modes:
            x.training = training
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)


@contextlib.contextmanager
def _eager():
    """torch.compile'd code (module.compile(), a compiled submodule) runs eagerly: compiled
    graphs skip the submodule hooks the replay needs."""
    import torch
    stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    if stance is None:
        yield
        return
    with stance("force_eager"):
        yield


def _autocast(state):
    import torch
    if state is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=state[0], dtype=state[1])


def _summary(o: dict) -> str:
    """The origin in plain words (the report's and the stop message's)."""
    where = f"rank {o['rank']}, step {o['step']}"
    mod = o.get("module")
    label = (mod or "the model") + (f" ({o['module_type']})" if o.get("module_type") else "")
    if o.get("bad_input"):
        s = f"{o['bad_input']} was already non-finite before the forward of {where}"
        if o["bad_input"].startswith("parameter"):
            s += " (the weights exploded: check the learning rate)"
        elif "input" in o["bad_input"]:
            s += " (the data)"
        if o.get("note"):
            s += f"; {o['note']}"
        return s
    if o.get("where") == "loss":
        return (f"{o['direction']} of {where}: the loss computation, outside the model ("
                + ("the model's output replayed finite)" if o["direction"] == "forward" else
                   "the gradient it gave the model's output was already non-finite)"))
    if o.get("direction"):
        s = f"{o['direction']} of {where}: {label} "
        s += ("produced it from finite inputs" if o["direction"] == "forward" else
              "got a non-finite parameter gradient" if o.get("by") else
              "turned a finite gradient into a non-finite one")
        if o.get("op"):
            s += f" (op {o['op']})"
        if o.get("note"):
            s += f"; {o['note']}"
        return s
    return f"{where}: origin not found: {o.get('why', 'unknown')}"

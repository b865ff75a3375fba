"""What the hook captures: the tensors each collection selects (parameters, gradients, layer
outputs and inputs), the plan of a save step, and the torch hooks installed for it.

Gradient hooks and layer forward hooks exist only on the steps that save them; a save step
followed by another with the same plan keeps them. Layers inside torch.compile'd code get no
hooks (they would be traced into the graph); DTensor shards are read as this rank's shard.
"""
from __future__ import annotations

import functools
import logging
from typing import Dict, List, Sequence

from ._dtypes import _torch_codes
from ._grad_norm import _GradNormRecorder
from ._modes import Mode
from ._schema import EVENT
from ._step_clock import CALLBACK_GRADIENT, CALLBACK_MODEL_POST, CALLBACK_MODEL_PRE
from ._storage import SUMMARY_BYTES

log = logging.getLogger("trainscope")


class _Plan:
    """What one save step captures: tensors by source, with flags (raw, reductions, buckets)."""

    __slots__ = ("params", "grads", "outputs", "inputs", "lane_rows", "lane_colls")

    def __init__(self):
        self.params: List[tuple] = []          # (full_name, param, flags, collection)
        self.grads: Dict[str, list] = {}       # param name -> [(full_name, flags, collection)]
        self.outputs: Dict[str, list] = {}     # module name -> [(full_name, flags, collection)]
        self.inputs: Dict[str, list] = {}
        # the gradients as the step clock's gradient lane takes them (Capture._lane_rows):
        # by parameter index None or [(full_name, buckets, index in lane_colls)]; None when a
        # gradient is saved raw (the hook's Python path copies it)
        self.lane_rows = None
        self.lane_colls: tuple = ()

    def empty(self) -> bool:
        return not (self.params or self.grads or self.outputs or self.inputs)


class Capture:
    """Selection, save plans and the step's torch hooks (a mixin of Hook)."""

    _shards = None  # FSDP1's ShardMap (_fsdp1.py): gradients read at optimizer.step()

    def _register_module(self, module, forward_steps: bool = True) -> None:
        self._model = module
        self._params = [(_plain_name(n), p) for n, p in module.named_parameters()]
        from ._fsdp1 import ShardMap
        self._shards = ShardMap.of(module)  # FSDP1: this rank's pieces, by full name
        if self._shards is not None:
            self._params = self._shards.params()
        self._param_index = {n: i for i, (n, _) in enumerate(self._params)}
        self._modules, self._compiled_modules = _modules_of(module)
        # the clock's hook objects (copies of the module get inert ones: see
        # python/stepclock/torch_hooks.cc).
        # On a torch.compile'd model (OptimizedModule) they go on the wrapper, whose hooks run
        # outside the compiled code (its `training` is the original module's).
        import torch
        self._clock.set_torch(torch.Tensor, torch.float32, torch.float64)  # tensors read in place
        try:  # the gradient lane's end of backward (python/stepclock/torch_hooks.cc)
            self._clock.set_backward_queue(
                torch.autograd.Variable._execution_engine.queue_callback)
        except AttributeError:
            self._clock.set_backward_queue(None)  # the hook's own (_queue_backward_end)
        if forward_steps:
            clock = self._clock
            self._handles.append(module.register_forward_pre_hook(
                clock.callback(CALLBACK_MODEL_PRE)))
            self._handles.append(module.register_forward_hook(clock.callback(CALLBACK_MODEL_POST)))
        _GradNormRecorder.add(self)
        self._targets = self._compute_targets()
        self._plan_cache.clear()
        self._active_memo = None
        self._project_storage()

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
        self._set_grad_lane(plan)
        if self._hooked_plan is plan:  # kept from the previous step, which saved the same
            self._clock.grad_begin(self._hooked_grads, len(self._params))
            if plan.params and not self._hooked_grads:
                self._flush_batches(device=False)
            self._set_repeat(plan, mode, ms)
            return
        self._remove_step_hooks()
        self._hooked_plan = plan
        pending = 0
        if plan.grads:
            for pname in plan.grads:
                index = self._param_index.get(pname)
                p = None if index is None else self._params[index][1]
                if p is not None and p.requires_grad and self._shards is None:
                    # after accumulation, reading .grad: a tensor hook keeping the incoming
                    # gradient makes torch copy it (see kGrad in python/stepclock/torch_hooks.cc)
                    self._step_handles.append(p.register_post_accumulate_grad_hook(
                        self._clock.callback(CALLBACK_GRADIENT, index)))
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
        self._set_repeat(plan, mode, ms)

    def _set_repeat(self, plan: _Plan, mode: Mode, ms: int) -> None:
        """When the plan only summarises gradients, all through the gradient lane, and the
        next mode steps save with the same plan, the clock ends and begins those save steps
        itself: no call into Python on them (the steps of a gradients-every-step schedule
        between two weight saves). The run ends where another collection saves or stops
        saving, where the hook takes over again."""
        clock = self._clock
        ss = None
        if (self._lane_rows_set is not None and not plan.params and not plan.outputs
                and not plan.inputs and self._hooked_plan is plan):
            ss = self._schedules()
        if ss is None:
            clock.set_repeat(None)
            return
        until = ss[2].run_end(int(mode), ms, 1024)
        if until <= ms + 1:
            clock.set_repeat(None)
            return
        clock.set_repeat(int(mode), until, ss[2].next_save(int(mode), until), self._hooked_grads)

    # The step clock summarises a save step's CPU gradients itself when the last one arrives
    # (its gradient lane, python/stepclock/torch_hooks.cc): no Python per gradient. The cases
    # that need Python keep the lane off: a GradScaler's scale to divide by, DDP's gradients read
    # once all-reduced, FSDP1 shards, device summaries, communication timing, raw copies.
    # On a step that also summarises weights the hook's one core call for both costs less than
    # the lane's call and a second one for the weights (anchor MLP, every step: 310-340 µs
    # against 340-380 µs of the hook's own time per step).
    _grad_lane_enabled = True  # tests compare both paths

    def _set_grad_lane(self, plan: _Plan) -> None:
        rows = plan.lane_rows
        if (rows is None or plan.params or not self._grad_lane_enabled or not self._saving
                or self._writer is None or self.device_stats == "torch" or self._scalers
                or self._grads_final_only or self._shards is not None
                or self._comm_timing is not None):
            rows = None
        if rows is not self._lane_rows_set:
            self._take_lane_counts()  # the counts of the rows set before, accounted by them
            self._lane_rows_set = rows
            self._lane_colls = plan.lane_colls
        if rows is None:
            self._clock.set_grad_lane(None)
        else:
            self._clock.set_grad_lane(rows, _torch_codes())

    _lane_rows_set = None
    _lane_colls: tuple = ()

    def _take_lane_counts(self) -> None:
        """Accounts the summaries the gradient lane wrote (bytes by collection)."""
        counts = self._clock.take_lane_counts()
        if counts is None:
            return
        pending = self._unaccounted
        for coll, n in zip(self._lane_colls, counts):
            if n:
                pending[coll] = pending.get(coll, 0) + n * SUMMARY_BYTES

    def _note_compiled_layer(self, mname: str) -> None:
        """A layer hook not installed because the layer runs in compiled code: said once."""
        if self._warned_compiled:
            return
        self._warned_compiled = True
        msg = (f"trainscope: layer {mname!r} (and any other) runs inside torch.compile'd code: "
               "its activations/inputs are not recorded (a hook there would be traced into "
               "the graph); the model's parameters and gradients are")
        log.warning(msg)
        self.add_event(EVENT.TORCH_COMPILE, {"message": msg, "layer": mname,
                                         "step": self.step_count})

    _warned_compiled = False

    def _end_save(self) -> None:
        self._slow_grads(final=True)
        self._take_lane_counts()
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
        self._clock.set_repeat(None)
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
        plan.lane_rows, plan.lane_colls = self._lane_rows(plan)
        return plan

    def _lane_rows(self, plan: _Plan):
        """The plan's gradients for the step clock's gradient lane: ([None or [(full_name,
        buckets, collection index)]] by parameter index, collection names); (None, ()) when it
        has no gradients or saves one raw."""
        if not plan.grads:
            return None, ()
        colls: List[str] = []
        rows: list = [None] * len(self._params)
        for pname, lst in plan.grads.items():
            index = self._param_index.get(pname)
            if index is None:
                continue
            mine = []
            for full, (raw, red, buckets), coll in lst:
                if raw:
                    return None, ()
                if red:
                    if coll not in colls:
                        colls.append(coll)
                    mine.append((full, int(buckets), colls.index(coll)))
            rows[index] = mine
        return rows, tuple(colls)


def _is_dtensor(t) -> bool:
    """A torch.distributed DTensor (sharded or replicated parameters and gradients)."""
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


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

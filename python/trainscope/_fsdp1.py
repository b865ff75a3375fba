"""FSDP1 (``torch.distributed.fsdp.FullyShardedDataParallel``): this rank's pieces of the
original parameters, under their full names.

FSDP1 flattens the parameters of each wrapped unit into one ``FlatParameter`` and keeps a
1-D shard of it on each rank (with ``use_orig_params=False`` the module's only parameter is
``_fsdp_wrapped_module._flat_param``; with ``use_orig_params=True`` the original parameters
become 1-D views of the shard, empty where this rank holds none of them). Either way the flat
parameter records, per original parameter, its fully qualified name in the unit (``_fqns``)
and where its piece lies in this rank's shard (``_shard_param_infos``: in_shard,
offset_in_shard, numel_in_shard, ...). ``ShardMap`` turns that into (full name, 1-D piece)
pairs for weights (views of the shard, which FSDP keeps in the same storage between steps and
the optimizer updates in place) and, after backward, for gradients (views of the flat
parameter's reduce-scattered ``.grad``). The global l2 norm of a parameter is then
``sqrt(sum over ranks of l2^2)``, as for FSDP2.

FSDP1's gradient hooks fire before the reduce-scatter, so gradients are read at
``optimizer.step()`` (or the step's end), once per step; the hook registers no gradient hooks
on these pieces. Names drop the wrapper parts (``_fsdp_wrapped_module``,
``_checkpoint_wrapped_module``, ``_orig_mod``).
"""
from __future__ import annotations

import sys
from typing import List, Optional, Tuple

_WRAPPER_PARTS = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod")


def full_name(*parts: str) -> str:
    out = []
    for p in parts:
        out.extend(x for x in p.split(".") if x and x not in _WRAPPER_PARTS)
    return ".".join(out)


def _fsdp_class():
    mod = sys.modules.get("torch.distributed.fsdp.fully_sharded_data_parallel")
    return getattr(mod, "FullyShardedDataParallel", None) if mod is not None else None


def is_fsdp1(module) -> bool:
    cls = _fsdp_class()
    return cls is not None and isinstance(module, cls)


class ShardMap:
    """This rank's pieces of an FSDP1 model's parameters (see the module docstring)."""

    def __init__(self, units: List[Tuple[str, object]]):
        # [(full name, flat parameter, offset in the shard, numel)]
        self._pieces: List[Tuple[str, object, int, int]] = []
        for prefix, flat in units:
            for fqn, info in zip(flat._fqns, flat._shard_param_infos):
                if info.in_shard and info.numel_in_shard:
                    self._pieces.append((full_name(prefix, fqn), flat,
                                         int(info.offset_in_shard), int(info.numel_in_shard)))
        self._taken_step = -1

    @classmethod
    def of(cls, module) -> Optional["ShardMap"]:
        """The map of an FSDP1 model (its root or a module holding FSDP1 units), or None."""
        fsdp = _fsdp_class()
        if fsdp is None:
            return None
        units = []
        for name, m in module.named_modules():
            handle = getattr(m, "_handle", None) if isinstance(m, fsdp) else None
            flat = getattr(handle, "flat_param", None)
            if flat is not None and hasattr(flat, "_shard_param_infos"):
                units.append((name, flat))
        return cls(units) if units else None

    def params(self) -> list:
        """[(full name, 1-D view of this rank's piece)]: what the hook summarises as weights
        and selects gradients by. The views are marked as requiring grad (as the parameters
        they stand for), so gradient collections select them."""
        out = []
        for name, flat, off, n in self._pieces:
            v = flat.detach()[off:off + n]
            v.requires_grad_(True)
            out.append((name, v))
        return out

    def grads(self, step: int) -> list:
        """[(index into params(), gradient piece)] of the reduce-scattered gradients, once per
        step (the hook asks at optimizer.step() and again at the step's end)."""
        if step == self._taken_step:
            return []
        self._taken_step = step
        out = []
        for i, (_, flat, off, n) in enumerate(self._pieces):
            g = flat.grad
            if g is not None and g.numel() >= off + n:
                out.append((i, g.detach()[off:off + n]))
        return out

"""grad_norm/total: the norm of every clip_grad_norm_ call, handed to the open hooks."""
from __future__ import annotations

import functools
import threading
import weakref
from typing import TYPE_CHECKING, List

if TYPE_CHECKING:
    from .hook import Hook

class _GradNormRecorder:
    """Records the total norm of every ``torch.nn.utils.clip_grad_norm_`` call as
    ``grad_norm/total`` at the current step of each open hook with a registered model.

    While such a hook exists, the function clip_grad_norm_ looks up at each call to compute the
    norm (``torch.nn.utils.clip_grad._get_total_norm``) is replaced by one that also hands the
    norm to the hooks, so a clip_grad_norm_ imported before the hook was created is covered too;
    nothing of ours runs when clip_grad_norm_ is not called. Where torch has no such function,
    ``clip_grad_norm_`` itself is replaced in ``torch.nn.utils`` and its module (calls through
    a name imported earlier are then not seen). Restored when the last hook closes.

    FSDP1 (``FullyShardedDataParallel``): ``torch.nn.utils.clip_grad_norm_`` over its flat
    shards returns this rank's local norm, so for a hook whose model is FSDP1 it is not
    recorded; FSDP1's own ``model.clip_grad_norm_()`` (the global norm, what torch's docs ask
    FSDP1 users to call) is wrapped too while such a hook exists, and recorded."""

    _hooks: "weakref.WeakSet[Hook]" = weakref.WeakSet()
    _patched: List[tuple] = []  # (module, attribute, original, ours)
    _NORM_FUNCTION = "_get_total_norm"  # in torch.nn.utils.clip_grad where torch has it
    _inside = threading.local()  # in FSDP1's clip_grad_norm_: its inner calls are not recorded

    @classmethod
    def add(cls, hook: Hook) -> None:
        cls._hooks.add(hook)
        if getattr(hook, "_shards", None) is not None:
            cls._patch_fsdp1()
        import torch.nn.utils
        from torch.nn.utils import clip_grad
        if any(m is clip_grad or m is torch.nn.utils for m, *_ in cls._patched):
            return
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
    def _patch_fsdp1(cls) -> None:
        from ._fsdp1 import _fsdp_class
        fsdp = _fsdp_class()
        if fsdp is None or any(m is fsdp for m, *_ in cls._patched):
            return
        orig = fsdp.clip_grad_norm_

        @functools.wraps(orig)
        def recording(self, *args, **kwargs):
            cls._inside.on = True
            try:
                norm = orig(self, *args, **kwargs)
            finally:
                cls._inside.on = False
            for h in list(cls._hooks):
                if getattr(h, "_shards", None) is not None:
                    h._record_grad_norm(norm)
            return norm
        fsdp.clip_grad_norm_ = recording
        cls._patched.append((fsdp, "clip_grad_norm_", orig, recording))

    @classmethod
    def _recording(cls, orig):
        @functools.wraps(orig)
        def recording(*args, **kwargs):
            norm = orig(*args, **kwargs)
            if getattr(cls._inside, "on", False):
                return norm  # FSDP1's clip_grad_norm_ records its own result
            for h in list(cls._hooks):
                if getattr(h, "_shards", None) is None:  # FSDP1: a local norm
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

"""What a checkpoint holds and how it is put back: the model, optimizers, scheduler, extra
state, the RNG states (Python, NumPy, torch CPU and CUDA) and the step counters of the
Checkpointer and its hook (docs/checkpoints.md, "What is saved")."""
from __future__ import annotations

import logging
import random
from typing import Any, Dict

from ._checkpoint_files import now_us

log = logging.getLogger("trainscope")

FORMAT = "trainscope-checkpoint"  # the "format" of the saved state dict (and of its record)
VERSION = 1                       # of the state dict's layout (the record has its own version)
_TRAIN = 0  # Mode.TRAIN


class CheckpointState:
    """The Checkpointer's state capture (a mixin over its model, optimizers, scheduler,
    extra_state, hook, step, lr_scale and rollback count)."""

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
                           "wall_us": now_us(), "lr_scale": self.lr_scale,
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

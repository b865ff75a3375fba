"""What a checkpoint holds and how it is put back: the model, optimizers, scheduler, extra
state, the RNG states (Python, NumPy, torch CPU and CUDA) and the step counters of the
Checkpointer and its hook (docs/checkpoints.md, "What is saved"); finding the newest valid
checkpoint and what a resume records."""
from __future__ import annotations

import logging
import random
from typing import Any, Dict, Optional, Tuple

from ._checkpoint_files import list_checkpoints, now_us, read_verified
from ._schema import EVENT

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

    def _load_latest(self, accept) -> Optional[Tuple[dict, dict]]:
        """(record, state) of the newest valid checkpoint whose record `accept`s, or None."""
        for meta in reversed(list_checkpoints(self.dir)):
            if accept(meta):
                found = self._load_checkpoint(meta)
                if found is not None:
                    return found
        return None

    def _load_checkpoint(self, meta: dict) -> Optional[Tuple[dict, dict]]:
        """(record, state) of one committed checkpoint, or None (checksum or size mismatch,
        not loadable: said and recorded as checkpoint_invalid)."""
        import io
        import torch
        # The bytes are read once, checked, and loaded from memory: the file cannot change
        # between the check and the load, and the record names no file but its own.
        why, record, data = read_verified(meta)
        state = None
        if why is None:
            try:
                # weights_only: a run directory may be writable by others, and a pickle
                # could run their code; our state is tensors and plain values only
                state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
                del data
                if not isinstance(state, dict) or state.get("format") != FORMAT:
                    why = "not a trainscope checkpoint"
                elif int((state.get("trainscope") or {}).get("step", record["step"])) != \
                        int(record["step"]):
                    why = (f"holds step {state['trainscope']['step']}, its record says "
                           f"{record['step']}")
            except Exception as e:
                why = f"torch.load failed: {type(e).__name__}: {e}"
        if why is not None:
            log.warning("trainscope: skipping checkpoint %s: %s", meta["path"], why)
            self._event(EVENT.CHECKPOINT_INVALID, {"path": meta["path"],
                                                   "step": meta["step"], "reason": why})
            return None
        return {**meta, **record}, state  # the record the bytes were checked against

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
                fields["down_time_s"] = max(0.0, (now_us() - last["end_us"]) / 1e6)
        except Exception as e:
            log.debug("trainscope: resume: previous steps not read: %s", e)
        return fields

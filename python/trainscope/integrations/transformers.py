"""The Hugging Face Trainer: one callback records a Trainer training like an explicit ts.Hook.

    from trainscope.integrations.transformers import TrainscopeCallback
    trainer = Trainer(model, args, train_dataset=..., eval_dataset=...,
                      callbacks=[TrainscopeCallback(rules=["exploding_tensor"],
                                                    actions=["stop_training"])])

What it records (docs/integrations.md):

- steps: one TRAIN step per optimizer step, numbered like the Trainer's logs: the step that
  ``state.global_step`` reaches when it ends (the first optimizer step is step 1).
- ``losses/loss``: the ``loss`` of the Trainer's logs (``on_log``): with ``logging_steps=1``
  every step's loss (the mean over its accumulated micro-batches, as the Trainer reports it);
  with ``logging_steps=N`` the Trainer's mean over the last N steps, at the step it was logged.
- an EVAL step per evaluation: ``losses/loss`` = ``eval_loss`` (so ``overfit`` works) and
  every metric as ``scalars/eval_<name>``; the other numeric log entries (``grad_norm``,
  ``learning_rate``, ``epoch``) as ``scalars/<name>`` of the TRAIN step.
- weights and gradients (and any other collection) of the model on the save schedule; a
  GradScaler (fp16) is followed, so gradient summaries are unscaled and skipped steps known.
- a trainscope stop sets ``control.should_save`` (the Trainer writes
  ``output_dir/checkpoint-<step>`` at that step) and ``control.should_training_stop``.
"""
from __future__ import annotations

import os
from typing import Dict, Optional

from transformers import TrainerCallback

from .._modes import Mode
from .._schema import EVENT, worker_stream
from ._driver import Driver, DriverProperties, as_float, log

try:
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
except Exception:  # pragma: no cover - the constant has been "checkpoint" since 2020
    PREFIX_CHECKPOINT_DIR = "checkpoint"


def _dist():
    """torch.distributed when a process group with more than one process is up, else None."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return dist
    except Exception:
        pass
    return None


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


class TrainscopeCallback(DriverProperties, TrainerCallback):
    """Records a Hugging Face Trainer training with a ts.Hook (see the module docs).

    Args:
        out_dir, save_interval, collections, rules, actions, **hook_kwargs: passed to
            ``ts.Hook`` (``raise_on_stop`` and ``auto_step`` are set by the callback). Under
            ``trainscope run`` the hook writes into ``$TRAINSCOPE_RUN_DIR``.
        checkpoint_on_stop: have the Trainer save its checkpoint at the step trainscope
            stops it.
        record_logs: record the other numeric log entries as scalars.
    """

    def __init__(self, out_dir: Optional[str] = None, *, checkpoint_on_stop: bool = True,
                 record_logs: bool = True, **hook_kwargs):
        if out_dir is not None:
            hook_kwargs["out_dir"] = out_dir
        hook_kwargs.pop("auto_step", None)
        self._d = Driver("transformers", hook_kwargs)
        self.checkpoint_on_stop = bool(checkpoint_on_stop)
        self.record_logs = bool(record_logs)
        self._stopped = False
        self._stop_step: Optional[int] = None
        self._device = None
        self.checkpoints: list = []  # checkpoint directories the Trainer wrote while recorded

    # ---- lifetime -------------------------------------------------------------------------------
    def _open(self, args, model=None, optimizer=None) -> None:
        if self._d.hook is not None or self._d.disabled:
            return
        dist = _dist()
        if (dist is not None and "out_dir" not in self._d.hook_kwargs
                and self._d.out_dir is None and not os.environ.get("TRAINSCOPE_RUN_DIR")):
            import time
            name = [os.path.join("trainscope-runs", time.strftime("%Y%m%d-%H%M%S")
                                 + f"-{os.getpid()}")]
            dist.broadcast_object_list(name, src=0)  # one run for all processes
            self._d.hook_kwargs["out_dir"] = name[0]
        rank = int(getattr(args, "process_index", 0) or 0)
        h = self._d.open(model=model, worker=worker_stream(rank))
        if h is None:
            return
        self._device = getattr(args, "device", None)
        scaler = getattr(optimizer, "scaler", None)  # accelerate's AcceleratedOptimizer (fp16)
        if scaler is not None and hasattr(scaler, "step"):
            h.register_scaler(scaler)
        h.add_event(EVENT.TRANSFORMERS, {
            "world_size": int(getattr(args, "world_size", 1) or 1),
            "gradient_accumulation_steps": int(getattr(args, "gradient_accumulation_steps", 1)),
            "logging_steps": getattr(args, "logging_steps", None),
            "bf16": bool(getattr(args, "bf16", False)), "fp16": bool(getattr(args, "fp16", False)),
            "output_dir": str(getattr(args, "output_dir", ""))})

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        try:
            self._open(args, model, optimizer)
        except Exception as e:
            self._d.fail("train begin", e)

    def on_train_end(self, args, state, control, **kwargs):
        try:
            self._d.end()
        except Exception as e:
            self._d.fail("train end", e)
        self._d.close()

    # ---- steps ------------------------------------------------------------------------------
    def on_step_begin(self, args, state, control, **kwargs):
        if self._d.hook is None:
            return
        try:
            self._d.end()  # a step whose log never came
            self._d.begin(Mode.TRAIN, int(state.global_step) + 1)
        except Exception as e:
            self._d.fail("step begin", e)

    def on_step_end(self, args, state, control, **kwargs):
        if self._d.hook is None:
            return
        try:
            if not self._log_due(args, state, control):
                self._d.end()  # else on_log brings this step's loss, then ends it
        except Exception as e:
            self._d.fail("step end", e)
        self._check_stop(args, state, control)

    @staticmethod
    def _log_due(args, state, control) -> bool:
        """The Trainer logs the training loss after this step: at its logging steps, and with
        logging_strategy="epoch" after the epoch's (or the training's) last step."""
        if control.should_log:
            return True
        if getattr(args, "logging_strategy", None) == "epoch":
            ep = float(state.epoch or 0)
            return abs(ep - round(ep)) < 1e-6 or state.global_step >= state.max_steps
        return False

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self._d.hook is None or not logs:
            return
        try:
            if any(str(k).startswith("eval_") for k in logs):
                return  # an evaluation's metrics: on_evaluate records them
            training = self._d.step_open and self._d.hook.mode == Mode.TRAIN
            if training and "loss" in logs:
                self._d.loss(as_float(logs["loss"]))
            if self.record_logs:
                self._d.scalars({k: v for k, v in logs.items() if k != "loss"})
            if training:
                self._d.end()
        except Exception as e:
            self._d.fail("log", e)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        opened_here = False
        try:
            if self._d.hook is None:  # trainer.evaluate() outside train(): the same run
                self._open(args, kwargs.get("model"))
                opened_here = self._d.hook is not None
            if self._d.hook is None:
                return
            self._d.begin(Mode.EVAL)
            metrics = metrics or {}
            loss = as_float(metrics.get("eval_loss"))
            if loss is not None:
                self._d.loss(loss)
            self._d.scalars(metrics)
            self._d.end()
        except Exception as e:
            self._d.fail("evaluate", e)
        if opened_here:
            self._d.close()
        else:
            self._check_stop(args, state, control)

    # ---- stops and checkpoints -------------------------------------------------------------------
    def _check_stop(self, args, state, control) -> None:
        try:
            if self._stopped or self._d.hook is None:
                return
            stop = self._d.should_stop
            dist = _dist()
            if dist is not None:  # every rank stops at the same step (no rank left hanging)
                import torch
                t = torch.tensor([1.0 if stop else 0.0], device=self._device or "cpu")
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                stop = bool(t.item() > 0)
            if not stop:
                return
            self._stopped = True
            self._stop_step = int(state.global_step)
            reason = self._d.stop_reason
            log.warning("trainscope: stopping the Trainer at global step %d: %s",
                        state.global_step, reason)
            if self.checkpoint_on_stop:
                control.should_save = True  # written by the Trainer before it leaves the loop
            control.should_training_stop = True
            self._d.event(EVENT.STOP_HONOURED, {
                "reason": reason, "step": self._d.hook.step_count,
                "global_step": int(state.global_step),
                "checkpoint": (self._checkpoint_dir_of(state, args) if self.checkpoint_on_stop
                               else None)})
        except Exception as e:
            self._d.fail("stop", e)

    def _checkpoint_dir_of(self, state, args=None) -> Optional[str]:
        out = getattr(args, "output_dir", None) if args is not None else None
        if out is None:
            out = self._output_dir
        if out is None:
            return None
        return os.path.join(str(out), f"{PREFIX_CHECKPOINT_DIR}-{int(state.global_step)}")

    _output_dir = None

    def on_init_end(self, args, state, control, **kwargs):
        self._output_dir = getattr(args, "output_dir", None)

    def on_save(self, args, state, control, **kwargs):
        try:
            self._output_dir = getattr(args, "output_dir", self._output_dir)
            path = self._checkpoint_dir_of(state, args)
            reason = "stop" if self._stop_step == int(state.global_step) else "trainer"
            if path is not None:
                self.checkpoints.append(path)
            if self._d.hook is not None:
                self._d.event(EVENT.CHECKPOINT, {
                    "step": int(state.global_step), "global_step": self._d.hook.step_count,
                    "path": path, "reason": reason,
                    "bytes": _dir_bytes(path) if path and os.path.isdir(path) else 0})
        except Exception as e:
            self._d.fail("save", e)

"""PyTorch Lightning: one callback records a Lightning training like an explicit ts.Hook.

    from trainscope.integrations.lightning import TrainscopeCallback
    trainer = Trainer(callbacks=[TrainscopeCallback(rules=["exploding_tensor"],
                                                    actions=["stop_training"])])

Works with ``lightning.pytorch`` and ``pytorch_lightning`` (2.x): the callback is an instance
of both packages' ``Callback``. What it records and how stops and checkpoints work is in
docs/integrations.md:

- steps: one TRAIN step per optimizer step; its mode step is ``trainer.global_step`` at the
  step's first batch (gradient accumulation: several batches, one step). Validation (and test,
  by default) batches are EVAL steps, predict batches PREDICT steps.
- ``losses/loss``: the training_step's loss every step (with accumulation the mean of the
  micro-batch losses, i.e. the loss of the accumulated batch); in EVAL the validation_step's
  returned loss, or the logged ``val_loss`` when validation_step returns none.
- ``scalars/<name>``: the metrics logged with ``self.log`` (``trainer.callback_metrics``) at
  the end of each validation and training epoch.
- weights, gradients (and any other collection) of the LightningModule, on the save schedule.
- a trainscope stop (a rule's stop_training action, ``trainscope stop``, the dashboard) saves a
  checkpoint with ``trainer.save_checkpoint`` and sets ``trainer.should_stop``; on SIGTERM
  (Lightning's own handler) the callback saves a checkpoint before Lightning exits.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any, Dict, Optional

from .._modes import Mode
from .._schema import EVENT, worker_stream
from ._driver import Driver, DriverProperties, as_float, log

_BASES = []
for _name in ("lightning.pytorch", "pytorch_lightning"):
    try:
        _mod = __import__(_name, fromlist=["Callback"])
        if _mod.Callback not in _BASES:
            _BASES.append(_mod.Callback)
    except Exception:  # not installed (or broken): the other one may be
        pass
if not _BASES:
    raise ImportError("trainscope.integrations.lightning needs PyTorch Lightning 2.x "
                      "(pip install lightning, or pytorch-lightning)")

_EVAL_NAMES = ("val_loss", "valid_loss", "validation_loss", "val/loss", "valid/loss",
               "validation/loss", "eval_loss", "eval/loss")
_TEST_NAMES = ("test_loss", "test/loss")


def _parse_mode(value) -> Mode:
    m = Mode.parse(value)
    if m == Mode.GLOBAL:
        raise ValueError("test_mode must be TRAIN, EVAL or PREDICT")
    return m


def _loss_of(outputs):
    """The loss in a *_step's return value: a one-element tensor, or the "loss" entry of a
    dict (anything else, e.g. predictions, is no loss)."""
    value = outputs
    if value is not None and not hasattr(value, "detach") and hasattr(value, "get"):
        try:
            value = value.get("loss")
        except Exception:
            return None
    if value is None or not hasattr(value, "detach"):
        return None
    try:
        return value if value.numel() == 1 else None
    except Exception:
        return None


class TrainscopeCallback(DriverProperties, *_BASES):
    """Records a Lightning training with a ts.Hook (see the module docs).

    Args:
        out_dir, save_interval, collections, rules, actions, **hook_kwargs: passed to
            ``ts.Hook`` (its own ``raise_on_stop`` and ``auto_step`` are set by the callback).
            Under ``trainscope run`` the hook writes into ``$TRAINSCOPE_RUN_DIR``.
        checkpoint_on_stop: save a Lightning checkpoint when trainscope stops the training.
        checkpoint_on_sigterm: save one when Lightning receives SIGTERM (single process).
        checkpoint_dir: where (default: ``<run dir>/checkpoints``); files are named
            ``lightning-<reason>-step=<global step>.ckpt``; resume with
            ``trainer.fit(model, ckpt_path=...)``.
        test_mode: the mode of test batches (default EVAL; "predict" keeps them apart from
            the validation losses the overfit rule compares).
        record_metrics: record ``trainer.callback_metrics`` as ``scalars/<name>``.
    """

    def __init__(self, out_dir: Optional[str] = None, *, checkpoint_on_stop: bool = True,
                 checkpoint_on_sigterm: bool = True, checkpoint_dir: Optional[str] = None,
                 test_mode="eval", record_metrics: bool = True, **hook_kwargs):
        super().__init__()
        if out_dir is not None:
            hook_kwargs["out_dir"] = out_dir
        hook_kwargs.pop("auto_step", None)
        self._d = Driver("lightning", hook_kwargs)
        self.checkpoint_on_stop = bool(checkpoint_on_stop)
        self.checkpoint_on_sigterm = bool(checkpoint_on_sigterm)
        self.checkpoint_dir = checkpoint_dir
        self.test_mode = _parse_mode(test_mode)
        self.record_metrics = bool(record_metrics)
        self._gs_open: Optional[int] = None  # trainer.global_step when the TRAIN step opened
        self._stopped = False
        self._eval_loss_seen = False  # a loss came from validation_step in this validation
        self._metrics_seen: Dict[str, float] = {}
        self._module_registered = False
        self.checkpoints: list = []  # paths this callback saved

    # ---- lifetime -------------------------------------------------------------------------------
    def setup(self, trainer, pl_module, stage: str) -> None:
        try:
            if self._d.hook is not None or self._d.disabled:
                return
            world = int(getattr(trainer, "world_size", 1) or 1)
            if (world > 1 and "out_dir" not in self._d.hook_kwargs and self._d.out_dir is None
                    and not os.environ.get("TRAINSCOPE_RUN_DIR")):
                # one run for all ranks: rank 0's default directory
                name = os.path.join("trainscope-runs", time.strftime("%Y%m%d-%H%M%S")
                                    + f"-{os.getpid()}")
                self._d.hook_kwargs["out_dir"] = trainer.strategy.broadcast(name, src=0)
            self._d.open(worker=worker_stream(int(getattr(trainer, 'global_rank', 0) or 0)))
            self._module_registered = False
        except Exception as e:
            self._d.fail("setup", e)

    def _ensure_module(self, trainer, pl_module) -> None:
        """Registers the model once it sits on its device (after the strategy's setup)."""
        if self._module_registered or self._d.hook is None:
            return
        self._module_registered = True
        h = self._d.hook
        h.register_module(pl_module, forward_steps=False)
        scaler = getattr(getattr(trainer, "precision_plugin", None), "scaler", None)
        if scaler is not None and hasattr(scaler, "step"):
            h.register_scaler(scaler)  # 16-mixed: amp/ scalars, unscaled gradient summaries
        h.add_event(EVENT.LIGHTNING, {
            "precision": str(getattr(trainer, "precision", "")),
            "strategy": type(getattr(trainer, "strategy", None)).__name__,
            "world_size": int(getattr(trainer, "world_size", 1) or 1),
            "accumulate_grad_batches": int(getattr(trainer, "accumulate_grad_batches", 1) or 1),
            "global_step": int(getattr(trainer, "global_step", 0) or 0)})

    def teardown(self, trainer, pl_module, stage: str) -> None:
        try:
            self._d.close()
        except Exception as e:
            self._d.fail("teardown", e)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        try:
            if self._d.hook is None:
                return
            if getattr(trainer, "received_sigterm", False) or \
                    type(exception).__name__ == "SIGTERMException":
                path = None
                if self.checkpoint_on_sigterm:
                    if int(getattr(trainer, "world_size", 1) or 1) == 1:
                        path = self._checkpoint(trainer, "sigterm")
                    else:
                        # Lightning's ranks leave the loop at different points after SIGTERM:
                        # a collective save_checkpoint could wait for a rank that has left
                        self._d.event(EVENT.CHECKPOINT_SKIPPED, {
                            "reason": "SIGTERM under a multi-process strategy",
                            "step": int(trainer.global_step)})
                self._d.event(EVENT.PREEMPTED, {
                    "signal": int(signal.SIGTERM), "step": int(trainer.global_step),
                    "global_step": self._d.hook.step_count, "checkpoint": path})
            else:
                self._d.event(EVENT.TRAINING_FAILED, {
                    "error": f"{type(exception).__name__}: {exception}"[:500],
                    "step": int(getattr(trainer, "global_step", 0) or 0)})
        except Exception as e:
            self._d.fail("on_exception", e)
        finally:
            self._d.close()  # Lightning calls no teardown hooks after an exception

    # ---- training ---------------------------------------------------------------------------
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._d.hook is None:
            return
        try:
            self._ensure_module(trainer, pl_module)
            if not self._d.step_open or self._d.hook.mode != Mode.TRAIN:
                self._gs_open = int(trainer.global_step)
                self._d.begin(Mode.TRAIN, self._gs_open)
        except Exception as e:
            self._d.fail("train batch start", e)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._d.hook is None:
            return
        try:
            loss = _loss_of(outputs)
            if loss is not None and getattr(pl_module, "automatic_optimization", True):
                k = int(getattr(trainer, "accumulate_grad_batches", 1) or 1)
                if k != 1:  # Lightning divided it for backward; record the batch's own loss
                    loss = loss * k
            self._d.loss(loss)
        except Exception as e:
            self._d.fail("train batch end", e)
        try:
            if self._gs_open is not None and int(trainer.global_step) != self._gs_open:
                self._d.end()  # the optimizer stepped: the step is complete
                self._gs_open = None
            self._check_stop(trainer)
        except Exception as e:
            self._d.fail("train batch end", e)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if self._d.hook is None:
            return
        try:
            if self._d.step_open and self._d.hook.mode == Mode.TRAIN:
                self._d.end()  # an accumulation window cut short by the epoch's end
                self._gs_open = None
            self._record_metrics(trainer)
        except Exception as e:
            self._d.fail("train epoch end", e)

    # ---- validation, test, predict -------------------------------------------------------------
    def _eval_batch_start(self, trainer, pl_module, mode: Mode) -> None:
        if self._d.hook is None or getattr(trainer, "sanity_checking", False):
            return
        self._ensure_module(trainer, pl_module)
        if self._d.step_open and self._d.hook.mode == mode:
            self._d.end()  # the previous batch's step (kept open for the epoch's metrics)
        self._d.begin(mode)

    def _eval_batch_end(self, trainer, outputs) -> None:
        if self._d.hook is None or getattr(trainer, "sanity_checking", False):
            return
        loss = _loss_of(outputs)
        if loss is not None:
            self._eval_loss_seen = True
            self._d.loss(loss)

    def _eval_end(self, trainer, names) -> None:
        if self._d.hook is None or getattr(trainer, "sanity_checking", False):
            return
        if not self._d.step_open:
            return  # no batch ran
        if not self._eval_loss_seen:  # validation_step returned no loss: the logged one
            metrics = getattr(trainer, "callback_metrics", {}) or {}
            for n in names:
                v = as_float(metrics.get(n))
                if v is not None:
                    self._d.loss(v)
                    break
        self._eval_loss_seen = False
        self._record_metrics(trainer)
        self._d.end()
        self._check_stop(trainer)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx,
                                  dataloader_idx: int = 0) -> None:
        try:
            self._eval_batch_start(trainer, pl_module, Mode.EVAL)
        except Exception as e:
            self._d.fail("validation batch start", e)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx,
                                dataloader_idx: int = 0) -> None:
        try:
            self._eval_batch_end(trainer, outputs)
        except Exception as e:
            self._d.fail("validation batch end", e)

    def on_validation_end(self, trainer, pl_module) -> None:
        try:
            self._eval_end(trainer, _EVAL_NAMES)
        except Exception as e:
            self._d.fail("validation end", e)

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx,
                            dataloader_idx: int = 0) -> None:
        try:
            self._eval_batch_start(trainer, pl_module, self.test_mode)
        except Exception as e:
            self._d.fail("test batch start", e)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx,
                          dataloader_idx: int = 0) -> None:
        try:
            self._eval_batch_end(trainer, outputs)
        except Exception as e:
            self._d.fail("test batch end", e)

    def on_test_end(self, trainer, pl_module) -> None:
        try:
            self._eval_end(trainer, _TEST_NAMES)
        except Exception as e:
            self._d.fail("test end", e)

    def on_predict_batch_start(self, trainer, pl_module, batch, batch_idx,
                               dataloader_idx: int = 0) -> None:
        try:
            self._eval_batch_start(trainer, pl_module, Mode.PREDICT)
        except Exception as e:
            self._d.fail("predict batch start", e)

    def on_predict_end(self, trainer, pl_module) -> None:
        try:
            if self._d.hook is not None and self._d.step_open:
                self._d.end()
        except Exception as e:
            self._d.fail("predict end", e)

    # ---- metrics, stops, checkpoints -------------------------------------------------------------
    def _record_metrics(self, trainer) -> None:
        """callback_metrics that are new or changed since last recorded, as scalars of the
        current step and mode."""
        if not self.record_metrics:
            return
        metrics = getattr(trainer, "callback_metrics", None) or {}
        fresh = {}
        for name, value in metrics.items():
            v = as_float(value)
            if v is None:
                continue
            old = self._metrics_seen.get(name)
            if old is None or not (old == v or (old != old and v != v)):
                fresh[name] = v
                self._metrics_seen[name] = v
        self._d.scalars(fresh)

    def _check_stop(self, trainer) -> None:
        if self._stopped or getattr(getattr(trainer, "state", None), "fn", "fit") != "fit":
            return  # only a fit is stopped (validate/test/predict run to their end)
        stop = self._d.should_stop
        if int(getattr(trainer, "world_size", 1) or 1) > 1:
            # every rank takes the stop at the same step (a rank that leaves while the others
            # enter the next all-reduce would hang the job): one boolean all-reduce per step
            stop = bool(trainer.strategy.reduce_boolean_decision(stop, all=False))
        if not stop:
            return
        self._stopped = True
        reason = self._d.stop_reason
        log.warning("trainscope: stopping the Lightning training at global step %d: %s",
                    int(trainer.global_step), reason)
        path = self._checkpoint(trainer, "stop") if self.checkpoint_on_stop else None
        trainer.should_stop = True
        self._d.event(EVENT.STOP_HONOURED, {"reason": reason, "step": self._d.hook.step_count,
                                        "global_step": int(trainer.global_step),
                                        "checkpoint": path})

    def _checkpoint(self, trainer, reason: str) -> Optional[str]:
        """trainer.save_checkpoint into checkpoint_dir; a `checkpoint` event (or
        `checkpoint_failed`). Every rank calls it (Lightning writes on rank 0)."""
        h = self._d.hook
        base = self.checkpoint_dir or os.path.join(h.out_dir, "checkpoints")
        path = os.path.join(base, f"lightning-{reason}-step={int(trainer.global_step)}.ckpt")
        t0 = time.perf_counter()
        try:
            trainer.save_checkpoint(path)
        except Exception as e:
            self._d.event(EVENT.CHECKPOINT_FAILED, {"where": reason, "path": path,
                                                "message": f"{type(e).__name__}: {e}"})
            self._d.fail("checkpoint", e)
            return None
        dur = time.perf_counter() - t0
        size = os.path.getsize(path) if os.path.isfile(path) else 0
        self.checkpoints.append(path)
        self._d.event(EVENT.CHECKPOINT, {"step": int(trainer.global_step),
                                     "global_step": h.step_count, "path": path,
                                     "bytes": size, "duration_us": int(dur * 1e6),
                                     "reason": reason})
        log.info("trainscope: Lightning checkpoint %s (%d bytes)", path, size)
        return path

    # ---- Lightning checkpoints of the callback itself --------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """The hook's step counters go into Lightning checkpoints, so a resumed training
        continues the recorded series."""
        h = self._d.hook
        try:
            if h is not None:
                return {"hook": h.state_dict()}
            return {"hook": self._d._state} if self._d._state else {}  # after teardown
        except Exception as e:
            self._d.fail("state_dict", e)
            return {}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        try:
            st = (state_dict or {}).get("hook")
            if not st:
                return
            self._d._state = st
            if self._d.hook is not None:
                self._d.hook.load_state_dict(st)
        except Exception as e:
            self._d.fail("load_state_dict", e)

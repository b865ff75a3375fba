"""What a ts.Checkpointer and its rollback executor use of the hook they follow.

The Checkpointer (checkpoint.py) and the rollback executor (rollback.py) once read the hook's
private state directly (``_rollback``, ``_dist``, ``_stop_reason``, ``_request_stop_inprocess``,
``_mode_steps``, ``_closed`` ...). They now go through this one narrow object, so those
attributes are read in one place beside the hook and a change of the hook's internals is made
here too. Everything else they need is the hook's public API (``step_count``, ``out_dir``,
``worker``, ``flush``, ``add_event``, ``state_dict``/``load_state_dict``, ``take_rollbacks``,
``rule_statuses``, ``add_step_callback``/``remove_step_callback``, ``stop_reason``).

Thread-safety: as the hook's; ``request_stop`` may be called from any thread, the rest from
the training thread.
"""
from __future__ import annotations

from typing import Any, Optional

_TRAIN = 0  # Mode.TRAIN


class HookLink:
    """The hook as a Checkpointer sees it (see the module docstring)."""

    __slots__ = ("hook",)

    def __init__(self, hook):
        self.hook = hook

    # ------------------------------------------------------------------ configuration
    def rollback_spec(self) -> Optional[dict]:
        """{"rules": [rule ids], "action": ts.Rollback} from the hook's rules and actions, or
        None when none of them rolls back."""
        return getattr(self.hook, "_rollback", None)

    def attach(self, ckpt) -> None:
        """Registers `ckpt` as the Checkpointer following this hook (one per hook)."""
        self.hook._checkpointer = ckpt

    def detach(self, ckpt) -> None:
        if getattr(self.hook, "_checkpointer", None) is ckpt:
            self.hook._checkpointer = None

    # ---------------------------------------------------------------------- the step
    def train_steps(self) -> int:
        """Completed TRAIN steps (the TRAIN step the next step begins)."""
        return int(self.hook._mode_steps.get(_TRAIN, 0))

    @property
    def closed(self) -> bool:
        return bool(getattr(self.hook, "_closed", False))

    def in_train(self) -> bool:
        return int(self.hook.mode) == _TRAIN

    # ------------------------------------------------------------------------- stops
    @property
    def stop_pending(self) -> bool:
        """A stop was requested and is being honoured (should_stop is, or will be, True)."""
        return getattr(self.hook, "_stop_reason", None) is not None

    def request_stop(self, reason: str, source: str) -> None:
        """Asks for a stop as a rule's stop_training would: in a job of several ranks it is
        held until every rank takes it at the same step (_distributed.py)."""
        self.hook._request_stop_inprocess(reason, source=source)

    # ------------------------------------------------------------------ distributed
    def coordinator(self) -> Optional[Any]:
        """The hook's StopCoordinator (_distributed.py) in a job of several ranks, else None;
        its ``coordinating`` says whether decisions are agreed across ranks now."""
        return getattr(self.hook, "_dist", None)

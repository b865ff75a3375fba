"""Preemption notices: the signal handler of a Checkpointer (a flag the next step boundary acts
on, chained to the previous handler, ignored in forked children), the exit status of a
preempted training, and data-loader workers that survive the notice (docs/checkpoints.md)."""
from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any, Dict

from ._checkpoint_files import now_us

log = logging.getLogger("trainscope")

#: Exit status of a training that checkpointed and exited on a preemption notice (SIGTERM).
#: 75 is EX_TEMPFAIL of sysexits.h ("temporary failure; the user is invited to retry"):
#: distinct from 0 (done), 1 (error) and 143 (killed by SIGTERM without a checkpoint).
PREEMPTED_EXIT_CODE = 75


class _SafeWorkerInit:
    """A DataLoader worker_init_fn: the worker ignores the preemption signals, then calls the
    user's init function. torch's workers install a SIGTERM handler that kills them, so a
    SIGTERM sent to the whole process group (Slurm, `kill -TERM -PGID`) would kill them in the
    middle of the main process's last step; ignoring it lets the main process finish the step,
    checkpoint, and shut its workers down itself."""

    _trainscope_safe = True

    def __init__(self, fn=None, signals=(signal.SIGTERM,)):
        self.fn = fn
        self.signals = tuple(int(s) for s in signals)

    def __call__(self, worker_id: int):
        for s in self.signals:
            try:
                signal.signal(s, signal.SIG_IGN)
            except (ValueError, OSError):
                pass
        if self.fn is not None:
            self.fn(worker_id)


def preemption_safe_worker_init(fn=None, signals=(signal.SIGTERM,)):
    """worker_init_fn for a torch DataLoader whose workers must survive the preemption notice
    (``DataLoader(..., worker_init_fn=ts.checkpoint.preemption_safe_worker_init(my_init))``;
    ``ckpt.wrap(loader)`` sets it for you). Picklable (works with spawn)."""
    return _SafeWorkerInit(fn, signals)


class PreemptionSignals:
    """The Checkpointer's signal handling (a mixin: the state is the Checkpointer's). Uses
    ``_pid`` (the process that installed it), sets ``_preempt_signal`` and ``_preempt_us``,
    keeps the replaced handlers in ``_prev_handlers``."""

    _pid: int
    _preempt_signal: int
    _preempt_us: int
    _prev_handlers: Dict[int, Any]

    def _install_signals(self, sigs) -> None:
        if threading.current_thread() is not threading.main_thread():
            log.warning("trainscope: Checkpointer created outside the main thread; no "
                        "preemption (SIGTERM) handler installed")
            return
        for sig in sigs:
            try:
                self._prev_handlers[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError) as e:
                log.warning("trainscope: cannot handle signal %s: %s", sig, e)

    def _on_signal(self, signum, frame) -> None:
        if os.getpid() != self._pid:
            return  # a forked data-loader worker: the main process handles the notice
        if not self._preempt_signal:
            self._preempt_signal = int(signum)
            self._preempt_us = now_us()
            log.warning("trainscope: signal %d (preemption notice): checkpointing at the end "
                        "of the current step", signum)
        prev = self._prev_handlers.get(signum)
        if callable(prev) and prev not in (signal.SIG_DFL, signal.SIG_IGN,
                                           signal.default_int_handler):
            prev(signum, frame)

    def _restore_signals(self) -> None:
        """Puts the handlers back that _install_signals replaced (main thread of this process)."""
        if os.getpid() == self._pid and threading.current_thread() is threading.main_thread():
            for sig, prev in self._prev_handlers.items():
                try:
                    signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
                except (ValueError, OSError, TypeError):
                    pass
        self._prev_handlers = {}

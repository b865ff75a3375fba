"""How loud trainscope is on stderr: one line per event that matters (a rule fired, a stop, a
degraded component), said by rank 0 for the whole job.

Every module logs to the ``trainscope`` logger and adds no handler of its own, so a user's
logging configuration decides where the lines go (without one, Python's last-resort handler
prints WARNING and above to stderr; with TRAINSCOPE_LOG_LEVEL=info or debug and no handler
anywhere, one stderr handler is added for those lines). Its level:

- ``TRAINSCOPE_LOG_LEVEL`` (debug, info, warning, error, critical) when set: on every rank;
- else WARNING on rank 0 (or a single process) and ERROR on the other ranks of a
  torch.distributed job (``RANK`` > 0): the ranks take stops together, so rank 0 speaking for
  the job keeps a 2-rank stop to one line instead of one per rank. What the other ranks would
  have said is in the run (their events, run_end's hook_errors); TRAINSCOPE_LOG_LEVEL=warning
  shows it on their stderr too.

``trainscope run --quiet`` sets TRAINSCOPE_LOG_LEVEL=error for the training it launches.
"""
from __future__ import annotations

import logging
import os

LEVELS = ("debug", "info", "warning", "error", "critical")


def configure() -> None:
    """Sets the ``trainscope`` logger's level from the environment (at import)."""
    lg = logging.getLogger("trainscope")
    want = os.environ.get("TRAINSCOPE_LOG_LEVEL", "").strip().lower()
    if want:
        if want not in LEVELS:
            lg.setLevel(logging.WARNING)
            lg.warning("trainscope: TRAINSCOPE_LOG_LEVEL=%r is not one of %s; using warning",
                       want, ", ".join(LEVELS))
            return
        lg.setLevel(getattr(logging, want.upper()))
        if lg.level < logging.WARNING and not lg.handlers and not logging.getLogger().handlers:
            # Python's last-resort handler prints WARNING and above only
            h = logging.StreamHandler()
            h.setFormatter(logging.Formatter("%(message)s"))
            lg.addHandler(h)
            lg.propagate = False
        return
    try:
        rank = int(os.environ.get("RANK", "0") or 0)
    except ValueError:
        rank = 0
    lg.setLevel(logging.ERROR if rank > 0 else logging.WARNING)

"""trainscope: capture tensors, losses and timings from PyTorch training, evaluate rules live,
stop the job when one fires, and read everything back.

    import trainscope as ts
    with ts.Hook(out_dir="runs/exp1", save_interval=100) as hook:
        hook.register_module(model)
        hook.register_loss(criterion)
        for x, y in hook.wrap(loader):
            ...
    run = ts.open_run("runs/exp1")
    steps, losses = run.scalar("losses/loss")

See docs/python.md for the whole API. torch is imported only when the hook needs it.
"""
from . import _core
from . import _log
from ._errors import ConfigError
from ._modes import Mode, NotFoundError, RuleFired, TrainingStopped
from .collection import BUILTIN as BUILTIN_COLLECTIONS
from .collection import DEFAULT_COLLECTIONS, Collection
from .hook import Hook, ProfilerConfig
from .checkpoint import PREEMPTED_EXIT_CODE, Checkpointer, Rollback
from .reader import Run, Tensor, open_run
from .rules import Rule, rule_names, watch
from ._tables import SCHEMA_VERSION as TABLE_SCHEMA_VERSION
from ._tables import TABLES

__version__ = _core.__version__
_log.configure()

__all__ = [
    "Hook", "Collection", "ConfigError", "Mode", "ProfilerConfig", "Rule", "RuleFired", "Run",
    "Tensor",
    "NotFoundError", "TrainingStopped", "open_run", "watch", "rule_names", "compute_stats",
    "request_stop", "BUILTIN_COLLECTIONS", "DEFAULT_COLLECTIONS",
    "Checkpointer", "Rollback", "PREEMPTED_EXIT_CODE", "export_parquet", "TABLES",
    "TABLE_SCHEMA_VERSION",
]


def compute_stats(array, buckets: int = 0):
    """Reductions of a numpy array or CPU torch tensor with the core's one-pass kernel
    (min max mean std var l1 l2 abs_mean count nan inf zeros ...).

        >>> import numpy as np, trainscope as ts
        >>> ts.compute_stats(np.array([1.0, 2.0, np.nan]))["mean"]
        1.5
    """
    import numpy as np
    from ._dtypes import numpy_code, torch_to_buffer
    if hasattr(array, "detach"):
        arr, code, _ = torch_to_buffer(array)
    else:
        arr = np.ascontiguousarray(array)
        code = numpy_code(arr.dtype)
    return _core.compute_stats(arr, code, buckets)


def request_stop(run_dir: str, reason: str, requested_by: str = "python") -> None:
    """Asks the training writing `run_dir` to stop (its hook sees it at the next step)."""
    _core.request_stop(run_dir, reason, requested_by)


def export_parquet(runs, dest, system: bool = True):
    """Runs (a run directory or several) as Parquet tables in the folder `dest`, for DuckDB,
    Dask, Spark (docs/export.md, "Parquet"); returns the files written. Needs pyarrow."""
    from .parquet_export import export_parquet as export
    return export(runs, dest, system=system)

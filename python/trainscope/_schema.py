"""The names a run uses: metric names, event kinds, stream and file names.

They come from the core (``include/trainscope/schema.h`` through ``trainscope._core.schema``), so
the Python side, the C++ readers and the web UI spell every name the same way; nothing here is
retyped. Attribute names are the schema's keys in upper case::

    EVENT.RUN_END == "run_end"          METRIC.CPU_UTIL == "cpu.util"
    FILE.STOP_REQUEST == "stop.json"    STREAM.WORKER_PREFIX == "worker-"
    gpu_metric(0, GPU_FIELD.UTIL) == "gpu0.util"
"""
import json
from types import SimpleNamespace

from . import _core

_S = json.loads(_core.schema.JSON)


def _names(d: dict) -> SimpleNamespace:
    return SimpleNamespace(**{k.upper(): v for k, v in d.items()})


EVENT = _names(_S["events"])           # canonical event kinds
EVENT_ALIASES = dict(_S["event_aliases"])  # kinds older writers used -> canonical kind
METRIC = _names(_S["metrics"])         # whole-machine system metrics
GPU_FIELD = _names(_S["gpu"]["fields"])  # gpu<N>.<field>
STREAM = _names(_S["streams"])
FILE = _names(_S["files"])

canonical_event_kind = _core.schema.canonical_event_kind
gpu_metric = _core.schema.gpu_metric
parse_gpu_metric = _core.schema.parse_gpu_metric
worker_stream = _core.schema.worker_stream
parse_profile_file_name = _core.schema.parse_profile_file_name


def profile_file(kind: str, worker: str) -> str:
    """``profile_file("trace", "worker-0") == "trace-worker-0.json"`` (kind: functions, trace)."""
    return FILE.__dict__["PROFILE_" + kind.upper()].replace("{worker}", worker)

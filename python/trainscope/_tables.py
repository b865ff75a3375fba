"""A run as Arrow tables: the one definition of the tables that ``run.table(name)`` returns and
that ``trainscope export parquet`` writes (docs/export.md, "Parquet").

``TABLES`` names every table's columns, types and meaning; ``SCHEMA_VERSION`` is their version.
A change to a table (a column added, removed, renamed or retyped) is a new version: files of an
older version stay readable as they are (docs/export.md, "Version policy").

The tables are built column by column from the extension's column reader
(``_core.read_columns``: one pass over the run, one numpy array per field), so a run of millions
of steps costs no Python object per record. pyarrow is imported here only, when a table is
asked for.
"""
from __future__ import annotations

import json
from typing import Dict, List, Optional, Tuple

import numpy as np

from ._schema import EVENT, STREAM

SCHEMA_VERSION = 1
# Key-value metadata of every Parquet file the export writes (bytes keys, as Parquet keeps them).
META_SCHEMA_VERSION = "schema_version"
META_TABLE = "trainscope.table"
META_PRODUCER = "trainscope.producer"

_MODES = ["TRAIN", "EVAL", "PREDICT", "GLOBAL"]  # Mode codes 0..3 (include/trainscope/types.h)

# Columns every per-stream table starts with.
_STREAM_COLUMNS = [
    ("run_id", "string", False, "the run's id (run.json); also the `run=` folder of the file"),
    ("stream", "string", False, "the stream that recorded it: worker-<rank>, monitor-<host>, "
                                "watch-<pid>"),
    ("rank", "int32", True, "the rank of a worker-<rank> stream; null for other streams"),
]

# table -> [(column, type, nullable, meaning)]
TABLES: Dict[str, List[Tuple[str, str, bool, str]]] = {
    "runs": [
        ("run_id", "string", False, "the run's id (run.json; the folder name when it has none)"),
        ("name", "string", False, "the run's human name"),
        ("path", "string", False, "the run directory it was exported from (absolute)"),
        ("host", "string", False, "the host that started it"),
        ("pid", "int64", False, "the process that started it"),
        ("start_us", "int64", False, "start, µs since the Unix epoch (UTC)"),
        ("end_us", "int64", True, "the latest time any stream recorded, µs; null: nothing yet"),
        ("state", "string", False, "empty, live, ended or crashed (docs/format.md, Run status)"),
        ("framework", "string", False, "\"pytorch 2.4.0\", \"libtorch\", ... (may be empty)"),
        ("command", "list<string>", False, "argv of the training, when known"),
        ("instance_type", "string", True, "config instance_type (the report's cost lookup)"),
        ("model", "string", True, "config model (a string, or an object's \"name\"), else the "
                                  "model the zero-code capture found; null: unknown"),
        ("ranks", "int32", False, "number of worker-<rank> streams"),
        ("last_step", "int64", True, "the highest step any worker recorded; null: none"),
        ("config_json", "string", False, "the whole configuration (JSON object) for anything "
                                         "else: json_extract(config_json, '$.key')"),
    ],
    "steps": _STREAM_COLUMNS + [
        ("step", "int64", False, "global step (all modes)"),
        ("mode", "string", False, "TRAIN, EVAL or PREDICT"),
        ("mode_step", "int64", False, "step counted within the mode"),
        ("start_us", "int64", False, "step start, µs since the Unix epoch"),
        ("end_us", "int64", False, "step end, µs since the Unix epoch"),
        ("duration_us", "int64", False, "end_us - start_us"),
        ("data_wait_us", "int64", True, "time waiting for the data loader; null: not measured"),
        ("forward_us", "int64", True, "forward pass; null: not measured"),
        ("backward_us", "int64", True, "backward pass; null: not measured"),
        ("optimizer_us", "int64", True, "optimizer step; null: not measured"),
    ],
    "scalars": _STREAM_COLUMNS + [
        ("name", "string", False, "\"losses/loss\", \"scalars/learning_rate\", ..."),
        ("step", "int64", False, "global step"),
        ("mode", "string", False, "TRAIN, EVAL or PREDICT"),
        ("mode_step", "int64", False, "step within the mode"),
        ("value", "float64", False, "the value (NaN and ±inf as recorded)"),
        ("wall_us", "int64", False, "when it was recorded, µs since the Unix epoch"),
    ],
    "summaries": _STREAM_COLUMNS + [
        ("name", "string", False, "tensor name, \"gradients/fc1.weight\""),
        ("step", "int64", False, "global step"),
        ("mode", "string", False, "TRAIN, EVAL or PREDICT"),
        ("mode_step", "int64", False, "step within the mode"),
        ("dtype", "string", False, "element type: float32, bfloat16, ..."),
        ("shape", "list<int64>", False, "the tensor's shape"),
        ("count", "int64", False, "elements, non-finite ones included"),
        ("finite", "int64", False, "finite elements"),
        ("nan", "int64", False, "NaN elements"),
        ("inf", "int64", False, "±inf elements"),
        ("pos_inf", "int64", False, "+inf elements"),
        ("neg_inf", "int64", False, "-inf elements"),
        ("zeros", "int64", False, "elements equal to 0"),
        ("negatives", "int64", False, "elements < 0 (-inf included)"),
        ("positives", "int64", False, "elements > 0 (+inf included)"),
        ("min", "float64", False, "min of the finite elements (NaN: none)"),
        ("max", "float64", False, "max of the finite elements"),
        ("mean", "float64", False, "mean of the finite elements"),
        ("std", "float64", False, "population standard deviation (ddof 0) of the finite ones"),
        ("var", "float64", False, "population variance (ddof 0)"),
        ("l1", "float64", False, "sum of |x|"),
        ("l2", "float64", False, "sqrt(sum of x²)"),
        ("abs_mean", "float64", False, "l1 / finite"),
        ("zero_fraction", "float64", False, "zeros / count (NaN for an empty tensor)"),
        ("hist_lo", "float64", True, "histogram range start; null: no histogram saved"),
        ("hist_hi", "float64", True, "histogram range end"),
        ("hist_counts", "list<int64>", True, "equal-width bucket counts over [hist_lo, hist_hi]"),
        ("wall_us", "int64", False, "when it was recorded, µs since the Unix epoch"),
    ],
    "system": _STREAM_COLUMNS + [
        ("wall_us", "int64", False, "sample time, µs since the Unix epoch"),
        ("metric", "string", False, "docs/metrics.md: cpu.util, gpu0.util, mem.used_bytes, ..."),
        ("value", "float64", False, "the metric's value"),
    ],
    "rule_events": _STREAM_COLUMNS + [
        ("rule", "string", False, "rule instance name, \"vanishing_gradient\""),
        ("status", "string", False, "InProgress, NoIssuesFound, IssuesFound, Error, Warning, "
                                    "NoData"),
        ("step", "int64", True, "the step it was evaluated at; null: not at a step"),
        ("mode", "string", False, "TRAIN, EVAL or PREDICT"),
        ("worker", "string", False, "the stream whose data it evaluated"),
        ("tensors", "list<string>", False, "the tensors involved"),
        ("value", "float64", True, "the observed value; null: none"),
        ("threshold", "float64", True, "the threshold it was compared with; null: none"),
        ("message", "string", False, "one line for humans"),
        ("firing", "int64", False, "1-based count of this rule's firings so far (0: none)"),
        ("wall_us", "int64", False, "when it was recorded, µs since the Unix epoch"),
        ("details_json", "string", True, "extra fields (JSON object); null: none"),
    ],
    "events": _STREAM_COLUMNS + [
        ("kind", "string", False, "run_start, run_end, checkpoint, preempted, ..."),
        ("wall_us", "int64", False, "when, µs since the Unix epoch"),
        ("json", "string", False, "its fields (JSON object)"),
    ],
}
# The tables stored per stream (the others, `runs`, once per run).
STREAM_TABLES = [t for t in TABLES if t != "runs"]


def require_pyarrow():
    """pyarrow, or ImportError saying how to get it."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "Parquet and Arrow tables need pyarrow, which is not installed for "
            f"this Python ({e}): pip install pyarrow") from None
    import pyarrow
    return pyarrow


def _arrow_type(pa, name: str):
    if name.startswith("list<"):
        return pa.list_(_arrow_type(pa, name[5:-1]))
    return {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(),
            "float64": pa.float64()}[name]


def arrow_schema(table: str):
    """The pyarrow schema of a table, with its version in the metadata."""
    pa = require_pyarrow()
    from . import _core
    fields = [pa.field(c, _arrow_type(pa, t), nullable=n) for c, t, n, _ in TABLES[table]]
    return pa.schema(fields, metadata={META_SCHEMA_VERSION: str(SCHEMA_VERSION),
                                       META_TABLE: table,
                                       META_PRODUCER: "trainscope " + _core.__version__})


def schema_json() -> dict:
    """The schema as the export's DEST/_schema.json holds it."""
    return {"schema_version": SCHEMA_VERSION,
            "partitioning": "hive: <table>/run=<run_id>/<stream>.parquet "
                            "(runs: runs/run=<run_id>/run.parquet)",
            "tables": {t: [{"name": c, "type": ty, "nullable": n, "description": d}
                           for c, ty, n, d in cols] for t, cols in TABLES.items()}}


def rank_of(stream: str) -> Optional[int]:
    if stream.startswith(STREAM.WORKER_PREFIX):
        tail = stream[len(STREAM.WORKER_PREFIX):]
        if tail.isdigit():
            return int(tail)
    return None


# ---- building tables ---------------------------------------------------------------------------
def _strings(pa, names: List[str], index: np.ndarray):
    """A string column from dictionary codes (built in Arrow's C++, not per row in Python)."""
    dictionary = pa.array(names, pa.string())
    return dictionary.take(pa.array(index, pa.int32()))


def _modes(pa, codes: np.ndarray):
    return _strings(pa, _MODES, codes.astype(np.int32))


def _optional(pa, values: np.ndarray, missing: np.ndarray):
    return pa.array(values, mask=missing)


def _lists(pa, offsets: np.ndarray, values, mask=None):
    arr = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values,
                                   mask=None if mask is None else pa.array(mask))
    return arr


def _head(pa, run_id: str, stream: str, n: int) -> list:
    rank = rank_of(stream)
    return [pa.repeat(pa.scalar(run_id, pa.string()), n),
            pa.repeat(pa.scalar(stream, pa.string()), n),
            pa.repeat(pa.scalar(rank, pa.int32()), n)]


def _table(pa, name: str, columns: list):
    return pa.Table.from_arrays(columns, schema=arrow_schema(name))


def read(run_dir: str, tables: List[str], stream: Optional[str] = None,
         on_stream=None) -> dict:
    """One pass over the run for `tables` (of one stream, or all): ``_core.read_columns``.
    With ``on_stream(stream, {table: columns})``, each stream goes there once read."""
    from . import _core
    from ._modes import NotFoundError
    try:
        data = _core.read_columns(str(run_dir), list(tables), stream or "", on_stream)
    except FileNotFoundError as e:
        raise NotFoundError("run directory", str(run_dir), None, context="",
                            hint=str(e)) from None
    data["run_dir"] = str(run_dir)
    return data


def stream_table(c, table: str, run_id: str, stream: str):
    """One stream's rows of `table` from its columns (what ``read`` gives for the table)."""
    pa = require_pyarrow()
    if table == "steps":
        n = len(c["step"])
        cols = [c["step"], _modes(pa, c["mode"]), c["mode_step"], c["start_us"], c["end_us"],
                c["end_us"] - c["start_us"]]
        cols += [_optional(pa, c[k], c[k] < 0)
                 for k in ("data_wait_us", "forward_us", "backward_us", "optimizer_us")]
    elif table == "scalars":
        n = len(c["step"])
        cols = [_strings(pa, c["names"], c["name_index"]), c["step"], _modes(pa, c["mode"]),
                c["mode_step"], c["value"], c["wall_us"]]
    elif table == "summaries":
        n = len(c["step"])
        from ._dtypes import NAMES
        dtype_names = [NAMES.get(i, "unknown") for i in range(256)]
        no_hist = np.diff(c["hist_offsets"]) == 0
        cols = [_strings(pa, c["names"], c["name_index"]), c["step"], _modes(pa, c["mode"]),
                c["mode_step"], _strings(pa, dtype_names, c["dtype"].astype(np.int32)),
                _lists(pa, c["shape_offsets"], pa.array(c["shape_values"], pa.int64()))]
        cols += [c[k] for k in ("count", "finite", "nan", "inf", "pos_inf", "neg_inf", "zeros",
                                "negatives", "positives", "min", "max", "mean", "std", "var",
                                "l1", "l2", "abs_mean", "zero_fraction")]
        cols += [_optional(pa, c["hist_lo"], no_hist), _optional(pa, c["hist_hi"], no_hist),
                 _lists(pa, c["hist_offsets"], pa.array(c["hist_counts"].astype(np.int64)),
                        mask=no_hist),
                 c["wall_us"]]
    elif table == "system":
        n = len(c["wall_us"])
        cols = [c["wall_us"], _strings(pa, c["names"], c["name_index"]), c["value"]]
    elif table == "rule_events":
        n = len(c)

        def num(k):
            return pa.array([None if e[k] != e[k] else e[k] for e in c], pa.float64())
        cols = [pa.array([e["rule"] for e in c], pa.string()),
                pa.array([e["status"] for e in c], pa.string()),
                pa.array([None if e["step"] < 0 else e["step"] for e in c], pa.int64()),
                pa.array([_MODES[e["mode"]] for e in c], pa.string()),
                pa.array([e["worker"] for e in c], pa.string()),
                pa.array([list(e["tensors"]) for e in c], pa.list_(pa.string())),
                num("value"), num("threshold"),
                pa.array([e["message"] for e in c], pa.string()),
                pa.array([int(e["firing"]) for e in c], pa.int64()),
                pa.array([e["wall_us"] for e in c], pa.int64()),
                pa.array([e["details_json"] or None for e in c], pa.string())]
    elif table == "events":
        n = len(c)
        cols = [pa.array([e["kind"] for e in c], pa.string()),
                pa.array([e["wall_us"] for e in c], pa.int64()),
                pa.array([e["json"] or "{}" for e in c], pa.string())]
    else:
        raise KeyError(table)
    return _table(pa, table, _head(pa, run_id, stream, n) + cols)


def run_id_of(data: dict) -> str:
    """The run's id; a run without a readable run.json goes by its folder's name."""
    import os
    return data["manifest"].get("id") or os.path.basename(os.path.normpath(data["run_dir"]))


def captured_model(events: List[dict]) -> Optional[str]:
    """The model the run trains: the one `trainscope run`'s zero-code capture found (its
    instrumentation event, python/trainscope/_autorun.py), else the one a hook's
    register_module named (model_registered), or None."""
    for e in events:
        if e["kind"] == EVENT.MODEL_REGISTERED:
            try:
                name = json.loads(e["json"]).get("name")
            except (ValueError, AttributeError):
                continue
            if isinstance(name, str) and name:
                registered = name
                break
    else:
        registered = None
    for e in events:
        if e["kind"] != EVENT.INSTRUMENTATION:
            continue
        try:
            found = json.loads(e["json"]).get("model", {})
        except (ValueError, AttributeError):
            continue
        if isinstance(found, dict) and isinstance(found.get("name"), str):
            return found["name"]
    return registered


def _model_of(config: dict, captured: Optional[str]) -> Optional[str]:
    model = config.get("model")
    if isinstance(model, str) and model:
        return model
    if isinstance(model, dict) and isinstance(model.get("name"), str):
        return model["name"]
    return captured


def runs_table(data: dict, captured: Optional[str] = None):
    """The one-row `runs` table of a run (data: ``read`` of it; `captured`: the model of its
    events, ``captured_model``)."""
    import os
    pa = require_pyarrow()
    m = data["manifest"]
    try:
        config = json.loads(m.get("config_json") or "{}")
    except ValueError:
        config = {}
    if not isinstance(config, dict):
        config = {}
    counts = data["counts"]
    ends = [c["last_wall_us"] for c in counts.values() if c["last_wall_us"] > 0]
    last_steps = [counts[w]["last_step"] for w in data["workers"] if counts[w]["last_step"] >= 0]
    instance = config.get("instance_type")
    row = {
        "run_id": run_id_of(data), "name": m.get("name", ""),
        "path": os.path.abspath(data["run_dir"]), "host": m.get("host", ""),
        "pid": int(m.get("pid", 0)), "start_us": int(m.get("start_us", 0)),
        "end_us": max(ends) if ends else None, "state": data["state"],
        "framework": m.get("framework", ""), "command": list(m.get("command", [])),
        "instance_type": instance if isinstance(instance, str) else None,
        "model": _model_of(config, captured), "ranks": len(data["workers"]),
        "last_step": max(last_steps) if last_steps else None,
        "config_json": m.get("config_json") or "{}",
    }
    return pa.Table.from_pylist([row], schema=arrow_schema("runs"))


def run_table(run_dir: str, table: str, stream: Optional[str] = None):
    """A whole run's `table` (or one stream's rows of it), streams in name order."""
    pa = require_pyarrow()
    if table not in TABLES:
        from ._modes import NotFoundError
        raise NotFoundError("table", table, list(TABLES))
    if table == "runs":
        data = read(run_dir, ["events"])
        events = [e for c in data["columns"].values() for e in c["events"]]
        return runs_table(data, captured_model(events))
    data = read(run_dir, [table], stream)
    run_id = run_id_of(data)
    parts = [stream_table(c[table], table, run_id, s) for s, c in data["columns"].items()]
    if not parts:
        return arrow_schema(table).empty_table()
    return pa.concat_tables(parts)

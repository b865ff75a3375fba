"""Runs as Parquet tables for DuckDB, Dask, Spark, pandas (docs/export.md, "Parquet").

    ts.export_parquet(["runs/a", "runs/b"], "lake/")        # Python
    trainscope export parquet runs/a runs/b lake/           # the CLI runs this module
    python -m trainscope export-parquet runs/a runs/b lake/

DEST is laid out as Hive partitions, one file per table, run and stream::

    DEST/_schema.json  DEST/README.md
    DEST/<table>/run=<run_id>/<stream>.parquet     steps, scalars, summaries, system,
                                                   rule_events, events
    DEST/runs/run=<run_id>/run.parquet             one row per run

so ``read_parquet('DEST/steps/**/*.parquet', hive_partitioning=true)`` queries every run at
once. The tables and their columns are ``trainscope._tables.TABLES`` (version
``SCHEMA_VERSION``, also in each file's key-value metadata). Exporting a run again replaces its
files: each is written under a temporary name and renamed over the old one, and files of
streams the run no longer has are removed. A table none of a run's streams has rows for is one
empty file, ``none.parquet``, so that every table's pattern always matches and has its schema.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Iterable, List, Optional, Sequence, Union
from urllib.parse import quote

from . import _core, _tables
from ._modes import NotFoundError

EMPTY_FILE = "none.parquet"
RUNS_FILE = "run.parquet"
_TMP_TAG = ".tmp-"

# Exit codes of the CLI (docs/cli.md, "Exit codes"; tools/cli/command.h).
_EXIT_FAILED, _EXIT_USAGE, _EXIT_NOT_FOUND = 1, 2, 3


def partition_dir(run_id: str) -> str:
    """``run=<run_id>``; characters other than letters, digits and ``._-`` percent-encoded."""
    return "run=" + quote(run_id, safe="-._")


def check_dest(dest: str) -> str:
    """Creates DEST if missing and makes sure files can be written into it; returns it.

    ValueError for a URL (object storage is not supported yet); NotADirectoryError when DEST
    is a file; PermissionError (or another OSError) when it cannot be created or written."""
    dest = os.fspath(dest)
    if _core.check_run_location(dest) is not None or _core.is_object_store_location(dest):
        scheme = dest.split(":", 1)[0]
        raise ValueError(
            f"{dest}: exporting to '{scheme}://' is not supported by this version of trainscope: "
            "DEST is a folder on a local or shared file system (a bucket mounted with "
            "mountpoint-s3 or s3fs works as one)")
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise NotADirectoryError(f"DEST '{dest}' is a file, not a folder")
    try:
        os.makedirs(dest, exist_ok=True)
    except OSError as e:
        raise type(e)(e.errno, f"cannot create DEST '{dest}': {e.strerror}") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".trainscope-probe" + _TMP_TAG, dir=dest)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise type(e)(e.errno, f"cannot write into DEST '{dest}': {e.strerror}") from None
    return dest


def _write(table, path: str) -> str:
    """Writes `table` to `path` through a temporary file renamed over it (readers see the old
    file or the new one, never half of one)."""
    import pyarrow.parquet as pq
    folder, base = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{base}{_TMP_TAG}{os.getpid()}")
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _remove_stale(folder: str, keep: Iterable[str]) -> None:
    """Removes what an earlier export left in `folder` that this one did not write (streams
    gone, temporary files of an interrupted export)."""
    keep = set(keep)
    for name in os.listdir(folder):
        stale = name.endswith(".parquet") and name not in keep
        if stale or (name.startswith(".") and _TMP_TAG in name):
            try:
                os.unlink(os.path.join(folder, name))
            except FileNotFoundError:
                pass


def export_run(run_dir: str, dest: str, system: bool = True) -> List[str]:
    """Exports one run into DEST (already checked: ``check_dest``); returns the files written.

    Each stream's files are written as soon as the reader has read the stream (memory holds
    one stream's columns at a time); then the runs table, the empty tables' none.parquet, and
    the removal of what an earlier export left that this one did not write."""
    tables = [t for t in _tables.STREAM_TABLES if t != "system" or system]
    run_id = _run_id(run_dir)
    part = partition_dir(run_id)
    written = {t: {} for t in _tables.STREAM_TABLES}
    events: List[dict] = []

    def on_stream(stream: str, columns: dict) -> None:
        events.extend(columns.get("events", []))
        for table in tables:
            t = _tables.stream_table(columns[table], table, run_id, stream)
            if t.num_rows:
                name = stream + ".parquet"
                written[table][name] = _write(t, os.path.join(dest, table, part, name))

    data = _tables.read(run_dir, tables, on_stream=on_stream)
    runs_dir = os.path.join(dest, "runs", part)
    out = [_write(_tables.runs_table(data, _tables.captured_model(events)),
                  os.path.join(runs_dir, RUNS_FILE))]
    _remove_stale(runs_dir, [RUNS_FILE])
    for table in _tables.STREAM_TABLES:
        folder = os.path.join(dest, table, part)
        if not written[table]:
            written[table][EMPTY_FILE] = _write(_tables.arrow_schema(table).empty_table(),
                                                os.path.join(folder, EMPTY_FILE))
        _remove_stale(folder, written[table])
        out += written[table].values()
    return out


def _run_id(run_dir: str) -> str:
    """The id export_run files the run under (its run.json's, else its folder's name)."""
    try:
        m = _core.read_manifest(run_dir)
    except (OSError, ValueError, RuntimeError):  # no run.json, or a damaged one
        m = {}
    return m.get("id") or os.path.basename(os.path.normpath(run_dir))


def _readme() -> str:
    lines = [f"# trainscope Parquet export (schema version {_tables.SCHEMA_VERSION})", "",
             "Written by `trainscope export parquet` (docs/export.md). Layout:",
             "`<table>/run=<run_id>/<stream>.parquet` (Hive partitions; `runs/run=<run_id>/"
             "run.parquet` for the runs table). Each file's key-value metadata holds "
             "`schema_version`. The columns, with types, are in `_schema.json`.", "",
             "    duckdb -c \"SELECT count(*) FROM read_parquet('steps/**/*.parquet', "
             "hive_partitioning=true)\"", "", "Tables:", ""]
    for t, cols in _tables.TABLES.items():
        lines.append(f"- `{t}`: " + ", ".join(c for c, *_ in cols))
    return "\n".join(lines) + "\n"


def _write_text(path: str, text: str) -> str:
    tmp = f"{path}{_TMP_TAG}{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def export_parquet(runs: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]],
                   dest: Union[str, os.PathLike], system: bool = True) -> List[str]:
    """Exports runs (a run directory or several) into the folder `dest` as Parquet tables;
    returns the files written. ``ts.NotFoundError`` for a RUN that is not a run directory;
    ``ValueError`` for an ``s3://`` DEST; ``OSError`` when DEST is a file or not writable;
    ``ImportError`` without pyarrow. ``system=False`` leaves system samples out."""
    if isinstance(runs, (str, os.PathLike)):
        runs = [runs]
    runs = [os.fspath(r) for r in runs]
    if not runs:
        raise ValueError("no run to export")
    _tables.require_pyarrow()
    seen = {}
    for r in runs:  # every RUN before writing anything
        if not os.path.isdir(r):
            bad = _core.check_run_location(r)
            if bad:
                raise ValueError(bad)
            raise NotFoundError("run directory", r, None, context="")
        rid = _run_id(r)
        if rid in seen:
            raise ValueError(f"'{r}' and '{seen[rid]}' are the same run (id {rid}): export "
                             "one of them")
        seen[rid] = r
    dest = check_dest(os.fspath(dest))
    out = [_write_text(os.path.join(dest, "_schema.json"),
                       json.dumps(_tables.schema_json(), indent=1) + "\n"),
           _write_text(os.path.join(dest, "README.md"), _readme())]
    for r in runs:
        out += export_run(r, dest, system=system)
    return out


# ---- the CLI's bridge --------------------------------------------------------------------------
_USAGE = "usage: trainscope export parquet [--no-system] RUN... DEST"


def _exit_code(e: BaseException) -> int:
    if isinstance(e, NotFoundError):
        return _EXIT_NOT_FOUND
    if isinstance(e, ValueError):
        return _EXIT_USAGE
    return _EXIT_FAILED


def _message(e: BaseException) -> str:
    if isinstance(e, NotFoundError):
        return e.args[0] if e.args else str(e)
    if isinstance(e, OSError) and e.strerror and not e.filename:
        return e.strerror
    return str(e)


def main(argv: Optional[Iterable[str]] = None) -> int:
    """``python -m trainscope.parquet_export [--no-system] [--result FILE] RUN... DEST``.

    Errors go to stderr as the CLI writes them ("trainscope: error: ..."), with its exit codes;
    with --result (how `trainscope export parquet` runs it) the outcome is written to FILE as
    JSON instead, {"files": [...]} or {"error": ..., "exit": N}, and the CLI reports it."""
    args = list(sys.argv[1:] if argv is None else argv)
    result, system, pos = None, True, []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--result" and i + 1 < len(args):
            result = args[i + 1]
            i += 2
            continue
        if a == "--no-system":
            system = False
        elif a in ("-h", "--help"):
            print(_USAGE)
            return 0
        else:
            pos.append(a)
        i += 1
    try:
        if len(pos) < 2:
            raise ValueError(f"expected RUN... DEST, got {len(pos)} argument(s)\n{_USAGE}")
        files = export_parquet(pos[:-1], pos[-1], system=system)
    except (NotFoundError, ValueError, OSError, ImportError) as e:
        if result:
            _write_text(result, json.dumps({"error": _message(e), "exit": _exit_code(e)}))
        else:
            print(f"trainscope: error: {_message(e)}", file=sys.stderr)
        return _exit_code(e)
    if result:
        _write_text(result, json.dumps({"files": files}))
    else:
        for f in files:
            print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

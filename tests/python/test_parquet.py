"""The Parquet export (docs/export.md, "Parquet"): runs written with the real writer, exported,
read back by DuckDB, pyarrow and Dask; every table's row count and per-column checksum equal to
what the reader (ts.open_run's record-wise accessors, not the column readers the export uses)
gives; the docs' DuckDB and Dask answers run here, agree with each other and with the reader's;
the schema version; DEST errors; re-export replaces."""
import glob
import hashlib
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")
dd = pytest.importorskip("dask.dataframe")

import trainscope as ts  # noqa: E402
from trainscope import _core, _tables  # noqa: E402
from trainscope.parquet_export import partition_dir  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODES = ["TRAIN", "EVAL", "PREDICT", "GLOBAL"]
T0 = 1_767_225_600_000_000

# name: (instance type, config "model" (a string or an object), ranks, steps, rules that fire)
RUNS = {
    "resnet-a": ("g5.2xlarge", "resnet50", 2, 40, ["vanishing_gradient", "dataloader"]),
    "resnet-b": ("p4d.24xlarge", {"name": "resnet50", "layers": 50}, 3, 30,
                 ["dataloader", "dataloader", "step_outlier"]),
    "bert-a": ("g5.2xlarge", "bert-base", 2, 50, ["exploding_tensor"]),
    "bert-b": ("p4d.24xlarge", "bert-base", 2, 20, []),
}


def write_run(path: pathlib.Path, seed: int, instance, model, ranks, steps, rules):
    _core.create_or_open_run(str(path), name=path.name, command=["python", "train.py"],
                             config_json=json.dumps({"instance_type": instance, "model": model}),
                             framework="pytorch test")
    rng = np.random.default_rng(seed)
    t_end = T0
    for rank in range(ranks):
        w = _core.Writer(str(path), stream=f"worker-{rank}")
        t = T0 + seed * 1_000_000_000
        for s in range(steps):
            wait, fwd, bwd = (int(x) for x in rng.integers(1000, 40000, 3))
            dur = wait + fwd + bwd + 3000
            # one step of each rank without a measured data wait, one without phases at all
            w.add_step(s, 0, s, t, t + dur, -1 if s == 3 else wait, -1 if s == 4 else fwd,
                       -1 if s == 4 else bwd, -1 if s == 4 else 2000)
            w.add_scalar("losses/loss", s, 0, s, float(2.0 / (s + 1) + 0.01 * rank), t + dur)
            if s % 5 == 0:
                w.add_scalar("scalars/learning_rate", s, 0, s, 0.1 * 0.9 ** s, t + dur)
                g = rng.normal(size=(4, 8)).astype(np.float32)
                if s == 10:
                    g[0, 0] = np.nan
                w.add_summary("gradients/fc.weight", s, 0, s, g, 1, (4, 8),
                              buckets=4 if s % 10 == 0 else 0)
                w.add_summary("weights/fc.bias", s, 0, s, rng.normal(size=8).astype(np.float64),
                              2, (8,))
            t += dur
        w.add_step(steps, 1, 0, t, t + 5000, -1, 4000, -1, -1)  # an evaluation step
        w.add_scalar("losses/loss", steps, 1, 0, 1.5, t + 5000)
        if rank == 0:
            for i, rule in enumerate(rules):
                w.add_rule_event(rule, "IssuesFound", 7 + i, 0, "worker-0",
                                 ["gradients/fc.weight"], 1e-8 * (i + 1), 1e-7,
                                 f"{rule} fired", i + 1, json.dumps({"i": i}), t)
            w.add_rule_event("loss_not_decreasing", "NoIssuesFound", -1, 0, "worker-0", [],
                             float("nan"), float("nan"), "", 0, "", t + 1)
            w.add_event("checkpoint", json.dumps({"step": 5}), t)
        w.close()
        t_end = max(t_end, t)
    mon = _core.Writer(str(path), stream="monitor-trainer-1")
    for i in range(25):
        mon.add_system_sample([("cpu.util", float(rng.uniform(10, 90))),
                               ("gpu0.util", float(rng.uniform(0, 100)))]
                              + ([("mem.used_bytes", 1e9 + i)] if i % 2 else []),
                              T0 + seed * 1_000_000_000 + i * 500_000)
    mon.close()
    watch = _core.Writer(str(path), stream="watch-4242")  # `trainscope watch`'s own events
    watch.add_rule_event("low_gpu_utilization", "IssuesFound", 12, 0, "worker-1", [], 3.0, 10.0,
                         "GPU idle", 1, "", t_end)
    watch.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("parquet") / "runs"
    base.mkdir()
    out = []
    for seed, (name, spec) in enumerate(sorted(RUNS.items()), start=1):
        write_run(base / name, seed, *spec)
        out.append(str(base / name))
    return out


@pytest.fixture(scope="module")
def lake(runs, tmp_path_factory):
    dest = tmp_path_factory.mktemp("lake") / "lake"
    files = ts.export_parquet(runs, dest)
    assert all(os.path.isfile(f) for f in files)
    return dest


# ---- what the reader says, record by record ---------------------------------------------------

def reader_rows(run_dir):
    """{table: [row dict]} of one run from the reader's record-wise accessors."""
    run = ts.open_run(run_dir)
    r = run._r
    rid = run.manifest["id"]
    rows = {t: [] for t in _tables.TABLES}
    for s in r.streams():
        head = {"run_id": rid, "stream": s, "rank": _tables.rank_of(s)}
        for st in r.step_records(s):
            opt = {k: (None if st[k] < 0 else st[k])
                   for k in ("data_wait_us", "forward_us", "backward_us", "optimizer_us")}
            rows["steps"].append({**head, "step": st["step"], "mode": MODES[st["mode"]],
                                  "mode_step": st["mode_step"], "start_us": st["start_us"],
                                  "end_us": st["end_us"],
                                  "duration_us": st["end_us"] - st["start_us"], **opt})
        for name in r.scalar_names():
            d = r.scalar(name, 3, s)
            for i in range(len(d["steps"])):
                rows["scalars"].append({**head, "name": name, "step": int(d["steps"][i]),
                                        "mode": MODES[int(d["modes"][i])],
                                        "mode_step": int(d["mode_steps"][i]),
                                        "value": float(d["values"][i]),
                                        "wall_us": int(d["wall_us"][i])})
        for sm in r.summaries(s):
            stats = dict(sm["stats"])
            hist = stats.pop("histogram", None)
            rows["summaries"].append({
                **head, "name": sm["name"], "step": sm["step"], "mode": MODES[sm["mode"]],
                "mode_step": sm["mode_step"], "dtype": sm["dtype"], "shape": list(sm["shape"]),
                **{k: (int(v) if k in ("count", "finite", "nan", "inf", "pos_inf", "neg_inf",
                                       "zeros", "negatives", "positives") else v)
                   for k, v in stats.items()},
                "hist_lo": hist["lo"] if hist else None, "hist_hi": hist["hi"] if hist else None,
                "hist_counts": [int(c) for c in hist["counts"]] if hist else None,
                "wall_us": sm["wall_us"]})
        for sample in r.system_samples(s):
            for metric, value in sample["metrics"].items():
                rows["system"].append({**head, "wall_us": sample["wall_us"], "metric": metric,
                                       "value": value})
    # rule events and events come merged over the streams: their stream is not compared
    for e in r.rule_events():
        nan_none = (lambda v: None if v != v else v)
        rows["rule_events"].append({
            "run_id": rid, "rule": e["rule"], "status": e["status"],
            "step": None if e["step"] < 0 else e["step"], "mode": MODES[e["mode"]],
            "worker": e["worker"], "tensors": list(e["tensors"]), "value": nan_none(e["value"]),
            "threshold": nan_none(e["threshold"]), "message": e["message"],
            "firing": e["firing"], "wall_us": e["wall_us"],
            "details_json": e["details_json"] or None})
    for e in r.events():
        rows["events"].append({"run_id": rid, "kind": e["kind"], "wall_us": e["wall_us"],
                               "json": e["json"] or "{}"})
    m = run.manifest
    rows["runs"].append({"run_id": rid, "name": m["name"], "host": m["host"],
                         "start_us": m["start_us"], "instance_type": m["config"]["instance_type"],
                         "model": (m["config"]["model"] if isinstance(m["config"]["model"], str)
                                   else m["config"]["model"]["name"]),
                         "ranks": len(r.workers()), "command": list(m["command"])})
    return rows


def checksum(values):
    """(rows, nulls, NaNs, and the exact sum of the numbers or a digest of the sorted others)."""
    values = list(values)
    present = [v for v in values if v is not None]
    nulls = len(values) - len(present)
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if all(isinstance(v, int) for v in present):
            return len(values), nulls, 0, sum(present)
        nan = sum(1 for v in present if math.isnan(v))
        return len(values), nulls, nan, math.fsum(v for v in present if not math.isnan(v))
    digest = hashlib.sha256("\n".join(sorted(repr(v) for v in present)).encode()).hexdigest()
    return len(values), nulls, 0, digest


def column_checksums(rows, columns):
    return {c: checksum(r[c] for r in rows) for c in columns}


@pytest.fixture(scope="module")
def expected(runs):
    out = {t: [] for t in _tables.TABLES}
    for run_dir in runs:
        for t, rows in reader_rows(run_dir).items():
            out[t] += rows
    return out


def compared_columns(table, expected_rows):
    return [c for c, *_ in _tables.TABLES[table] if c in expected_rows[0]]


def pylist_columns(arrow_table):
    return arrow_table.to_pylist()


# ---- the tables, by three engines -------------------------------------------------------------

@pytest.mark.parametrize("table", list(_tables.TABLES))
def test_duckdb_pyarrow_and_dask_read_what_the_reader_reads(lake, expected, table):
    want = expected[table]
    assert want, f"the generated runs have no {table}"
    cols = compared_columns(table, want)
    want_sums = column_checksums(want, cols)
    pattern = f"{lake}/{table}/**/*.parquet"
    con = duckdb.connect()
    rel = con.sql(f"SELECT * FROM read_parquet('{pattern}', hive_partitioning = true)")
    got_duck = [dict(zip(rel.columns, row)) for row in rel.fetchall()]
    got_arrow = pq.read_table(f"{lake}/{table}").to_pylist()
    ddf = dd.read_parquet(f"{lake}/{table}", dtype_backend="pyarrow")
    got_dask = pa.Table.from_pandas(ddf.compute(), preserve_index=False).to_pylist()
    for engine, got in (("duckdb", got_duck), ("pyarrow", got_arrow), ("dask", got_dask)):
        assert len(got) == len(want), f"{engine}: {table} has {len(got)} rows, reader {len(want)}"
        # the Hive partition of each row is its run
        assert {str(r["run"]) for r in got} == {r["run_id"] for r in got}, engine
        assert all(partition_dir(r["run_id"]) == f"run={r['run']}" for r in got), engine
        assert column_checksums(got, cols) == want_sums, engine
    per_run = dict(con.sql(f"SELECT run_id, count(*) FROM read_parquet('{pattern}', "
                           "hive_partitioning = true) GROUP BY run_id").fetchall())
    assert per_run == {rid: sum(1 for r in want if r["run_id"] == rid)
                       for rid in {r["run_id"] for r in want}}


def test_run_table_is_what_the_files_hold(runs, lake):
    for run_dir in runs:
        run = ts.open_run(run_dir)
        rid = run.manifest["id"]
        for table in _tables.TABLES:
            mine = run.table(table)
            assert mine.schema.equals(_tables.arrow_schema(table), check_metadata=False)
            files = pq.read_table(f"{lake}/{table}/{partition_dir(rid)}",
                                  schema=_tables.arrow_schema(table))
            cols = [c for c, *_ in _tables.TABLES[table]]
            assert mine.num_rows == files.num_rows > 0, table
            assert column_checksums(mine.to_pylist(), cols) == \
                column_checksums(files.to_pylist(), cols), table
    df = ts.open_run(runs[0]).table("steps").to_pandas()
    assert len(df) and {"duration_us", "data_wait_us"} <= set(df.columns)
    assert ts.open_run(runs[0]).table("steps", stream="worker-1").column("rank").to_pylist() \
        == [1] * len(df[df["stream"] == "worker-1"])
    with pytest.raises(ts.NotFoundError, match="did you mean: 'steps'"):
        ts.open_run(runs[0]).table("stesp")


def test_every_file_carries_the_schema_version_and_the_tables_types(lake):
    files = glob.glob(f"{lake}/*/run=*/*.parquet")
    assert files
    for f in files:
        table = pathlib.Path(f).parts[-3]
        meta = pq.read_metadata(f).metadata
        assert meta[b"schema_version"] == str(ts.TABLE_SCHEMA_VERSION).encode(), f
        assert meta[b"trainscope.table"] == table.encode(), f
        assert pq.read_schema(f).equals(_tables.arrow_schema(table), check_metadata=False), f
    schema = json.loads((lake / "_schema.json").read_text())
    assert schema["schema_version"] == ts.TABLE_SCHEMA_VERSION == 1
    assert set(schema["tables"]) == set(ts.TABLES)
    assert [c["name"] for c in schema["tables"]["steps"]] == \
        [c for c, *_ in ts.TABLES["steps"]]
    assert "schema version 1" in (lake / "README.md").read_text()
    assert not glob.glob(f"{lake}/*/run=*/.*")  # no temporary file left


def test_the_tables_are_documented_column_by_column():
    """docs/export.md's table of every table's columns is the schema's."""
    text = (ROOT / "docs" / "export.md").read_text()
    for table, cols in _tables.TABLES.items():
        m = re.search(rf"^\| `{table}` \| (.*?) \|$", text, re.M)
        assert m, f"docs/export.md does not list the {table} table"
        documented = re.findall(r"`([a-z_0-9]+)` \(", m.group(1))
        assert documented == [c for c, *_ in cols], table


# ---- the docs' questions, by DuckDB, by Dask, by the reader -----------------------------------

def docs_blocks():
    """The Python blocks of docs/export.md's Parquet section that answer the questions."""
    text = (ROOT / "docs" / "export.md").read_text()
    section = text[text.index("## Parquet"):]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    duck = [b for b in blocks if "import duckdb" in b]
    dask = [b for b in blocks if "import dask" in b]
    assert len(duck) == 1 and len(dask) == 1, "one DuckDB and one Dask block"
    return duck[0], dask[0]


def reader_answers(runs):
    """Both answers from ts.open_run: {instance: (median step ms, data-wait share)} over TRAIN
    steps with a measured data wait, and {(model, rule): (firings, runs)} of IssuesFound events."""
    durations, waits, fired = {}, {}, {}
    for run_dir in runs:
        run = ts.open_run(run_dir)
        cfg = run.manifest["config"]
        inst = cfg.get("instance_type") or "unknown"
        model = cfg["model"] if isinstance(cfg["model"], str) else cfg["model"]["name"]
        for w in run.workers():
            for s in run.step_records(w):
                if s["mode"] == ts.Mode.TRAIN and s["data_wait_us"] >= 0:
                    durations.setdefault(inst, []).append(s["end_us"] - s["start_us"])
                    waits.setdefault(inst, []).append(s["data_wait_us"])
        for e in run.rule_events():
            if e["status"] == "IssuesFound":
                n, rs = fired.get((model, e["rule"]), (0, set()))
                fired[(model, e["rule"])] = (n + 1, rs | {run.manifest["id"]})
    by_instance = {i: (float(np.median(d)) / 1000, sum(waits[i]) / sum(d))
                   for i, d in durations.items()}
    return by_instance, {k: (n, len(rs)) for k, (n, rs) in fired.items()}


def run_block(source, workdir, runs):
    """Runs a docs block in `workdir` (the current folder), whose runs/ holds the generated
    runs; its namespace."""
    for r in runs:
        if not (workdir / "runs" / os.path.basename(r)).exists():
            shutil.copytree(r, workdir / "runs" / os.path.basename(r))
    ns = {"__name__": "__docs__"}
    exec(compile(source, "docs/export.md", "exec"), ns)
    return ns


def test_docs_duckdb_and_dask_answers_agree_with_the_reader(runs, tmp_path, capsys,
                                                            monkeypatch):
    duck_src, dask_src = docs_blocks()
    monkeypatch.chdir(tmp_path)  # the blocks' "lake" and "runs/*" are relative
    duck = run_block(duck_src, tmp_path, runs)
    dask = run_block(dask_src, tmp_path, runs)
    want_steps, want_rules = reader_answers(runs)
    assert set(want_steps) == {"g5.2xlarge", "p4d.24xlarge"} and want_rules

    got = {r[0]: (r[1], r[2]) for r in duckdb.sql(duck["STEP_TIME"]).fetchall()}
    assert got.keys() == want_steps.keys()
    for inst, (ms, share) in want_steps.items():
        assert got[inst][0] == pytest.approx(ms, rel=1e-12)
        assert got[inst][1] == pytest.approx(share, rel=1e-12)
    by_dask = dask["by_instance"]
    assert sorted(by_dask.index) == sorted(want_steps)
    for inst, (ms, share) in want_steps.items():
        assert by_dask.loc[inst, "median_step_ms"] == pytest.approx(ms, rel=1e-12)
        assert by_dask.loc[inst, "data_wait_share"] == pytest.approx(share, rel=1e-12)

    rows = duckdb.sql(duck["RULES"]).fetchall()
    assert {(m, r): (n, k) for m, r, n, k in rows} == want_rules
    # most firings first within each model
    for model in {m for m, *_ in rows}:
        counts = [n for m, _, n, _ in rows if m == model]
        assert counts == sorted(counts, reverse=True)
    by_rule = dask["by_rule"]
    assert {(m, r): (int(n), int(k)) for (m, r), (n, k) in
            zip(by_rule.index, by_rule[["firings", "runs"]].itertuples(index=False))} \
        == want_rules
    assert "resnet50" in capsys.readouterr().out  # the blocks print their answers


# ---- re-export, errors ------------------------------------------------------------------------

def test_export_again_replaces_the_run_files(runs, tmp_path):
    dest = tmp_path / "lake"
    ts.export_parquet(runs[:2], dest)
    rid = ts.open_run(runs[0]).manifest["id"]
    part = dest / "steps" / partition_dir(rid)
    (part / "worker-9.parquet").write_bytes(
        (part / "worker-0.parquet").read_bytes())  # a stream the run no longer has
    (part / ".worker-0.parquet.tmp-1").write_bytes(b"interrupted")
    before = duckdb.sql(f"SELECT count(*) FROM '{dest}/steps/**/*.parquet'").fetchall()[0][0]
    ts.export_parquet(runs[:1], dest)
    assert sorted(os.listdir(part)) == ["worker-0.parquet", "worker-1.parquet"]
    after = duckdb.sql(f"SELECT count(*) FROM '{dest}/steps/**/*.parquet'").fetchall()[0][0]
    assert before - after == pq.read_metadata(part / "worker-0.parquet").num_rows
    # the other run's files stay
    other = ts.open_run(runs[1]).manifest["id"]
    assert (dest / "steps" / partition_dir(other)).is_dir()


def cli(*args, env_extra=None):
    env = dict(os.environ, TRAINSCOPE_PYTHON=sys.executable, **(env_extra or {}))
    return subprocess.run([os.environ.get("TRAINSCOPE_BIN", "trainscope"), "export", "parquet",
                           *args], capture_output=True, text=True, env=env, timeout=300)


def test_cli_exports_many_runs(runs, tmp_path):
    dest = tmp_path / "cli-lake"
    p = cli(*runs, str(dest))
    assert p.returncode == 0, p.stderr
    files = p.stdout.split()
    assert str(dest / "_schema.json") in files
    n = duckdb.sql(f"SELECT count(DISTINCT run_id) FROM read_parquet('{dest}/runs/**/*.parquet',"
                   " hive_partitioning = true)").fetchall()[0][0]
    assert n == len(runs)
    p = cli("--no-system", runs[0], str(tmp_path / "no-system"))
    assert p.returncode == 0, p.stderr
    assert [os.path.basename(f) for f in glob.glob(f"{tmp_path}/no-system/system/*/*")] \
        == ["none.parquet"]


def test_cli_runs_the_python_beside_the_command_it_was_started_as(runs, tmp_path):
    """A venv's bin/trainscope (here a link to the build's) runs the bin/python3 beside it."""
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "trainscope").symlink_to(os.path.abspath(os.environ.get(
        "TRAINSCOPE_BIN", shutil.which("trainscope"))))
    marker = tmp_path / "ran"
    (venv_bin / "python3").write_text(f"#!/bin/sh\necho \"$@\" > {marker}\n"
                                      f"exec {sys.executable} \"$@\"\n")
    (venv_bin / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "TRAINSCOPE_PYTHON"}
    p = subprocess.run([str(venv_bin / "trainscope"), "export", "parquet", runs[0],
                        str(tmp_path / "lake")], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert marker.read_text().startswith("-m trainscope.parquet_export --result ")
    assert (tmp_path / "lake" / "steps").is_dir()


def one_error(p):
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainscope: error: "), p.stderr
    return lines[0]


def test_dest_that_is_a_file_is_one_clear_error(runs, tmp_path):
    dest = tmp_path / "a-file"
    dest.write_text("x")
    p = cli(runs[0], str(dest))
    assert p.returncode == 1
    assert one_error(p) == f"trainscope: error: DEST '{dest}' is a file, not a folder"
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        ts.export_parquet(runs[0], dest)
    p = cli(runs[0], str(dest / "below"))
    assert p.returncode == 1 and "cannot create DEST" in one_error(p)


def test_dest_that_is_not_writable_is_one_clear_error(runs, tmp_path):
    if os.geteuid() == 0:  # root writes into any folder it may create one in: not into sysfs
        dest = pathlib.Path("/sys")
        if os.access(dest, os.W_OK) and not dest.is_dir():
            pytest.skip("no folder here that root cannot write into")
    else:
        dest = tmp_path / "read-only"
        dest.mkdir()
        dest.chmod(0o555)
    p = cli(runs[0], str(dest))
    assert p.returncode == 1
    assert one_error(p) == f"trainscope: error: cannot write into DEST '{dest}': " \
                           "Permission denied"
    with pytest.raises(PermissionError, match="cannot write into DEST"):
        ts.export_parquet(runs[0], dest)


def test_a_run_that_is_not_a_run_and_an_s3_dest(runs, tmp_path):
    p = cli(runs[0], str(tmp_path / "missing"), str(tmp_path / "lake"))
    assert p.returncode == 3
    assert one_error(p) == f"trainscope: error: no run directory '{tmp_path / 'missing'}'"
    assert not (tmp_path / "lake").exists()  # nothing written
    p = cli(runs[0], "s3://bucket/lake")
    assert p.returncode == 2
    assert "s3://" in p.stderr and "not supported" in p.stderr
    p = cli(runs[0])
    assert p.returncode == 2 and "expected FORMAT RUN... DEST, got 2" in p.stderr
    with pytest.raises(ts.NotFoundError, match="no run directory"):
        ts.export_parquet([str(tmp_path / "missing")], tmp_path / "lake")
    with pytest.raises(ValueError, match="same run"):
        ts.export_parquet([runs[0], runs[0]], tmp_path / "twice")


def test_python_module_entry_points(runs, tmp_path):
    for argv in (["-m", "trainscope", "export-parquet"], ["-m", "trainscope.parquet_export"]):
        dest = tmp_path / argv[-1]
        p = subprocess.run([sys.executable, *argv, runs[0], str(dest)], capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert (dest / "steps").is_dir()
    p = subprocess.run([sys.executable, "-m", "trainscope.parquet_export", runs[0],
                        str(tmp_path / "x" / "no-run"), str(tmp_path / "y")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 3 and p.stderr.startswith("trainscope: error: no run directory")


def test_without_pyarrow_the_error_names_pip_install(runs, tmp_path):
    """An interpreter where `import pyarrow` fails (a shadowing module) gets the install hint."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "pyarrow.py").write_text("raise ImportError('No module named pyarrow')\n")
    env = {"PYTHONPATH": f"{shadow}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    p = cli(runs[0], str(tmp_path / "lake"), env_extra=env)
    assert p.returncode == 1
    assert "pip install pyarrow" in one_error(p)


def test_runs_table_finds_the_model_of_a_zero_code_capture(tmp_path):
    """`trainscope run`'s capture names the model in its instrumentation event; a run whose
    configuration and events name no model or instance has nulls there."""
    for name, event in (("captured", {"model": {"name": "Net", "parameters": 10}}),
                        ("plain", None)):
        run_dir = str(tmp_path / name)
        _core.create_or_open_run(run_dir, name=name, config_json='{"save_interval": 5}')
        w = _core.Writer(run_dir, stream="worker-0")
        w.add_step(0, 0, 0, T0, T0 + 10)
        if event:
            w.add_event("instrumentation", json.dumps(event), T0)
        w.close()
        row = ts.open_run(run_dir).table("runs").to_pylist()[0]
        assert row["model"] == ("Net" if event else None)
        assert row["instance_type"] is None and row["ranks"] == 1 and row["last_step"] == 0
        assert row["state"] == "ended" and row["end_us"] >= T0 + 10


def test_column_reader_hands_each_stream_over_once_and_passes_errors_on(runs):
    """The export writes each stream as soon as it is read (memory: one stream's columns); a
    failure while writing one (a full disk) ends the read with that error."""
    seen = []
    data = _core.read_columns(runs[0], ["steps"], "",
                              lambda s, c: seen.append((s, len(c["steps"]["step"]))))
    assert [s for s, _ in seen] == data["streams"] and data["columns"] == {}
    steps = {s: n for s, n in seen}
    assert steps["monitor-trainer-1"] == 0
    assert steps["worker-0"] == len(ts.open_run(runs[0]).step_records("worker-0"))
    calls = []

    def full_disk(stream, columns):
        calls.append(stream)
        raise OSError(28, "No space left on device")
    with pytest.raises(OSError, match="No space left"):
        _core.read_columns(runs[0], ["steps"], "", full_disk)
    assert len(calls) == 1  # none handed over after the failure


def test_a_plain_hook_run_names_its_model_and_the_instance_type(tmp_path, monkeypatch):
    """ts.Hook + register_module (no zero-code capture) names the model through its
    model_registered event, looked through DDP-style wrappers; the instance type comes from
    TRAINSCOPE_INSTANCE_TYPE (or SageMaker's SM_CURRENT_INSTANCE_TYPE)."""
    import torch

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x)

    class Wrapper(torch.nn.Module):  # like DistributedDataParallel: the model in .module
        def __init__(self, m):
            super().__init__()
            self.module = m

        def forward(self, x):
            return self.module(x)

    monkeypatch.setenv("TRAINSCOPE_INSTANCE_TYPE", "g5.xlarge")
    run_dir = str(tmp_path / "plain")
    model = Wrapper(Classifier())
    with ts.Hook(run_dir, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        for _ in range(3):
            model(torch.randn(2, 4)).sum().backward()
    run = ts.open_run(run_dir)
    ev = run.events("model_registered")
    assert ev and ev[0]["name"] == "Classifier" and ev[0]["parameters"] == 10, ev
    row = run.table("runs").to_pylist()[0]
    assert row["model"] == "Classifier" and row["instance_type"] == "g5.xlarge", row

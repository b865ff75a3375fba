"""Parquet export of a big run: `trainscope export parquet` of 8 ranks × 200,000 steps (the
tests' make_synthetic_run, --kind faulty), target ≤ 10 s; then DuckDB reads it back and every
table's row count and every column's checksum (exact sums of integers, fsum of floats, count
and total length of strings) equal the reader's record-wise accessors (docs/performance.md,
"Parquet export").

    .venv/bin/python bench/parquet_export.py [--ranks 8] [--steps 200000] [--keep DIR]
(BUILD: build folder, default ./build)
"""
import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import duckdb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import trainscope as ts  # noqa: E402
from trainscope import _tables  # noqa: E402

MODES = ["TRAIN", "EVAL", "PREDICT", "GLOBAL"]


def reader_sums(run_dir):
    """{table: {column: checksum}} from the reader's record-wise accessors."""
    run = ts.open_run(run_dir)
    r = run._r
    cols = {t: {} for t in ("steps", "scalars", "summaries", "system")}

    def add(table, column, value):
        cols[table].setdefault(column, []).append(value)
    for s in r.streams():
        for st in r.step_records(s):
            for k in ("step", "mode_step", "start_us", "end_us"):
                add("steps", k, st[k])
            add("steps", "duration_us", st["end_us"] - st["start_us"])
            for k in ("data_wait_us", "forward_us", "backward_us", "optimizer_us"):
                add("steps", k, None if st[k] < 0 else st[k])
            add("steps", "mode", MODES[st["mode"]])
        for name in r.scalar_names():
            d = r.scalar(name, 3, s)
            n = len(d["steps"])
            cols["scalars"].setdefault("step", []).extend(int(v) for v in d["steps"])
            cols["scalars"].setdefault("value", []).extend(float(v) for v in d["values"])
            cols["scalars"].setdefault("wall_us", []).extend(int(v) for v in d["wall_us"])
            cols["scalars"].setdefault("name", []).extend([name] * n)
        for sm in r.summaries(s):
            add("summaries", "step", sm["step"])
            add("summaries", "name", sm["name"])
            for k in ("l2", "mean", "min", "max"):
                add("summaries", k, sm["stats"][k])
            for k in ("count", "nan", "zeros"):
                add("summaries", k, int(sm["stats"][k]))
        for sample in r.system_samples(s):
            for metric, value in sample["metrics"].items():
                add("system", "wall_us", sample["wall_us"])
                add("system", "metric", metric)
                add("system", "value", value)
    return {t: {c: checksum(v) for c, v in cs.items()} for t, cs in cols.items()}


def checksum(values):
    present = [v for v in values if v is not None]
    if present and isinstance(present[0], str):
        return ("str", len(values), len(set(present)), sum(len(v) for v in present))
    if present and isinstance(present[0], int):
        return ("int", len(values), len(present), sum(present))
    finite = [v for v in present if not math.isnan(v)]
    return ("float", len(values), len(present), len(finite), math.fsum(finite))


def duckdb_sums(dest, expected):
    out = {}
    for table, cols in expected.items():
        src = f"read_parquet('{dest}/{table}/**/*.parquet', hive_partitioning = true)"
        out[table] = {}
        for c, want in cols.items():
            kind = want[0]
            if kind == "str":
                q = f"SELECT count(*), count(DISTINCT {c}), sum(length({c})) FROM {src}"
                n, distinct, length = duckdb.sql(q).fetchall()[0]
                out[table][c] = ("str", n, distinct, int(length))
            elif kind == "int":
                q = f"SELECT count(*), count({c}), sum({c})::HUGEINT FROM {src}"
                n, present, total = duckdb.sql(q).fetchall()[0]
                out[table][c] = ("int", n, present, int(total or 0))
            else:
                q = (f"SELECT count(*), count({c}), count({c}) FILTER (WHERE NOT isnan({c})), "
                     f"fsum({c}) FILTER (WHERE NOT isnan({c})) FROM {src}")
                n, present, finite, total = duckdb.sql(q).fetchall()[0]
                out[table][c] = ("float", n, present, finite, total)
    return out


def same(a, b):
    if a[0] != "float":
        return a == b
    return a[:4] == b[:4] and math.isclose(a[4], b[4] or 0.0, rel_tol=1e-12, abs_tol=1e-9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--keep", help="make the run here (kept) instead of a temporary folder")
    a = ap.parse_args()
    build = os.environ.get("BUILD", os.path.join(ROOT, "build"))
    cli = os.path.join(build, "tools", "cli", "trainscope")
    synth = os.path.join(build, "tests", "tools", "make_synthetic_run")
    work = a.keep or tempfile.mkdtemp(prefix="parquet-bench-")
    run = os.path.join(work, "run")
    if not os.path.isdir(run):
        t = time.perf_counter()
        subprocess.run([synth, run, "--kind", "faulty", "--steps", str(a.steps),
                        "--ranks", str(a.ranks)], check=True, stdout=subprocess.DEVNULL)
        print(f"made {a.ranks} ranks x {a.steps} steps in {time.perf_counter() - t:.1f} s")
    dest = os.path.join(work, "lake")
    env = dict(os.environ, TRAINSCOPE_PYTHON=sys.executable)
    t = time.perf_counter()
    subprocess.run([cli, "export", "parquet", run, dest], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    export_s = time.perf_counter() - t
    t = time.perf_counter()
    subprocess.run([cli, "export", "parquet", run, dest], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    again_s = time.perf_counter() - t
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(dest) for f in fs)
    run_size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(run) for f in fs)
    rows = {t: duckdb.sql(f"SELECT count(*) FROM read_parquet('{dest}/{t}/**/*.parquet')")
            .fetchall()[0][0] for t in _tables.TABLES}
    print(f"parquet_export: {a.ranks} ranks x {a.steps} steps (run {run_size / 2**20:.0f} MB) "
          f"-> {size / 2**20:.1f} MB of Parquet")
    print(f"  trainscope export parquet: {export_s:.2f} s (target <= 10 s) "
          f"{'OK' if export_s <= 10 else 'SLOW'}; again (replacing): {again_s:.2f} s")
    print("  rows: " + ", ".join(f"{t} {n:,}" for t, n in rows.items()))
    want = reader_sums(run)
    got = duckdb_sums(dest, want)
    bad = [(t, c, want[t][c], got[t][c]) for t in want for c in want[t]
           if not same(want[t][c], got[t][c])]
    n = sum(len(c) for c in want.values())
    print(f"  DuckDB vs reader: {n} column checksums, {len(bad)} differ "
          f"{'OK' if not bad else bad}")
    if not a.keep:
        shutil.rmtree(work)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

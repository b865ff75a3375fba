#!/usr/bin/env python3
"""How `trainscope report` grows with ranks and steps (issue 33, item 3).

For each shape RANKSxSTEPS a synthetic DDP-like run is written with the tests'
make_synthetic_run (the real writer), then reported:
  before  the CLI given with --old-cli (a build without the stream index), if any
  cold    this CLI on the run without RUN/report/streams.tsi: every record read, index written
  warm    this CLI again: the closed streams' summaries read from the index
Wall time and peak RSS come from wait4() of each report process; summary.json of cold and warm
must be identical (and equal to before's, when given, apart from nothing: the report is the
same). The run is deleted after its row.

  bench/report_scale.py [--shapes 64x100000,1024x100000] [--dir /dev/shm] [--old-cli CLI]
Target: 1,024 ranks x 100,000 steps in <= 5 s and <= 300 MB (warm).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(cmd, env):
    """(seconds, peak MB) of one process; fails loudly when it fails."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed ({status}): {' '.join(cmd)}\n{err}")
    return dt, ru.ru_maxrss / 1024.0


def du_mb(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total / 1048576.0


def summary(run):
    with open(os.path.join(run, "report", "summary.json")) as f:
        return json.load(f)


def main():
    build = os.environ.get("TRAINSCOPE_BUILD_DIR", os.path.join(ROOT, "build"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--shapes", default="1x100000,64x100000,1024x100000")
    ap.add_argument("--dir", default="/dev/shm", help="where the runs are written (room: ~7.3 MB "
                    "per rank and 100,000 steps)")
    ap.add_argument("--cli", default=os.path.join(build, "tools", "cli", "trainscope"))
    ap.add_argument("--synth", default=os.path.join(build, "tests", "tools", "make_synthetic_run"))
    ap.add_argument("--old-cli", default="", help="a CLI without the stream index, for 'before'")
    ap.add_argument("--json", default="", help="also write the rows here")
    a = ap.parse_args()
    env = dict(os.environ, TRAINSCOPE_HOME=os.path.join(a.dir, "ts-scale-home"))
    rows = []
    print("| run | on disk | written in | before | cold (index built) | warm (from index) |")
    print("|---|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        ranks, steps = (int(x) for x in shape.split("x"))
        run = os.path.join(a.dir, f"ts-scale-{ranks}x{steps}")
        shutil.rmtree(run, ignore_errors=True)
        t0 = time.monotonic()
        subprocess.run([a.synth, run, "--ranks", str(ranks), "--steps", str(steps)], check=True,
                       stdout=subprocess.DEVNULL)
        write_s = time.monotonic() - t0
        disk = du_mb(run)
        report = ["report", run, "--no-history"]
        row = {"ranks": ranks, "steps": steps, "disk_mb": round(disk, 1),
               "write_s": round(write_s, 1)}
        if a.old_cli:
            row["before"] = measure([a.old_cli] + report, env)
            before = summary(run)
        idx = os.path.join(run, "report", "streams.tsi")
        if os.path.exists(idx):
            os.remove(idx)
        row["cold"] = measure([a.cli] + report, env)
        cold = summary(run)
        row["index_mb"] = round(os.path.getsize(idx) / 1048576.0, 1) if os.path.exists(idx) else 0
        row["warm"] = min(measure([a.cli] + report, env) for _ in range(2))
        warm = summary(run)
        row["same"] = cold == warm and (not a.old_cli or before == cold)
        shutil.rmtree(run, ignore_errors=True)
        fmt = lambda m: f"{m[0]:.2f} s, {m[1]:.0f} MB" if m else ""
        print(f"| {ranks:,} × {steps:,} | {disk:,.0f} MB | {write_s:.0f} s | "
              f"{fmt(row.get('before'))} | {fmt(row['cold'])} | **{fmt(row['warm'])}** "
              f"(index {row['index_mb']} MB){'' if row['same'] else ' SUMMARIES DIFFER'} |",
              flush=True)
        rows.append(row)
    shutil.rmtree(env["TRAINSCOPE_HOME"], ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

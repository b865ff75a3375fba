"""`trainscope inspect` of a run with many scalar names (issue 29; docs/performance.md).

Writes a run whose one worker records NAMES distinct scalar series (one value each, through the
writer the hook uses), then times `trainscope inspect RUN` and `trainscope inspect RUN --json`
(best of REPEATS) and prints seconds and names per second. Before issue 29 inspect re-listed
every name for each name it printed: 8,000 names took 18 s, 100,000 did not finish.

    PYTHONPATH=python python bench/inspect_names.py [NAMES] [--bin build/tools/cli/trainscope]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
from trainscope import _core  # noqa: E402

REPEATS = 3


def write_run(run_dir: str, names: int) -> None:
    _core.create_or_open_run(run_dir, name="inspect-names")
    w = _core.Writer(run_dir, "worker-0", queue_max_records=names + 16)
    for i in range(names):
        w.add_scalar(f"scalars/metric_{i:06d}", 0, 0, 0, float(i))
    w.add_step(0, 0, 0, 1000, 2000)
    err = w.close()
    if err:
        sys.exit(f"writer: {err}")


def best_of(cmd) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", type=int, nargs="?", default=100_000)
    ap.add_argument("--bin", default=os.environ.get(
        "TRAINSCOPE_BIN", os.path.join(ROOT, "build", "tools", "cli", "trainscope")))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        t0 = time.perf_counter()
        write_run(run_dir, a.names)
        print(f"wrote {a.names:,} scalar names in {time.perf_counter() - t0:.2f} s")
        for label, extra in (("inspect", []), ("inspect --json", ["--json"])):
            s = best_of([a.bin, "inspect", run_dir, *extra])
            print(f"{label:16s} {a.names:,} names: {s:.3f} s ({a.names / s:,.0f} names/s), "
                  f"best of {REPEATS}")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Times NumPy computing what one ComputeStats call returns, the way a user would do it.

For each size: float32 N(0, 1) values (like bench/stats_bench.cc), then separate calls
np.min, np.max, np.mean, np.std, np.linalg.norm, np.isnan(x).sum(), np.isinf(x).sum().
Reports the median wall and thread-CPU time of each call over the repeats and their sums, as
JSON on stdout (CPU time is the steadier number on a shared machine).
Run single-threaded for a fair comparison (bench/run_stats.sh sets OPENBLAS_NUM_THREADS=1;
np.linalg.norm of a vector goes through BLAS dot).
"""
import argparse
import json
import statistics
import time

import numpy as np

OPS = [
    ("min", np.min),
    ("max", np.max),
    ("mean", np.mean),
    ("std", np.std),
    ("l2", np.linalg.norm),
    ("nan_count", lambda x: np.isnan(x).sum()),
    ("inf_count", lambda x: np.isinf(x).sum()),
]


def time_size(n, repeats):
    x = np.random.default_rng(42).standard_normal(n).astype(np.float32)
    wall = {name: [] for name, _ in OPS}
    cpu = {name: [] for name, _ in OPS}
    for _ in range(repeats):
        for name, fn in OPS:
            start, start_cpu = time.perf_counter(), time.thread_time()
            fn(x)
            cpu[name].append(time.thread_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
    ops = {name: statistics.median(t) for name, t in wall.items()}
    ops_cpu = {name: statistics.median(t) for name, t in cpu.items()}
    return {"n": n, "bytes": int(x.nbytes), "repeats": repeats, "ops_s": ops,
            "total_s": sum(ops.values()), "ops_cpu_s": ops_cpu,
            "total_cpu_s": sum(ops_cpu.values())}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,1000000,10000000")
    parser.add_argument("--min-time", type=float, default=0.5,
                        help="seconds of measurement per size (at least 5 repeats)")
    args = parser.parse_args()
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        probe = time_size(n, 1)["total_s"]
        repeats = max(5, min(1000, int(args.min_time / max(probe, 1e-9))))
        results.append(time_size(n, repeats))
    print(json.dumps({"numpy_version": np.__version__, "dtype": "float32", "sizes": results},
                     indent=1))


if __name__ == "__main__":
    main()

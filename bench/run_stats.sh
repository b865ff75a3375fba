#!/bin/bash
# Runs the tensor-statistics benchmarks and prints ratios measured in the same run:
#   ours vs a plain vectorised float sum over the same buffer (read bandwidth; target >= 0.7),
#   ours vs NumPy computing the same statistics with separate calls (target >= 3x).
# Builds nothing. Usage: bench/run_stats.sh BUILD_DIR [OUT_DIR]
#   BUILD_DIR: a configured and built tree (ninja -C BUILD_DIR stats_bench).
#   OUT_DIR:   where the raw JSON goes (default: a temporary directory).
set -euo pipefail
build=${1:?usage: bench/run_stats.sh BUILD_DIR [OUT_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$(mktemp -d)}
mkdir -p "$out"
bench="$build/bench/stats_bench"
[[ -x $bench ]] || { echo "no $bench: build it first (ninja -C $build stats_bench)" >&2; exit 1; }

# Single-threaded everywhere (np.linalg.norm uses BLAS dot; ComputeStats is one thread).
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

"$bench" --benchmark_format=json --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true >"$out/stats_bench.json"
/usr/bin/python3 "$here/stats_vs_numpy.py" >"$out/numpy.json"

/usr/bin/python3 - "$out/stats_bench.json" "$out/numpy.json" <<'PY'
import json, sys

bench = json.load(open(sys.argv[1]))
numpy = {s["n"]: s for s in json.load(open(sys.argv[2]))["sizes"]}
med = {}
for b in bench["benchmarks"]:
    if b.get("aggregate_name") == "median":
        med[b["run_name"]] = b

def gbs(name):
    b = med.get(name)
    return b["bytes_per_second"] / 1e9 if b else float("nan")

def real_s(name, key="real_time"):
    b = med[name]
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
    return b[key] * scale

ctx = bench["context"]
print(f"# {ctx.get('host_name', '?')}: {ctx.get('num_cpus')} cpus, {ctx.get('mhz_per_cpu')} MHz,"
      f" load {ctx.get('load_avg')}; medians of 5 repetitions")
print("float32 N(0,1). GB/s from CPU time; speedup = NumPy's 7 calls / one ComputeStats, "
      "by wall time and by CPU time")
print(f"{'size':>10} {'ours GB/s':>10} {'sum GB/s':>9} {'ratio':>6} "
      f"{'numpy ms':>9} {'ours ms':>8} {'speedup':>8} {'cpu ms np/ours':>16} {'speedup':>8}")
for n in (10_000, 1_000_000, 10_000_000):
    ours, base = f"BM_ComputeStats_f32/{n}", f"BM_PlainSum/{n}"
    np_s = numpy[n]["total_s"] if n in numpy else float("nan")
    np_cpu = numpy[n]["total_cpu_s"] if n in numpy else float("nan")
    ours_cpu = real_s(ours, "cpu_time")
    print(f"{n:>10} {gbs(ours):>10.2f} {gbs(base):>9.2f} {gbs(ours) / gbs(base):>6.2f} "
          f"{np_s * 1e3:>9.3f} {real_s(ours) * 1e3:>8.3f} {np_s / real_s(ours):>7.1f}x "
          f"{np_cpu * 1e3:>8.3f}/{ours_cpu * 1e3:<7.3f} {np_cpu / ours_cpu:>7.1f}x")
print()
print("Reference: the same float32 sum accumulated in double (every element widened, as any "
      "double-accumulating kernel must)")
print(f"{'size':>10} {'as-double GB/s':>15} {'/ sum':>6} {'ours / as-double':>17}")
for n in (10_000, 1_000_000, 10_000_000):
    ours, base, dbl = f"BM_ComputeStats_f32/{n}", f"BM_PlainSum/{n}", f"BM_SumAsDouble/{n}"
    print(f"{n:>10} {gbs(dbl):>15.2f} {gbs(dbl) / gbs(base):>6.2f} {gbs(ours) / gbs(dbl):>17.2f}")
print()
for name in ("BM_ComputeStats_f16/1000000", "BM_ComputeStats_bf16/1000000",
             "BM_ComputeStats_f32_offset/1000000", "BM_ComputeStats_f32_generic/1000000",
             "BM_ComputeStats_f32_avx2/1000000", "BM_ComputeStats_f32_avx512/1000000"):
    if name in med:
        print(f"{name:<40} {gbs(name):6.2f} GB/s  {real_s(name) * 1e3:8.3f} ms")
PY
echo "raw results: $out"

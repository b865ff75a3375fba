#!/usr/bin/env bash
# Store benchmarks: enqueue latency while the writer is busy, raw write throughput vs a plain
# sequential write in the same run. Usage: bench/run_store.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:-${TRAINSCOPE_BUILD_DIR:-build}}
out=$(mktemp)
# Repetitions, randomly interleaved, medians: the machine is shared and its disk is noisy.
# TS_BENCH_DIR picks the file system (default /tmp; /dev/shm isolates CPU cost from the disk).
"$b/bench/writer_bench" --benchmark_repetitions=9 --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_format=json --benchmark_out="$out" \
  --benchmark_out_format=json >/dev/null 2>&1
/usr/bin/python3 - "$out" <<'PY'
import json, sys
runs = {b["run_name"].split("/")[0]: b for b in json.load(open(sys.argv[1]))["benchmarks"]
        if b.get("aggregate_name") == "median"}
e = runs["BM_EnqueueSummaryWhileBusy"]
print(f"enqueue latency (summary record, writer busy): p50 {e['p50_ns']/1000:.2f} us, "
      f"p99 {e['p99_ns']/1000:.2f} us, max {e['max_ns']/1000:.1f} us, dropped {int(e['dropped'])}")
raw, plain = runs["BM_RawWriteThroughput"], runs["BM_PlainSequentialWrite"]
r, p = raw["bytes_per_second"] / 2**20, plain["bytes_per_second"] / 2**20
print(f"raw tensor writes: {r:.0f} MiB/s, plain sequential write: {p:.0f} MiB/s, ratio {r/p:.2f}")
PY
rm -f "$out"

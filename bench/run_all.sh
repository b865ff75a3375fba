#!/usr/bin/env bash
# Runs every benchmark and prints its results (see docs/performance.md for what they mean).
set -uo pipefail
cd "$(dirname "$0")/.."
b=${TRAINSCOPE_BUILD_DIR:-build}
PY=${PYTHON:-.venv/bin/python}
echo "== store";        bash bench/run_store.sh "$b"
echo "== stats";        bash bench/run_stats.sh "$b"
echo "== rules";        "$b/bench/rules_bench"
echo "== sysmon";       /usr/bin/python3 bench/sysmon_vs_psutil.py "$b/bench"
echo "== report";       BUILD="$b" bash bench/report_bench.sh
echo "== parquet export"; BUILD="$b" "$PY" bench/parquet_export.py
echo "== hook overhead (reference: batch 512, ~1.8 ms steps)"; "$PY" bench/step_overhead.py
echo "== hook overhead, stress case: batch 64, ~0.5 ms steps"; "$PY" bench/step_overhead.py --batch 64
echo "== profiler window"; "$PY" bench/profiler_overhead.py
echo "== rule stop latency (Python hook, C++ Session)"
PYTHONPATH=python "$PY" bench/rule_latency.py 200
"$b/bench/session_latency_bench" 100 1000

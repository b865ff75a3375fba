#!/usr/bin/env bash
# End-to-end benchmark of `trainscope report`: a synthetic run of 100,000 steps with 200,000
# system samples (24 metrics each), written with the real Writer. Targets: the report finishes
# in under 5 s and the HTML stays under 5 MB.
#   bench/report_bench.sh [STEPS] [SAMPLES]     (BUILD=build dir, default ./build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-${TRAINSCOPE_BUILD_DIR:-build}}
STEPS=${1:-100000}
SAMPLES=${2:-200000}
CLI=$BUILD/tools/cli/trainscope
SYNTH=$BUILD/tests/tools/make_synthetic_run
for b in "$CLI" "$SYNTH"; do [ -x "$b" ] || { echo "missing $b (build first)"; exit 1; }; done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export TRAINSCOPE_HOME=$WORK/home

t0=$(date +%s.%N)
"$SYNTH" "$WORK/run" --kind faulty --steps "$STEPS" --samples "$SAMPLES" >/dev/null
t1=$(date +%s.%N)
"$CLI" report "$WORK/run" --instance g5.2xlarge >/dev/null
t2=$(date +%s.%N)
"$CLI" report "$WORK/run" --instance g5.2xlarge --json >/dev/null
t3=$(date +%s.%N)

run_bytes=$(du -sb "$WORK/run" --exclude=report | cut -f1)
html_bytes=$(stat -c %s "$WORK/run/report/report.html")
json_bytes=$(stat -c %s "$WORK/run/report/summary.json")
awk -v steps="$STEPS" -v samples="$SAMPLES" -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" \
    -v run_bytes="$run_bytes" -v html="$html_bytes" -v json="$json_bytes" 'BEGIN {
  write_s = t1 - t0; report_s = t2 - t1; again_s = t3 - t2
  printf "report_bench: %d steps, %d system samples (run dir %.1f MB, written in %.2f s)\n", steps, samples, run_bytes/1048576, write_s
  printf "  trainscope report:        %.2f s  (target < 5 s)  %s\n", report_s, report_s < 5 ? "OK" : "SLOW"
  printf "  trainscope report --json: %.2f s\n", again_s
  printf "  report.html:              %.2f MB (target < 5 MB) %s\n", html/1048576, html < 5*1048576 ? "OK" : "TOO BIG"
  printf "  summary.json:             %.1f KB\n", json/1024
}'

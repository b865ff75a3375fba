#!/usr/bin/env bash
# Reading many-rank runs: synthetic DDP-like runs (make_synthetic_run --ranks) of 1, 8, 64 and
# 256 ranks x 10,000 steps and 8 ranks x 200,000 steps; for each, wall time and peak RSS
# (/usr/bin/time) of `trainscope report`, `trainscope watch --rules straggler` replaying the
# finished run, and `trainscope inspect`. Targets (issue 16): 8 x 200,000 reports in < 10 s and
# < 300 MB; 256 x 10,000 reported within the same bound, watched keeping up, inspected in seconds.
#   bench/ranks_bench.sh [CLI ...]     (default: BUILD/tools/cli/trainscope; give two CLIs,
#                                       e.g. an older build first, to compare them run by run)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-${TRAINSCOPE_BUILD_DIR:-build}}
SYNTH=$BUILD/tests/tools/make_synthetic_run
CLIS=("$@")
[ ${#CLIS[@]} -gt 0 ] || CLIS=("$BUILD/tools/cli/trainscope")
for b in "$SYNTH" "${CLIS[@]}"; do [ -x "$b" ] || { echo "missing $b (build first)"; exit 1; }; done
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (GNU time)"; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export TRAINSCOPE_HOME=$WORK/home

measure() {  # prints "seconds peak_MB" of the command; OK_RC: the exit codes that are success
  local rc=0
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >"$WORK/out" 2>&1 || rc=$?
  if [[ " ${OK_RC:-0} " != *" $rc "* ]]; then cat "$WORK/out"; exit 1; fi
  awk '{ printf "%6.2f s %6.0f MB", $1, $2 / 1024 }' "$WORK/time"
}

printf "%-18s %8s %-4s %-22s %-22s %-22s %s\n" run "on disk" cli report watch inspect \
  "watch steps/s"
for shape in 1x10000 8x10000 64x10000 256x10000 8x200000; do
  ranks=${shape%x*} steps=${shape#*x}
  run=$WORK/run-$shape
  "$SYNTH" "$run" --ranks "$ranks" --steps "$steps" >/dev/null
  disk=$(du -sm "$run" | cut -f1)
  i=0
  for cli in "${CLIS[@]}"; do
    i=$((i + 1))
    rm -rf "$run/report" "$run"/watch-*
    r=$(measure "$cli" report "$run" --out "$WORK/report.html")
    t0=$(date +%s.%N)
    # watch exits 5 when the rule fired (docs/cli.md): a finished replay either way
    w=$(OK_RC="0 5" measure "$cli" watch "$run" --rules straggler --wait-s 0 --quiet)
    t1=$(date +%s.%N)
    n=$(measure "$cli" inspect "$run")
    rate=$(awk -v n=$((ranks * steps)) -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
    printf "%-18s %5s MB %-4s %-22s %-22s %-22s %s\n" "$ranks x $steps" "$disk" "#$i" "$r" "$w" \
      "$n" "$rate"
  done
  rm -rf "$run"
done

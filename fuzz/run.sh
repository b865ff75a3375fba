#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build-fuzz/ and fuzzes one or all.
#   fuzz/run.sh [SECONDS] [TARGET|all]     default 300 s of segment_reader_fuzz
# Targets (fuzz/<target>.cc; seeds in fuzz/corpus/<name>/, crashers kept in
# fuzz/regressions/<name>/, <name> being the target without _fuzz; dictionaries fuzz/dict/):
#   segment_reader_fuzz    the bytes of a segment (seeds written by make_fuzz_seeds)
#   record_fuzz            crafted records with correct CRCs, generated from the input
#   http_request_fuzz      what a client sends the dashboard server (head, headers, body)
#   rules_config_fuzz      a rules configuration, JSON or YAML
#   run_manifest_fuzz      run.json
#   stop_request_fuzz      control/stop.json
#   checkpoint_record_fuzz a checkpoint commit record, ckpt-<step>.json
# `all` runs every target SECONDS each, one after the other (FUZZ_JOBS=2: two at a time). New
# inputs go to the ignored fuzz/corpus-work/<name>/, crashers to fuzz/corpus-work/<name>/crashes/,
# libFuzzer's output to build-fuzz/logs/<target>.log. Run under `nice -n 19` on a shared machine.
# FUZZ_NO_BUILD=1 fuzzes the binaries already in build-fuzz/ (no cmake, no ninja: for runs
# started while the sources are being edited, or two runs at once).
# No allocation may pass -malloc_limit_mb: every size a file claims is bounded before use (a raw
# tensor by 32768 x its stored bytes, the most zstd can inflate them: 1 GiB for a 32 KiB input).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
target=${2:-segment_reader_fuzz}
all=(segment_reader_fuzz record_fuzz http_request_fuzz rules_config_fuzz run_manifest_fuzz
     stop_request_fuzz checkpoint_record_fuzz)
b=build-fuzz
build() { [ -n "${FUZZ_NO_BUILD:-}" ] || ninja -C $b "$@"; }
[ -n "${FUZZ_NO_BUILD:-}" ] || CC=clang CXX=clang++ cmake -S . -B $b -G Ninja -DTRAINSCOPE_BUILD_FUZZ=ON -DTRAINSCOPE_BUILD_TESTS=OFF \
  -DTRAINSCOPE_BUILD_BENCH=OFF -DTRAINSCOPE_BUILD_PYTHON=OFF -DTRAINSCOPE_BUILD_EXAMPLES=OFF \
  "-DTRAINSCOPE_LAYERS=util;store;stats;sysmon;rules;runtime;server" "-DTRAINSCOPE_CLI_ONLY=inspect;verify" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" >/dev/null
if [ "$target" = all ]; then
  build "${all[@]}" make_fuzz_seeds
  printf '%s\n' "${all[@]}" | FUZZ_NO_BUILD=1 xargs -P "${FUZZ_JOBS:-1}" -I{} "$0" "$secs" {}
  exit 0
fi
build "$target" $([ "$target" = segment_reader_fuzz ] && echo make_fuzz_seeds)
name=${target%_fuzz}
work=fuzz/corpus-work/$name
mkdir -p "$work/crashes" $b/logs
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1100 -print_final_stats=1
        -artifact_prefix="$work/crashes/")
case "$target" in
  segment_reader_fuzz) "$b/fuzz/make_fuzz_seeds" fuzz/corpus/segment_reader; max_len=65536 ;;
  record_fuzz) max_len=32768 ;;
  rules_config_fuzz) max_len=65536 ;;  # long scalars: see fuzz/regressions/rules_config
  *) max_len=8192 ;;
esac
[ -f "fuzz/dict/$name.dict" ] && limits+=(-dict="fuzz/dict/$name.dict")
# A UBSan report is a finding: stop there (libFuzzer saves the input) rather than go on.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
seeds=()
for d in fuzz/corpus/$name fuzz/regressions/$name; do [ -d "$d" ] && seeds+=("$d"); done
"$b/fuzz/$target" -max_total_time="$secs" -max_len=$max_len "${limits[@]}" "$work" \
  ${seeds[@]+"${seeds[@]}"} 2>&1 | tee "$b/logs/$target-$(date -u +%Y%m%dT%H%M%SZ).log"

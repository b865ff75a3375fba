#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes one of them.
#   fuzz/run.sh [SECONDS] [TARGET]     default 300 s of segment_reader_fuzz
# Targets: segment_reader_fuzz (the bytes of a segment, seeded by make_fuzz_seeds) and
# record_fuzz (crafted records with correct CRCs, generated from the input; no seeds needed).
# No allocation may pass -malloc_limit_mb: every size a file claims is bounded before use (a raw
# tensor by 32768 x its stored bytes, the most zstd can inflate them: 1 GiB for a 32 KiB input).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
target=${2:-segment_reader_fuzz}
b=build-fuzz
CC=clang CXX=clang++ cmake -S . -B $b -G Ninja -DTRAINSCOPE_BUILD_FUZZ=ON -DTRAINSCOPE_BUILD_TESTS=OFF \
  -DTRAINSCOPE_BUILD_BENCH=OFF -DTRAINSCOPE_BUILD_PYTHON=OFF -DTRAINSCOPE_BUILD_EXAMPLES=OFF \
  "-DTRAINSCOPE_LAYERS=util;store" "-DTRAINSCOPE_CLI_ONLY=inspect;verify" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" >/dev/null
ninja -C $b "$target" make_fuzz_seeds
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1100 -print_final_stats=1)
if [ "$target" = record_fuzz ]; then
  mkdir -p fuzz/corpus-work/record
  "$b/fuzz/record_fuzz" -max_total_time="$secs" -max_len=32768 "${limits[@]}" fuzz/corpus-work/record
else
  "$b/fuzz/make_fuzz_seeds" fuzz/corpus/segment_reader
  mkdir -p fuzz/corpus-work
  "$b/fuzz/segment_reader_fuzz" -max_total_time="$secs" -max_len=65536 "${limits[@]}" \
    fuzz/corpus-work fuzz/corpus/segment_reader
fi

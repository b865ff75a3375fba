#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes the segment reader.
#   fuzz/run.sh [SECONDS]     default 300
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
b=build-fuzz
CC=clang CXX=clang++ cmake -S . -B $b -G Ninja -DTRAINSCOPE_BUILD_FUZZ=ON -DTRAINSCOPE_BUILD_TESTS=OFF \
  -DTRAINSCOPE_BUILD_BENCH=OFF -DTRAINSCOPE_BUILD_PYTHON=OFF -DTRAINSCOPE_BUILD_EXAMPLES=OFF \
  "-DTRAINSCOPE_LAYERS=util;store" "-DTRAINSCOPE_CLI_ONLY=inspect;verify" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" >/dev/null
ninja -C $b segment_reader_fuzz make_fuzz_seeds
"$b/fuzz/make_fuzz_seeds" fuzz/corpus/segment_reader
mkdir -p fuzz/corpus-work
"$b/fuzz/segment_reader_fuzz" -max_total_time="$secs" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 fuzz/corpus-work fuzz/corpus/segment_reader

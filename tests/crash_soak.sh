#!/usr/bin/env bash
# Soak version of the crash-safety test: thousands of SIGKILL trials (default 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
TS_CRASH_TRIALS=${1:-2000} "${TRAINSCOPE_BUILD_DIR:-build}/tests/crash_test"

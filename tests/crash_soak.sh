#!/usr/bin/env bash
# Soak version of the crash-safety tests: thousands of SIGKILL trials. $1: trials of the
# writer crash test (default 2000); $2: trials of the journal crash test, a step-recording
# child killed at random moments (default 1000).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${TRAINSCOPE_BUILD_DIR:-build}"
TS_CRASH_TRIALS=${1:-2000} "$BUILD/tests/crash_test"
TS_CRASH_TRIALS=${2:-1000} "$BUILD/tests/journal_crash_test"

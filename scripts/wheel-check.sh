#!/usr/bin/env bash
# The packaged path, as a new user takes it: build the wheel with pip (PEP 517, scikit-build-core,
# isolated build environment), install only that wheel into a fresh venv with the pinned torch,
# and from outside the source tree run `trainscope --help`, a short real training whose loss
# turns NaN (exploding_tensor + stop_training must stop it), then `trainscope rules` and
# `trainscope report` on the run. ./dev test runs this; `./dev wheel` too.
#   scripts/wheel-check.sh [WORK_DIR]     (default: a fresh temporary folder, removed after)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${TRAINSCOPE_PYTHON:-python3}
WORK=${1:-$(mktemp -d -t ts-wheel-XXXXXX)}
[ -n "${1:-}" ] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK"
step() { printf '\033[1m--> wheel: %s\033[0m\n' "$*" >&2; }
pins() { grep -E "^($1)==" requirements/dev.txt; }

step "pip wheel . (build log: $WORK/wheel.log)"
t0=$(date +%s)
if command -v ccache >/dev/null; then  # objects shared with ./dev build's (same flags)
  export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  export CCACHE_NOHASHDIR=1
  export CC=${CC:-gcc} CXX=${CXX:-g++}  # as ./dev does: ccache hashes the compiler's name
fi
"$PYTHON" -m pip wheel --no-deps -w "$WORK/dist" . >"$WORK/wheel.log" 2>&1 \
  || { tail -50 "$WORK/wheel.log"; echo "wheel-check: pip wheel failed" >&2; exit 1; }
whl=$(ls "$WORK"/dist/trainscope-*.whl)
step "built $(basename "$whl") ($(du -h "$whl" | cut -f1)) in $(( $(date +%s) - t0 )) s"

step "fresh venv with only the wheel, torch and scikit-learn (for the digits data)"
"$PYTHON" -m venv "$WORK/venv"
V="$WORK/venv/bin"
"$V/python" -m pip install -q --disable-pip-version-check "$whl" $(pins 'torch|numpy|scikit-learn') \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

mkdir -p "$WORK/job"
cp examples/pytorch/digits.py "$WORK/job/train.py"
cd "$WORK/job"   # nothing of the source tree is importable from here
"$V/python" - <<'PY'
import os, sys, trainscope
where = os.path.realpath(trainscope.__file__)
assert where.startswith(os.path.realpath(sys.prefix)), f"trainscope imported from {where}"
print("import trainscope", trainscope.__version__, "from", os.path.dirname(where))
PY
"$V/trainscope" --help >help.txt
grep -q "report" help.txt || { cat help.txt; echo "wheel-check: trainscope --help lists no report" >&2; exit 1; }
step "trainscope --help: ok ($(wc -l <help.txt) lines)"

step "a training whose loss turns NaN, stopped by exploding_tensor"
"$V/python" train.py --out run --fault nan --steps 3000 --rules exploding_tensor \
  --actions stop_training >train.json
cat train.json
"$V/python" - <<'PY'
import json
s = json.load(open("train.json"))
assert s["stopped"], f"the training was not stopped: {s}"
assert s["steps"] < 3000, s
PY
"$V/trainscope" rules run | tee rules.txt
grep -q "exploding_tensor" rules.txt
"$V/trainscope" report run >report.txt
test -s run/report/report.html || { cat report.txt; echo "wheel-check: no report.html" >&2; exit 1; }
step "report: $(du -h run/report/report.html | cut -f1) report.html; wheel path OK"

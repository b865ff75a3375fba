#!/usr/bin/env bash
# The README demo: a healthy training and a failing one, both under trainscope.
#  1. A LibTorch MLP whose learning rate explodes at step 100: `trainscope run` evaluates the
#     exploding_tensor rule while it trains and stops it a few steps after the loss turns NaN.
#  2. A healthy PyTorch training (scikit-learn's digits) recorded by the Python hook.
# Then it shows what was recorded and writes a report for each run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TRAINSCOPE_BUILD_DIR:-build}
TS="$BUILD/tools/cli/trainscope"
PY=${PYTHON:-.venv/bin/python}
OUT=${1:-runs/demo}
rm -rf "$OUT"
mkdir -p "$OUT"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. LibTorch training with an injected fault, under 'trainscope run' (auto-stop on NaN)"
"$TS" run --out "$OUT/libtorch-nan" --rules exploding_tensor,loss_not_decreasing \
  --actions stop_training,log --term-after-s 5 -- \
  "$BUILD/examples/libtorch/train_mlp" --out "$OUT/libtorch-nan" --steps 2000 --fault nan || true
"$TS" rules "$OUT/libtorch-nan"

if [ -x "$PY" ] && "$PY" -c "import trainscope" 2>/dev/null && [ -f examples/pytorch/digits.py ]; then
  say "2. A healthy PyTorch training recorded by the Python hook"
  "$PY" examples/pytorch/digits.py --out "$OUT/pytorch-healthy"
  say "What was recorded"
  "$TS" inspect "$OUT/pytorch-healthy"
fi

for run in "$OUT"/*/; do
  run=${run%/}
  if "$TS" help report >/dev/null 2>&1; then
    say "Report for $run"
    "$TS" report "$run" || true
  fi
done
say "Done. Open the reports in a browser:"
ls -1 "$OUT"/*/report/report.html 2>/dev/null | sed 's/^/  /' || echo "  (no reports: trainscope report is not built)"

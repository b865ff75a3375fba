#!/usr/bin/env bash
# The README demo (./dev demo): three trainings under trainscope, then their reports.
#  1. A healthy PyTorch training (scikit-learn's digits) recorded by the Python hook, with the
#     common tensor rules evaluated live.
#  2. The same training with a learning rate far too high, launched with `trainscope run`:
#     the exploding_tensor rule fires when the loss turns NaN and the run is stopped.
#  3. A LibTorch (C++) training recorded through the C++ API.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TRAINSCOPE_BUILD_DIR:-build}
TS="$BUILD/tools/cli/trainscope"
PY=${PYTHON:-.venv/bin/python}
OUT=${1:-runs/demo}
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
export TRAINSCOPE_HOME=${TRAINSCOPE_HOME:-$OUT/.history}  # keep the demo out of your history
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
RULES=vanishing_gradient,exploding_tensor,dead_loss,loss_not_decreasing,overfit

say "1. A healthy PyTorch training, recorded by the Python hook (rules: $RULES)"
"$PY" examples/pytorch/digits.py --out "$OUT/healthy" --steps 400 --rules "$RULES"
"$TS" inspect "$OUT/healthy"

say "2. The same training with a learning rate far too high, under 'trainscope run' (auto-stop)"
"$TS" run --out "$OUT/nan" --rules exploding_tensor,dead_loss --actions stop_training,log \
  --interval-ms 200 -- "$PY" examples/pytorch/digits.py --fault nan --steps 3000 || true
"$TS" rules "$OUT/nan"

if [ -x "$BUILD/examples/libtorch/train_mlp" ]; then
  say "3. A LibTorch training recorded through the C++ API"
  "$BUILD/examples/libtorch/train_mlp" --out "$OUT/libtorch" --steps 300
fi

for run in healthy nan libtorch; do
  [ -d "$OUT/$run" ] || continue
  say "Report: $OUT/$run"
  "$TS" report "$OUT/$run" --instance g5.xlarge || true
done
say "History of these runs"
"$TS" ls || true
say "Done. Open the reports in a browser:"
for f in "$OUT"/*/report/report.html; do echo "  file://$(realpath "$f")"; done

#!/usr/bin/env bash
# The GPU check, run on the lent GPU machine from the repository root (no network there):
# finds Python with torch, cmake/ninja/pkg-config (the bundle's wheels first), configures and
# builds trainscope._core and the CLI against gpu-bundle/ (scripts/gpu-check/bundle.sh, run
# here first), then runs bench/gpu_check.py. Prints one table; writes it to
# $OUT/gpu_check.md and $OUT/gpu_check.json. Every step prints its time; a failed step is a
# FAIL row and the script goes on with what it can still check.
#
#   device tool: command "bash scripts/gpu-check/run.sh", carry ["gpu-bundle"]
#   here:        TS_GPU_PYTHON=.venv/bin/python TS_GPU_NICE=10 OUT=$(mktemp -d) \
#                  bash scripts/gpu-check/run.sh
#
# Environment: OUT (default build-gpu/out), TS_GPU_PYTHON (default: the first of python3.12,
# python3, python that imports torch), TS_GPU_BUNDLE (gpu-bundle), TS_GPU_WORK (build-gpu),
# TS_GPU_JOBS (nproc), TS_GPU_NICE (0), TS_GPU_BUDGET_S (whole script, default 450),
# TS_GPU_SYSTEM_DEPS=1 (use the machine's zstd/sqlite/json/pybind11 instead of the bundle's),
# TS_GPU_NO_VENV=1 (unpack the wheels instead of installing them: the path taken without venv/pip).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUNDLE=${TS_GPU_BUNDLE:-$ROOT/gpu-bundle}
WORK=${TS_GPU_WORK:-$ROOT/build-gpu}
OUT=${OUT:-$WORK/out}
JOBS=${TS_GPU_JOBS:-$(nproc)}
NICE=${TS_GPU_NICE:-0}
BUDGET_S=${TS_GPU_BUDGET_S:-450}
T0=$(date +%s.%N)
mkdir -p "$WORK" "$OUT"
STEPS=$OUT/run_steps.jsonl
: >"$STEPS"
LOGS=$OUT/logs
mkdir -p "$LOGS"

elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
json_str() {  # a JSON string literal of $1
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/ }
  s=${s//$'\t'/ }
  printf '"%s"' "$s"
}
STEP_T=0
begin() { STEP_T=$(date +%s.%N); printf '[%6ss] %s ...\n' "$(elapsed)" "$1"; }
# row CHECK RESULT NUMBERS: one row of the table (JSON line for gpu_check.py) and a log line.
row() {
  local secs
  secs=$(awk -v a="$STEP_T" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  printf '[%6ss] %-22s %-5s %s (%ss)\n' "$(elapsed)" "$1" "$2" "$3" "$secs"
  printf '{"check": %s, "result": %s, "numbers": %s, "seconds": %s}\n' \
    "$(json_str "$1")" "$(json_str "$2")" "$(json_str "$3")" "$secs" >>"$STEPS"
}
tail_of() { tail -n "${2:-4}" "$1" 2>/dev/null | tr -s ' \n' ' ' | cut -c1-400; }
run_nice() { if [ "$NICE" != 0 ]; then nice -n "$NICE" "$@"; else "$@"; fi; }

# ---- 1. Python with torch -------------------------------------------------------------------
begin "python"
PY=${TS_GPU_PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.12 python3 python; do
    p=$(command -v "$c" 2>/dev/null) || continue
    "$p" -c "import torch" >/dev/null 2>&1 && { PY=$p; break; }
  done
fi
if [ -n "$PY" ] && pyinfo=$("$PY" -c 'import sys, torch
print("python %d.%d.%d" % sys.version_info[:3], "torch", torch.__version__,
      "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>"$LOGS/python.err"); then
  PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  row "python" "PASS" "$PY: $pyinfo"
else
  row "python" "FAIL" "no Python that imports torch (${PY:-none}): $(tail_of "$LOGS/python.err" 2)"
  PY=""
fi

# ---- 2. compiler, cmake, ninja, pkg-config ------------------------------------------------------
begin "compiler"
CXX_BIN=${CXX:-$(command -v c++ || command -v g++ || command -v clang++ || true)}
if [ -n "$CXX_BIN" ]; then
  row "compiler" "PASS" "$CXX_BIN: $("$CXX_BIN" --version 2>&1 | head -1)"
else
  row "compiler" "FAIL" "no C++ compiler (c++, g++, clang++): nothing can be built"
fi

begin "cmake/ninja"
CMAKE="" NINJA="" PKGCONF="" how=""
if [ -n "$PY" ] && ls "$BUNDLE"/wheels/cmake-*.whl >/dev/null 2>&1; then
  # The bundle's wheels in a temp venv that sees the system's packages (torch, pip).
  V=$WORK/venv
  rm -rf "$V"
  if [ "${TS_GPU_NO_VENV:-0}" != 1 ] &&
     "$PY" -m venv --system-site-packages --without-pip "$V" >"$LOGS/venv.log" 2>&1 &&
     "$V/bin/python" -m pip install -q --no-index --no-deps --ignore-installed --disable-pip-version-check \
       "$BUNDLE"/wheels/*.whl >>"$LOGS/venv.log" 2>&1; then
    site=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    CMAKE=$site/cmake/data/bin/cmake NINJA=$V/bin/ninja PKGCONF=$site/pkgconf/.bin/pkgconf
    how="bundle wheels, pip --no-index into $V"
  else
    # No venv module or no pip: unpack the wheels and use their binaries directly.
    X=$WORK/wheels
    rm -rf "$X"
    if "$PY" - "$X" "$BUNDLE"/wheels/*.whl >>"$LOGS/venv.log" 2>&1 <<'EOF'
import os, stat, sys, zipfile
out = sys.argv[1]
for whl in sys.argv[2:]:
    with zipfile.ZipFile(whl) as z:
        z.extractall(out)
for d, _, files in os.walk(out):
    for f in files:
        p = os.path.join(d, f)
        if "/bin/" in p or "/.bin/" in p or "/scripts/" in p:
            os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
EOF
    then
      CMAKE=$X/cmake/data/bin/cmake PKGCONF=$X/pkgconf/.bin/pkgconf
      NINJA=$(ls "$X"/ninja-*.data/scripts/ninja 2>/dev/null | head -1)
      how="bundle wheels, unpacked (no venv or pip here${TS_GPU_NO_VENV:+, TS_GPU_NO_VENV}: $(tail_of "$LOGS/venv.log" 2))"
    fi
  fi
fi
# What the bundle did not give: the machine's own tools.
[ -x "$CMAKE" ] || { CMAKE=$(command -v cmake || true); how="$how; system cmake"; }
[ -x "$NINJA" ] || { NINJA=$(command -v ninja || command -v ninja-build || true); how="$how; system ninja"; }
[ -x "$PKGCONF" ] || { PKGCONF=$(command -v pkg-config || command -v pkgconf || true); how="$how; system pkg-config"; }
if [ -n "$CMAKE" ] && [ -n "$NINJA" ] && "$CMAKE" --version >/dev/null 2>&1; then
  row "cmake/ninja" "PASS" "$("$CMAKE" --version | head -1), ninja $("$NINJA" --version), pkg-config ${PKGCONF:-none}; ${how#; }"
else
  row "cmake/ninja" "FAIL" "cmake='${CMAKE}' ninja='${NINJA}' (${how#; })"
  CMAKE=""
fi

# ---- 3. configure ------------------------------------------------------------------------------
BUILD=$WORK/build
PKG=$WORK/pkg
built=0
if [ -n "$PY" ] && [ -n "$CXX_BIN" ] && [ -n "$CMAKE" ]; then
  begin "configure"
  args=(-S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" -DCMAKE_BUILD_TYPE=Release
        -DCMAKE_CXX_COMPILER="$CXX_BIN"
        -DTRAINSCOPE_BUILD_TESTS=OFF -DTRAINSCOPE_BUILD_BENCH=OFF -DTRAINSCOPE_BUILD_EXAMPLES=OFF
        -DTRAINSCOPE_BUILD_PYTHON=ON -DPython3_EXECUTABLE="$PY"
        -DTRAINSCOPE_PY_OUTPUT_DIR="$PKG/trainscope")
  used=()
  [ -n "$PKGCONF" ] && args+=(-DPKG_CONFIG_EXECUTABLE="$PKGCONF")
  if [ "${TS_GPU_SYSTEM_DEPS:-0}" != 1 ] && [ -d "$BUNDLE/prefix" ]; then
    # The bundle's paths first, and only them for pkg-config: what was tested here.
    P=$BUNDLE/prefix
    args+=(-DCMAKE_PREFIX_PATH="$P"
           -DSQLite3_INCLUDE_DIR="$P/include" -DSQLite3_LIBRARY="$P/lib/libsqlite3.a"
           -Dnlohmann_json_DIR="$P/share/cmake/nlohmann_json")
    export PKG_CONFIG_LIBDIR=$P/lib/pkgconfig PKG_CONFIG_PATH=""
    used+=("zstd/sqlite3/nlohmann-json: bundle")
  else
    used+=("zstd/sqlite3/nlohmann-json: system")
  fi
  if [ "${TS_GPU_SYSTEM_DEPS:-0}" != 1 ] && [ -f "$BUNDLE/pybind11/share/cmake/pybind11/pybind11Config.cmake" ]; then
    args+=(-Dpybind11_DIR="$BUNDLE/pybind11/share/cmake/pybind11")
    used+=("pybind11: bundle")
  elif d=$("$PY" -m pybind11 --cmakedir 2>/dev/null); then
    args+=(-Dpybind11_DIR="$d")
    used+=("pybind11: $d")
  fi
  if [ -f "$BUNDLE/dygraphs/dygraph.min.js" ] && { [ "${TS_GPU_SYSTEM_DEPS:-0}" != 1 ] ||
       [ ! -f /usr/share/javascript/dygraphs/dygraph.min.js ]; }; then
    args+=(-DTRAINSCOPE_DYGRAPHS_DIR="$BUNDLE/dygraphs")
    used+=("dygraphs: bundle")
  fi
  # Python headers: the interpreter's own, else the bundle's (same minor version only).
  pyinc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  if [ -f "$pyinc/Python.h" ] && [ "${TS_GPU_BUNDLE_PYHEADERS:-0}" != 1 ]; then
    used+=("Python.h: $pyinc")
  elif [ -f "$BUNDLE/python$PYVER/include/python$PYVER/Python.h" ]; then
    args+=(-DPython3_INCLUDE_DIR="$BUNDLE/python$PYVER/include/python$PYVER")
    used+=("Python.h: bundle ($PYVER)")
  else
    used+=("Python.h: none found for $PYVER")
  fi
  rm -rf "$BUILD/CMakeCache.txt" "$PKG"
  mkdir -p "$PKG/trainscope"
  if run_nice "$CMAKE" "${args[@]}" >"$LOGS/configure.log" 2>&1; then
    row "configure" "PASS" "$(IFS=';'; echo "${used[*]}" | sed 's/;/; /g')"
    # ---- 4. build ------------------------------------------------------------------------------
    begin "build _core"
    if run_nice "$NINJA" -C "$BUILD" -j "$JOBS" _core >"$LOGS/build_core.log" 2>&1; then
      row "build _core" "PASS" "-j$JOBS, $(ls "$PKG"/trainscope/_core*.so 2>/dev/null | xargs -r basename)"
      built=1
    else
      row "build _core" "FAIL" "$(grep -m2 -E 'error|Error' "$LOGS/build_core.log" | cut -c1-300 | tr '\n' ' ')"
    fi
    begin "build CLI"
    if run_nice "$NINJA" -C "$BUILD" -j "$JOBS" trainscope_cli >"$LOGS/build_cli.log" 2>&1; then
      row "build CLI" "PASS" "$BUILD/tools/cli/trainscope"
    else
      row "build CLI" "FAIL" "$(grep -m2 -E 'error|Error' "$LOGS/build_cli.log" | cut -c1-300 | tr '\n' ' ')"
    fi
  else
    row "configure" "FAIL" "$(grep -m1 -A3 -E 'CMake Error' "$LOGS/configure.log" | tr -s ' \n' ' ' | cut -c1-400)"
  fi
else
  begin "configure"
  row "configure" "FAIL" "skipped: missing $( [ -z "$PY" ] && echo "python ")$( [ -z "$CXX_BIN" ] && echo "compiler ")$( [ -z "$CMAKE" ] && echo "cmake")"
fi

# ---- 5. the package: the source tree's Python files + the module just built ------------------
if [ "$built" = 1 ]; then
  begin "import trainscope"
  cp "$ROOT"/python/trainscope/*.py "$ROOT"/python/trainscope/*.pyi "$PKG/trainscope/" 2>/dev/null
  export PYTHONPATH=$PKG${PYTHONPATH:+:$PYTHONPATH}
  export TRAINSCOPE_BIN=$BUILD/tools/cli/trainscope
  if imp=$("$PY" -c 'import trainscope as ts, trainscope._core as c
print(ts.__version__, c.__file__, "sysmon" if getattr(c, "HAVE_SYSMON", False) else "no sysmon")' 2>"$LOGS/import.err"); then
    row "import trainscope" "PASS" "$imp"
  else
    row "import trainscope" "FAIL" "$(tail_of "$LOGS/import.err" 3)"
  fi
fi

# ---- 6. the checks -------------------------------------------------------------------------------
left=$(awk -v a="$T0" -v b="$(date +%s.%N)" -v t="$BUDGET_S" 'BEGIN { printf "%d", t - (b - a) }')
if [ -n "$PY" ]; then
  printf '[%6ss] bench/gpu_check.py (%ss left) ...\n' "$(elapsed)" "$left"
  export TORCHINDUCTOR_CACHE_DIR=$WORK/inductor-cache
  timeout -k 10 "$((left > 30 ? left : 30))" "$PY" "$ROOT/bench/gpu_check.py" --out "$OUT" \
    --prelude "$STEPS" --budget-s "$((left > 30 ? left - 10 : 20))"
  rc=$?
  [ "$rc" = 0 ] || echo "gpu_check.py exited with $rc"
  [ -s "$OUT/gpu_check.md" ] && exit 0
fi
# No table from gpu_check.py: print run.sh's own rows.
{
  echo "| check | result | numbers |"
  echo "|---|---|---|"
  sed -E 's/^\{"check": "(.*)", "result": "(.*)", "numbers": "(.*)", "seconds": (.*)\}$/| \1 | \2 | \3 (\4 s) |/' "$STEPS"
  echo "| gpu_check.py | FAIL | did not write a table (see above) |"
} | tee "$OUT/gpu_check.md"
exit 1

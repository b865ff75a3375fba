#!/usr/bin/env bash
# Installs everything trainscope needs on Debian 12 from Debian's apt and PyPI, nothing else.
# Idempotent: what is already present is skipped quickly.
#   scripts/install-deps.sh          build + demo dependencies, and the venv .venv
#   scripts/install-deps.sh --test   also test-only tools (chromium, prometheus, clang, protoc)
# The venv is made with `python3` from PATH (CPython >= 3.9 with venv and headers; override with
# TRAINSCOPE_PYTHON) and gets requirements/dev.txt, whose torch pin is exact on purpose.
set -euo pipefail
cd "$(dirname "$0")/.."
want_test=0
[ "${1:-}" = "--test" ] && want_test=1
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

pkgs=(build-essential cmake ninja-build pkg-config git ccache libcurl4-openssl-dev libssl-dev
      libzstd-dev libsqlite3-dev nlohmann-json3-dev libyaml-cpp-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      libjs-dygraphs)
if [ "$want_test" = 1 ]; then
  pkgs+=(chromium prometheus protobuf-compiler curl clang libclang-rt-14-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Python side: one venv, pinned requirements, reinstalled only when they change.
VENV=.venv
PYTHON=${TRAINSCOPE_PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "install-deps: creating $VENV with $("$PYTHON" --version)"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.requirements.sha256"
want=$(cat requirements/*.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "install-deps: pip install -r requirements/dev.txt"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements/dev.txt \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "$want" >"$stamp"
fi

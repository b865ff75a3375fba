#!/usr/bin/env bash
# Installs everything trainscope needs on Debian 12, from Debian's apt and the npm registry only.
# Idempotent: packages already present are skipped quickly.
#   scripts/install-deps.sh          build + Python + demo dependencies
#   scripts/install-deps.sh --test   also test-only tools (chromium, prometheus, protoc, psutil, npm)
set -euo pipefail
want_test=0
[ "${1:-}" = "--test" ] && want_test=1
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

pkgs=(build-essential cmake ninja-build pkg-config git
      libzstd-dev libsqlite3-dev nlohmann-json3-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      python3 python3-venv python3-dev python3-numpy python3-pytest pybind11-dev
      python3-torch libopenblas0-openmp python3-sklearn
      libtorch-dev)
if [ "$want_test" = 1 ]; then
  pkgs+=(chromium prometheus protobuf-compiler python3-psutil curl clang libclang-rt-14-dev)
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

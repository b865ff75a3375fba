#!/usr/bin/env bash
# Gathers into gpu-bundle/ (ignored) what building trainscope on a lent GPU machine may lack,
# since that machine has no network: zstd and SQLite as static position-independent libraries
# (built here from PyPI sdists), nlohmann-json and dygraphs from Debian's packages, pybind11's
# headers and CMake config, CPython 3.12 headers, and wheels of cmake, ninja and pkgconf for
# Python 3.12 on manylinux x86_64. Runs here (Debian 12); scripts/gpu-check/run.sh uses the
# result there (device tool: carry ["gpu-bundle"]).
#
#   bash scripts/gpu-check/bundle.sh        # rebuilds gpu-bundle/ from scratch (~2 min here)
#
# Layout (run.sh relies on it):
#   prefix/{include,lib,lib/pkgconfig,share/cmake/nlohmann_json}   zstd, sqlite3, nlohmann-json
#   pybind11/{include,share/cmake/pybind11}                        from the pybind11 wheel
#   dygraphs/dygraph.min.{js,css}                                  Debian's libjs-dygraphs
#   python3.12/include/python3.12/                                 CPython 3.12 headers
#   wheels/*.whl                                                   cmake, ninja, pkgconf
#   MANIFEST.txt                                                   versions and sizes
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
B=$ROOT/gpu-bundle
PYBIND11_VERSION=${PYBIND11_VERSION:-3.1.0}
ZSTD_SDIST=${ZSTD_SDIST:-1.5.7.2}      # PyPI `zstd`: carries zstd 1.5.7's lib/
SQLEAN_SDIST=${SQLEAN_SDIST:-3.50.4.5} # PyPI `sqlean-py`: carries the SQLite 3.50.4 amalgamation
LIMIT_MIB=60
CC=${CC:-cc}
PIP=(python3 -m pip)
[ -x "$ROOT/.venv/bin/python" ] && PIP=("$ROOT/.venv/bin/python" -m pip)
t0=$(date +%s)
pipq() {  # pip, without the local index's notes about extra locations that do not exist
  "${PIP[@]}" "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

# ---- Debian packages: nlohmann-json, dygraphs ---------------------------------------------------
pkgs=(nlohmann-json3-dev libjs-dygraphs)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bundle: apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
ver() { dpkg-query -W -f='${Version}' "$1"; }

rm -rf "$B"
mkdir -p "$B"/prefix/{include,lib/pkgconfig,share/cmake} "$B"/dygraphs "$B"/wheels
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# nlohmann-json: headers + CMake package (its targets file is relative to its own location).
cp -r /usr/include/nlohmann "$B/prefix/include/"
cp -r /usr/share/cmake/nlohmann_json "$B/prefix/share/cmake/"

# dygraphs (embedded into the library by web/CMakeLists.txt).
cp /usr/share/javascript/dygraphs/dygraph.min.js /usr/share/javascript/dygraphs/dygraph.min.css \
  "$B/dygraphs/"

# ---- zstd and SQLite: static, position-independent, built here from source ---------------------
# Debian's libzstd.a and libsqlite3.a are not PIC, so they cannot go into the _core module.
# The sources come from PyPI sdists: zstd's lib/ from `zstd`, the SQLite amalgamation from
# `sqlean-py` (with sqlean's own tail, which registers its extensions, cut off). No LTO, so any
# binutils links them; the machine's glibc binds their symbols at link time.
CFLAGS_LIB="-O2 -fPIC -fno-lto -DNDEBUG"
pipq download -q --disable-pip-version-check --no-deps --no-binary :all: -d "$tmp" \
  "zstd==$ZSTD_SDIST" "sqlean-py==$SQLEAN_SDIST"
tar -xzf "$tmp/zstd-$ZSTD_SDIST.tar.gz" -C "$tmp"
tar -xzf "$tmp/sqlean_py-$SQLEAN_SDIST.tar.gz" -C "$tmp"

Z=$tmp/zstd-$ZSTD_SDIST/zstd/lib
mkdir -p "$tmp/zo"
export CC CFLAGS_LIB
ls "$Z"/common/*.c "$Z"/compress/*.c "$Z"/decompress/*.c "$Z"/decompress/*.S |
  xargs -P "$(nproc)" -I{} sh -c \
    'nice -n 10 $CC $CFLAGS_LIB -fvisibility=hidden -DZSTD_MULTITHREAD -pthread -c "$1" -o "$2/$(basename "$1").o"' \
    _ {} "$tmp/zo"
ar rcs "$B/prefix/lib/libzstd.a" "$tmp"/zo/*.o
cp "$Z/zstd.h" "$Z/zstd_errors.h" "$B/prefix/include/"
zstd_version=$(awk '/^#define ZSTD_VERSION_(MAJOR|MINOR|RELEASE)[ \t]/ { v = v (v == "" ? "" : ".") $3 } END { print v }' "$Z/zstd.h")
{
  echo 'prefix=${pcfiledir}/../..'
  echo 'includedir=${prefix}/include'
  echo 'libdir=${prefix}/lib'
  echo
  echo 'Name: zstd'
  echo "Description: zstd (static, PIC; PyPI zstd==$ZSTD_SDIST sources)"
  echo "Version: $zstd_version"
  echo 'Libs: -L${libdir} -lzstd'
  echo 'Libs.private: -pthread'
  echo 'Cflags: -I${includedir}'
} >"$B/prefix/lib/pkgconfig/libzstd.pc"

S=$tmp/sqlean_py-$SQLEAN_SDIST/sqlite
sed '/End of sqlite3\.c \*\*\*/q' "$S/sqlite3.c" >"$tmp/sqlite3.c"
if ! tail -1 "$tmp/sqlite3.c" | grep -q "End of sqlite3.c"; then
  echo "bundle: $S/sqlite3.c has no end marker" >&2
  exit 1
fi
# A few of Debian's options that a library user can notice (threads, metadata, FTS5, R-tree).
# shellcheck disable=SC2086
nice -n 10 "$CC" $CFLAGS_LIB -DSQLITE_THREADSAFE=1 -DSQLITE_ENABLE_COLUMN_METADATA \
  -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_RTREE -DSQLITE_ENABLE_DBSTAT_VTAB \
  -DSQLITE_ENABLE_UNLOCK_NOTIFY -DSQLITE_SECURE_DELETE -c "$tmp/sqlite3.c" -o "$tmp/sqlite3.o"
ar rcs "$B/prefix/lib/libsqlite3.a" "$tmp/sqlite3.o"
cp "$S/sqlite3.h" "$S/sqlite3ext.h" "$B/prefix/include/"
sqlite_version=$(sed -n 's/^#define SQLITE_VERSION  *"\(.*\)"/\1/p' "$S/sqlite3.h")

# The test that matters: both go into a shared object.
echo 'int ts_probe(void) { return 0; }' >"$tmp/probe.c"
"$CC" -shared -fPIC -o "$tmp/probe.so" "$tmp/probe.c" -Wl,--whole-archive \
  "$B/prefix/lib/libzstd.a" "$B/prefix/lib/libsqlite3.a" -Wl,--no-whole-archive -lpthread -ldl -lm

# ---- PyPI: pybind11 (pure; headers + CMake config only), cmake/ninja/pkgconf wheels ---------
pipq download -q --disable-pip-version-check --no-deps -d "$tmp" "pybind11==$PYBIND11_VERSION"
pipq download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$B/wheels" \
  cmake ninja pkgconf
python3 - "$tmp"/pybind11-*.whl "$B" <<'PYEOF'
import sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith(("pybind11/include/", "pybind11/share/")):
            z.extract(n, out)
PYEOF
test -f "$B/pybind11/share/cmake/pybind11/pybind11Config.cmake"

# ---- CPython 3.12 headers (for a machine whose Python 3.12 has none) -------------------------
pyinc=""
for d in /root/.pyenv/versions/3.12*/include/python3.12 /usr/local/include/python3.12 \
         /usr/include/python3.12; do
  [ -f "$d/Python.h" ] && { pyinc=$d; break; }
done
if [ -n "$pyinc" ]; then
  mkdir -p "$B/python3.12/include"
  cp -r "$pyinc" "$B/python3.12/include/"
  py_hdr_version=$(sed -n 's/^#define PY_VERSION[[:space:]]*"\(.*\)"/\1/p' "$pyinc/patchlevel.h")
else
  echo "bundle: no CPython 3.12 headers found here; run.sh will need the machine's" >&2
  py_hdr_version="none"
fi

# ---- manifest and size check ----------------------------------------------------------------
{
  echo "trainscope gpu-bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), $("$CC" --version | head -1)"
  echo "zstd $zstd_version: static PIC, built from PyPI zstd==$ZSTD_SDIST"
  echo "sqlite $sqlite_version: static PIC, built from PyPI sqlean-py==$SQLEAN_SDIST (amalgamation)"
  echo "nlohmann-json3-dev $(ver nlohmann-json3-dev), libjs-dygraphs $(ver libjs-dygraphs)"
  echo "pybind11 $PYBIND11_VERSION (headers + cmake config)"
  echo "python headers: $py_hdr_version${pyinc:+ (from $pyinc)}"
  echo "wheels:"
  for w in "$B"/wheels/*.whl; do printf '  %s %s bytes\n' "$(basename "$w")" "$(stat -c %s "$w")"; done
} >"$B/MANIFEST.txt"
bytes=$(du -sb "$B" | cut -f1)
echo "total: $bytes bytes" >>"$B/MANIFEST.txt"
cat "$B/MANIFEST.txt"
du -sh "$B"/* | sed 's/^/  /'
if [ "$bytes" -gt $((LIMIT_MIB * 1024 * 1024)) ]; then
  echo "bundle: $bytes bytes is over ${LIMIT_MIB} MiB (the device tool carries 64 MiB in all)" >&2
  exit 1
fi
echo "bundle: gpu-bundle/ ready, $((bytes / 1024 / 1024)) MiB, $(( $(date +%s) - t0 )) s"

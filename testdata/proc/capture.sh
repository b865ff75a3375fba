#!/bin/bash
# Records the /proc and /sys/fs/cgroup files trainscope's system monitor reads into
# testdata/proc/<name>/{t0,t1}: two snapshots ~1 s apart so rates can be tested. It starts a
# small process tree (python3 -> 2 children, one busy, one with a grandchild) and records it
# along with pid 1; the tree's root pid goes to <name>/ROOT_PID, the seconds between the two
# snapshots to <name>/ELAPSED_S.   Usage: testdata/proc/capture.sh <name>
set -euo pipefail
name=${1:?name}
out=$(cd "$(dirname "$0")" && pwd)/$name
rm -rf "$out"; mkdir -p "$out"

python3 - >/dev/null 2>&1 <<'PY' &
import os, time
def busy(sec):
    end = time.time() + sec
    while time.time() < end: pass
if os.fork() == 0:            # child 1: busy loop (a data-loader worker)
    busy(30); os._exit(0)
if os.fork() == 0:            # child 2: sleeps, with a grandchild
    if os.fork() == 0:
        time.sleep(30); os._exit(0)
    time.sleep(30); os._exit(0)
time.sleep(30)
PY
root=$!
sleep 0.5
echo "$root" > "$out/ROOT_PID"

tree_pids() {  # the root and all its descendants
  local todo=("$root") all=()
  while ((${#todo[@]})); do
    local p=${todo[0]}; todo=("${todo[@]:1}"); all+=("$p")
    for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do todo+=("$c"); done
  done
  echo "${all[@]}"
}

copy() {  # copy <abs path> into <snapshot dir>, keeping the path
  local src=$1 dst=$2$1
  [ -r "$src" ] || return 0
  mkdir -p "$(dirname "$dst")"
  cat "$src" > "$dst" 2>/dev/null || rm -f "$dst"
}

snapshot() {
  local d=$out/$1
  for f in /proc/stat /proc/meminfo /proc/diskstats /proc/net/dev /proc/pressure/cpu \
           /proc/pressure/memory /proc/pressure/io; do copy "$f" "$d"; done
  for p in 1 $(tree_pids); do
    for f in stat statm cgroup; do copy /proc/$p/$f "$d"; done
  done
  # cgroup v1 controllers along the tree root's paths, and the v2 (unified) marker files.
  while IFS=: read -r _ ctrls path; do
    [ -z "$ctrls" ] && continue
    local mount=/sys/fs/cgroup/$ctrls dir
    [ -d "$mount" ] || continue
    dir=${mount}${path%/}
    while :; do
      for f in cpu.cfs_quota_us cpu.cfs_period_us cpu.stat cpuacct.usage memory.limit_in_bytes \
               memory.usage_in_bytes; do copy "$dir/$f" "$d"; done
      [ "${#dir}" -le "${#mount}" ] && break
      dir=$(dirname "$dir")
    done
  done < /proc/$root/cgroup
  for f in cgroup.controllers cpu.max memory.max memory.current cpu.stat cpu.pressure; do
    copy /sys/fs/cgroup/$f "$d"; copy /sys/fs/cgroup/unified/$f "$d"
  done
}

t0=$(date +%s%N); snapshot t0
sleep 1
t1=$(date +%s%N); snapshot t1
python3 -c "print(($t1 - $t0) / 1e9)" > "$out/ELAPSED_S"
kill $(tree_pids) 2>/dev/null || true
echo "recorded $out (root pid $root)"

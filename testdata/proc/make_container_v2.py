#!/usr/bin/env python3
"""Writes testdata/proc/container_v2_64core: a hand-made but realistic 64-core container on a
pure cgroup-v2 host (kernel 6.x formats), two snapshots exactly 1.0 s apart (t0, t1) at
USER_HZ=100 and 4096-byte pages, plus broken variants of t1 (truncated/, garbage/) for the
error-path tests. Values are chosen so the expected rates are round numbers; the tests say
which line they check. Re-run to regenerate (deterministic)."""
import os, shutil

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "container_v2_64core")
NCORES = 64


def write(root, rel, text):
    path = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def proc_stat(t):
    # Per core at t0: user 10000+10i, nice 20, system 2000, idle 80000, iowait 100, irq 0,
    # softirq 50, steal 0, guest 0 0. Over the second to t1 every core gains 100 ticks:
    # core 0 all idle, core 63 all user, the rest user+60 system+10 idle+25 iowait+5.
    cores = []
    for i in range(NCORES):
        c = [10000 + 10 * i, 20, 2000, 80000, 100, 0, 50, 0, 0, 0]
        if t == 1:
            if i == 0:
                c[3] += 100
            elif i == NCORES - 1:
                c[0] += 100
            else:
                c[0] += 60; c[2] += 10; c[3] += 25; c[4] += 5
        cores.append(c)
    total = [sum(c[k] for c in cores) for k in range(10)]
    lines = ["cpu  " + " ".join(map(str, total))]
    lines += ["cpu%d " % i + " ".join(map(str, c)) for i, c in enumerate(cores)]
    lines += ["intr 98765432 41 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
              "ctxt %d" % (123456789 + t * 50000),
              "btime 1764460800",
              "processes 1234567",
              "procs_running 9",
              "procs_blocked 1",
              "softirq 55555 1 2 3 4 5 6 7 8 9 10"]
    return "\n".join(lines) + "\n"


def meminfo(t):
    kb = {"MemTotal": 528280576, "MemFree": 402653184 - t * 1048576,
          "MemAvailable": 461373440 - t * 1048576, "Buffers": 1048576, "Cached": 58720256,
          "SwapCached": 0, "Active": 41943040, "Inactive": 52428800, "SwapTotal": 8388608,
          "SwapFree": 8126464, "Dirty": 2048, "Writeback": 0, "AnonPages": 33554432,
          "Mapped": 4194304, "Shmem": 2097152, "Slab": 6291456, "SReclaimable": 4194304,
          "SUnreclaim": 2097152, "PageTables": 131072, "CommitLimit": 272528896,
          "Committed_AS": 50331648, "VmallocTotal": 34359738367, "HugePages_Total": 0}
    out = []
    for k, v in kb.items():
        if k.startswith("HugePages"):
            out.append("%-16s%8d" % (k + ":", v))
        else:
            out.append("%-16s%8d kB" % (k + ":", v))
    return "\n".join(out) + "\n"


def diskstats(t):
    # nvme0n1 reads 2048 sectors (1 MiB) and writes 8192 sectors (4 MiB) in the second, 100 and
    # 400 I/Os, 250 ms busy. Its partitions, dm-0, loop0 and nvme1n1 (idle) must not add to it.
    def row(maj, mnr, name, r, rs, w, ws, io_ms):
        return "%4d %7d %s %d 0 %d 0 %d 0 %d 0 0 %d %d 0 0 0 0 0 0" % (
            maj, mnr, name, r, rs, w, ws, io_ms, io_ms)
    d = t
    rows = [row(7, 0, "loop0", 50 + 999 * d, 400 + 99999 * d, 0, 0, 1),
            row(259, 0, "nvme0n1", 10000 + 100 * d, 800000 + 2048 * d, 20000 + 400 * d,
                1600000 + 8192 * d, 5000 + 250 * d),
            row(259, 1, "nvme0n1p1", 9000 + 100 * d, 700000 + 2048 * d, 19000 + 400 * d,
                1500000 + 8192 * d, 4000 + 250 * d),
            row(259, 2, "nvme0n1p2", 10, 80, 0, 0, 1),
            row(259, 3, "nvme1n1", 500, 4000, 0, 0, 30),
            row(253, 0, "dm-0", 9000 + 100 * d, 700000 + 2048 * d, 19000 + 400 * d,
                1500000 + 8192 * d, 4000 + 250 * d)]
    return "\n".join(rows) + "\n"


def netdev(t):
    # eth0 receives 125000000 B (1 Gbit) and sends 25000000 B in the second; lo's traffic is
    # ignored.
    head = ("Inter-|   Receive                                                |  Transmit\n"
            " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets"
            " errs drop fifo colls carrier compressed\n")
    def row(name, rx, rxp, tx, txp):
        return "%6s: %d %d 0 0 0 0 0 0 %d %d 0 0 0 0 0 0\n" % (name, rx, rxp, tx, txp)
    return (head + row("lo", 5000000 + 77777777 * t, 100, 5000000 + 77777777 * t, 100) +
            row("eth0", 900000000 + 125000000 * t, 600000 + 90000 * t,
                300000000 + 25000000 * t, 400000 + 20000 * t))


def pressure(t, name):
    # cpu: some total grows by 250000 µs in the second (25 %); memory: full by 10000 (1 %).
    base = {"cpu": (12.5, 1000000, 250000, 0.0, 0, 0),
            "memory": (0.5, 200000, 20000, 0.25, 100000, 10000),
            "io": (3.0, 3000000, 50000, 1.0, 2000000, 20000)}[name]
    s_avg, s_tot, s_d, f_avg, f_tot, f_d = base
    return ("some avg10=%.2f avg60=1.00 avg300=0.50 total=%d\n"
            "full avg10=%.2f avg60=0.00 avg300=0.00 total=%d\n" %
            (s_avg, s_tot + s_d * t, f_avg, f_tot + f_d * t))


def pid_stat(pid, comm, state, ppid, utime, stime, start, rss):
    f = [pid, "(%s)" % comm, state, ppid, pid if ppid == 0 else 1, 1, 0, -1, 4194560, 1000, 0,
         0, 0, utime, stime, 0, 0, 20, 0, 4, 0, start, rss * 4096 * 3, rss,
         18446744073709551615, 1, 1, 0, 0, 0, 0, 0, 16781312, 17642, 0, 0, 17, 3, 0, 0, 0, 0,
         0, 0, 0, 0, 0, 0, 0, 0, 0]
    return " ".join(str(x) for x in f) + "\n"


# (pid, comm, ppid, utime t0, stime t0, utime delta, stime delta, start, rss pages)
PROCS = [
    (1, "python", 0, 50000, 5000, 150, 50, 100, 2621440),          # the trainer: 200 % CPU
    (40, "pt_data_worker", 1, 9000, 1000, 80, 20, 5000, 262144),    # 4 workers at 100 %
    (41, "pt_data_worker", 1, 9000, 1000, 80, 20, 5000, 262144),
    (42, "pt_data_worker", 1, 9000, 1000, 80, 20, 5000, 262144),
    (43, "pt_data_worker", 1, 9000, 1000, 80, 20, 5000, 262144),
    (57, "ffmpeg (decode)", 43, 300, 100, 30, 20, 9000, 16384),    # grandchild, 50 %
    (60, "sshd", 0, 10, 10, 0, 0, 50, 2048),                       # not in the tree
]


def snapshot(t):
    root = os.path.join(OUT, "t%d" % t)
    write(root, "/proc/stat", proc_stat(t))
    write(root, "/proc/meminfo", meminfo(t))
    write(root, "/proc/diskstats", diskstats(t))
    write(root, "/proc/net/dev", netdev(t))
    for r in ("cpu", "memory", "io"):
        write(root, "/proc/pressure/" + r, pressure(t, r))
    for pid, comm, ppid, ut, st, dut, dst, start, rss in PROCS:
        write(root, "/proc/%d/stat" % pid,
              pid_stat(pid, comm, "S" if pid != 40 else "R", ppid, ut + dut * t, st + dst * t,
                       start, rss))
        write(root, "/proc/%d/cgroup" % pid, "0::/\n")
        kids = [str(q[0]) for q in PROCS if q[2] == pid and pid != 0]
        write(root, "/proc/%d/task/%d/children" % (pid, pid), "".join(k + " " for k in kids))
    cg = "/sys/fs/cgroup/"
    write(root, cg + "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
    write(root, cg + "cpu.max", "1600000 100000\n")                  # 16 cores
    write(root, cg + "memory.max", "68719476736\n")                  # 64 GiB
    write(root, cg + "memory.current", "%d\n" % (34359738368 + t * 1073741824))
    # 7.2 CPU-seconds used in the second; 3 of 10 CFS periods throttled.
    write(root, cg + "cpu.stat",
          "usage_usec %d\nuser_usec %d\nsystem_usec %d\nnr_periods %d\nnr_throttled %d\n"
          "throttled_usec %d\nnr_bursts 0\nburst_usec 0\n" %
          (5000000000 + 7200000 * t, 4000000000 + 6000000 * t, 1000000000 + 1200000 * t,
           20000 + 10 * t, 1500 + 3 * t, 90000000 + 150000 * t))


def broken(name, mutate):
    src, dst = os.path.join(OUT, "t1"), os.path.join(OUT, name)
    shutil.copytree(src, dst)
    for rel, fn in mutate.items():
        p = os.path.join(dst, rel)
        with open(p) as f:
            text = f.read()
        with open(p, "w") as f:
            f.write(fn(text))


if __name__ == "__main__":
    shutil.rmtree(OUT, ignore_errors=True)
    snapshot(0)
    snapshot(1)
    with open(os.path.join(OUT, "README"), "w") as f:
        f.write(__doc__ + "\nROOT_PID 1, ELAPSED_S 1.0, USER_HZ 100, page size 4096\n")
    # truncated/: every file cut mid-line, as a reader racing a writer (or a full disk) sees.
    broken("truncated", {
        "proc/stat": lambda s: s[:40],               # inside the "cpu " line
        "proc/meminfo": lambda s: s[:10],            # "MemTotal: " then nothing
        "proc/diskstats": lambda s: s[: s.index("nvme0n1 ") + 12],
        "proc/net/dev": lambda s: s[:60],
        "proc/pressure/cpu": lambda s: s[:20],
        "sys/fs/cgroup/cpu.max": lambda s: s[:4],
        "proc/1/stat": lambda s: s[:30],
    })
    # garbage/: complete lines with non-numbers where numbers belong.
    broken("garbage", {
        "proc/stat": lambda s: s.replace("cpu  ", "cpu  x", 1),
        "proc/meminfo": lambda s: s.replace("MemTotal:", "MemTotal: lots", 1).replace(" 528280576 kB", " kB", 1),
        "proc/diskstats": lambda s: s.replace("nvme0n1 ", "nvme0n1 ?? ", 1),
        "proc/net/dev": lambda s: s.replace("eth0:", "eth0 ", 1),
        "proc/pressure/cpu": lambda s: s.replace("avg10=12.50", "avg10=NaNish", 1),
        "sys/fs/cgroup/cpu.max": lambda s: "unlimited please\n",
        "sys/fs/cgroup/memory.current": lambda s: "-5\n",
        "proc/1/stat": lambda s: s.replace(" 50150 ", " fifty ", 1),
    })
    print("wrote", OUT)

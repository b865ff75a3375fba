#!/usr/bin/python3
"""CPU time per system-monitor sample: trainscope's sampler (bench/sysmon_bench, C++) against
the same metrics collected with psutil, measured in the same run on the same machine.

psutil sample = cpu_times_percent(percpu=False) + cpu_times_percent(percpu=True) +
virtual_memory() + disk_io_counters(perdisk=True) + net_io_counters(pernic=True) + for the
5-process tree (this process + 4 sleeping children): Process.children(recursive=True) and each
one's cpu_percent() and memory_info(). CPU per sample is time.process_time() over N samples / N.

Usage: bench/sysmon_vs_psutil.py <build-dir>   (needs <build-dir>/sysmon_bench)
"""
import json
import os
import signal
import subprocess
import sys
import time

import psutil


def psutil_sample(root):
    psutil.cpu_times_percent(interval=None, percpu=False)
    psutil.cpu_times_percent(interval=None, percpu=True)
    psutil.virtual_memory()
    psutil.disk_io_counters(perdisk=True)
    psutil.net_io_counters(pernic=True)
    procs = [root] + root.children(recursive=True)
    n = 0
    for p in procs:
        try:
            p.cpu_percent(interval=None)
            p.memory_info()
            n += 1
        except psutil.Error:
            pass
    return n


def measure_psutil(samples):
    kids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            signal.pause()
            os._exit(0)
        kids.append(pid)
    try:
        root = psutil.Process()
        psutil_sample(root)  # prime (first cpu_percent is meaningless)
        nproc = 0
        t0 = time.process_time()
        for _ in range(samples):
            nproc = psutil_sample(root)
        cpu = (time.process_time() - t0) / samples
    finally:
        for pid in kids:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
    return cpu, nproc


def measure_trainscope(build):
    exe = os.path.join(build, "sysmon_bench")
    out = subprocess.run([exe, "--benchmark_format=json", "--benchmark_min_time=1"],
                         check=True, capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3}[b["time_unit"]]
        res[b["name"]] = (b["cpu_time"] * scale, b.get("metrics", 0))
    return res


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    ts = measure_trainscope(build)
    ps_cpu, nproc = measure_psutil(2000)
    print("psutil     : %7.1f us CPU/sample (%d processes in tree)" % (ps_cpu * 1e6, nproc))
    for name, (cpu, metrics) in ts.items():
        print("%-28s: %7.1f us CPU/sample, %3d metrics, psutil/trainscope = %.1fx" %
              (name, cpu * 1e6, metrics, ps_cpu / cpu))


if __name__ == "__main__":
    main()

"""GPU checks: the environment row, and the NVML sampler against nvidia-smi."""
import math
import os
import shutil
import subprocess
import threading
import time

from .common import NO_CUDA, _torch, _ts, fmt, median, run_dir


# ==================================================================================== env
def check_env(rows, work):
    torch = _torch()
    parts = [f"torch {torch.__version__}", f"CUDA {torch.version.cuda}"]
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        parts.append(f"{torch.cuda.device_count()}x {p.name} ({p.total_memory / 2**30:.0f} GiB, "
                     f"sm_{p.major}{p.minor})")
    else:
        parts.append("no CUDA device")
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            r = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20)
            parts.append(f"driver {r.stdout.strip().splitlines()[0]}" if r.returncode == 0
                         else f"nvidia-smi exit {r.returncode}")
        except Exception as e:
            parts.append(f"nvidia-smi: {e}")
    else:
        parts.append("no nvidia-smi")
    try:
        ts = _ts()
        parts.append(f"trainscope {ts.__version__} ({os.path.dirname(ts.__file__)})")
        parts.append("sysmon bound" if getattr(ts._core, "HAVE_SYSMON", False) else "NO sysmon")
        rows.add("environment", "INFO", ", ".join(parts))
    except Exception as e:
        parts.append(f"trainscope not importable: {e}")
        rows.add("environment", "FAIL", ", ".join(parts))


# =================================================================================== nvml
SMI_FIELDS = "index,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu"


class SmiPoller:
    """nvidia-smi in loop mode, one line per GPU every period_ms. Each line is placed in time by
    its own timestamp field (its output to a pipe may come in bursts), or by its arrival when
    that timestamp cannot be read or is more than 5 s off (another time zone)."""

    def __init__(self, smi, period_ms=200):
        self.lines = []
        self.p = subprocess.Popen([smi, f"--query-gpu=timestamp,{SMI_FIELDS}",
                                   "--format=csv,noheader,nounits", f"--loop-ms={period_ms}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        from datetime import datetime
        for line in self.p.stdout:
            now = time.time()
            f = [x.strip() for x in line.split(",")]
            if len(f) != 7:
                continue
            try:
                t = datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                if abs(t - now) > 5:
                    t = now
            except ValueError:
                t = now
            vals = []
            for x in f[1:]:
                try:
                    vals.append(float(x))
                except ValueError:
                    vals.append(float("nan"))  # [N/A], [Not Supported]
            self.lines.append((t, int(vals[0]), *vals[1:]))

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()
        self.t.join(5)
        return self.p.stderr.read() if self.p.stderr else ""


def smi_reserved_mib(smi):
    """memory.reserved (MiB) per index, when this nvidia-smi knows the field."""
    try:
        r = subprocess.run([smi, "--query-gpu=index,memory.reserved", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            return {}
        out = {}
        for line in r.stdout.splitlines():
            i, v = [x.strip() for x in line.split(",")]
            out[int(i)] = float(v)
        return out
    except Exception:
        return {}


def check_nvml(rows, work):
    torch = _torch()
    ts = _ts()
    if not getattr(ts._core, "HAVE_SYSMON", False):
        rows.add("sysmon via hook", "FAIL", "trainscope._core was built without the sysmon layer")
        return
    cuda = torch.cuda.is_available()
    smi = shutil.which("nvidia-smi")
    d = run_dir(work, "nvml")
    idle_s, load_s = (3.0, 6.0) if cuda else (1.0, 1.5)
    if cuda:
        torch.zeros(1, device="cuda")  # the context exists before the idle phase
        torch.cuda.synchronize()
    poller = SmiPoller(smi) if (cuda and smi) else None
    hook = ts.Hook(d, system_monitor_interval_ms=200, collections=["losses"])
    t_idle0 = time.time()
    time.sleep(idle_s)
    t_load0 = time.time()
    iters = 0
    big = None
    if cuda:
        big = torch.empty(8 * 2**30, dtype=torch.uint8, device="cuda")
        big.fill_(1)  # touched: resident
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        while time.time() - t_load0 < load_s:
            for _ in range(10):
                c = a @ b
            torch.cuda.synchronize()
            iters += 10
        del c
    else:
        a = torch.randn(512, 512)
        while time.time() - t_load0 < load_s:
            a @ a
            iters += 1
    t_load1 = time.time()
    reserved_torch = torch.cuda.memory_reserved() if cuda else 0
    smi_err = poller.stop() if poller else ""
    hook.close()
    del big
    samples = ts.open_run(d).system_samples()
    n = len(samples)
    metric_names = set()
    for s in samples:
        metric_names.update(s["metrics"])
    gpu_count = [s["metrics"].get("gpu.count") for s in samples if "gpu.count" in s["metrics"]]
    errors = max([s["metrics"].get("sysmon.errors", 0) for s in samples] or [0])
    expect = (idle_s + load_s) / 0.2
    ok = n >= 0.6 * expect and "cpu.util" in metric_names and "mem.total_bytes" in metric_names
    nums = (f"{n} samples in {idle_s + load_s:.1f} s at 200 ms, {len(metric_names)} metric names, "
            f"gpu.count {gpu_count[-1] if gpu_count else 'absent'}, sysmon.errors {errors:.0f}")
    if not cuda:
        ok = ok and (not gpu_count or gpu_count[-1] == 0)
        rows.add("sysmon via hook (cpu)", "PASS" if ok else "FAIL", nums)
        for what in ("nvml util", "nvml memory", "nvml power/temp", "nvml gpm", "nvml process mem"):
            rows.add(what, NO_CUDA, "needs a GPU and nvidia-smi")
        return
    rows.add("sysmon via hook", "PASS" if ok and gpu_count and gpu_count[-1] >= 1 else "FAIL", nums)
    if not smi:
        rows.add("nvml vs nvidia-smi", "FAIL", "no nvidia-smi on PATH")
        return
    if not poller.lines:
        rows.add("nvml vs nvidia-smi", "FAIL", f"nvidia-smi gave no lines: {smi_err[:200]}")
        return
    reserved = smi_reserved_mib(smi)
    # Pair each nvidia-smi line with the nearest trainscope sample (within 0.3 s).
    times = [s["wall_us"] / 1e6 for s in samples]

    def nearest(t):
        best, bd = None, 0.3
        for i, ts_t in enumerate(times):
            dd = abs(ts_t - t)
            if dd <= bd:
                best, bd = samples[i]["metrics"], dd
        return best

    indexes = sorted({ln[1] for ln in poller.lines})
    phases = {"idle": (t_idle0 + 1.0, t_load0), "load": (t_load0 + 1.5, t_load1)}
    per = {}  # (index, phase) -> dict of lists
    for (t, idx, util, used, total, power, temp) in poller.lines:
        m = nearest(t)
        if m is None:
            continue
        for ph, (a0, a1) in phases.items():
            if a0 <= t <= a1:
                p = per.setdefault((idx, ph), {k: [] for k in (
                    "util", "ts_util", "used", "ts_used", "total", "ts_total", "power",
                    "ts_power", "temp", "ts_temp", "sm_active", "tensor_active", "proc_mem")})
                p["util"].append(util)
                p["ts_util"].append(m.get(f"gpu{idx}.util"))
                p["used"].append(used)
                p["ts_used"].append(_mib(m.get(f"gpu{idx}.mem_used_bytes")))
                p["total"].append(total)
                p["ts_total"].append(_mib(m.get(f"gpu{idx}.mem_total_bytes")))
                p["power"].append(power)
                p["ts_power"].append(m.get(f"gpu{idx}.power_w"))
                p["temp"].append(temp)
                p["ts_temp"].append(m.get(f"gpu{idx}.temp_c"))
                p["sm_active"].append(m.get(f"gpu{idx}.sm_active"))
                p["tensor_active"].append(m.get(f"gpu{idx}.tensor_active"))
                p["proc_mem"].append(_mib(m.get(f"gpu{idx}.proc_mem_bytes")))
    # the loaded GPU: the index whose load-phase utilisation is highest
    def load_util(i):
        m = median(per.get((i, "load"), {}).get("util", []))
        return -1.0 if math.isnan(m) else m
    loaded = max(indexes, key=load_util)
    idle, load = per.get((loaded, "idle")), per.get((loaded, "load"))
    if not idle or not load:
        rows.add("nvml vs nvidia-smi", "FAIL", f"too few paired samples (idle {bool(idle)}, "
                 f"load {bool(load)}; {len(poller.lines)} smi lines, {n} samples)")
        return
    pairs = len(idle["util"]) + len(load["util"])

    # utilisation: medians per phase within 10 points; the load must show as busy
    du_i = abs(median(idle["ts_util"]) - median(idle["util"]))
    du_l = abs(median(load["ts_util"]) - median(load["util"]))
    ok = du_i <= 10 and du_l <= 10 and median(load["ts_util"]) >= 50
    rows.add("nvml util", "PASS" if ok else "FAIL",
             f"gpu{loaded}, median % trainscope/smi: idle {fmt(median(idle['ts_util']))}/"
             f"{fmt(median(idle['util']))}, load {fmt(median(load['ts_util']))}/"
             f"{fmt(median(load['util']))} (tolerance 10 points; load must read >= 50); "
             f"{pairs} pairs, {iters} bf16 8192^2 matmuls")

    # memory: used per pair (v1 'used' may include the reserved part nvidia-smi leaves out),
    # the 8 GiB step between the phases, total
    res = reserved.get(loaded, 0.0)
    diffs = [a - b for a, b in zip(idle["ts_used"] + load["ts_used"], idle["used"] + load["used"])
             if a is not None and not math.isnan(b)]
    md = median(diffs)
    tol = max(64.0, 0.01 * median(load["total"]))
    used_ok = abs(md) <= tol or (res > 0 and abs(md - res) <= tol)
    step_ts = median(load["ts_used"]) - median(idle["ts_used"])
    step_smi = median(load["used"]) - median(idle["used"])
    step_ok = abs(step_ts - step_smi) <= max(64.0, 0.02 * step_smi) and step_smi > 7000
    dt = abs(median(idle["ts_total"] + load["ts_total"]) - median(idle["total"] + load["total"]))
    total_ok = dt <= 1.0 or (res > 0 and abs(dt - res) <= 1.0)
    rows.add("nvml memory", "PASS" if used_ok and step_ok and total_ok else "FAIL",
             f"used: trainscope - smi median {fmt(md)} MiB (tolerance {fmt(tol, 0)} MiB; smi "
             f"reserved {fmt(res, 0)} MiB); load step {fmt(step_ts, 0)} vs {fmt(step_smi, 0)} MiB "
             f"(8192 MiB allocated; 2%); total {fmt(median(load['ts_total']), 0)} vs "
             f"{fmt(median(load['total']), 0)} MiB")

    # power: medians per phase within 15% or 25 W; temperature within 3 C
    pw = []
    for ph in (idle, load):
        a, b = median(ph["ts_power"]), median(ph["power"])
        pw.append((a, b, abs(a - b) <= max(25.0, 0.15 * b)))
    tmp = []
    for ph in (idle, load):
        a, b = median(ph["ts_temp"]), median(ph["temp"])
        tmp.append((a, b, abs(a - b) <= 3.0))
    ok = all(x[2] for x in pw + tmp)
    rows.add("nvml power/temp", "PASS" if ok else "FAIL",
             f"power W trainscope/smi: idle {fmt(pw[0][0])}/{fmt(pw[0][1])}, load "
             f"{fmt(pw[1][0])}/{fmt(pw[1][1])} (15% or 25 W); temp C: idle {fmt(tmp[0][0], 0)}/"
             f"{fmt(tmp[0][1], 0)}, load {fmt(tmp[1][0], 0)}/{fmt(tmp[1][1], 0)} (3 C)")

    sm, tens = median(load["sm_active"]), median(load["tensor_active"])
    if math.isnan(sm):
        rows.add("nvml gpm", "WARN", "no gpu.sm_active in the load phase (GPM not supported or "
                                     "not permitted here); tensor_active " + fmt(tens))
    else:
        rows.add("nvml gpm", "PASS" if sm >= 50 and tens > 0 else "FAIL",
                 f"load medians: sm_active {fmt(sm)} %, tensor_active {fmt(tens)} % (expect "
                 f"sm_active >= 50, tensor_active > 0 under bf16 matmuls); idle sm_active "
                 f"{fmt(median(idle['sm_active']))} %")
    pm = median(load["proc_mem"])
    want = reserved_torch / 2**20
    if math.isnan(pm) or pm == 0:
        rows.add("nvml process mem", "WARN",
                 f"gpu{loaded}.proc_mem_bytes {fmt(pm, 0)} MiB (0 or absent: NVML reports host "
                 f"pids in a container without the host's pid namespace); torch reserved "
                 f"{fmt(want, 0)} MiB")
    else:
        rows.add("nvml process mem", "PASS" if pm >= want else "FAIL",
                 f"load median {fmt(pm, 0)} MiB >= torch.cuda.memory_reserved {fmt(want, 0)} MiB")


def _mib(v):
    return None if v is None else v / 2**20

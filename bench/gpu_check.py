#!/usr/bin/env python3
"""GPU check: what trainscope does on a CUDA machine, compared with an independent reference.

Run by scripts/gpu-check/run.sh after it has built trainscope._core (it puts the package on
PYTHONPATH); also runs on a machine without CUDA, where each check does its CPU part and
reports the GPU part as ``SKIP (no CUDA)``. Each check runs in its own Python process (a CUDA
error, the sync debug mode or dynamo's state cannot leak into the next one) with a time limit
inside --budget-s; rows are written as they are decided, so a check that is killed keeps what
it had found. Prints one Markdown table ``check | result | numbers`` and writes it to
OUT/gpu_check.md and OUT/gpu_check.json.

Checks (tolerances are in the code next to each comparison and in the row's numbers):
  env        versions: torch, CUDA, the GPU, the driver, trainscope.
  nvml       the hook's system sampler (C++ sampler, NVML via dlopen, 200 ms) against
             ``nvidia-smi --query-gpu=...`` polled at the same time, through an idle phase and a
             bf16 matmul load with an 8 GiB allocation: utilisation, memory used/total and the
             load's memory step, power, temperature, GPM metrics, the process's memory.
             CPU part: the sampler runs through the hook and reports gpu.count.
  summaries  weights/biases/gradients of float32, float16 and bfloat16 models and saved tensors
             (float64, int32, NaN/±Inf, all-NaN, empty, non-contiguous, 2^24+3 elements) read
             back with ts.open_run and compared with NumPy float64 on CPU copies. CPU part: the
             C++ kernel (device_stats="auto") and the batched torch path (device_stats="torch").
  sync       torch.cuda.set_sync_debug_mode("warn") counts synchronisations on hooked steps
             (non-save and save steps separately), "error" mode on non-save steps, then hooked
             vs unhooked step times (interleaved blocks) on a GPU-bound and a launch-bound model.
  compile    torch.compile with the hook registered before and after compiling: steps and
             losses recorded, losses against the same compiled model without the hook and
             against eager, graph breaks and graphs from torch._dynamo.utils.counters.
  amp        autocast + GradScaler with one step forced to an inf gradient: losses recorded,
             the skipped step seen in the run (non-finite gradient summaries, no optimizer
             time, unchanged weights, the recorded loss scale halving) and matching the scaler;
             with hook.register_scaler, also the hook's amp/loss_scale and amp/skipped.

  python3 bench/gpu_check.py [--out DIR] [--prelude run_steps.jsonl] [--budget-s 420]
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
NO_CUDA = "SKIP (no CUDA)"
# name, seconds it may take at most (on the GPU machine; all of them share --budget-s)
CHECKS = [("env", 60), ("nvml", 90), ("summaries", 120), ("sync", 150), ("compile", 240),
          ("amp", 90)]


# ================================================================================ harness
class Rows:
    """Rows of one check, appended to a JSON-lines file as soon as each is decided."""

    def __init__(self, path):
        self.path = path

    def add(self, check, result, numbers):
        line = json.dumps({"check": check, "result": result, "numbers": numbers})
        with open(self.path, "a") as f:
            f.write(line + "\n")
        print(f"{check:28s} {result:15s} {numbers}", flush=True)


def run_child(name, rows, work):
    """Runs one check in this process (the child side)."""
    fn = globals()[f"check_{name}"]
    try:
        fn(rows, work)
    except Exception as e:  # the check's own failure: a row, not a traceback only
        import traceback
        traceback.print_exc()
        rows.add(name, "FAIL", f"{type(e).__name__}: {str(e)[:300]}")


def read_rows(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="folder for gpu_check.md/.json and logs")
    ap.add_argument("--prelude", default=None, help="JSON-lines rows to put first (run.sh's)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="for all checks together")
    ap.add_argument("--only", default=None, help="comma-separated check names")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rows", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        run_child(args.child, Rows(args.rows), args.work)
        return 0

    t_start = time.monotonic()
    out = args.out or tempfile.mkdtemp(prefix="gpu_check_")
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    work = tempfile.mkdtemp(prefix="gpu_check_work_")
    names = [n for n, _ in CHECKS]
    if args.only:
        names = [n for n in args.only.split(",") if n in dict(CHECKS)]
    rows = read_rows(args.prelude) if args.prelude else []
    for name in names:
        left = args.budget_s - (time.monotonic() - t_start) - 5
        limit = min(dict(CHECKS)[name], left)
        if limit < 10:
            rows.append({"check": name, "result": "FAIL",
                         "numbers": f"not run: the time budget ({args.budget_s:.0f} s) is spent"})
            continue
        rows_path = os.path.join(work, f"{name}.jsonl")
        log_path = os.path.join(out, "logs", f"check_{name}.log")
        t0 = time.monotonic()
        print(f"--- {name} (at most {limit:.0f} s)", flush=True)
        with open(log_path, "w") as log:
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", name,
                                  "--rows", rows_path, "--work", work],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            # copy the child's output to the console and the log as it comes
            pump = threading.Thread(target=_pump, args=(p.stdout, log), daemon=True)
            pump.start()
            try:
                rc = p.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                rc = None
            pump.join(5)
        got = read_rows(rows_path)
        secs = time.monotonic() - t0
        if got:  # the check's time, on its first row
            got[0].setdefault("seconds", round(secs, 1))
        rows.extend(got)
        if rc is None:
            rows.append({"check": name, "result": "FAIL",
                         "numbers": f"timed out after {limit:.0f} s (rows above are what it "
                                    f"had decided; log: logs/check_{name}.log)"})
        elif rc != 0 and not got:
            rows.append({"check": name, "result": "FAIL",
                         "numbers": f"exit {rc}: {_tail(log_path)}"})
        print(f"--- {name}: {secs:.1f} s", flush=True)
    table = render(rows)
    print()
    print(table)
    with open(os.path.join(out, "gpu_check.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(out, "gpu_check.json"), "w") as f:
        json.dump({"schema": 1, "seconds": round(time.monotonic() - t_start, 1),
                   "rows": rows}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _pump(stream, log):
    for line in stream:
        sys.stdout.write("    " + line)
        sys.stdout.flush()
        log.write(line)


def _tail(path, n=3):
    try:
        with open(path) as f:
            lines = [ln.strip() for ln in f if ln.strip()]
        return " / ".join(lines[-n:])[:400]
    except OSError:
        return "no log"


def render(rows):
    def cell(s):
        return str(s).replace("|", "\\|").replace("\n", " ")
    out = ["| check | result | numbers |", "|---|---|---|"]
    for r in rows:
        extra = f" ({r['seconds']} s)" if r.get("seconds") is not None else ""
        out.append(f"| {cell(r['check'])} | {cell(r['result'])} | {cell(r['numbers'])}{extra} |")
    return "\n".join(out)


# ================================================================================ helpers
def _torch():
    import torch
    return torch


def _ts():
    import trainscope as ts
    return ts


def cuda_ok():
    torch = _torch()
    return torch.cuda.is_available()


def mlp(sizes, seed=0):
    torch = _torch()
    torch.manual_seed(seed)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def batches(n, batch, d_in, classes, device, seed=1, dtype=None):
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randn(batch, d_in, generator=g)
        y = torch.randint(0, classes, (batch,), generator=g)
        if dtype is not None:
            x = x.to(dtype)
        out.append((x.to(device), y.to(device)))
    return out


def run_dir(work, name):
    d = os.path.join(work, "runs", f"{name}-{os.getpid()}-{time.monotonic_ns()}")
    os.makedirs(os.path.dirname(d), exist_ok=True)
    return d


def f64(t):
    """A CPU float64 numpy copy of a tensor (bfloat16/float16 widened exactly)."""
    torch = _torch()
    t = t.detach()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.cpu().double().numpy() if t.is_floating_point() else t.cpu().numpy().astype("f8")


def median(xs):
    xs = sorted(x for x in xs if x is not None and not math.isnan(x))
    if not xs:
        return float("nan")
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def fmt(x, nd=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{nd}f}"


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


# ============================================================================== summaries
COUNT_KEYS = ("count", "nan", "pos_inf", "neg_inf", "zeros", "negatives", "positives")
EXACT_KEYS = ("min", "max")  # float64 widening is exact, so min/max must be too
RTOL = 1e-9


def reference(x):
    import numpy as np
    x = x.ravel()
    fin = x[np.isfinite(x)]
    out = {"count": x.size, "nan": int(np.isnan(x).sum()), "pos_inf": int((x == np.inf).sum()),
           "neg_inf": int((x == -np.inf).sum()), "zeros": int((x == 0).sum()),
           "negatives": int((x < 0).sum()), "positives": int((x > 0).sum())}
    if fin.size:
        out.update(min=fin.min(), max=fin.max(), mean=fin.mean(), std=fin.std(),
                   l1=np.abs(fin).sum(), l2=np.sqrt((fin * fin).sum()), abs_mean=np.abs(fin).mean())
    return out


def compare(got, ref, stats):
    """Adds to stats: compared values, max relative error; returns mismatch strings."""
    bad = []
    scale = max(abs(ref.get("min", 0.0)), abs(ref.get("max", 0.0)), 1e-300)
    for k, v in ref.items():
        g = got.get(k)
        stats["values"] += 1
        if g is None:
            bad.append(f"{k} missing")
        elif k in COUNT_KEYS or k in EXACT_KEYS:
            if g != v:
                bad.append(f"{k} {g!r} != {v!r}")
        else:
            err = abs(g - v) / max(abs(v), 1e-12 * scale)
            stats["max_rel"] = max(stats["max_rel"], err)
            if not err <= RTOL:
                bad.append(f"{k} {g!r} vs {v!r} (rel {err:.1e})")
    return bad


def special_tensors(device):
    """name -> tensor: dtypes and values the summaries must get right."""
    torch = _torch()
    g = torch.Generator().manual_seed(7)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    nan, inf = float("nan"), float("inf")
    t = {
        "f32_normal": r(100_000),
        "f32_offset_1e4": 1e4 + r(50_000),
        "f64_offset_1e8": (1e8 + r(50_000).double()),
        "f16_normal": r(30_000).half(),
        "f16_overflow": torch.tensor([1.0, 70000.0, -70000.0, 65504.0, 6e-8, 0.0]).half(),
        "bf16_offset_100": (100 + r(30_000)).bfloat16(),
        "i32": torch.randint(-1000, 1000, (4096,), generator=g, dtype=torch.int32),
        "f32_nan_inf": torch.tensor([1.0, nan, inf, -inf, -2.0, 0.0, 3.5, nan]),
        "bf16_nan_inf": torch.tensor([nan, inf, -inf, 1.5, -0.25, 0.0]).bfloat16(),
        "f32_all_nan": torch.full((33,), nan),
        "f32_empty": torch.empty(0),
        "f32_transposed": r(300, 200).t(),  # non-contiguous
        "f32_large": r(2**24 + 3),
    }
    return {k: v.to(device) for k, v in t.items()}


def summaries_run(device, device_stats, work):
    """Trains float32, float16 and bfloat16 MLPs with the hook and saves special tensors;
    returns (tensors compared, stats, mismatches)."""
    torch = _torch()
    ts = _ts()
    stats = {"values": 0, "max_rel": 0.0}
    bad, compared = [], 0
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        model = mlp([64, 256, 256, 10]).to(device=device, dtype=dtype)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        crit = torch.nn.CrossEntropyLoss()
        data = batches(7, 128, 64, 10, device, dtype=dtype)
        d = run_dir(work, f"summ-{device}-{device_stats}-{dtype}")
        refs = {}
        hook = ts.Hook(d, save_interval=3, collections=["losses", "weights", "biases", "gradients"],
                       device_stats=device_stats, system_monitor_interval_ms=0)
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        for i, (x, y) in enumerate(data):
            save = i % 3 == 0
            if save:  # weights are summarised at the step's first forward, before the update
                for n, p in model.named_parameters():
                    coll = "biases" if n.split(".")[-1].startswith("bias") else "weights"
                    refs[(f"{coll}/{n}", i)] = f64(p)
            loss = crit(model(x).float(), y)
            opt.zero_grad()
            loss.backward()
            if save:
                for n, p in model.named_parameters():
                    refs[(f"gradients/{n}", i)] = f64(p.grad)
            opt.step()
        if dtype == torch.float32:
            for name, t in special_tensors(device).items():
                hook.save_tensor(name, t)
                refs[(f"tensors/{name}", None)] = f64(t)
        hook.close()
        run = ts.open_run(d)
        for (name, step), ref in refs.items():
            try:
                t = run.tensor(name)
                s = step if step is not None else t.steps()[-1]
                got = t.reductions(s)
            except Exception as e:
                bad.append(f"{name}@{step}: {e}")
                continue
            compared += 1
            for m in compare(got, reference(ref), stats):
                bad.append(f"{str(dtype)[6:]} {name}@{step}: {m}")
    return compared, stats, bad


def check_summaries(rows, work):
    cases = [("cpu", "auto", "summaries cpu (C++ kernel)"),
             ("cpu", "torch", "summaries cpu (torch path)")]
    if cuda_ok():
        cases.append(("cuda", "auto", "summaries cuda"))
    for device, mode, label in cases:
        compared, stats, bad = summaries_run(device, mode, work)
        rows.add(label, "PASS" if not bad and compared else "FAIL",
                 f"{compared} tensors (f32/f16/bf16 models' weights, biases, gradients at 3 "
                 f"steps; f64, i32, NaN/±Inf, all-NaN, empty, non-contiguous, 2^24+3), "
                 f"{stats['values']} values vs NumPy float64: counts and min/max exact, "
                 f"max rel err {stats['max_rel']:.1e} (tolerance {RTOL:.0e})"
                 + (f"; {len(bad)} mismatches: " + "; ".join(bad[:3]) if bad else ""))
    if not cuda_ok():
        rows.add("summaries cuda", NO_CUDA, "same comparison on cuda tensors")


# =================================================================================== sync
def train_step(model, opt, crit, x, y):
    loss = crit(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def make_training(sizes, batch, n_batches, device, hooked, work, label, save_interval=100):
    torch = _torch()
    ts = _ts()
    model = mlp(sizes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    crit = torch.nn.CrossEntropyLoss()
    data = batches(n_batches, batch, sizes[0], sizes[-1], device)
    hook = None
    if hooked:
        hook = ts.Hook(run_dir(work, label), save_interval=save_interval)
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
    return model, opt, crit, data, hook


def sync_counts(device, work):
    """Sync warnings per hooked step kind ("warn" mode), then hook errors in "error" mode on
    non-save steps. On a CPU there is no sync debug mode: the same steps run and are counted."""
    torch = _torch()
    cuda = device == "cuda"
    sizes, batch = ([1024, 2048, 2048, 10], 256) if cuda else ([64, 256, 256, 10], 64)
    model, opt, crit, data, hook = make_training(sizes, batch, 8, device, True, work, "sync",
                                                 save_interval=50)
    base, bopt, bcrit, bdata, _ = make_training(sizes, batch, 8, device, False, work, "sync-base")
    set_mode = torch.cuda.set_sync_debug_mode if cuda else (lambda mode: None)
    for i in range(3):  # warm-up (cuBLAS handles, allocator)
        train_step(base, bopt, bcrit, *bdata[i % 8])
    if cuda:
        torch.cuda.synchronize()
    counts = {"base": 0, "nonsave": 0, "save": 0, "nonsave_steps": 0, "save_steps": 0}
    what = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        set_mode("warn")
        try:
            for i in range(20):
                train_step(base, bopt, bcrit, *bdata[i % 8])
            counts["base"] = len(w)
            for i in range(120):  # mode steps 0..119: tensors saved at 0, 50, 100
                before = len(w)
                train_step(model, opt, crit, *data[i % 8])
                kind = "save" if hook.mode_step % 50 == 0 else "nonsave"
                counts[kind] += len(w) - before
                counts[kind + "_steps"] += 1
                if len(w) > before and len(what) < 2:
                    what.append(f"step {hook.mode_step}: {str(w[before].message)[:120]}")
        finally:
            set_mode("default")
    # "error": a sync inside a hook callback raises there (and is counted as a hook error)
    errors_before = hook.error_count
    raised = None
    set_mode("error")
    try:
        for i in range(29):  # mode steps 120..148: none saves tensors
            train_step(model, opt, crit, *data[i % 8])
    except Exception as e:
        raised = f"{type(e).__name__}: {str(e)[:150]}"
    finally:
        set_mode("default")
    err = hook.error_count - errors_before
    err_where = sorted(hook.errors)[:3] if err else []
    steps_done = hook.step_count
    hook.close()
    return counts, what, raised, err, err_where, steps_done


def time_steps(sizes, batch, device, work, rounds=6, block=40, sync=None):
    """Median per-step time (s) of an unhooked and a hooked copy, interleaved by blocks."""
    torch = _torch()
    sync = sync or (torch.cuda.synchronize if device == "cuda" else (lambda: None))
    runs = {}
    for hooked in (False, True):
        runs[hooked] = make_training(sizes, batch, 8, device, hooked, work, f"time-{hooked}")
    times = {False: [], True: []}
    for r in range(rounds + 1):  # round 0 warms up
        for hooked in ((False, True) if r % 2 else (True, False)):
            model, opt, crit, data, _ = runs[hooked]
            sync()
            t0 = time.perf_counter()
            for i in range(block):
                train_step(model, opt, crit, *data[i % 8])
            sync()
            if r:
                times[hooked].append((time.perf_counter() - t0) / block)
    hook = runs[True][4]
    errors = hook.error_count
    hook.close()
    return median(times[False]), median(times[True]), errors


def check_sync(rows, work):
    cuda = cuda_ok()
    # CPU part: the harness (steps counted and classified) and the step-time comparison
    counts, what, raised, err, err_where, steps = sync_counts("cpu", work)
    ok = (counts["save_steps"] == 3 and counts["nonsave_steps"] == 117 and steps == 148
          and raised is None and err == 0)
    rows.add("sync harness (cpu)", "PASS" if ok else "FAIL",
             f"149 hooked steps, save steps seen {counts['save_steps']} (expect 3: 0, 50, 100), "
             f"non-save {counts['nonsave_steps']}, last step {steps}, hook errors {err}"
             + (f", raised {raised}" if raised else "") + "; no sync debug mode without CUDA")
    base, hooked, errors = time_steps([64, 256, 256, 10], 64, "cpu", work, rounds=4, block=30)
    rows.add("step time (cpu)", "INFO" if not errors else "FAIL",
             f"MLP 64-256-256-10 batch 64: no hook {base * 1e6:.0f} us, default hook "
             f"{hooked * 1e6:.0f} us per step ({hooked / base:.3f}x); hook errors {errors}")
    if not cuda:
        rows.add("no sync on non-save steps", NO_CUDA, "torch.cuda.set_sync_debug_mode")
        rows.add("no sync on save steps", NO_CUDA, "torch.cuda.set_sync_debug_mode")
        rows.add("step time (cuda)", NO_CUDA, "hooked vs unhooked on cuda")
        return
    counts, what, raised, err, err_where, steps = sync_counts("cuda", work)
    ok = counts["nonsave"] == 0 and counts["base"] == 0 and raised is None and err == 0 \
        and counts["save_steps"] == 3
    rows.add("no sync on non-save steps", "PASS" if ok else "FAIL",
             f"sync warnings: unhooked {counts['base']} in 20 steps, hooked non-save "
             f"{counts['nonsave']} in {counts['nonsave_steps']} steps; 'error' mode, 29 non-save "
             f"steps: {'raised ' + raised if raised else 'no exception'}, hook errors {err}"
             + (f" {err_where}" if err_where else "") + (f"; {'; '.join(what)}" if what else ""))
    rows.add("no sync on save steps", "PASS" if counts["save"] == 0 else "WARN",
             f"sync warnings on the {counts['save_steps']} save steps (weights + gradients "
             f"summaries, one device copy): {counts['save']}")
    for sizes, batch, label in (([1024, 4096, 4096, 10], 512, "GPU-bound MLP 1024-4096-4096-10 b512"),
                                ([64, 256, 256, 10], 64, "launch-bound MLP 64-256-256-10 b64")):
        base, hooked, errors = time_steps(sizes, batch, "cuda", work)
        ratio = hooked / base
        rows.add("step time (cuda)", "PASS" if ratio <= 1.05 and not errors else "WARN",
                 f"{label}: no hook {base * 1e6:.0f} us, default hook {hooked * 1e6:.0f} us per "
                 f"step ({ratio:.3f}x; WARN above 1.05x); hook errors {errors}")


# ================================================================================ compile
def compile_variant(variant, device, work, steps=12):
    torch = _torch()
    ts = _ts()
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    model = mlp([32, 128, 128, 10]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.CrossEntropyLoss()
    data = batches(4, 64, 32, 10, device)
    hook, fwd, d = None, model, None
    if variant != "eager":
        if variant in ("hook before compile", "hook after compile"):
            d = run_dir(work, variant.replace(" ", "-"))
            hook = ts.Hook(d, save_interval=5, system_monitor_interval_ms=0)
        if variant == "hook before compile":
            hook.register_module(model)
        fwd = torch.compile(model)
        if variant == "hook after compile":
            hook.register_module(fwd)
        if hook is not None:
            hook.register_loss(crit)
            hook.register_optimizer(opt)
    losses = []
    t0 = time.perf_counter()
    for i in range(steps):
        x, y = data[i % 4]
        losses.append(train_step(fwd, opt, crit, x, y).detach())
    losses = [float(v) for v in torch.stack(losses).cpu().double()]
    secs = time.perf_counter() - t0
    info = {"losses": losses, "secs": secs,
            "graph_breaks": sum(counters["graph_break"].values()),
            "break_reasons": [" ".join(str(k).split())[:240]
                              for k in list(counters["graph_break"])[:2]],
            "graphs": counters["stats"]["unique_graphs"], "frames": counters["frames"]["total"]}
    if hook is not None:
        info["hook_errors"] = hook.error_count
        hook.close()
        run = ts.open_run(d)
        info["steps_recorded"] = len(run.step_records())
        info["losses_recorded"] = [float(v) for v in run.scalar("losses/loss")[1]]
        info["grad_steps"] = run.tensor(run.tensor_names("gradients")[0]).steps() \
            if run.tensor_names("gradients") else []
    return info


def max_rel(a, b):
    return max((abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)), default=float("nan"))


def check_compile(rows, work):
    devices = ["cpu"] + (["cuda"] if cuda_ok() else [])
    for device in devices:
        try:
            res = {v: compile_variant(v, device, work) for v in
                   ("eager", "compiled", "hook before compile", "hook after compile")}
        except Exception as e:
            rows.add(f"torch.compile ({device})", "FAIL", f"{type(e).__name__}: {str(e)[:300]}")
            continue
        eager, comp = res["eager"], res["compiled"]
        base_rel = max_rel(comp["losses"], eager["losses"])
        for v in ("hook before compile", "hook after compile"):
            r = res[v]
            steps_ok = r["steps_recorded"] == len(r["losses"])
            rec_rel = max_rel(r["losses_recorded"], r["losses"]) \
                if len(r["losses_recorded"]) == len(r["losses"]) else float("inf")
            rel_c = max_rel(r["losses"], comp["losses"])
            rel_e = max_rel(r["losses"], eager["losses"])
            ok = steps_ok and rec_rel <= 1e-6 and rel_c <= 1e-4 and not r["hook_errors"]
            extra = (r["graph_breaks"] > comp["graph_breaks"] or r["graphs"] > comp["graphs"])
            result = ("WARN" if extra else "PASS") if ok else "FAIL"
            rows.add(f"torch.compile ({device}), {v}", result,
                     f"steps recorded {r['steps_recorded']}/{len(r['losses'])}, losses recorded "
                     f"{len(r['losses_recorded'])} (rel {rec_rel:.1e} to the training's); losses vs "
                     f"compiled without hook rel {rel_c:.1e} (tolerance 1e-4), vs eager {rel_e:.1e} "
                     f"(compiled vs eager {base_rel:.1e}); graph breaks {r['graph_breaks']} "
                     f"(without hook {comp['graph_breaks']}), graphs {r['graphs']} (without hook "
                     f"{comp['graphs']}), frames {r['frames']}; gradients saved at "
                     f"{r['grad_steps']}; hook errors {r['hook_errors']}; {r['secs']:.1f} s"
                     + (f"; breaks: {r['break_reasons']}" if r["break_reasons"] else ""))
    if not cuda_ok():
        rows.add("torch.compile (cuda)", NO_CUDA, "inductor/triton with the hook")


# ==================================================================================== amp
def check_amp(rows, work):
    torch = _torch()
    devices = ["cpu"] + (["cuda"] if cuda_ok() else [])
    for device in devices:
        label = f"amp + GradScaler ({device})"
        try:
            rows.add(label, *amp_run(device, work))
        except Exception as e:
            rows.add(label, "FAIL", f"{type(e).__name__}: {str(e)[:300]}")
    if not cuda_ok():
        rows.add("amp + GradScaler (cuda)", NO_CUDA, "fp16 autocast on cuda")


def amp_run(device, work, steps=16, k=7):
    torch = _torch()
    ts = _ts()
    import numpy as np
    dtype = torch.float16
    if device == "cpu":
        try:  # fp16 autocast on CPU is recent; bf16 is the CPU's usual one
            with torch.autocast("cpu", dtype=torch.float16):
                torch.nn.Linear(4, 4)(torch.randn(2, 4))
        except Exception:
            dtype = torch.bfloat16
    model = mlp([64, 256, 256, 10]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.CrossEntropyLoss()
    data = batches(4, 128, 64, 10, device)
    scaler = torch.amp.GradScaler(device)
    around = [k - 1, k, k + 1, k + 2]
    d = run_dir(work, f"amp-{device}")
    hook = ts.Hook(d, system_monitor_interval_ms=0, collections=[
        "losses", "scalars", ts.Collection("weights", save_steps=around),
        ts.Collection("gradients", save_steps=around)])
    hook.register_module(model)
    hook.register_loss(crit)
    hook.register_optimizer(opt)
    follows_scaler = hasattr(hook, "register_scaler")  # amp/loss_scale, amp/skipped
    if follows_scaler:
        hook.register_scaler(scaler)
    init_scale = scaler.get_scale()
    for i in range(steps):
        x, y = data[i % 4]
        with torch.autocast(device, dtype=dtype):
            loss = crit(model(x), y)
        scaled = scaler.scale(loss)
        if i == k:
            scaled = scaled * float("inf")  # every gradient non-finite: the scaler must skip
        opt.zero_grad()
        scaled.backward()
        scaler.step(opt)
        scaler.update()
        hook.save_scalar("amp_scale", scaler.get_scale())
    errors = hook.error_count
    hook.close()
    run = ts.open_run(d)
    _, losses = run.scalar("losses/loss")
    sc_steps, scales = run.scalar("scalars/amp_scale")
    prev = [init_scale] + list(scales[:-1])
    skipped = [int(s) for s, a, b in zip(sc_steps, scales, prev) if a < b]
    recs = {r["step"]: r for r in run.step_records()}
    no_opt = sorted(s for s, r in recs.items() if r["optimizer_us"] < 0)
    grads = run.tensor_names("gradients")
    nonfinite = {s: sum(1 for g in grads if (lambda r: r["nan"] + r["inf"])(
        run.tensor(g).reductions(s)) > 0) for s in around}
    wname = run.tensor_names("weights")[0]
    w = {s: run.tensor(wname).reductions(s) for s in around}
    same_after_skip = all(w[k][m] == w[k + 1][m] for m in ("mean", "l2", "min", "max"))
    moved_before = any(w[k - 1][m] != w[k][m] for m in ("mean", "l2"))
    ok = (len(losses) == steps and bool(np.isfinite(losses).all()) and k in skipped
          and no_opt == skipped and nonfinite[k] == len(grads) and nonfinite[k - 1] == 0
          and nonfinite[k + 1] == 0 and same_after_skip and moved_before and not errors)
    amp = "hook has no register_scaler: amp/* scalars not checked"
    if follows_scaler:
        # the hook's own record of the scaler: the scale each step's backward used, and 1 on
        # the steps the scaler skipped
        name_scale = getattr(ts._core, "AMP_LOSS_SCALE", "amp/loss_scale")
        name_skip = getattr(ts._core, "AMP_SKIPPED", "amp/skipped")
        try:
            st_scale, v_scale = run.scalar(name_scale)
            used = dict(zip((int(x) for x in st_scale), v_scale))
            scale_ok = all(used.get(int(s)) == b for s, b in zip(sc_steps, prev))
            st_skip, v_skip = run.scalar(name_skip)
            hook_skipped = sorted(int(s) for s, v in zip(st_skip, v_skip) if v >= 0.5)
            amp = (f"{name_scale} at {len(used)} steps, equal to the scale used: {scale_ok}; "
                   f"{name_skip} = 1 at {hook_skipped}")
            ok = ok and scale_ok and hook_skipped == skipped
        except Exception as e:
            amp = f"register_scaler: {type(e).__name__}: {str(e)[:150]}"
            ok = False
    return ("PASS" if ok else "FAIL",
            f"{str(dtype)[6:]} autocast, {steps} steps, inf forced at step {k}: losses recorded "
            f"{len(losses)} (finite {int(np.isfinite(losses).sum())}); skipped per recorded scale "
            f"{skipped}, steps without optimizer time {no_opt}; gradients with NaN/Inf at "
            f"{k - 1}/{k}/{k + 1}: {nonfinite[k - 1]}/{nonfinite[k]}/{nonfinite[k + 1]} of "
            f"{len(grads)}; weights unchanged over the skip {same_after_skip}, changed before "
            f"{moved_before}; scale {init_scale:g} -> {scales[-1]:g}; {amp}; hook errors {errors}")


if __name__ == "__main__":
    sys.exit(main())

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

  cuda_oom   a real CUDA out-of-memory error under the hook: the allocator history armed when
             the device is near full, the cuda_out_of_memory event, the snapshot (pickle, device
             traces) and the report's finding (bench/gpucheck/memory.py).

  python3 bench/gpu_check.py [--out DIR] [--prelude run_steps.jsonl] [--budget-s 420]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# name, seconds it may take at most (on the GPU machine; all of them share --budget-s)
CHECKS = [("env", 60), ("nvml", 90), ("summaries", 120), ("sync", 150), ("compile", 240),
          ("amp", 90), ("cuda_oom", 90)]


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
    from gpucheck import CHECK_FUNCS  # bench/ is sys.path[0] when this file runs
    fn = CHECK_FUNCS[name]
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


if __name__ == "__main__":
    sys.exit(main())

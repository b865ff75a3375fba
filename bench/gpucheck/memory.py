"""cuda_oom: a real CUDA out-of-memory error under the hook (python/trainscope/_cuda_memory.py).

Each step keeps another 0.5 % of the device allocated until allocations hit the per-process cap
(torch.cuda.set_per_process_memory_fraction(0.95)); the hook arms the allocator's history when
the reserved memory passes 85 % of the device, before the error. Checked: one
cuda_memory_history event, one cuda_out_of_memory event with the allocator's counters, the
snapshot file loadable with pickle and holding device traces, and `trainscope report`'s
cuda_out_of_memory finding."""
import json
import os
import pickle
import subprocess

from .common import NO_CUDA, _torch, _ts, cuda_ok, run_dir


def check_cuda_oom(rows, work):
    if not cuda_ok():
        rows.add("cuda_oom", NO_CUDA, "OOM snapshot path (tested here with a fake device)")
        return
    torch = _torch()
    ts = _ts()
    d = run_dir(work, "cuda-oom")
    total = torch.cuda.get_device_properties(0).total_memory
    # The arm threshold is 85 % of the device; the OOM must come after it, so the growth
    # is allowed up to 95 % of the device.
    torch.cuda.set_per_process_memory_fraction(0.95, 0)
    model = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    held = []
    step_of_oom = None
    try:
        with ts.Hook(d, system_monitor_interval_ms=200) as hook:
            hook.register_module(model)
            hook.register_optimizer(opt)
            chunk = max(total // 200, 1 << 20)  # 0.5 % of the device per step
            for step in range(100_000):
                held.append(torch.empty(chunk // 4, dtype=torch.float32, device="cuda"))
                loss = model(torch.randn(64, 1024, device="cuda")).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                step_of_oom = step
    except torch.cuda.OutOfMemoryError:
        pass
    finally:
        held.clear()
        torch.cuda.empty_cache()
    run = ts.open_run(d)
    armed = run.events("cuda_memory_history")
    oom = run.events("cuda_out_of_memory")
    problems = []
    if len(armed) != 1:
        problems.append(f"{len(armed)} cuda_memory_history events")
    if len(oom) != 1:
        problems.append(f"{len(oom)} cuda_out_of_memory events")
    snap_ok, entries = False, 0
    if oom and oom[0].get("snapshot"):
        with open(os.path.join(d, oom[0]["snapshot"]), "rb") as f:
            snap = pickle.load(f)
        entries = sum(len(t) for t in snap.get("device_traces", []))
        snap_ok = entries > 0
    if not snap_ok:
        problems.append("no snapshot with device traces")
    cli = os.environ.get("TRAINSCOPE_BIN") or "trainscope"
    rep = subprocess.run([cli, "report", d, "--json", "--no-history"], capture_output=True,
                         text=True, timeout=120)
    found = rep.returncode == 0 and any(
        f["rule"] == "cuda_out_of_memory" for f in json.loads(rep.stdout)["findings"])
    if not found:
        problems.append("no cuda_out_of_memory finding in the report")
    numbers = (f"OOM after step {step_of_oom}; history armed at step "
               f"{armed[0]['step'] if armed else '-'}; snapshot {entries} trace entries; "
               f"allocated {oom[0].get('allocated_bytes', 0) / 2**30:.1f} GiB of "
               f"{total / 2**30:.0f} GiB" if oom else "no OOM event")
    rows.add("cuda_oom", "FAIL: " + "; ".join(problems) if problems else "PASS", numbers)

"""What filled CUDA memory (issue 34, item 2; python/trainscope/_cuda_memory.py). There is no
GPU here: torch.cuda's allocator counters and its memory-history calls are replaced by a fake
device whose reserved memory the test controls, and a real torch.cuda.OutOfMemoryError ends the
training. bench/gpu_check.py runs the same path on a real device."""
import json
import os
import pickle
import subprocess
import time
import types

import pytest
import torch

import trainscope as ts
from conftest import cli_path

GIB = 1024 ** 3


class FakeDevice:
    """An 80 GiB device: `reserved` and `allocated` are what the test sets; the history and
    snapshot calls are recorded, and a snapshot is a real pickle file."""

    def __init__(self, monkeypatch):
        self.total = 80 * GIB
        self.reserved = 10 * GIB
        self.allocated = 8 * GIB
        self.history_calls = []
        self.snapshots = []
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "is_available", lambda: True)
        monkeypatch.setattr(cuda, "is_initialized", lambda: True)
        monkeypatch.setattr(cuda, "current_device", lambda: 0)
        monkeypatch.setattr(cuda, "get_device_properties",
                            lambda d: types.SimpleNamespace(total_memory=self.total))
        monkeypatch.setattr(cuda, "memory_reserved", lambda d=None: self.reserved)
        monkeypatch.setattr(cuda, "memory_allocated", lambda d=None: self.allocated)
        monkeypatch.setattr(cuda, "max_memory_allocated", lambda d=None: self.allocated + GIB)
        monkeypatch.setattr(cuda.memory, "_record_memory_history",
                            lambda *a, **k: self.history_calls.append(k))

        def dump(path):
            with open(path, "wb") as f:
                pickle.dump({"segments": [], "device_traces": [[{"action": "alloc"}]]}, f)
            self.snapshots.append(path)
        monkeypatch.setattr(cuda.memory, "_dump_snapshot", dump)


def _train_until_oom(run_dir, device, fill_at, oom_at):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        # The watch looks at the device at the hook's stop checks (every stop_check_interval_ms
        # at a step start, then every 25 steps at most): steps of about 1 ms give it several.
        with ts.Hook(run_dir, system_monitor_interval_ms=0, stop_check_interval_ms=10,
                     writer_options={"flush_interval_ms": 10}) as hook:
            hook.register_module(model)
            hook.register_loss(crit)
            hook.register_optimizer(opt)
            for step in range(10_000):
                if step == fill_at:
                    device.reserved, device.allocated = 78 * GIB, 56 * GIB
                if step == oom_at:
                    raise torch.cuda.OutOfMemoryError(
                        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                        "capacity of 80.00 GiB of which 1.10 GiB is free.")
                loss = crit(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                time.sleep(0.001)


def test_near_full_device_arms_the_history_and_the_oom_writes_a_snapshot(run_dir, monkeypatch):
    monkeypatch.delenv("TRAINSCOPE_CUDA_MEMORY_HISTORY", raising=False)
    device = FakeDevice(monkeypatch)
    _train_until_oom(run_dir, device, fill_at=30, oom_at=400)
    assert device.history_calls and device.history_calls[0]["max_entries"] > 0
    assert device.history_calls[-1] == {"enabled": None}  # turned off again at close
    run = ts.open_run(run_dir)
    armed = run.events("cuda_memory_history")
    assert len(armed) == 1, armed
    assert armed[0]["step"] >= 30 and "98% reserved" in armed[0]["reason"], armed
    oom = run.events("cuda_out_of_memory")
    assert len(oom) == 1, oom
    e = oom[0]
    # the error came before step 400's forward: the last step begun is 399
    assert e["step"] == 399 and e["worker"] == "worker-0" and e["history"] is True
    assert e["snapshot"] == os.path.join("memory", "snapshot-worker-0.pickle")
    assert e["allocated_bytes"] == 56 * GIB and e["total_bytes"] == 80 * GIB
    assert "Tried to allocate 2.00 GiB" in e["message"]
    snap = os.path.join(run_dir, e["snapshot"])
    assert pickle.load(open(snap, "rb"))["device_traces"]
    # the report names it, with the snapshot to open
    rep = subprocess.run([cli_path(), "report", run_dir, "--json", "--no-history"],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    findings = json.loads(rep.stdout)["findings"]
    f = [x for x in findings if x["rule"] == "cuda_out_of_memory"]
    assert f and f[0]["severity"] == "critical", findings
    assert "memory/snapshot-worker-0.pickle" in f[0]["evidence"], f[0]
    assert "memory_viz" in f[0]["recommendation"]


def test_oom_without_a_warning_still_gets_its_counters_and_segments(run_dir, monkeypatch):
    monkeypatch.delenv("TRAINSCOPE_CUDA_MEMORY_HISTORY", raising=False)
    device = FakeDevice(monkeypatch)
    _train_until_oom(run_dir, device, fill_at=10**9, oom_at=5)  # never near full before
    assert device.history_calls == []  # nothing armed: nothing paid on allocations
    oom = ts.open_run(run_dir).events("cuda_out_of_memory")
    assert len(oom) == 1 and oom[0]["history"] is False, oom
    assert device.snapshots  # the allocator's segments, without stacks


def test_history_armed_from_the_start_or_never(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINSCOPE_CUDA_MEMORY_HISTORY", "1")
    device = FakeDevice(monkeypatch)
    _train_until_oom(str(tmp_path / "a"), device, fill_at=10**9, oom_at=3)
    run = ts.open_run(str(tmp_path / "a"))
    assert run.events("cuda_memory_history")[0]["step"] == 0
    assert run.events("cuda_out_of_memory")[0]["history"] is True
    monkeypatch.setenv("TRAINSCOPE_CUDA_MEMORY_HISTORY", "0")
    device = FakeDevice(monkeypatch)
    _train_until_oom(str(tmp_path / "b"), device, fill_at=2, oom_at=200)
    run = ts.open_run(str(tmp_path / "b"))
    assert run.events("cuda_memory_history") == [] and device.history_calls == []
    oom = run.events("cuda_out_of_memory")
    assert len(oom) == 1 and "snapshot" not in oom[0] and device.snapshots == []


def test_a_cpu_machine_pays_nothing(run_dir):
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0)
    try:
        assert hook._cuda_memory is None  # no CUDA here: no watch, no per-step look
    finally:
        hook.close()

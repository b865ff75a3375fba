"""A crash loses at most the last step, through the real hook: one Python process imports torch
once and forks a child per trial that trains a tiny model under ts.Hook, reporting each
finished step on a pipe; the parent SIGKILLs it at a random moment (often within the first
200 ms of training) and reads the run back. Every step reported more than 10 ms before the kill
must be there with its loss and StepRecord, in order, and nothing may be corrupt."""
import json
import os
import subprocess
import sys

import pytest

TRIALS = int(os.environ.get("TS_PY_CRASH_TRIALS", "10"))

SCRIPT = r'''
import json, os, random, signal, sys, time
import torch
torch.set_num_threads(1)
import trainscope as ts

def child(run_dir, wfd, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0)
    hook.register_module(model)
    hook.register_loss(crit)
    i = 0
    while True:
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        os.write(wfd, f"{i} {time.monotonic_ns() // 1000} {loss.item()!r}\n".encode())
        i += 1

def trial(base, n, rng):
    run_dir = os.path.join(base, f"run{n}")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            child(run_dir, w, n)
        finally:
            os._exit(1)
    os.close(w)
    os.set_blocking(r, False)
    buf, done = b"", {}
    def drain():
        nonlocal buf
        while True:
            try:
                chunk = os.read(r, 65536)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for ln in lines:
                s, t, v = ln.split()
                done[int(s)] = (int(t), float(v))
    first = None
    delay = rng.uniform(0, 0.2) if n % 2 == 0 else rng.uniform(0.2, 0.8)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        drain()
        if first is None and done:
            first = time.monotonic()
        if first is not None and time.monotonic() - first >= delay:
            break
        time.sleep(0.0005)
    killed = time.monotonic_ns() // 1000
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.set_blocking(r, True)
    drain()
    os.close(r)
    must = [s for s, (t, _) in done.items() if t < killed - 10000]
    out = {"trial": n, "reported": len(done), "must": max(must) if must else -1,
           "delay_ms": delay * 1e3}
    if must:
        run = ts.open_run(run_dir)
        st = run.read_stats()
        steps = [rec["step"] for rec in run.step_records()]
        ls, lv = run.scalar("losses/loss")
        out.update(steps=steps, loss_steps=[int(s) for s in ls],
                   loss_ok=all(abs(float(v) - done[int(s)][1]) <= 1e-6 * max(1, abs(done[int(s)][1]))
                               for s, v in zip(ls, lv) if int(s) in done),
                   corrupt=st["corrupt_regions"], undecodable=st["undecodable_records"],
                   journal=st["journal_records"])
    return out

base, trials = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
print(json.dumps([trial(base, n, rng) for n in range(trials)]))
'''


def test_sigkill_loses_at_most_the_last_step(tmp_path):
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(TRIALS)],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    checked = 0
    for res in results:
        if res["must"] < 0:
            continue
        checked += 1
        n = res["must"] + 1
        assert res["steps"][:n] == list(range(n)), res
        assert res["steps"] == sorted(set(res["steps"])), res  # in order, once
        assert res["loss_steps"][:n] == list(range(n)), res
        assert res["loss_ok"], res
        assert res["corrupt"] == 0 and res["undecodable"] == 0, res
    assert checked >= TRIALS // 2, results
    # The kills come before the writer flushed: without the journal these runs lose steps.
    assert any(res.get("journal", 0) > 0 for res in results), results


FATAL = r'''
import os, signal, sys
import torch
torch.set_num_threads(1)
import trainscope as ts
model = torch.nn.Linear(4, 1)
crit = torch.nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
hook = ts.Hook(sys.argv[1], system_monitor_interval_ms=0)
hook.register_module(model)
hook.register_loss(crit)
for i in range(6):
    loss = crit(model(torch.ones(2, 4)), torch.zeros(2, 1))
    opt.zero_grad()
    loss.backward()
    opt.step()
model(torch.ones(2, 4))  # step 5 ends: its StepRecord is journaled
print("dying", flush=True)
os.kill(os.getpid(), getattr(signal, sys.argv[2]))
'''


@pytest.mark.parametrize("sig", ["SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE", "SIGILL"])
def test_fatal_signal_is_recorded_and_the_previous_handler_runs(tmp_path, sig):
    import signal

    import trainscope as ts
    run_dir = str(tmp_path / "run")
    out = subprocess.run([sys.executable, "-X", "faulthandler", "-c", FATAL, run_dir, sig],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == -getattr(signal, sig), (out.returncode, out.stderr[-2000:])
    assert "Fatal Python error" in out.stderr, out.stderr[-2000:]  # faulthandler still ran
    run = ts.open_run(run_dir)
    died = [e for e in run.events() if e["kind"] == "process_died"]
    assert len(died) == 1 and died[0]["name"] == sig, died
    assert [r["step"] for r in run.step_records()][:6] == list(range(6))
    steps, _ = run.scalar("losses/loss")
    assert list(steps) == list(range(6))

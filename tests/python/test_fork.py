"""Fork safety: a child made by os.fork() once a Hook exists (explicit or zero-code) exits
normally (sys.exit, so atexit runs Hook.close) without waiting for the parent's threads, leaves
the parent's run alone, and may make a Hook of its own; DataLoader workers (fork start method)
are not affected.

Each scenario runs in its own interpreter (a fork inside pytest would run pytest's teardown in
the child); the parent waits for the child by polling (bounded) and reports a hang as exit 3."""
import os
import subprocess
import sys
import textwrap

import pytest

ts = pytest.importorskip("trainscope")
pytest.importorskip("torch")

PKG = os.path.dirname(os.path.dirname(os.path.abspath(ts.__file__)))

# Waits for the child by polling: a hang is exit status 3 (and the child is killed).
WAIT = """
import os, signal, time
def wait_child(pid, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    print("CHILD HUNG", flush=True)
    raise SystemExit(3)
"""

TRAIN = """
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
crit = torch.nn.CrossEntropyLoss()
def train(steps, crit=crit):
    for _ in range(steps):
        x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _run(tmp_path, body, args=(), cli=None, out=None):
    script = tmp_path / "script.py"
    script.write_text(WAIT + TRAIN + textwrap.dedent(body))
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TRAINSCOPE_RUN_DIR", None)
    cmd = [sys.executable, str(script), *map(str, args)]
    if cli is not None:
        cmd = [cli, "run", "--out", str(out), "--quiet", "--"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    return p


def test_a_forked_child_exits_and_may_make_its_own_hook(tmp_path):
    parent_run, child_run = tmp_path / "parent", tmp_path / "child"
    p = _run(tmp_path, """
        import sys, trainscope as ts
        hook = ts.Hook(sys.argv[1], rules=["exploding_tensor"], save_interval=2,
                       system_monitor_interval_ms=100)
        hook.register_module(model)
        crit = hook.register_loss(crit)
        train(20, crit)
        pid = os.fork()
        if pid == 0:
            train(3, crit)  # the parent's hook records nothing of it
            own = ts.Hook(sys.argv[2], save_interval=1)  # a hook of its own, elsewhere
            m2 = torch.nn.Linear(8, 3)
            own.register_module(m2)
            o2 = torch.optim.SGD(m2.parameters(), lr=0.1)
            c2 = own.register_loss(torch.nn.CrossEntropyLoss())
            for _ in range(5):
                loss = c2(m2(torch.randn(4, 8)), torch.randint(0, 3, (4,)))
                o2.zero_grad(); loss.backward(); o2.step()
            hook.close()  # the parent's: nothing happens
            sys.exit(0)   # atexit closes `own` (and leaves the parent's hook alone)
        code = wait_child(pid)
        assert code == 0, code
        train(10, crit)
        hook.close()
        print("parent done", flush=True)
    """, args=(parent_run, child_run))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "parent done" in p.stdout
    r = ts.open_run(str(parent_run))
    assert r.workers() == ["worker-0"]
    assert len(r.step_records()) == 30  # the child's 3 steps are not among them
    assert [e["steps"] for e in r.events("run_end")] == [30]
    c = ts.open_run(str(child_run))
    assert len(c.step_records()) == 5 and [e["steps"] for e in c.events("run_end")] == [5]


def test_dataloader_workers_with_the_fork_start_method_are_not_affected(tmp_path):
    run = tmp_path / "run"
    p = _run(tmp_path, """
        import sys, trainscope as ts
        from torch.utils.data import DataLoader, TensorDataset
        hook = ts.Hook(sys.argv[1], save_interval=5)
        hook.register_module(model)
        crit = hook.register_loss(crit)
        data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
        loader = DataLoader(data, batch_size=8, num_workers=2, multiprocessing_context="fork")
        n = 0
        for epoch in range(2):
            for x, y in hook.wrap(loader):
                loss = crit(model(x), y)
                opt.zero_grad(); loss.backward(); opt.step()
                n += 1
        hook.close()
        print("steps", n, flush=True)
    """, args=(run,))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "steps 16" in p.stdout
    r = ts.open_run(str(run))
    assert len(r.step_records()) == 16 and len(r.events("run_end")) == 1


def test_a_forked_child_under_zero_code_capture_exits(tmp_path, cli):
    run = tmp_path / "zc"
    p = _run(tmp_path, """
        train(15)
        pid = os.fork()
        if pid == 0:
            import sys
            sys.exit(0)
        code = wait_child(pid)
        assert code == 0, code
        train(5)
        print("parent done", flush=True)
    """, cli=cli, out=run)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "parent done" in p.stdout
    r = ts.open_run(str(run))
    steps, _ = r.scalar("losses/loss")
    assert list(steps) == list(range(20))

"""Runs join the history (`trainscope ls`) when they end, with how they ended (#28 item 4):
a Hook's close, a script that crashes, and `trainscope run` with a clean exit, a crash and a
stop by a rule."""
import json
import os
import subprocess
import sys
import textwrap

import trainscope as ts
from conftest import train

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))


def _ls(cli, home):
    env = dict(os.environ, TRAINSCOPE_HOME=str(home))
    p = subprocess.run([cli, "ls", "--json"], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    return {os.path.basename(r["path"]): r for r in json.loads(p.stdout)["runs"]}


def _env(home):
    env = dict(os.environ, TRAINSCOPE_HOME=str(home))
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TRAINSCOPE_RUN_DIR", None)
    env.pop("TRAINSCOPE_MONITORED", None)
    return env


SCRIPT = textwrap.dedent("""
    import sys, torch, trainscope as ts
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hook = ts.Hook(out_dir=sys.argv[1], system_monitor_interval_ms=0)
    hook.register_module(model)
    for i in range(30):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if sys.argv[2] == "crash" and i == 20:
            raise RuntimeError("injected failure")
""")


def test_hook_close_records_the_run_and_a_crash_is_recorded_as_crashed(tmp_path, cli, tiny,
                                                                       monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("TRAINSCOPE_HOME", str(home))
    monkeypatch.delenv("TRAINSCOPE_MONITORED", raising=False)
    model, opt, crit, batches = tiny
    with ts.Hook(out_dir=str(tmp_path / "ok"), system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        train(hook, model, opt, crit, batches, steps=10)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "crash"), "crash"],
                       capture_output=True, text=True, timeout=120, env=_env(home))
    assert p.returncode == 1 and "injected failure" in p.stderr, p.stderr
    runs = _ls(cli, home)  # no trainscope report in between
    assert runs["ok"]["status"] == "ended" and runs["ok"]["steps"] == 10, runs["ok"]
    assert runs["crash"]["status"] == "crashed", runs["crash"]
    # reporting a run again keeps the status its end recorded
    r = subprocess.run([cli, "report", str(tmp_path / "crash")], capture_output=True, text=True,
                       timeout=60, env=_env(home))
    assert r.returncode == 0, r.stderr
    assert _ls(cli, home)["crash"]["status"] == "crashed"


def test_history_off_with_the_environment_variable(tmp_path, cli, tiny, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("TRAINSCOPE_HOME", str(home))
    monkeypatch.setenv("TRAINSCOPE_HISTORY", "0")
    model, opt, crit, batches = tiny
    with ts.Hook(out_dir=str(tmp_path / "off"), system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        train(hook, model, opt, crit, batches, steps=3)
    monkeypatch.delenv("TRAINSCOPE_HISTORY")
    assert "off" not in _ls(cli, home)


def test_trainscope_run_records_ended_crashed_and_stopped_runs(tmp_path, cli):
    home = tmp_path / "home"
    script = tmp_path / "plain.py"  # no trainscope in it: zero-code capture
    script.write_text(textwrap.dedent("""
        import sys, torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for i in range(30):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            if sys.argv[1] == "crash" and i == 20:
                raise RuntimeError("injected failure")
    """))
    env = _env(home)
    for name, mode in (("ok", "ok"), ("crash", "crash")):
        p = subprocess.run([cli, "run", "--out", str(tmp_path / name), "--", sys.executable,
                            str(script), mode],
                           capture_output=True, text=True, timeout=180, env=env)
        assert p.returncode == (0 if mode == "ok" else 1), p.stderr
    nan = os.path.join(HERE, "scripts", "nan_loss.py")
    p = subprocess.run([cli, "run", "--out", str(tmp_path / "stop"), "--rules",
                        "exploding_tensor", "--actions", "stop_training", "--", sys.executable,
                        nan], capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 76, p.stderr
    runs = _ls(cli, home)
    assert runs["ok"]["status"] == "ended", runs
    assert runs["crash"]["status"] == "crashed", runs
    assert runs["stop"]["status"] == "stopped", runs

"""Profiler windows asked of a running training (issue 34, item 3): `trainscope profile RUN`
on demand, and automatically when a step-time rule fires (step_outlier here, in-process). The
window lands in RUN/profile/ and in a profiler_window event that names the request."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import trainscope as ts

TRAIN = textwrap.dedent("""
    import sys, time, torch
    import trainscope as ts
    run, steps, slow_from, rules = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    hook = ts.Hook(out_dir=run, rules=[] if rules == "-" else [
        {"name": "step_outlier", "params": {"n_outliers": 2}}])
    hook.register_module(model)
    hook.register_loss(crit)
    hook.register_optimizer(opt)
    x, y = torch.randn(32, 16), torch.randn(32, 1)
    print("started", flush=True)
    for step in range(steps):
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.03 if slow_from <= step < slow_from + 8 else 0.004)
        if hook.should_stop:
            break
    hook.close()
    print("done", flush=True)
""")


def _start(tmp_path, steps, slow_from=10**9, rules="-", env=None):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    run = tmp_path / "run"
    p = subprocess.Popen([sys.executable, str(script), str(run), str(steps), str(slow_from), rules],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **(env or {})))
    assert p.stdout.readline().strip() == "started", p.stderr.read()
    return p, run


def _windows(run):
    try:
        return ts.open_run(str(run)).events("profiler_window")
    except Exception:  # noqa: BLE001 - not readable yet
        return []


def _wait(pred, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def test_trainscope_profile_asks_a_running_training_for_a_window(cli, tmp_path):
    p, run = _start(tmp_path, steps=100000)
    try:
        bad = subprocess.run([cli, "profile", str(run), "--steps", "0"], capture_output=True,
                             text=True, timeout=60)
        assert bad.returncode == 2 and "--steps" in bad.stderr, bad.stderr
        absent = subprocess.run([cli, "profile", str(run), "--workers", "worker-7"],
                                capture_output=True, text=True, timeout=60)
        assert absent.returncode == 6 and "worker-7" in absent.stderr, absent.stderr
        asked = subprocess.run([cli, "profile", str(run), "--steps", "3", "--reason", "why slow?"],
                               capture_output=True, text=True, timeout=60)
        assert asked.returncode == 0, asked.stderr
        assert "profiler window of 3 steps" in asked.stdout, asked.stdout
        w = _wait(lambda: _windows(run), 120, "the profiler window")[0]
        assert w["requested_by"] == "trainscope profile" and w["reason"] == "why slow?", w
        assert w["num_steps"] == 3, w
        trace = os.path.join(run, "profile", "trace-worker-0.json")
        assert os.path.getsize(trace) > 0
        json.load(open(trace))  # a whole Chrome trace
        # The same request is not taken twice.
        time.sleep(1.0)
        assert len(_windows(run)) == 1
    finally:
        subprocess.run([cli, "stop", str(run)], capture_output=True, timeout=60)
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    # The run has ended: nothing to ask.
    late = subprocess.run([cli, "profile", str(run)], capture_output=True, text=True, timeout=60)
    assert late.returncode == 6, late.stderr
    # The report shows the window.
    rep = subprocess.run([cli, "report", str(run), "--no-history"], capture_output=True,
                         text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    summary = json.load(open(os.path.join(run, "report", "summary.json")))
    assert summary["profile"] and summary["profile"][0]["num_steps"] == 3, summary["profile"]


def test_a_step_time_rule_that_fires_takes_a_profile_of_the_slow_steps(tmp_path):
    p, run = _start(tmp_path, steps=240, slow_from=150, rules="step_outlier",
                    env={"TRAINSCOPE_PROFILE_ON_FIRE": "4"})
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    r = ts.open_run(str(run))
    fired = [e for e in r.rule_events()
             if e["rule"] == "step_outlier" and e["status"] == "IssuesFound"]
    assert fired, r.rule_events()
    windows = r.events("profiler_window")
    assert len(windows) == 1, windows
    w = windows[0]
    assert w["reason"].startswith("rule step_outlier"), w
    assert w["num_steps"] == 4, w
    # the window opens within a few steps of the firing
    assert 0 < w["start_step"] - fired[0]["step"] <= 20, (w, fired[0])
    assert os.path.exists(os.path.join(run, "profile", "trace-worker-0.json"))


def test_no_profile_on_fire_when_turned_off(tmp_path):
    p, run = _start(tmp_path, steps=200, slow_from=150, rules="step_outlier",
                    env={"TRAINSCOPE_PROFILE_ON_FIRE": "0"})
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    r = ts.open_run(str(run))
    assert any(e["rule"] == "step_outlier" and e["status"] == "IssuesFound"
               for e in r.rule_events())
    assert r.events("profiler_window") == []

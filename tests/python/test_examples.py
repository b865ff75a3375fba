"""The PyTorch examples run end to end (subprocess, few steps)."""
import json
import os
import subprocess
import sys

import pytest

import trainscope as ts
from conftest import ROOT

EXAMPLE = os.path.join(ROOT, "examples", "pytorch", "digits.py")


def run_example(*args, env=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    out = subprocess.run([sys.executable, EXAMPLE, "--threads", "1", "--monitor-ms", "0",
                          *args], capture_output=True, text=True, env=e, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_healthy_example(run_dir):
    res = run_example("--out", run_dir, "--steps", "60", "--eval-every", "20")
    assert res["steps"] == 60 and not res["stopped"]
    run = ts.open_run(run_dir)
    assert run.steps(mode=ts.Mode.TRAIN) and run.steps(mode=ts.Mode.EVAL)
    steps, losses = run.scalar("losses/loss", mode=ts.Mode.TRAIN)
    assert len(steps) == 60 and losses[-1] < losses[0]
    assert run.scalar("scalars/val_acc")[1][-1] > 0.3
    assert run.tensor_names(collection="gradients")


@pytest.mark.skipif(not ts._core.HAVE_RULES, reason="built without rules")
def test_nan_fault_stops_training(run_dir):
    res = run_example("--out", run_dir, "--fault", "nan", "--steps", "300",
                      "--save-interval", "1", "--step-ms", "20", "--rules", "exploding_tensor",
                      "--actions", "stop_training")
    assert res["stopped"] and res["steps"] < 300
    assert ts.open_run(run_dir).rule_statuses()["exploding_tensor"]["status"] == "IssuesFound"


def test_trainscope_run_env(run_dir, tmp_path):
    res = run_example("--out", str(tmp_path / "ignored"), "--steps", "5",
                      env={"TRAINSCOPE_RUN_DIR": run_dir, "TRAINSCOPE_MONITORED": "1"})
    assert res["run_dir"] == run_dir
    assert ts.open_run(run_dir).workers() == ["worker-0"]

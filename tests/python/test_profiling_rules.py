"""End to end: the profiling rules under `trainscope run` on the PyTorch digits example.

A data-starved training (--fault slow_loader: the loader sleeps 20 ms per batch) must make the
dataloader rule fire with the evidence in its message; a healthy training must not make any of
dataloader, cpu_bottleneck or step_outlier fire. Each training is ~150 steps (a few seconds).
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "pytorch", "digits.py")
RULES = "dataloader,cpu_bottleneck,step_outlier"


@pytest.fixture
def setup():
    try:
        import trainscope  # noqa: F401
    except ImportError:
        pytest.skip("the trainscope Python package is not installed (./dev installs it)")
    if not os.path.exists(EXAMPLE):
        pytest.skip("examples/pytorch/digits.py is missing")
    cli = os.environ.get("TRAINSCOPE_BIN")
    if not cli or not os.path.exists(cli):
        pytest.skip("TRAINSCOPE_BIN is not set to the trainscope CLI")
    return cli


def run_training(cli, out, *args, timeout=180):
    cmd = [cli, "run", "--out", out, "--quiet", "--interval-ms", "200", "--rules", RULES, "--",
           sys.executable, EXAMPLE, "--steps", "150", "--threads", "1", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0 and "unknown rule" in p.stderr:
        pytest.skip("this trainscope binary has no profiling rules registered: " + p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    r = subprocess.run([cli, "rules", out, "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def final_status(events, rule):
    """IssuesFound once the rule fired, else the last non-Warning status."""
    status = None
    for e in events:
        if e["rule"] != rule or e["status"] == "Warning":
            continue
        if status != "IssuesFound":
            status = e["status"]
    return status


def firings(events, rule):
    return [e for e in events if e["rule"] == rule and e["status"] == "IssuesFound"]


def test_slow_loader_fires_dataloader(setup, tmp_path):
    events = run_training(setup, str(tmp_path / "slow"), "--fault", "slow_loader")
    fired = firings(events, "dataloader")
    assert fired, json.dumps(events, indent=1)
    e = fired[0]
    assert e["worker"].startswith("worker-")
    assert e["threshold"] == 25
    assert e["value"] > 50  # 20 ms of sleep in a step of a few ms
    assert "ms per step" in e["message"] and "of the step time" in e["message"]
    assert final_status(events, "dataloader") == "IssuesFound"
    # No GPU on the CI machine: cpu_bottleneck must not guess.
    assert not firings(events, "cpu_bottleneck")
    # It had nothing to check, and says so rather than "no issues".
    assert final_status(events, "cpu_bottleneck") == "NoData"
    last = [e for e in events if e["rule"] == "cpu_bottleneck" and e["status"] == "NoData"][-1]
    assert "no GPU metrics" in last["message"], last


def test_healthy_run_does_not_fire(setup, tmp_path):
    events = run_training(setup, str(tmp_path / "healthy"))
    for rule in RULES.split(","):
        assert not firings(events, rule), json.dumps(firings(events, rule), indent=1)
        want = "NoData" if rule == "cpu_bottleneck" else "NoIssuesFound"  # no GPU in CI
        assert final_status(events, rule) == want, rule

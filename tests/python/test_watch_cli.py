"""`trainscope watch` on a run written by another process: it detects the fault and its stop
request (RUN/control/stop.json) ends that training at a step boundary."""
import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "pytorch", "digits.py")


def _bin():
    b = os.environ.get("TRAINSCOPE_BIN")
    if not b or not os.path.exists(b):
        pytest.skip("TRAINSCOPE_BIN is not set (./dev test sets it)")
    return b


def _wait_for(pred, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("how", ["config", "rules_and_actions"])
def test_watch_detects_nan_and_stops_the_training(tmp_path, how):
    """--config with a stop_training action, and --rules with --actions stop_training (rules
    named with --rules had no action and watch had no --actions: the training ran on)."""
    ts = _bin()
    run = tmp_path / "run"
    config = tmp_path / "rules.json"
    config.write_text(json.dumps({"rules": [
        {"name": "exploding_tensor", "actions": ["stop_training"]}]}))
    rules_args = (["--config", str(config)] if how == "config" else
                  ["--rules", "exploding_tensor", "--actions", "stop_training"])
    # A training that would run for minutes: 20 ms per step, NaN after a few steps.
    train = subprocess.Popen(
        [sys.executable, EXAMPLE, "--out", str(run), "--fault", "nan", "--steps", "20000",
         "--step-ms", "20", "--threads", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (run / "run.json").exists(), 60, "the training to create its run")
        watch = subprocess.run([ts, "watch", str(run), *rules_args, "--quiet"],
                               capture_output=True, text=True, timeout=180)
        assert watch.returncode == 76, watch.stderr  # it asked the training to stop
        out, err = train.communicate(timeout=120)
    finally:
        if train.poll() is None:
            train.kill()
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stopped"] is True, (out, err)
    assert "exploding_tensor" in (summary["stop_reason"] or "")
    assert summary["steps"] < 20000
    events = json.loads(subprocess.run([ts, "rules", str(run), "--json"], capture_output=True,
                                       text=True, check=True).stdout)
    fired = [e for e in events if e["rule"] == "exploding_tensor" and e["status"] == "IssuesFound"]
    assert fired, events
    # The loop ended soon after the firing (20 ms steps; watch polls every 100 ms and the hook
    # looks for stop requests every 100 ms).
    assert summary["steps"] - fired[0]["step"] <= 40, (summary, fired[0])
    assert (run / "control" / "stop.json").exists()

"""Accelerate: an explicit ts.Hook on the model accelerator.prepare returns, in a real
two-process CPU job (torchrun, gloo): one run directory, one worker-<rank> stream per process,
each stream's loss series the one its process computed; an injected NaN fires the rule on
every rank and all processes leave the loop at the same step (Accelerate's set_trigger /
check_trigger) after accelerator.save_state. The job is tests/python/accelerate_job.py."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("accelerate")

import trainscope as ts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _job(tmp_path, *args, procs=2):
    run = str(tmp_path / "run")
    out = str(tmp_path / "out-RANK.json")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={procs}", os.path.join(HERE, "accelerate_job.py"), run, out,
           *args]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    outs = []
    for r in range(procs):
        with open(out.replace("RANK", str(r))) as f:
            outs.append(json.load(f))
    return ts.open_run(run), outs


def test_two_processes_one_run_losses_per_rank(tmp_path):
    run, outs = _job(tmp_path, "--steps", "24", "--save-interval", "8")
    assert sorted(run.workers()) == ["worker-0", "worker-1"]
    for o in outs:
        assert o["world"] == 2 and o["worker"] == f"worker-{o['rank']}"
        steps, values = run.scalar("losses/loss", worker=o["worker"])
        assert list(steps) == [s for s, _ in o["losses"]] == list(range(24))
        assert values.tolist() == pytest.approx([v for _, v in o["losses"]], rel=1e-6)
    # each rank's own batches: the two series differ
    assert outs[0]["losses"] != outs[1]["losses"]
    # gradients of the prepared (DistributedDataParallel) model, named through its wrapper
    assert "gradients/module.0.weight" in run.tensor_names()
    assert run.tensor("gradients/module.0.weight", worker="worker-1").steps() == [0, 8, 16]
    st = run.rule_statuses()["exploding_tensor"]
    assert st["status"] != "IssuesFound" and st["firings"] == 0
    assert all(o["stopped_at"] is None for o in outs)


def test_nan_on_every_rank_stops_all_processes_at_the_same_step(tmp_path):
    fault = 10
    run, outs = _job(tmp_path, "--steps", "4000", "--fault", str(fault))
    stops = {o["stopped_at"] for o in outs}
    assert len(stops) == 1 and fault <= stops.pop() < 4000
    fired = {}
    for e in run.rule_events():
        if e["rule"] == "exploding_tensor" and e["status"] == "IssuesFound":
            fired[e["worker"]] = min(fired.get(e["worker"], e["step"]), e["step"])
    assert fired == {"worker-0": fault, "worker-1": fault}
    ckpt = run.events("checkpoint")
    assert ckpt and os.path.isdir(ckpt[0]["path"])

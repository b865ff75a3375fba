"""A rollback in a torchrun job (gloo, CPU, 2 ranks): a NaN on rank 1 only with the rollback
action, and every rank restores the same checkpoint at the same step and goes on in lockstep
(python/trainscope/_distributed.py, rollback.py; docs/distributed.md, "Rollback")."""
import math

import pytest

import trainscope as ts
from test_distributed import _exits, torchrun


def test_nan_on_one_rank_rolls_every_rank_back_to_the_same_checkpoint(tmp_path):
    out = tmp_path / "job"
    torchrun(tmp_path, "--scenario", "rollback", "--out", str(out), "--max-steps", "120")
    for trial in (0, 1):
        d = out / f"trial-{trial}"
        exits = _exits(str(d))
        # both ranks ran to the end of their batches without a stop, in lockstep, and DDP kept
        # their parameters equal: they restored the same state
        assert all(e["reason"] is None and e["rollbacks"] == 1 for e in exits), exits
        assert exits[0]["steps"] == exits[1]["steps"] < 120, exits
        assert exits[0]["params"] == exits[1]["params"]
        assert all(e["lr"] == pytest.approx(0.005) for e in exits)  # lr_factor 0.5 on both
        assert all(e["sync"]["state"] == "rounds" and e["sync"]["rollbacks"] == 1
                   for e in exits)  # stops are still agreed after it
        run = ts.open_run(str(d))
        rbs = sorted(run.events("rollback"), key=lambda e: e["rank"])
        assert [e["rank"] for e in rbs] == [0, 1], rbs
        assert all(e["requested_by"] == 1 and e["rule"] == "exploding_tensor" for e in rbs)
        same = {(e["train_step"], e["from_step"], e["bound_train_step"]) for e in rbs}
        assert len(same) == 1, rbs  # the same checkpoint, taken at the same step
        train_step, from_step, bound = same.pop()
        assert bound == 30 + 7 * trial - 1  # the NaN's step: checkpoints before it only
        if trial == 0:  # both checkpoint every 5 steps: the newest before the NaN
            assert train_step == 5 * ((bound - 1) // 5)
            assert rbs[0]["newest_here"] == rbs[1]["newest_here"] == train_step
        else:  # their newest differ; step 8 is the newest both have
            assert train_step == 8, rbs
            assert rbs[0]["newest_here"] % 4 == 2 and rbs[1]["newest_here"] % 4 == 0, rbs
            assert rbs[0]["agreement_rounds"] > 3, rbs
        # the rolled-back steps were recorded again: one finite series on each rank
        for w in ("worker-0", "worker-1"):
            steps, values = run.scalar("losses/loss", worker=w)
            assert steps.tolist() == list(range(exits[0]["steps"])), w
            assert all(math.isfinite(v) for v in values.tolist()), w

"""A rollback in a torchrun job (gloo, CPU, 2 ranks): a NaN on rank 1 only with the rollback
action, and every rank restores the same checkpoint at the same step and goes on in lockstep
(python/trainscope/_distributed.py, rollback.py; docs/distributed.md, "Rollback")."""
import math

import pytest

import trainscope as ts
from test_distributed import _exits, torchrun


def test_nan_on_one_rank_rolls_every_rank_back_to_the_same_checkpoint(tmp_path):
    out = tmp_path / "job"
    torchrun(tmp_path, "--scenario", "rollback", "--out", str(out), "--max-steps", "100")
    for trial in (0, 1):
        d = out / f"trial-{trial}"
        exits = _exits(str(d))
        # both ranks ran to the end of their batches without a stop, in lockstep, and DDP kept
        # their parameters equal: they restored the same state
        assert all(e["reason"] is None and e["rollbacks"] == 1 for e in exits), exits
        assert exits[0]["steps"] == exits[1]["steps"] < 100, exits
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
        # the rolled-back steps were recorded again: one finite series on each rank up to the
        # last step trained. Steps of the abandoned branch beyond it (when the rollback came
        # later than half-way through the batches) are still in the stream: the reader does not
        # yet drop a branch a rollback abandoned (docs/checkpoints.md, "After a rollback").
        final = exits[0]["steps"]
        for w in ("worker-0", "worker-1"):
            steps, values = run.scalar("losses/loss", worker=w)
            steps, values = steps.tolist(), values.tolist()
            assert steps[:final] == list(range(final)), w
            assert all(math.isfinite(v) for v in values[:final]), w
            assert all(final <= s < from_step for s in steps[final:]), (w, steps[final:])
    # trial 2: rank 0 has no Checkpointer, so the ranks cannot roll back together: every rank
    # stops at the same step instead (no rank restores alone)
    exits = _exits(str(out / "trial-2"))
    assert exits[0]["steps"] == exits[1]["steps"] < 100, exits
    assert all("not every rank has a ts.Checkpointer" in e["reason"] for e in exits), exits
    assert exits[1]["rollbacks"] == 0 and exits[0]["params"] == exits[1]["params"]
    run = ts.open_run(str(out / "trial-2"))
    assert not run.events("rollback")
    agreed = run.events("stop_agreed")
    assert sorted(e["rank"] for e in agreed) == [0, 1] and len({e["step"] for e in agreed}) == 1


def _agree(sets, bound, invalid=()):
    """Runs StopCoordinator.agree_checkpoint on one thread per rank, with an all_reduce(MAX)
    between the threads in place of gloo's; returns each rank's (step, rounds)."""
    import threading

    import torch

    from trainscope._distributed import StopCoordinator
    n = len(sets)
    bar = threading.Barrier(n)
    slots = [None] * n

    def all_reduce(t, op=None, group=None):
        slots[group] = t.clone()
        bar.wait()
        t.copy_(torch.stack(slots).max(dim=0).values)
        bar.wait()

    out = [None] * n

    def rank(r):
        c = object.__new__(StopCoordinator)
        c._group, c.sync_ns = r, 0
        steps = set(sets[r])
        out[r] = c.agree_checkpoint(
            bound, lambda s: max((x for x in steps if x < s), default=-1),
            lambda s: s in steps and (r, s) not in invalid)

    import torch.distributed as dist
    orig, dist.all_reduce = dist.all_reduce, all_reduce
    try:
        ts_ = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
        for t in ts_:
            t.start()
        for t in ts_:
            t.join(timeout=30)
    finally:
        dist.all_reduce = orig
    return out


def test_ranks_agree_on_the_newest_checkpoint_every_rank_has():
    assert _agree([{5, 10, 15, 20}, {5, 10, 15, 20}], 22) == [(20, 2)] * 2
    assert _agree([{5, 10, 15, 20}, {10, 20, 30}], 25) == [(20, 2)] * 2
    assert _agree([{5, 10, 15, 20}, {10, 20, 30}], 20)[0][0] == 10
    assert _agree([{2, 4, 8, 12, 16}, {3, 6, 8, 9, 15}, {8, 16}], 17)[0][0] == 8
    assert _agree([{1, 3, 5}, {2, 4, 6}], 7) == [(-1, 4)] * 2  # none in common
    assert _agree([{5, 10}, set()], 20)[0][0] == -1
    # a checkpoint one rank cannot use (torn) is skipped by all
    assert _agree([{5, 10, 15}, {5, 10, 15}], 20, invalid={(1, 15)})[0][0] == 10

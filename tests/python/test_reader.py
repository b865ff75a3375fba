"""Reader API: missing names/steps, live reading of a run being written by another process."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import trainscope as ts
from conftest import ROOT, train


@pytest.fixture
def small_run(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(run_dir, save_interval=5, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        train(hook, model, opt, crit, batches[:11])
    return ts.open_run(run_dir)


def test_missing_tensor_names_nearest(small_run):
    with pytest.raises(ts.NotFoundError) as e:
        small_run.tensor("gradients/0.weigth")
    assert isinstance(e.value, KeyError)
    assert "gradients/0.weigth" in str(e.value) and "'gradients/0.weight'" in str(e.value)
    # A scalar is a name too (smdebug lists losses among the tensors): it opens as a tensor.
    loss = small_run.tensor("losses/loss")
    steps, values = small_run.scalar("losses/loss")
    assert loss.steps() == [int(s) for s in steps]
    assert float(loss.value(int(steps[0]))) == values[0]


def test_missing_step_names_nearest_steps(small_run):
    t = small_run.tensor("gradients/0.weight")
    with pytest.raises(ts.NotFoundError) as e:
        t.reductions(6)
    msg = str(e.value)
    assert "step 6" in msg and "5" in msg and "10" in msg
    with pytest.raises(ts.NotFoundError) as e:
        t.value(5)
    # one readable sentence: what is missing, where, why, what to do (it once read "no raw
    # value of '...' at step 5 (there is no raw value of at all). only summaries ...")
    assert e.value.message == (
        "no raw value of 'gradients/0.weight' at step 5: only summaries were saved; use "
        "reductions(), or save it with ts.Collection(..., raw=True)")
    with pytest.raises(ts.NotFoundError) as e:
        t.reduction(5, "l3")
    assert "'l2'" in str(e.value)


def test_missing_scalar_and_run(small_run, tmp_path):
    with pytest.raises(ts.NotFoundError) as e:
        small_run.scalar("losses/los")
    assert "'losses/loss'" in str(e.value)
    with pytest.raises(ts.NotFoundError):
        small_run.scalar("losses/loss", mode=ts.Mode.EVAL)
    with pytest.raises(ts.NotFoundError):
        ts.open_run(str(tmp_path / "nope"))


def test_tensor_names_filters(small_run):
    assert small_run.tensor_names(regex=r"\.bias$") == [
        "gradients/0.bias", "gradients/2.bias", "gradients/4.bias"]
    assert small_run.scalar_names() == ["losses/loss"]
    assert small_run.bytes_by_collection()
    assert small_run.writer_stats()["records_written"] > 0


LIVE = r"""
import sys, time, torch
sys.path.insert(0, sys.argv[2])
import trainscope as ts
torch.set_num_threads(1)
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
crit = torch.nn.CrossEntropyLoss()
with ts.Hook(sys.argv[1], save_interval=2, system_monitor_interval_ms=0,
             writer_options={"flush_interval_ms": 20}) as hook:
    hook.register_module(m); hook.register_loss(crit)
    for i in range(60):
        x = torch.randn(4, 4); y = torch.randint(0, 2, (4,))
        loss = crit(m(x), y); opt.zero_grad(); loss.backward(); opt.step()
        time.sleep(0.03)
"""


def test_read_while_training_writes(run_dir):
    p = subprocess.Popen([sys.executable, "-c", LIVE, run_dir, os.path.join(ROOT, "python")])
    try:
        deadline = time.monotonic() + 60
        run = None
        while run is None and time.monotonic() < deadline:
            try:
                run = ts.open_run(run_dir)
            except ts.NotFoundError:
                time.sleep(0.05)
        seen = []
        while p.poll() is None and time.monotonic() < deadline:
            n = len(run.steps())
            if not seen or n != seen[-1]:
                seen.append(n)
            time.sleep(0.05)
        assert p.wait(timeout=60) == 0
        run.refresh()
        # it saw the run grow while the training was running
        assert len([n for n in seen if 0 < n < 60]) >= 2, seen
        assert run.steps() == list(range(60))
        assert run.ended()
        assert run.tensor("gradients/0.weight").steps() == list(range(0, 60, 2))
    finally:
        if p.poll() is None:
            p.kill()

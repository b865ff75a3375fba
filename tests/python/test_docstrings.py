"""The examples in the package's docstrings run and print what they show."""
import doctest
import os

import numpy as np
import pytest

import trainscope as ts
import trainscope.collection
import trainscope._errors
import trainscope._modes
import trainscope.reader
from conftest import train


@pytest.mark.parametrize("module", [ts, trainscope.collection, trainscope._modes,
                                    trainscope._errors, trainscope.reader])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_reader_module_example_on_a_real_run(tmp_path, tiny, monkeypatch):
    """The reader module's example (skipped by doctest: it needs a run) on a real one."""
    model, opt, crit, batches = tiny
    monkeypatch.chdir(tmp_path)
    with ts.Hook("runs/exp1", save_interval=5, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        crit = hook.register_loss(crit)
        train(hook, model, opt, crit, batches[:12])
    run = ts.open_run("runs/exp1")
    names = run.tensor_names(collection="gradients")
    assert names == sorted(names) and "gradients/0.weight" in names
    t = run.tensor("gradients/0.weight")
    assert t.steps() == [0, 5, 10]
    assert np.isfinite(t.reduction(t.steps()[-1], "l2"))
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN)
    assert list(steps) == list(range(12)) and len(values) == 12
    assert os.path.isdir("runs/exp1")

"""Errors inside the hook never reach the training loop: they are counted, logged once,
written as hook_error events, and the hook degrades."""
import os
import stat

import pytest
import torch

import trainscope as ts
from conftest import train


def test_unwritable_out_dir(tmp_path, tiny):
    model, opt, crit, batches = tiny
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, stat.S_IRUSR | stat.S_IXUSR)
    if os.access(str(ro), os.W_OK):
        pytest.skip("running as a user that can write anywhere")
    hook = ts.Hook(str(ro / "run"), system_monitor_interval_ms=0)
    hook.register_module(model)
    hook.register_loss(crit)
    losses = train(hook, model, opt, crit, batches[:5])
    hook.save_scalar("x", 1.0)
    hook.close()
    assert len(losses) == 5
    assert hook.errors.get("unwritable run directory") == 1
    assert hook.step_count == 5
    ws = hook.writer_stats()  # what could not be written, counted
    assert ws["records_written"] == 0 and ws["records_dropped"] == 5 + 1, ws


def test_unwritable_out_dir_root(tmp_path, tiny):
    # a path below a regular file cannot be created by anyone, root included
    f = tmp_path / "file"
    f.write_text("x")
    model, opt, crit, batches = tiny
    hook = ts.Hook(str(f / "run"), system_monitor_interval_ms=0)
    hook.register_module(model)
    assert len(train(hook, model, opt, crit, batches[:3])) == 3
    hook.close()
    assert "unwritable run directory" in hook.errors


def test_bad_collection_config_raises_config_error_whatever_strict(run_dir):
    # A wrong argument is a programmer error found where it is given (issue 18): ConfigError,
    # strict or not; only failures while the training runs are logged and degrade.
    with pytest.raises(ts.ConfigError, match="collections"):
        ts.Hook(run_dir, collections=["losses", {"not": "a collection"}],
                system_monitor_interval_ms=0)
    with pytest.raises(ts.ConfigError, match="regular expression"):
        ts.Hook(run_dir + "2", collections=[ts.Collection("gradients", include="[unclosed")],
                strict=True)


class ThrowingPattern:
    """A 'regex' whose search raises (e.g. a user-supplied matcher with a bug)."""
    pattern = "boom"

    def search(self, s):
        raise RuntimeError("matcher exploded")


def test_collection_matcher_that_throws(run_dir, tiny):
    import re
    model, opt, crit, batches = tiny
    c = ts.Collection("gradients", save_interval=1)
    c.include_patterns = [ThrowingPattern()]
    with ts.Hook(run_dir, collections=["losses", c], system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        losses = train(hook, model, opt, crit, batches[:4])
    assert len(losses) == 4
    assert "collection gradients" in hook.errors
    run = ts.open_run(run_dir)
    assert len(run.scalar("losses/loss")[0]) == 4
    errs = run.events("hook_error")
    assert errs and "matcher exploded" in errs[0]["message"]


class WeirdOutput(torch.nn.Module):
    def forward(self, x):
        return {"a": x * 2, "b": [x, "text", None], "c": object()}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weird = WeirdOutput()
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        out = self.weird(x)
        return self.fc(out["a"])


def test_module_with_weird_output_type(run_dir, tiny):
    _, _, crit, batches = tiny
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    colls = ["losses", ts.Collection("activations", include=".*", save_interval=1)]
    with ts.Hook(run_dir, collections=colls, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        assert len(train(hook, model, opt, crit, batches[:3])) == 3
    names = ts.open_run(run_dir).tensor_names()
    assert "activations/weird/a" in names and "activations/weird/b/0" in names
    assert "activations/fc" in names
    assert hook.errors == {}


def test_writer_killed_under_the_hook(run_dir, tiny):
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, save_interval=1, system_monitor_interval_ms=0)
    hook.register_module(model)
    hook.register_loss(crit)
    train(hook, model, opt, crit, batches[:3])
    hook._writer.close()  # the stream goes away mid-training
    losses = train(hook, model, opt, crit, batches[3:8])
    hook.save_scalar("val", 1.0)
    hook.close()
    assert len(losses) == 5
    assert len(ts.open_run(run_dir).scalar("losses/loss")[0]) == 3


def test_internal_exception_is_counted_and_degrades(run_dir, tiny, monkeypatch):
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, save_interval=1, system_monitor_interval_ms=0, max_errors=5)
    hook.register_module(model)
    hook.register_loss(crit)

    def broken(*a, **k):
        raise ValueError("injected failure")
    monkeypatch.setattr(hook, "_save_items", broken)
    losses = train(hook, model, opt, crit, batches[:10])
    hook.close()
    assert len(losses) == 10
    assert hook.error_count >= 5
    assert not hook._saving  # degraded: no more tensor saving
    run = ts.open_run(run_dir)
    errs = run.events("hook_error")
    assert errs[0]["message"] == "ValueError: injected failure"
    assert len(run.scalar("losses/loss")[0]) == 10  # losses still recorded
    assert run.events("run_end")[0]["hook_errors"] == hook.error_count


def test_hook_methods_never_raise_after_close(run_dir, tiny):
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0)
    hook.register_module(model)
    hook.close()
    train(hook, model, opt, crit, batches[:2])
    hook.save_scalar("a", 1)
    hook.save_tensor("t", torch.ones(3))
    hook.step()
    hook.set_mode(ts.Mode.EVAL)
    hook.close()

"""Stop requests, raise_on_stop, the profiler window, custom Python rules, built-in rules."""
import json
import os
import time

import pytest
import torch

import trainscope as ts
from conftest import train


def test_stop_request_sets_should_stop(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(run_dir, system_monitor_interval_ms=0, stop_check_interval_ms=0) as hook:
        hook.register_module(model)
        train(hook, model, opt, crit, batches[:2])
        assert not hook.should_stop
        ts.request_stop(run_dir, "watcher saw NaN", "test")
        steps = 0
        for x, y in batches[2:]:
            model(x)
            steps += 1
            if hook.should_stop:
                break
        assert steps == 1
        assert "watcher saw NaN" in hook.stop_reason
    assert ts.open_run(run_dir).events("stop_requested")


def test_raise_on_stop(run_dir, tiny):
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0, raise_on_stop=True,
                   stop_check_interval_ms=0)
    hook.register_module(model)
    train(hook, model, opt, crit, batches[:2])
    ts.request_stop(run_dir, "enough", "test")
    with pytest.raises(ts.TrainingStopped) as e:
        train(hook, model, opt, crit, batches[2:6])
    assert "enough" in str(e.value)
    assert hook.step_count == 2  # raised when step 2 began (the next step boundary)
    train(hook, model, opt, crit, batches[6:8])  # raised once only
    hook.close()
    assert ts.open_run(run_dir).events("stop_honoured")


def test_profiler_window(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(run_dir, system_monitor_interval_ms=0,
                 profiler=ts.ProfilerConfig(start_step=3, num_steps=4)) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        train(hook, model, opt, crit, batches[:10])
    worker = "worker-0"
    with open(os.path.join(run_dir, "profile", f"functions-{worker}.json")) as f:
        table = json.load(f)
    assert table["window"] == {"start_step": 3, "num_steps": 4}
    assert table["step_time_us"] > 0
    assert table["functions"] and {"name", "file", "line", "calls", "total_us",
                                   "self_us"} <= set(table["functions"][0])
    ops = {o["name"] for o in table["operators"]}
    assert any("addmm" in o or "linear" in o for o in ops), ops
    with open(os.path.join(run_dir, "profile", f"trace-{worker}.json")) as f:
        trace = json.load(f)  # torch 1.13 writes a bare event list; newer: {"traceEvents"}
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert any(e.get("name") == "aten::addmm" for e in events)
    ev = ts.open_run(run_dir).events("profiler_window")
    assert ev and ev[0]["start_step"] == 3 and ev[0]["end_step"] == 6


class LossAbove(ts.Rule):
    def __init__(self, limit):
        super().__init__(actions=["stop_training"])
        self.limit = limit
        self.seen = []

    def invoke_at_step(self, step):
        self.seen.append(step)
        steps, values = self.run.scalar("losses/loss")
        v = values[list(steps).index(step)] if step in steps else None
        if v is not None and v > self.limit:
            raise ts.RuleFired(f"loss {v:.3f} above {self.limit}", value=v,
                               threshold=self.limit)
        return False


class Broken(ts.Rule):
    def invoke_at_step(self, step):
        raise ZeroDivisionError("bug in the rule")


def test_custom_python_rules_fire_error_and_stop(run_dir, tiny):
    model, opt, crit, batches = tiny
    rule = LossAbove(limit=-1.0)  # fires at once
    with ts.Hook(run_dir, system_monitor_interval_ms=0, rules=[rule, Broken()],
                 stop_check_interval_ms=0, writer_options={"flush_interval_ms": 10}) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        steps = 0
        deadline = time.monotonic() + 30
        for x, y in batches * 5:
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            time.sleep(0.02)
            if hook.should_stop or time.monotonic() > deadline:
                break
        assert hook.should_stop
        assert "LossAbove" in hook.stop_reason
    st = ts.open_run(run_dir).rule_statuses()
    assert st["LossAbove"]["status"] == "IssuesFound"
    assert st["Broken"]["status"] == "Error"
    assert "bug in the rule" in st["Broken"]["message"]


def test_watch_with_custom_rule(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(run_dir, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        train(hook, model, opt, crit, batches[:5])

    class Counts(ts.Rule):
        def invoke_at_step(self, step):
            return False
    out = ts.watch(run_dir, rules=[Counts()], timeout_s=20)
    assert out["Counts"]["status"] == "NoIssuesFound"


needs_rules = pytest.mark.skipif(not ts._core.HAVE_RULES, reason="built without rules")


@needs_rules
def test_builtin_rule_names_validated():
    assert "vanishing_gradient" in ts.rule_names()
    with pytest.raises(Exception) as e:
        ts.Hook("/tmp/unused-ts-run", rules=["no_such_rule"], strict=True)
    assert "no_such_rule" in str(e.value)


@needs_rules
def test_builtin_rule_fires_and_stops_training(run_dir, tiny):
    model, opt, crit, batches = tiny
    # loss constant: lr 0 -> dead_loss fires after num_steps saved values
    for g in opt.param_groups:
        g["lr"] = 0.0
    x, y = batches[0]
    with ts.Hook(run_dir, system_monitor_interval_ms=0, stop_check_interval_ms=0,
                 rules=[ts.Rule("dead_loss", num_steps=3)], actions=["stop_training"],
                 writer_options={"flush_interval_ms": 10}) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        deadline = time.monotonic() + 30
        while not hook.should_stop and time.monotonic() < deadline:
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.01)
        assert hook.should_stop, hook.rule_statuses()
    st = ts.open_run(run_dir).rule_statuses()
    assert st["dead_loss"]["status"] == "IssuesFound"

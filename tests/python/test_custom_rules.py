"""Custom Python rules run in the C++ rules engine (a trampoline, python/bindings/
python_rule.cc): the engine's min_consecutive, recover_after, reminders and actions apply to them
as to built-in rules, and their report words travel in their firings."""
import json
import os

import pytest
import torch

import trainscope as ts
from conftest import train

pytestmark = pytest.mark.skipif(not ts._core.HAVE_RULES, reason="built without rules")

STEPS = 12


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run of STEPS training steps with the loss saved at each."""
    run_dir = str(tmp_path_factory.mktemp("custom") / "run")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 4, generator=g), torch.randint(0, 3, (4,), generator=g))
               for _ in range(STEPS)]
    with ts.Hook(run_dir, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        train(hook, model, opt, crit, batches)
    return run_dir


class BadAt(ts.Rule):
    """Violated at the given steps; reads the loss through the reader API like any rule."""

    def __init__(self, bad, **kw):
        super().__init__(**kw)
        self.bad = set(bad)
        self.seen = []

    def invoke_at_step(self, step):
        self.seen.append(step)
        steps, values = self.run.scalar("losses/loss")
        if step not in steps.tolist():
            raise ts.NotFoundError("losses/loss", step)
        if step in self.bad:
            v = float(values[steps.tolist().index(step)])
            raise ts.RuleFired(f"bad step {step}", value=v, threshold=0.0,
                               tensors=["losses/loss"])
        return False


def _events(run_dir, rule):
    return [e for e in ts.open_run(run_dir).rule_events() if e["rule"] == rule]


def test_every_step_is_evaluated_once_in_order(finished_run):
    rule = BadAt([], id="all_steps")
    out = ts.watch(finished_run, rules=[rule], timeout_s=30, stream="watch-order")
    assert rule.seen == list(range(STEPS))
    assert out["all_steps"]["status"] == "NoIssuesFound"
    assert out["all_steps"]["evaluations"] == STEPS
    assert rule.worker == "worker-0"


def test_min_consecutive(finished_run):
    # violated at 2 (alone) and 5..9: with min_consecutive=3 only the run fires, at step 7
    rule = BadAt([2, 5, 6, 7, 8, 9], id="consecutive", min_consecutive=3)
    out = ts.watch(finished_run, rules=[rule], timeout_s=30, stream="watch-consecutive")
    assert out["consecutive"]["status"] == "IssuesFound"
    assert out["consecutive"]["firings"] == 1 and out["consecutive"]["violations"] == 6
    fired = [e for e in _events(finished_run, "consecutive") if e["status"] == "IssuesFound"]
    assert [e["step"] for e in fired] == [7]
    assert fired[0]["details"] == {"consecutive": 3, "first_step": 5}
    assert fired[0]["tensors"] == ["losses/loss"] and fired[0]["threshold"] == 0.0


def test_recover_after_and_reminders(finished_run):
    # violated 0..4, clear 5..6, violated 7..11: recover_after=2 lets it fire twice; while
    # violated it reminds every 2 steps
    bad = [0, 1, 2, 3, 4, 7, 8, 9, 10, 11]
    rule = BadAt(bad, id="flapping", recover_after=2, remind_every_steps=2)
    out = ts.watch(finished_run, rules=[rule], timeout_s=30, stream="watch-recover")
    assert out["flapping"]["firings"] == 2
    fired = [e for e in _events(finished_run, "flapping") if e["status"] == "IssuesFound"]
    firsts = [e["step"] for e in fired if not e["details"].get("reminder")]
    reminders = [e["step"] for e in fired if e["details"].get("reminder")]
    assert firsts == [0, 7]
    assert reminders == [2, 4, 9, 11]
    # without recovery room (recover_after=3 > the 2 clear steps) it is one firing
    rule = BadAt(bad, id="sticky", recover_after=3, remind_every_steps=0)
    out = ts.watch(finished_run, rules=[rule], timeout_s=30, stream="watch-sticky")
    assert out["sticky"]["firings"] == 1


def test_exec_action_gets_the_event(finished_run, tmp_path):
    out_file = tmp_path / "event.json"
    rule = BadAt([3], id="with_exec",
                 actions=[{"type": "exec", "command": f"cat > {out_file}"}])
    out = ts.watch(finished_run, rules=[rule], timeout_s=30, stream="watch-exec")
    assert out["with_exec"]["status"] == "IssuesFound"
    event = json.loads(out_file.read_text())
    assert event["rule"] == "with_exec" and event["step"] == 3
    assert event["message"] == "bad step 3" and event["status"] == "IssuesFound"


class Titled(BadAt):
    title = "Loss went bad"
    severity = "critical"
    advice = "Lower the learning rate."


def test_report_words_travel_in_the_firing(finished_run):
    out = ts.watch(finished_run, rules=[Titled([4], id="titled")], timeout_s=30,
                   stream="watch-titled")
    assert out["titled"]["status"] == "IssuesFound"
    fired = [e for e in _events(finished_run, "titled") if e["status"] == "IssuesFound"]
    d = fired[0]["details"]
    assert d["title"] == "Loss went bad" and d["severity"] == "critical"
    assert d["advice"] == "Lower the learning rate." and d["stop_worthy"] is True


def test_bad_severity_and_builtin_name_are_config_errors(finished_run):
    class Loud(BadAt):
        severity = "fatal"
    with pytest.raises(ValueError, match="severity 'fatal'"):
        ts.watch(finished_run, rules=[Loud([])], timeout_s=5, stream="watch-bad1")
    with pytest.raises(ValueError, match="built-in rule"):
        ts.watch(finished_run, rules=[BadAt([], name="dead_loss")], timeout_s=5,
                 stream="watch-bad2")


def test_errors_are_counted_and_leave_other_rules_running(finished_run):
    class Broken(ts.Rule):
        def invoke_at_step(self, step):
            if step == 3:
                raise KeyError("no such thing")
            return False
    ok = BadAt([], id="fine")
    out = ts.watch(finished_run, rules=[Broken(), ok], timeout_s=30, stream="watch-broken")
    assert out["Broken"]["status"] == "Error"
    assert "KeyError" in out["Broken"]["message"]
    assert out["Broken"]["evaluations"] == 3  # steps 0..2, then disabled
    assert out["fine"]["status"] == "NoIssuesFound" and ok.seen == list(range(STEPS))


def test_in_process_custom_rule_with_log_action_and_min_consecutive(run_dir, tiny, capfd):
    model, opt, crit, batches = tiny
    rule = BadAt(range(3, 100), id="inproc", min_consecutive=2, actions=["log"])
    with ts.Hook(run_dir, system_monitor_interval_ms=0, rules=[rule]) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        train(hook, model, opt, crit, batches[:8])
    assert not hook.should_stop
    st = ts.open_run(run_dir).rule_statuses()
    assert st["inproc"]["status"] == "IssuesFound"
    fired = [e for e in _events(run_dir, "inproc") if e["status"] == "IssuesFound"]
    assert fired[0]["step"] == 4 and fired[0]["details"]["first_step"] == 3
    assert "rule inproc IssuesFound at step 4" in capfd.readouterr().err
    assert os.path.isdir(run_dir)


def test_rollback_action_is_dispatched_by_the_engine(run_dir, tiny):
    """In-process the engine hands a rollback firing to the hook's take_rollbacks() (the
    Checkpointer's executor), with the first bad step and the action's parameters."""
    model, opt, crit, batches = tiny
    rule = BadAt(range(2, 100), id="rb", min_consecutive=2,
                 actions=[ts.Rollback(lr_factor=0.25, skip_batches=1)])
    with ts.Hook(run_dir, system_monitor_interval_ms=0, rules=[rule]) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        train(hook, model, opt, crit, batches[:6])
    reqs = hook.take_rollbacks()
    assert [(r["rule"], r["firing"], r["step"]) for r in reqs] == [("rb", 1, 3)]
    assert json.loads(reqs[0]["details_json"])["first_step"] == 2
    params = json.loads(reqs[0]["action_json"])
    assert params["lr_factor"] == 0.25 and params["skip_batches"] == 1
    assert hook.take_rollbacks() == []  # taken once

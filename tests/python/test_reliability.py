"""Reliability (issue 17): statuses that never mislead, every recorded name listed, an empty
run that opens, and a NaN loss that stops the loop at the step it appeared."""
import json
import math
import os
import subprocess
import time

import pytest
import torch

import trainscope as ts
from trainscope import _core


def _run_events(run_dir, kind):
    return [e for e in ts.open_run(run_dir).events() if e["kind"] == kind]


# ---- statuses ---------------------------------------------------------------------------------
def test_rule_with_nothing_to_evaluate_ends_no_data(run_dir, tiny):
    model, _, crit, _ = tiny
    with ts.Hook(run_dir, rules=["exploding_tensor", "vanishing_gradient"],
                 system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        # nothing trained: the rules had nothing to evaluate
    st = ts.open_run(run_dir).rule_statuses()
    for rule in ("exploding_tensor", "vanishing_gradient"):
        assert st[rule]["status"] == "NoData", st[rule]
        assert st[rule]["message"].startswith("no data:"), st[rule]


def test_rules_cli_and_report_show_no_data(run_dir, tiny, cli):
    model, _, crit, _ = tiny
    with ts.Hook(run_dir, rules=["exploding_tensor"], system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
    out = subprocess.run([cli, "rules", run_dir], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    final = out.stdout.split("final status:")[1]
    assert "exploding_tensor" in final and "NoData" in final and "NoIssuesFound" not in final
    rep = subprocess.run([cli, "report", run_dir, "--json"], capture_output=True,
                         text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    summary = json.loads(rep.stdout)
    assert summary["rules"]["clean"] == []
    assert [x["rule"] for x in summary["rules"]["no_data"]] == ["exploding_tensor"]


# ---- names ------------------------------------------------------------------------------------
def test_tensor_names_lists_losses_and_scalars(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(run_dir, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        for x, y in batches[:3]:
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        hook.save_scalar("val_acc", 0.5)
    run = ts.open_run(run_dir)
    names = run.tensor_names()
    assert "losses/loss" in names and "scalars/val_acc" in names
    assert any(n.startswith("gradients/") for n in names)
    assert names == sorted(names)
    assert run.tensor_names(collection="losses") == ["losses/loss"]
    assert "losses/loss" not in run.tensor_names(scalars=False)
    assert run.tensor_names(regex="val_") == ["scalars/val_acc"]
    # Every listed name opens as a tensor; a scalar's value at a step is its value.
    steps, values = run.scalar("losses/loss")
    t = run.tensor("losses/loss")
    assert t.steps() == [int(s) for s in steps]
    assert float(t.value(int(steps[1]))) == pytest.approx(values[1])
    assert t.reduction(int(steps[1]), "mean") == pytest.approx(values[1])
    for name in names:
        tn = run.tensor(name)
        assert tn.steps(), name


# ---- an empty run -------------------------------------------------------------------------------
def _empty_run(path):
    _core.create_or_open_run(path, name="", command=["x"], config_json="{}", framework="")
    os.makedirs(os.path.join(path, "worker-0"))
    open(os.path.join(path, "worker-0", "LOCK"), "w").close()


def test_run_with_nothing_recorded_opens_empty(run_dir, cli):
    _empty_run(run_dir)
    run = ts.open_run(run_dir)
    assert run.steps() == [] and run.tensor_names() == [] and run.step_records() == []
    with pytest.raises(ts.NotFoundError):
        run.scalar("losses/loss")
    out = subprocess.run([cli, "verify", run_dir], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert "nothing recorded yet" in out.stdout, out.stdout


# ---- a NaN stops the same step ------------------------------------------------------------------
@pytest.mark.parametrize("rule", ["exploding_tensor", "dead_loss"])
def test_nan_loss_with_stop_training_ends_the_loop_at_that_step(run_dir, tiny, rule):
    model, opt, _, batches = tiny
    crit = torch.nn.MSELoss()
    nan_at = 7
    need = 1 if rule == "exploding_tensor" else 2  # dead_loss: num_steps non-finite in a row
    spec = ts.Rule(rule, actions=["stop_training"], **({"num_steps": 2} if need == 2 else {}))
    stepped = []
    with ts.Hook(run_dir, rules=[spec], system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        for i, (x, _) in enumerate(batches):
            target = torch.zeros(8, 3)
            if i >= nan_at:
                target = torch.full((8, 3), math.nan)
            loss = crit(model(x), target)
            opt.zero_grad()
            loss.backward()
            if hook.should_stop:  # between backward and optimizer.step()
                break
            opt.step()
            stepped.append(i)
    stop_step = nan_at + need - 1
    assert stepped[-1] == stop_step - 1, stepped  # no update with the NaN gradients
    if need == 1:  # dead_loss lets num_steps NaN values through by design
        assert all(torch.isfinite(p).all() for p in model.parameters())
    run = ts.open_run(run_dir)
    fired = [e for e in run.rule_events() if e["rule"] == rule and e["status"] == "IssuesFound"]
    assert fired and fired[0]["step"] == stop_step, fired
    stop = _run_events(run_dir, "stop_requested")
    assert len(stop) == 1 and stop[0]["step"] == stop_step, stop
    assert stop[0]["reason"].startswith(rule + ":"), stop
    nf = _run_events(run_dir, "nonfinite_loss_stop")
    assert nf and nf[0]["rule"] == rule and nf[0]["tensor"] == "losses/loss", nf


def test_nan_without_stop_action_does_not_stop(run_dir, tiny):
    model, opt, _, batches = tiny
    crit = torch.nn.MSELoss()
    with ts.Hook(run_dir, rules=["exploding_tensor"], system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        for i, (x, _) in enumerate(batches[:6]):
            loss = crit(model(x), torch.full((8, 3), math.nan if i == 2 else 0.0))
            loss.backward()
            assert not hook.should_stop
    assert not _run_events(run_dir, "nonfinite_loss_stop")


# ---- in-process rules are woken by writes, not polled ---------------------------------------------
def test_rule_runner_is_woken_by_the_writer(run_dir):
    os.makedirs(run_dir)
    w = _core.Writer(run_dir, "worker-0", flush_interval_ms=1)
    cfg = json.dumps({"rules": [{"name": "exploding_tensor", "actions": ["stop_training"]}]})
    # A poll period of 10 minutes: only the writer's wake-up can make the runner see the record.
    r = _core.RuleRunner(run_dir, cfg, w, streams=["worker-0"], poll_ms=600_000,
                         wake_on_write=True)
    try:
        now = int(time.time() * 1e6)
        w.add_scalar("losses/loss", 0, 0, 0, math.nan)
        w.add_step(0, 0, 0, now, now + 10, -1, -1, -1, -1)
        deadline = time.monotonic() + 30  # bounds the test; the wake takes milliseconds
        while not r.stop_requested() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert r.stop_requested()
        assert r.stop_reason().startswith("exploding_tensor:")
    finally:
        r.stop()
        w.close()


def test_the_committers_commit_evaluates_the_rules_before_it_returns(run_dir):
    """The hook's committer path (Runtime.commit_and_evaluate): the records are written and
    evaluated on the calling thread, so the stop is set when the call returns. The runner polls
    every 10 minutes here and nothing else could have seen the NaN in time."""
    rt = _core.Runtime(run_dir, "worker-0")
    w = rt.writer
    w.staging = True
    w.flush_on_commit = True
    rt.start_rules(json.dumps({"rules": [{"name": "exploding_tensor",
                                          "actions": ["stop_training"]}]}), poll_ms=600_000)
    try:
        for step in range(12):
            now = int(time.time() * 1e6)
            w.add_scalar("losses/loss", step, 0, step, 1.0 if step < 11 else math.nan)
            w.add_step(step, 0, step, now, now + 10, -1, -1, -1, -1)
            if step == 5:
                rt.commit_and_evaluate()
                assert not rt.stop_requested()  # healthy so far
        assert not rt.stop_requested()  # staged, not yet handed over
        rt.commit_and_evaluate()
        assert rt.stop_requested()
        assert rt.stop_source == "rule"
        assert rt.poll_stop(11).startswith("exploding_tensor:")
    finally:
        rt.close()
    steps, values = ts.open_run(run_dir).scalar("losses/loss")
    assert steps.tolist() == list(range(12))  # every record once, in order
    assert math.isnan(values[-1])


# ---- a disk that fills up ---------------------------------------------------------------------------
@pytest.fixture
def small_tmpfs(tmp_path):
    """An 8 MiB tmpfs (root only): a disk that fills up for real."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs",
                                            str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("needs root and tmpfs mounts")
    yield str(mnt)
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_disk_keeps_training_and_the_drop_counts_reach_the_disk(small_tmpfs, capfd):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    run_dir = os.path.join(small_tmpfs, "run")
    x, y = torch.randn(4, 256), torch.randn(4, 8)
    colls = [ts.Collection("weights", raw=True, save_interval=1),  # ~260 KB a step
             ts.Collection("losses", save_interval=1)]
    with ts.Hook(run_dir, collections=colls, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        for _ in range(60):
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert hook.step_count == 60  # the training ran to the end
    err = capfd.readouterr().err
    assert err.count("write error in") == 1, err  # said once
    run = ts.open_run(run_dir)
    stats = run.writer_stats()
    assert stats is not None and stats["records_dropped"] > 0, stats  # on disk, after all
    assert stats["io_errors"] >= 1
    assert run.read_stats()["corrupt_regions"] == 0
    # The losses and step records of every step: the journal kept what the full disk refused.
    steps, _ = run.scalar("losses/loss")
    assert list(steps) == list(range(60))
    assert [r["step"] for r in run.step_records()] == list(range(60))


# ---- YAML rule configs through the CLI ---------------------------------------------------------
def test_yaml_config_errors_name_the_bad_key(tmp_path, cli):
    bad = tmp_path / "rules.yaml"
    bad.write_text("rules:\n  - name: overfit\n    params: {ratio: 0.2}\n")
    out = subprocess.run([cli, "run", "--out", str(tmp_path / "run"), "--config", str(bad),
                          "--quiet", "--", "true"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "unknown parameter 'ratio'" in out.stderr and "ratio_threshold" in out.stderr
    good = tmp_path / "good.yaml"
    good.write_text("rules:\n  - name: exploding_tensor\n    actions: [log]\n")
    out = subprocess.run([cli, "run", "--out", str(tmp_path / "run2"), "--config", str(good),
                          "--quiet", "--", "true"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.stdout, out.stderr)
    st = ts.open_run(str(tmp_path / "run2")).rule_statuses()
    assert st["exploding_tensor"]["status"] == "NoData", st  # `true` records nothing

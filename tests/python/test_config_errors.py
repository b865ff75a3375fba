"""Wrong arguments raise ts.ConfigError where they are given (issue 18, finding 6).

Every bad value of Hook(...), Collection(...), ProfilerConfig(...) and the register_* calls
raises one ts.ConfigError (a ValueError) that names the argument, the value and what is allowed,
whether or not strict=True; nothing silently becomes something else. Registering the same model
twice is a no-op (20 iterations record 20 steps).
"""
import logging
import re

import pytest
import torch

import trainscope as ts
from conftest import train


def _hook(run_dir, **kw):
    kw.setdefault("system_monitor_interval_ms", 0)
    kw.setdefault("out_dir", run_dir)
    return ts.Hook(**kw)


BAD_HOOK_ARGS = [
    ("save_interval", 0), ("save_interval", -1), ("save_interval", "x"),
    ("save_interval", 10 ** 30), ("save_interval", True), ("save_interval", 2.5),
    ("save_interval", None),
    ("system_monitor_interval_ms", -5), ("system_monitor_interval_ms", "500"),
    ("stop_check_interval_ms", -1), ("expected_steps", 0), ("storage_budget_bytes", -1),
    ("max_errors", -1), ("max_errors", 1.5),
    ("device_stats", "gpu"), ("device_stats", None),
    ("raise_on_stop", "yes"), ("record_phases", 1), ("strict", "false"), ("auto_step", None),
    ("worker", 3), ("worker", ""), ("worker", "a/b"), ("run_name", 7),
    ("profiler", {"start_step": 5}), ("writer_options", ["x"]), ("out_dir", 42),
    ("collections", 42), ("collections", [42]), ("collections", ["no_such_collection!"]),
    ("rules", 42), ("rules", ["no_such_rule"]), ("actions", 42), ("actions", [3]),
]


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("arg,value", BAD_HOOK_ARGS)
def test_bad_hook_arguments_raise_config_error(run_dir, arg, value, strict):
    kw = {"strict": strict}
    kw[arg] = value
    with pytest.raises(ts.ConfigError) as e:
        _hook(run_dir, **kw)
    msg = str(e.value)
    assert e.value.argument == arg, msg
    assert arg in msg and "expected" in msg, msg
    assert isinstance(e.value, ValueError)


def test_message_names_argument_value_and_what_is_allowed(run_dir):
    with pytest.raises(ts.ConfigError, match=r"Hook: save_interval=0 is not allowed; "
                                             r"expected an integer >= 1"):
        _hook(run_dir, save_interval=0)
    with pytest.raises(ts.ConfigError, match=r"device_stats='gpu'.*'auto', 'torch', 'core'"):
        _hook(run_dir, device_stats="gpu")
    with pytest.raises(ts.ConfigError, match=r"save_interval=True.*a bool, not a number"):
        _hook(run_dir, save_interval=True)
    with pytest.raises(ts.ConfigError, match=r"no_such_rule"):
        _hook(run_dir, rules="no_such_rule")


def test_good_values_still_accepted(run_dir, tiny):
    import numpy as np
    model, opt, crit, batches = tiny
    hook = _hook(run_dir, save_interval=np.int64(5), rules="exploding_tensor",
                 actions="stop_training", storage_budget_bytes=None,
                 collections="gradients", profiler=ts.ProfilerConfig(start_step=100))
    assert hook.save_interval == 5
    assert [r.name for r in hook._builtin_rules] == ["exploding_tensor"]
    assert hook._actions_spec == ["stop_training"]
    hook.close()


@pytest.mark.parametrize("kw,arg", [
    (dict(include="([unclosed"), "include"), (dict(include=[r"ok", "(["]), "include"),
    (dict(include=42), "include"), (dict(save_interval=0), "save_interval"),
    (dict(save_interval="10"), "save_interval"), (dict(save_interval=10 ** 30), "save_interval"),
    (dict(reductions=["mean"]), "reductions"), (dict(reductions="yes"), "reductions"),
    (dict(raw=1), "raw"), (dict(save_steps=[1, -2]), "save_steps"),
    (dict(save_steps="10"), "save_steps"), (dict(save_steps=5), "save_steps"),
    (dict(start_step=-1), "start_step"), (dict(end_step=3, start_step=5), "end_step"),
    (dict(modes=["training"]), "modes"), (dict(modes="TRAIN"), "modes"),
    (dict(histogram_buckets=-1), "histogram_buckets"),
    (dict(histogram_buckets=1 << 21), "histogram_buckets"),
])
def test_bad_collection_arguments(kw, arg):
    with pytest.raises(ts.ConfigError) as e:
        ts.Collection("gradients", **kw)
    assert e.value.argument == arg, str(e.value)
    assert not isinstance(e.value.__cause__, re.error) or "regular expression" in str(e.value)


@pytest.mark.parametrize("name", ["", "a/b", None, 3])
def test_bad_collection_name(name):
    with pytest.raises(ts.ConfigError) as e:
        ts.Collection(name)
    assert e.value.argument == "name"


def test_bad_regex_is_config_error_not_re_error():
    with pytest.raises(ts.ConfigError, match=r"include='\(\[unclosed'.*regular expression"):
        ts.Collection("weights", include="([unclosed")


@pytest.mark.parametrize("kw,arg", [
    (dict(start_step=-1), "start_step"), (dict(num_steps=0), "num_steps"),
    (dict(num_steps="3"), "num_steps"), (dict(top_functions=-1), "top_functions"),
    (dict(torch_profiler="no"), "torch_profiler"), (dict(record_shapes=None), "record_shapes"),
])
def test_bad_profiler_arguments(kw, arg):
    with pytest.raises(ts.ConfigError) as e:
        ts.ProfilerConfig(**kw)
    assert e.value.argument == arg


@pytest.mark.parametrize("strict", [False, True])
def test_register_calls_check_what_they_are_given(run_dir, tiny, strict):
    model, opt, crit, _ = tiny
    hook = _hook(run_dir, strict=strict)
    try:
        with pytest.raises(ts.ConfigError, match=r"register_loss: criterion=42.*callable"):
            hook.register_loss(42)
        with pytest.raises(ts.ConfigError, match=r"name"):
            hook.register_loss(crit, name="")
        with pytest.raises(ts.ConfigError, match=r"name"):
            hook.register_loss(crit, name=5)
        with pytest.raises(ts.ConfigError, match=r"register_module: module=.*torch.nn.Module"):
            hook.register_module(lambda x: x)
        with pytest.raises(ts.ConfigError, match=r"register_optimizer: optimizer="):
            hook.register_optimizer(model)
        with pytest.raises(ts.ConfigError, match=r"register_optimizer: optimizer="):
            hook.register_optimizer(42)
        with pytest.raises(ts.ConfigError, match=r"register_scaler: scaler="):
            hook.register_scaler(opt)
        hook.register_module(model)
        other = torch.nn.Linear(2, 2)
        with pytest.raises(ts.ConfigError, match=r"already registered"):
            hook.register_module(other)
    finally:
        hook.close()


def test_register_module_twice_counts_each_step_once(run_dir, tiny, caplog):
    model, opt, crit, batches = tiny
    with caplog.at_level(logging.INFO, logger="trainscope"):
        with _hook(run_dir, save_interval=5) as hook:
            hook.register_module(model)
            hook.register_module(model)
            hook.register_module(model)
            crit = hook.register_loss(crit)
            hook.register_optimizer(opt)
            hook.register_optimizer(opt)
            train(hook, model, opt, crit, batches, steps=20)
    assert sum("already registered" in r.getMessage() for r in caplog.records) == 1
    run = ts.open_run(run_dir)
    steps, losses = run.scalar("losses/loss")
    assert list(steps) == list(range(20))
    assert len(run.step_records()) == 20


def test_watch_takes_one_rule_name_alone(run_dir, tiny):
    model, opt, crit, batches = tiny
    with _hook(run_dir, save_interval=5) as hook:
        hook.register_module(model)
        crit = hook.register_loss(crit)
        train(hook, model, opt, crit, batches, steps=10)
    statuses = ts.watch(run_dir, rules="loss_not_decreasing", timeout_s=60)
    assert list(statuses) == ["loss_not_decreasing"], statuses


# ---- issue 28 item 3: nothing accepted silently, the same message everywhere -----------------

def test_actions_without_rules_is_an_error(run_dir):
    # A typo or a forgotten rules= turned auto-stop off without a word.
    with pytest.raises(ts.ConfigError, match=r"actions apply to the rules given with them"):
        _hook(run_dir, actions=["stop_training"])


def test_a_misspelt_action_gets_the_nearest_name(run_dir):
    with pytest.raises(ts.ConfigError) as e:
        _hook(run_dir, rules=["exploding_tensor"], actions=["stop_trainin"])
    assert "unknown action 'stop_trainin'; did you mean 'stop_training'?" in str(e.value)
    with pytest.raises(ts.ConfigError, match="did you mean 'stop_training'"):
        _hook(run_dir, actions=["stop_trainin"])  # also without rules: the name first
    with pytest.raises(ValueError, match="did you mean 'stop_training'"):
        ts.watch(run_dir, rules=["dead_loss"], actions=["stop_trainin"], timeout_s=1)


def test_a_misspelt_rule_has_the_cores_message(run_dir):
    with pytest.raises(ts.ConfigError) as e:
        _hook(run_dir, rules=["exploding_tensr"])
    assert "unknown rule 'exploding_tensr'; did you mean 'exploding_tensor'?" in str(e.value)


def test_a_boolean_parameter_takes_only_true_or_false(run_dir):
    with pytest.raises(ValueError, match=r"parameter 'only_nan' must be true or false, "
                                         r"got \"yes\" \(a string\)"):
        _hook(run_dir, rules=[ts.Rule("exploding_tensor", only_nan="yes")])
    hook = _hook(run_dir, rules=[ts.Rule("exploding_tensor", only_nan=True)])
    hook.close()


def _bad_values(p):
    """Wrong values for one parameter of `_core.rule_types()`, as Python objects."""
    t = p["type"]
    if t in ("float", "int"):
        bad = ["5", True, "yes", float("nan"), [1], {}]
        if not p.get("negative_ok"):
            bad.append(-1)
        if t == "int":
            bad.append(2.5)
        if p["default"] is not None:
            bad.append(None)
    elif t == "bool":
        bad = ["yes", "true", 1, 0, "on", [True]]
        if p["default"] is not None:
            bad.append(None)
    else:  # str, regex
        bad = [5, True, {}]
        if t == "regex":
            bad.append("(unclosed")
    return bad


def _rule_cases():
    from trainscope import _core
    if not getattr(_core, "HAVE_RULES", False):
        return []
    return [(r["name"], p["name"], v) for r in _core.rule_types() for p in r["params"]
            for v in _bad_values(p)]


def test_every_parameter_of_every_rule_refuses_wrong_types_in_python_and_the_cli(
        run_dir, tmp_path):
    """Each wrong value goes through the Python API (ts.Rule -> the rules the hook and ts.watch
    validate) and through a config file read by `trainscope watch --config`: both refuse it
    with the same words, naming the rule and the parameter."""
    import json
    import os
    import subprocess
    from trainscope.rules import split_rules, _param_value
    cases = _rule_cases()
    if not cases:
        pytest.skip("built without the rules layer")
    cli = os.environ.get("TRAINSCOPE_BIN")
    assert len(cases) > 400
    missing = tmp_path / "no-run"
    for rule, param, value in cases:
        with pytest.raises(ValueError) as e:
            split_rules([ts.Rule(rule, **{param: value})], None)
        py_msg = str(e.value)
        expect = f"rule {rule}: parameter '{param}' must be"
        assert expect in py_msg, (rule, param, value, py_msg)
        if not cli:
            continue
        cfg = tmp_path / "rules.json"
        cfg.write_text(json.dumps({"rules": [{"name": rule,
                                              "params": {param: _param_value(value)}}]}))
        p = subprocess.run([cli, "watch", str(missing), "--config", str(cfg)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (rule, param, value, p.stderr)
        first = p.stderr.splitlines()[0]
        assert first == f"trainscope: error: {cfg}: {py_msg}", (first, py_msg)

"""One grammar for every `trainscope` command (docs/cli.md): the same exit code for the same
mistake, the error first ("trainscope: error: ...") and one line of usage after it, the nearest
name for a typo, checked option values, `version`, and `trainscope stop`."""
import json
import os
import subprocess

import pytest

import trainscope as ts

from conftest import train

# Every command with how to call it on a run directory RUN (the placeholder).
RUN_COMMANDS = {
    "report": ["report", "RUN", "--no-history"],
    "show": ["show", "RUN"],
    "export": ["export", "csv", "RUN", "OUT"],
    "rules": ["rules", "RUN"],
    "inspect": ["inspect", "RUN"],
    "verify": ["verify", "RUN"],
    "watch": ["watch", "RUN", "--wait-s", "0"],
    "stacks": ["stacks", "RUN"],
    "stop": ["stop", "RUN"],
    "notify": ["notify", "--flush", "RUN"],
    "compare": ["compare", "RUN", "RUN"],
}
ALL_COMMANDS = sorted(RUN_COMMANDS) + ["ls", "serve", "run"]


def _run(cli, *args, env_home=None, timeout=60):
    env = dict(os.environ)
    if env_home is not None:
        env["TRAINSCOPE_HOME"] = str(env_home)
    return subprocess.run([cli, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _args(name, run, out="out"):
    return [str(run) if a == "RUN" else str(out) if a == "OUT" else a for a in RUN_COMMANDS[name]]


@pytest.mark.parametrize("name", sorted(RUN_COMMANDS))
def test_a_missing_run_is_exit_3_for_every_command(cli, tmp_path, name):
    # It was 1 for report/show/export and 2 for rules/inspect/verify/watch.
    p = _run(cli, *_args(name, tmp_path / "no" / "such-run", tmp_path / "o"), env_home=tmp_path)
    assert p.returncode == 3, (name, p.returncode, p.stderr)
    assert p.stderr.startswith("trainscope: error: "), p.stderr
    assert "such-run" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("name", ALL_COMMANDS)
def test_an_unknown_option_is_the_error_then_one_usage_line(cli, tmp_path, name):
    args = _args(name, tmp_path) if name in RUN_COMMANDS else [name]
    if name == "run":
        args = ["run", "--bogus", "--", "true"]
    else:
        args.append("--bogus")
    p = _run(cli, *args, env_home=tmp_path)
    assert p.returncode == 2, (name, p.stderr)
    lines = p.stderr.splitlines()
    assert lines[0] == "trainscope: error: unknown option --bogus", lines
    assert len(lines) == 2 and lines[1].startswith(f"usage: trainscope {name}"), lines


def test_typed_names_get_the_nearest_one(cli, tmp_path):
    p = _run(cli, "stp", "RUN")
    assert p.returncode == 2
    assert p.stderr.splitlines()[0] == \
        "trainscope: error: unknown command 'stp'; did you mean 'stop'?"
    p = _run(cli, "run", "--rule", "exploding_tensor", "--", "true")
    assert p.returncode == 2
    assert p.stderr.splitlines()[0] == \
        "trainscope: error: unknown option --rule; did you mean '--rules'?"
    assert len(p.stderr.splitlines()) == 2  # not 30 lines of usage with the error last
    p = _run(cli, "run", "--rules", "exploding_tensr", "--", "true")
    assert p.returncode == 2
    assert "unknown rule 'exploding_tensr'; did you mean 'exploding_tensor'?" in p.stderr
    assert "all_zero" not in p.stderr  # not the list of all 27 rules
    p = _run(cli, "run", "--rules", "dead_loss", "--actions", "stop_trainin", "--", "true")
    assert p.returncode == 2
    assert "unknown action 'stop_trainin'; did you mean 'stop_training'?" in p.stderr
    p = _run(cli, "help", "inpsect")
    assert p.returncode == 2 and "did you mean 'inspect'?" in p.stderr
    p = _run(cli, "export", "tensorbord", tmp_path, tmp_path / "o")
    assert p.returncode == 2 and "did you mean 'tensorboard'?" in p.stderr


def test_version_has_one_source(cli):
    outs = {_run(cli, a).stdout for a in ("version", "--version", "-V")}
    assert outs == {f"trainscope {ts.__version__}\n"}, outs


@pytest.mark.parametrize("args, says", [
    (["--term-after-s", "abc"], "--term-after-s needs a finite number"),
    (["--term-after-s", "nan"], "got 'nan'"),
    (["--term-after-s", "inf"], "got 'inf'"),
    (["--term-after-s", "0"], "(0, 86400]"),
    (["--kill-after-s", "-1"], "--kill-after-s"),
    (["--interval-ms", "5"], "--interval-ms needs an integer in [100, 60000]"),
    (["--interval-ms", "1e3"], "got '1e3'"),
    (["--metrics-port", "70000"], "--metrics-port needs an integer in [0, 65535]"),
    (["--out"], "--out needs a value"),
    (["--out", "a", "--out", "b"], "--out is given twice"),
    (["--quiet=yes"], "--quiet takes no value"),
    (["--actions", "stop_training"], "--actions applies to the rules given with --rules"),
])
def test_run_option_values_are_usage_errors(cli, args, says):
    # --term-after-s abc was "error: stod" with exit 1; nan was accepted (no SIGTERM, ever).
    p = _run(cli, "run", *args, "--", "true")
    assert p.returncode == 2, (args, p.returncode, p.stderr)
    assert p.stderr.startswith("trainscope: error: ") and says in p.stderr, p.stderr


@pytest.mark.parametrize("args", [
    ["watch", "RUN", "--poll-ms", "0"], ["watch", "RUN", "--wait-s", "nan"],
    ["stacks", "RUN", "--wait-s", "-1"], ["serve", "--port", "http"],
    ["ls", "--limit", "ten"], ["report", "RUN", "--price-per-hour", "inf"],
])
def test_other_option_values_are_usage_errors(cli, tmp_path, args):
    p = _run(cli, *[str(tmp_path) if a == "RUN" else a for a in args], env_home=tmp_path)
    assert p.returncode == 2, (args, p.stderr)
    assert p.stderr.startswith("trainscope: error: "), p.stderr


def _small_run(run_dir, tiny, rules=None):
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, save_interval=1, rules=rules)
    hook.register_module(model)
    hook.register_optimizer(opt)
    hook.register_loss(crit)
    train(hook, model, opt, crit, batches, steps=5)
    return hook


def test_rules_with_a_misspelt_rule_is_a_usage_error(cli, run_dir, tiny, tmp_path):
    _small_run(run_dir, tiny, rules=["loss_not_decreasing"]).close()
    p = _run(cli, "rules", run_dir, "--rule", "loss_not_decresing")
    assert p.returncode == 2, p.stdout + p.stderr  # was "no rule events", exit 0
    assert "did you mean 'loss_not_decreasing'?" in p.stderr
    ok = _run(cli, "rules", run_dir, "--rule", "loss_not_decreasing")
    assert ok.returncode == 0, ok.stderr
    # a built-in rule that did not run in this run is not a typo
    none = _run(cli, "rules", run_dir, "--rule", "dead_relu")
    assert none.returncode == 0 and "no 'dead_relu' events" in none.stdout


def test_show_of_a_path_says_what_it_is(cli, tmp_path):
    (tmp_path / "not-a-run").mkdir()
    p = _run(cli, "show", tmp_path / "not-a-run", env_home=tmp_path)
    assert p.returncode == 3
    assert "is a directory but not a run" in p.stderr, p.stderr
    p = _run(cli, "show", tmp_path / "gone", env_home=tmp_path)
    assert p.returncode == 3 and "no run directory" in p.stderr, p.stderr


def test_stop_asks_the_running_job_and_says_when_there_is_none(cli, run_dir, tiny):
    hook = _small_run(run_dir, tiny)
    try:
        assert not hook.should_stop
        p = _run(cli, "stop", run_dir, "--reason", "enough for today")
        assert p.returncode == 0, p.stderr
        assert "asked the training" in p.stdout and "worker-0" in p.stdout
        with open(os.path.join(run_dir, "control", "stop.json")) as f:
            req = json.load(f)
        assert req["reason"] == "enough for today" and req["requested_by"] == "trainscope stop"
        import time
        deadline = time.monotonic() + 30
        while not hook.should_stop and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hook.should_stop and hook.stop_reason == "enough for today"
    finally:
        hook.close()
    # the job has ended: nothing to stop
    p = _run(cli, "stop", run_dir)
    assert p.returncode == 6, p.stderr
    assert p.stderr.startswith("trainscope: error: no running job in "), p.stderr
    assert _run(cli, "stop", run_dir, "--reason", "").returncode == 2

"""Quiet by default (#28 item 6): one line per event that matters on stderr, --quiet and
TRAINSCOPE_LOG_LEVEL for the rest. A multi-rank stop says one line: test_distributed.py."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.abspath(os.path.join(HERE, "..", "..", "python"))

NAN = os.path.join(HERE, "scripts", "nan_loss.py")


def _run(cli, tmp_path, *extra, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    for k in ("TRAINSCOPE_RUN_DIR", "TRAINSCOPE_MONITORED", "RANK", "TRAINSCOPE_LOG_LEVEL"):
        if not (env_extra and k in env_extra):
            env.pop(k, None)
    out = tmp_path / ("run" + str(len(list(tmp_path.iterdir()))))
    p = subprocess.run([cli, "run", "--out", str(out), "--rules", "exploding_tensor",
                        "--actions", "stop_training", *extra, "--", sys.executable, NAN],
                       capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 76, p.stderr
    return [ln for ln in p.stderr.splitlines() if ln.startswith("trainscope")]


def test_a_nan_stop_under_trainscope_run_says_three_lines(tmp_path, cli):
    lines = _run(cli, tmp_path)
    assert len(lines) == 3, lines
    assert sum("capturing model" in ln for ln in lines) == 1, lines
    assert sum("stopping the training at step 30" in ln for ln in lines) == 1, lines
    assert "run recorded in" in lines[-1] and "stopped by rule exploding_tensor" in lines[-1]


def test_quiet_keeps_only_the_stop_and_log_level_shows_more(tmp_path, cli):
    quiet = _run(cli, tmp_path, "--quiet")
    assert len(quiet) == 1 and "stopping the training at step 30" in quiet[0], quiet
    loud = _run(cli, tmp_path, env_extra={"TRAINSCOPE_LOG_LEVEL": "info"})
    assert any("stop requested" in ln for ln in loud), loud  # said at info level only


def test_other_ranks_are_quiet_unless_asked():
    code = ("import logging, trainscope; lg = logging.getLogger('trainscope'); "
            "print(lg.getEffectiveLevel())")
    for extra, want in (({"RANK": "1"}, logging_level("ERROR")),
                        ({"RANK": "0"}, logging_level("WARNING")),
                        ({"RANK": "1", "TRAINSCOPE_LOG_LEVEL": "warning"},
                         logging_level("WARNING"))):
        e = dict(os.environ, **extra)
        if "TRAINSCOPE_LOG_LEVEL" not in extra:
            e.pop("TRAINSCOPE_LOG_LEVEL", None)
        e["PYTHONPATH"] = PYTHON_DIR + os.pathsep + e.get("PYTHONPATH", "")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, env=e)
        assert p.returncode == 0, p.stderr
        assert int(p.stdout.strip()) == want, (extra, p.stdout)


def logging_level(name):
    import logging
    return getattr(logging, name)

"""PyTorch's flight recorder for the ranks of a job (python/trainscope/_flight_recorder.py,
tools/cli/flight_recorder.cc): the environment a job's ranks get, values the user set kept,
nothing changed where NCCL cannot be used, and dumps in the run listed by `trainscope stacks`.
Real dumps come from a gloo job in test_distributed.py's hang test (torch 2.13 records gloo
collectives too); a NCCL job has not been tried (no GPU here)."""
import json
import os
import subprocess
import sys

import pytest

from trainscope import _flight_recorder as fr

VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
PRINT_ENV = ("import json, os, sys; json.dump({k: v for k, v in os.environ.items() "
             "if k.startswith('TORCH_')}, open(sys.argv[1], 'w'))")


def _child_env(cli, tmp_path, name, **env):
    run = tmp_path / name
    e = {k: v for k, v in os.environ.items() if k not in VARS and k != fr.SWITCH}
    e.update(env)
    out = tmp_path / f"{name}.json"
    p = subprocess.run([cli, "run", "--out", str(run), "--quiet", "--no-instrument", "--",
                        sys.executable, "-c", PRINT_ENV, str(out)], env=e, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return run, json.load(open(out))


def test_trainscope_run_gives_the_ranks_the_flight_recorder_settings(cli, tmp_path):
    run, got = _child_env(cli, tmp_path, "on", TRAINSCOPE_FLIGHT_RECORDER="1")
    prefix = os.path.join(str(run.resolve()), "flight_recorder", "rank_")
    assert got == {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
                   "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_FR_DUMP_TEMP_FILE": prefix,
                   "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix}, got
    assert (run / "flight_recorder").is_dir()
    # what the user set stays as it is (either of torch's spellings counts)
    _, got = _child_env(cli, tmp_path, "user", TRAINSCOPE_FLIGHT_RECORDER="1",
                        TORCH_NCCL_TRACE_BUFFER_SIZE="7", TORCH_NCCL_DUMP_ON_TIMEOUT="0",
                        TORCH_NCCL_DEBUG_INFO_TEMP_FILE="/elsewhere/fr_")
    assert got == {"TORCH_NCCL_TRACE_BUFFER_SIZE": "7", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0",
                   "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/elsewhere/fr_"}, got
    run, got = _child_env(cli, tmp_path, "off", TRAINSCOPE_FLIGHT_RECORDER="0")
    assert got == {} and not (run / "flight_recorder").exists()
    if not os.path.exists("/proc/driver/nvidia/version"):  # no NCCL here: nothing changes
        run, got = _child_env(cli, tmp_path, "auto")
        assert got == {} and not (run / "flight_recorder").exists()


def test_hook_settings_respect_the_user_and_need_nccl(tmp_path, monkeypatch):
    env = {"TORCH_FR_BUFFER_SIZE": "50"}
    new = fr.settings(str(tmp_path), env)
    assert "TORCH_FR_BUFFER_SIZE" not in new and "TORCH_NCCL_TRACE_BUFFER_SIZE" not in new
    assert new["TORCH_FR_DUMP_TEMP_FILE"] == os.path.join(str(tmp_path), "flight_recorder",
                                                          "rank_")
    assert fr.configure(str(tmp_path), {fr.SWITCH: "0"}) == {}
    import torch
    if not torch.cuda.is_available():  # this machine: no NCCL, nothing is set
        env = {}
        assert fr.configure(str(tmp_path), env) == {} and env == {}
    env = {fr.SWITCH: "1"}
    new = fr.configure(str(tmp_path / "run"), env)
    assert set(new) == set(VARS) and all(env[k] == v for k, v in new.items())
    assert (tmp_path / "run" / "flight_recorder").is_dir()
    # no process group: nothing to dump
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "10")
    assert fr.dump(str(tmp_path), "req") is None


def test_stacks_lists_flight_recorder_dumps(cli, tmp_path):
    run = tmp_path / "run"
    (run / "flight_recorder" / "123-host-9").mkdir(parents=True)
    (run / "flight_recorder" / "123-host-9" / "rank_1").write_bytes(b"x" * 10)
    (run / "flight_recorder" / "123-host-9" / ".rank_0.tmp").write_bytes(b"partial")
    (run / "flight_recorder" / "rank_0").write_bytes(b"y" * 3)    # torch's own, on a timeout
    p = subprocess.run([cli, "stacks", str(run)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 3, p  # no stacks (not found), but the dumps are listed
    lines = [l.strip() for l in p.stdout.splitlines()]
    assert "flight_recorder/123-host-9/rank_1 (10 bytes)" in lines, p.stdout
    assert "flight_recorder/rank_0 (3 bytes)" in lines, p.stdout
    assert ".rank_0.tmp" not in p.stdout

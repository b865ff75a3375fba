"""A run or checkpoint location that is a URL trainscope does not write (gs://, file:..., an
s3:// URL without a bucket) is one clear error, never a local folder named after it (#26:
`ts.Hook(out_dir="s3://bucket/run1")` used to write `s3:/bucket/run1`; s3://bucket/prefix itself
is a run location now: tests/python/test_s3.py)."""
import os
import subprocess
import sys

import pytest

import trainscope as ts


@pytest.mark.parametrize("url", ["s3:///run1", "s3a://bucket/run1", "gs://b/run",
                                 "hdfs://nn/run", "file:///tmp/run"])
def test_hook_and_checkpointer_refuse_urls_and_make_nothing(tmp_path, monkeypatch, tiny, url):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRAINSCOPE_RUN_DIR", raising=False)
    with pytest.raises(ts.ConfigError) as e:
        ts.Hook(out_dir=url)
    assert url in str(e.value)
    if url.startswith("s3://"):
        assert "bucket name is empty" in str(e.value)
    model, opt, _, _ = tiny
    with pytest.raises(ts.ConfigError):
        ts.Checkpointer(url, model, opt, handle_preemption=False)
    assert os.listdir(tmp_path) == []  # no "s3:" folder


def test_checkpoints_in_a_bucket_are_refused_until_supported(tmp_path, monkeypatch, tiny):
    monkeypatch.chdir(tmp_path)
    model, opt, _, _ = tiny
    with pytest.raises(ts.ConfigError) as e:
        ts.Checkpointer("s3://bucket/ckpts", model, opt, handle_preemption=False)
    assert "s3://bucket/ckpts" in str(e.value) and "not supported yet" in str(e.value)
    assert os.listdir(tmp_path) == []


def test_cli_run_and_readers_refuse_urls(tmp_path, cli):
    for cmd in (["run", "--out", "s3:///run1", "--", sys.executable, "-c", "pass"],
                ["inspect", "s3a://bucket/run1"], ["verify", "gs://b/r"],
                ["report", "s3:///run1"]):
        p = subprocess.run([cli, *cmd], capture_output=True, text=True, timeout=60,
                           cwd=str(tmp_path))
        assert p.returncode != 0, (cmd, p.stdout, p.stderr)
        assert "://" in p.stderr and ("not supported" in p.stderr or "s3://bucket/prefix" in
                                      p.stderr or "bucket name is empty" in p.stderr), (cmd,
                                                                                       p.stderr)
    assert os.listdir(tmp_path) == []


def test_a_colon_that_is_not_a_url_is_a_path(tmp_path, tiny, monkeypatch):
    monkeypatch.delenv("TRAINSCOPE_RUN_DIR", raising=False)
    model, opt, crit, batches = tiny
    d = tmp_path / "run:1"
    with ts.Hook(out_dir=str(d), system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        for x, y in batches[:3]:
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert ts.open_run(str(d)).workers() == ["worker-0"]

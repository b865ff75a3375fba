"""`trainscope serve` over 10,000 ended runs: /metrics and /api/runs stay bounded in memory.

One real training (ts.Hook with a rule that fires, a system monitor, 60 steps) is the template;
10,000 runs are made from it (their own run.json, copies of its segment files).
The server answers /api/runs with every run and /metrics with every run's summary families; its
resident memory after eight rounds of both stays under a bound and does not grow in the last four
rounds beyond what the first four reached. Numbers: docs/performance.md ("Serving many runs").
"""
import http.client
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import torch

import trainscope as ts
from conftest import cli_path

RUNS = 10_000
ROUNDS = 8
# The server's resident memory after the rounds (today's code: 640 MiB after the first request,
# 1.6 GiB after eight).
RSS_BOUND_MB = 256


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def make_template(path):
    """60 steps whose loss turns NaN at step 40: exploding_tensor fires (no action)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    hook = ts.Hook(out_dir=str(path), rules=["exploding_tensor"], system_monitor_interval_ms=50)
    hook.register_module(model)
    hook.register_loss(crit)
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    for step in range(60):
        loss = crit(model(x), y if step < 40 else y * float("nan"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.005)
    hook.close()


def clone_runs(template, root, n):
    manifest = json.loads((template / "run.json").read_text())
    for i in range(n):
        d = root / f"run-{i:05d}"
        d.mkdir()
        m = dict(manifest, id=f"{manifest.get('id', 'run')}-{i}", name=f"run-{i:05d}")
        (d / "run.json").write_text(json.dumps(m))
        for sub in template.iterdir():
            if sub.is_dir():
                (d / sub.name).mkdir()
                for f in sub.iterdir():
                    if f.is_file():
                        shutil.copyfile(f, d / sub.name / f.name)


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory):
    # In memory where there is a tmpfs: removing 50,000 small files from this machine's disk
    # takes minutes, from a tmpfs a second (the runs take about 120 MB).
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 1 << 30:
        base = pathlib.Path(tempfile.mkdtemp(prefix="trainscope-many-", dir=shm))
    else:
        base = tmp_path_factory.mktemp("many")
    template = base / "template"
    make_template(template)
    root = base / "runs"
    root.mkdir()
    clone_runs(template, root, RUNS)
    yield root
    shutil.rmtree(base, ignore_errors=True)


def test_serving_ten_thousand_runs_is_bounded_in_memory(many_runs):
    cli = cli_path()
    port = free_port()
    proc = subprocess.Popen([cli, "serve", str(many_runs), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if get(port, "/healthz", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            assert proc.poll() is None, proc.stdout.read().decode()
            time.sleep(0.1)

        rss, sizes, first_s = [], [], None
        for round_ in range(ROUNDS):
            t0 = time.monotonic()
            status, body = get(port, "/api/runs")
            assert status == 200
            if round_ == 0:
                first_s = time.monotonic() - t0
                runs = json.loads(body)["runs"]
                assert len(runs) == RUNS
                assert {r["status"] for r in runs} == {"ended"}
                assert all(r["last_step"] >= 50 for r in runs)
                assert all(r["rules_with_issues"] == 1 for r in runs), runs[0]
            status, body = get(port, "/metrics")
            assert status == 200
            text = body.decode()
            sizes.append(len(body))
            if round_ == 0:
                lines = text.splitlines()
                assert sum(1 for l in lines if l.startswith("trainscope_run_live{")) == RUNS
                assert sum(1 for l in lines
                           if l.startswith("trainscope_rule_issues_found{") and l.endswith(" 1")) \
                    == RUNS
                assert text.count("# TYPE trainscope_steps_total ") == 1
                assert "trainscope_scalar{" not in text  # ended runs: summary families only
            rss.append(rss_mb(proc.pid))
        print(f"\n{RUNS} runs: first /api/runs {first_s:.1f} s; /metrics {sizes[0] / 1e6:.1f} MB; "
              f"server RSS after each round (MB): {[round(r) for r in rss]}")
        assert max(rss) < RSS_BOUND_MB, rss
        # flat: the last rounds hold no more than the first ones did (allocator arenas of the
        # server's threads fill during the first rounds)
        assert max(rss[4:]) <= max(rss[:4]) * 1.10 + 8, rss
        assert len(set(sizes)) == 1  # nothing changed: the same answer every time
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

"""A real Prometheus scrapes `trainscope serve` /metrics while a training writes a run.

Starts tests/tools/live_writer (a stand-in training), `trainscope serve` with a token on a free
loopback port, and Debian's `prometheus` with a temporary config (scrape_interval 1s, bearer
token) and TSDB directory; then polls Prometheus's HTTP query API until the step-time series
shows up. Everything started here is stopped by PID. Also checks the serve CLI's bind policy,
and `trainscope run --metrics-port` when that command exists.
"""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from conftest import cli_path as _bin, live_writer_path as _live_writer


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(fn, timeout, what):
    """Calls fn() until it returns something truthy; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (OSError, ValueError) as e:  # not up yet
            last = e
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}: {last!r}")


def http_get(url, token=None, timeout=5):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


class Procs:
    def __init__(self):
        self.procs = []

    def start(self, args, **kw):
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@pytest.fixture
def procs():
    p = Procs()
    yield p
    p.stop_all()


def query(prom_port, expr):
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    _, body = http_get(url)
    doc = json.loads(body)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def start_prometheus(procs, tmp_path, target_port, token):
    if not shutil.which("prometheus"):
        pytest.skip("Debian prometheus is not installed")
    prom_port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: trainscope
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials: {token}
    static_configs:
      - targets: ['127.0.0.1:{target_port}']
""")
    (tmp_path / "tsdb").mkdir()
    procs.start(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"])
    poll(lambda: http_get(f"http://127.0.0.1:{prom_port}/-/ready")[0] == 200, 60, "prometheus ready")
    return prom_port


def test_prometheus_scrapes_serve_during_training(procs, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    writer = procs.start([_live_writer(), str(runs / "job1"), "--steps", "0", "--step-ms", "100",
                          "--fault-step", "5", "--max-seconds", "240"])
    poll(lambda: (runs / "job1" / "run.json").exists(), 30, "the run to appear")
    port, token = free_port(), "prom-token-123"
    serve = procs.start([_bin(), "serve", str(runs), "--port", str(port), "--token", token])
    poll(lambda: http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200, 30, "trainscope serve")
    # Without the token /metrics is refused; with it we get the exposition format.
    with pytest.raises(urllib.error.HTTPError) as e:
        http_get(f"http://127.0.0.1:{port}/metrics")
    assert e.value.code == 401
    _, text = http_get(f"http://127.0.0.1:{port}/metrics", token)
    assert "# TYPE trainscope_step_time_seconds summary" in text

    prom = start_prometheus(procs, tmp_path, port, token)
    series = poll(lambda: query(prom, 'trainscope_step_time_seconds{quantile="0.5",run="job1"}'),
                  90, "the step-time series in Prometheus")
    labels = series[0]["metric"]
    assert labels["worker"] == "worker-0" and labels["mode"] == "TRAIN"
    assert 0.05 < float(series[0]["value"][1]) < 5.0  # live_writer sleeps 100 ms per step
    # Steps keep coming: the counter grows between scrapes.
    first = float(query(prom, 'trainscope_steps_total{run="job1"}')[0]["value"][1])
    poll(lambda: float(query(prom, 'trainscope_steps_total{run="job1"}')[0]["value"][1]) > first,
         30, "steps_total to grow")
    rule = poll(lambda: query(prom, 'trainscope_rule_status{run="job1",rule="loss_not_decreasing"} == 2'),
                30, "the rule status gauge to show IssuesFound")
    assert rule
    assert query(prom, 'trainscope_gpu_util{run="job1",gpu="0"}')
    assert query(prom, 'up{job="trainscope"} == 1')
    assert writer.poll() is None and serve.poll() is None


def test_serve_refuses_public_bind_without_token(tmp_path):
    r = subprocess.run([_bin(), "serve", str(tmp_path), "--host", "0.0.0.0", "--port", "0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "token" in r.stderr


def test_run_metrics_port_when_available(procs, tmp_path):
    r = subprocess.run([_bin(), "help", "run"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or "--metrics-port" not in r.stdout:
        pytest.skip("`trainscope run --metrics-port` is not available in this build yet")
    port, token = free_port(), "run-token"
    run_dir = tmp_path / "run"
    env = dict(os.environ, TRAINSCOPE_TOKEN=token)
    procs.start([_bin(), "run", "--out", str(run_dir), "--metrics-port", str(port), "--",
                 _live_writer(), str(run_dir), "--steps", "0", "--step-ms", "100",
                 "--max-seconds", "120"], env=env)
    poll(lambda: http_get(f"http://127.0.0.1:{port}/metrics", token)[0] == 200, 60,
         "trainscope run --metrics-port")
    prom = start_prometheus(procs, tmp_path, port, token)
    poll(lambda: query(prom, 'trainscope_step_time_seconds{quantile="0.5"}'), 90,
         "the step-time series from trainscope run")

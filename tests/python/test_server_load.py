"""`trainscope serve` under a slowloris load: 64 slow clients plus 64 fast ones on loopback.

The slow clients connect without a token and send one byte of a request head every 2 s (and
connect again whenever the server drops them, as an attacker would); the fast clients ask for
/api/runs and /metrics with the token, one request after the other, each on a new connection.
Every fast request must be answered 200: no 503, no timeout, no reset. The load lasts 30 s, three
of the server's 10 s request deadlines, so every slow connection has been cut by the deadline or
given up its slot at least once while the fast ones kept being served. Then SIGTERM, with slow
clients still connected, must stop the server (exit 0). Everything is bounded in time and the
server is stopped by PID.
"""
import http.client
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import cli_path as _bin, live_writer_path as _live_writer

SLOW, FAST = 64, 64
LOAD_S = 30.0
SLOW_BYTE_EVERY_S = 2.0
TOKEN = "load-test-token-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if fn():
                return
        except OSError as e:  # not listening yet
            last = e
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}: {last!r}")


def get(port, path, token=TOKEN, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


class SlowClient(threading.Thread):
    """Dribbles a request head that never ends; reconnects when the server closes it."""

    HEAD = b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "

    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.port, self.stop = port, stop
        self.connections = 0
        self.dropped = 0  # connections the server ended (deadline or slot given up)
        self.sock = None

    def run(self):
        while not self.stop.is_set():
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                self.connections += 1
                sent = 0
                while not self.stop.is_set():
                    byte = self.HEAD[sent:sent + 1] or b"a"
                    self.sock.sendall(byte)
                    sent += 1
                    # Wait for the next byte, noticing when the server closes the connection.
                    self.sock.settimeout(SLOW_BYTE_EVERY_S)
                    try:
                        self.sock.recv(4096)  # EOF, or an answer (408) before the close
                    except socket.timeout:
                        continue
                    self.dropped += 1
                    break
            except OSError:
                self.dropped += 1
                time.sleep(0.05)
            finally:
                if self.sock is not None and not self.stop.is_set():
                    self.sock.close()


class FastClient(threading.Thread):
    def __init__(self, port, stop, index):
        super().__init__(daemon=True)
        self.port, self.stop, self.index = port, stop, index
        self.ok = 0
        self.failures = []

    def run(self):
        paths = ["/api/runs", "/metrics", "/api/runs/job"]
        i = self.index
        while not self.stop.is_set():
            path = paths[i % len(paths)]
            i += 1
            try:
                status = get(self.port, path)
            except OSError as e:
                self.failures.append(f"{path}: {e!r}")
                continue
            if status == 200:
                self.ok += 1
            else:
                self.failures.append(f"{path}: HTTP {status}")


@pytest.fixture
def runs(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    r = subprocess.run([_live_writer(), str(runs / "job"), "--steps", "50", "--step-ms", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return runs


def test_slow_clients_do_not_keep_fast_ones_out_and_sigterm_stops(runs):
    port = free_port()
    serve = subprocess.Popen([_bin(), "serve", str(runs), "--port", str(port), "--token", TOKEN],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stop, fast_stop = threading.Event(), threading.Event()
    slow, fast = [], []
    try:
        wait_until(lambda: get(port, "/healthz", token=None, timeout=2) == 200, 30, "serve")
        slow = [SlowClient(port, stop) for _ in range(SLOW)]
        for c in slow:
            c.start()
        time.sleep(SLOW_BYTE_EVERY_S)  # every slow client holds a connection before the fast start
        fast = [FastClient(port, fast_stop, i) for i in range(FAST)]
        for c in fast:
            c.start()
        time.sleep(LOAD_S)
        # Stop the fast clients first; the slow ones keep their connections through SIGTERM.
        fast_stop.set()
        for c in fast:
            c.join(timeout=30)
        failures = [f for c in fast for f in c.failures]
        served = sum(c.ok for c in fast)
        assert not failures, f"{len(failures)} fast requests failed ({served} ok): {failures[:10]}"
        assert all(c.ok > 0 for c in fast), [c.ok for c in fast]
        assert sum(c.connections for c in slow) >= SLOW
        # The slow clients were cut (deadline or eviction), not served and not left forever.
        assert sum(c.dropped for c in slow) >= SLOW

        print(f"load: {served} fast requests served, {sum(c.connections for c in slow)} slow "
              f"connections, {sum(c.dropped for c in slow)} cut by the server")
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0, serve.stderr.read().decode()
    finally:
        stop.set()
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        for c in slow:
            c.join(timeout=10)


@pytest.mark.parametrize("token", [" ", "short-token"])
def test_serve_beyond_loopback_needs_a_token_of_16_characters(tmp_path, token):
    r = subprocess.run([_bin(), "serve", str(tmp_path), "--host", "0.0.0.0", "--port", "0",
                        "--token", token], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert "16" in r.stderr and "token" in r.stderr, r.stderr

"""Alerts that reach people (docs/rules.md, "Webhook alerts"): HTTPS with a test CA, the
payload formats, HMAC signatures, secrets kept out of the run's files, configuration errors at
start, and the outbox that delivers an alert once when a down endpoint comes back.

The receivers are real HTTP(S) and SMTP servers (tests/python/alert_servers.py: http.server
wrapped with ssl, aiosmtpd) on 127.0.0.1 on free ports, each in its own process, started by the
test and stopped by PID."""
import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import trainscope as ts
from conftest import cli_path

pytestmark = pytest.mark.skipif(not getattr(ts._core, "HAVE_RULES", False),
                                reason="built without the rules layer")


SERVERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alert_servers.py")


class ServerProcess:
    """One of alert_servers.py's endpoints in its own process: started here, ready once it has
    written its port (polled, bounded), stopped by PID. Its requests are read back from the
    JSON lines it appends to STATE/requests.jsonl."""

    def __init__(self, kind, *args):
        self.state = tempfile.mkdtemp(prefix=f"ts-alert-{kind}-")
        self.proc = subprocess.Popen([sys.executable, SERVERS, kind, self.state, *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = os.path.join(self.state, "port")
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode() if self.proc.poll() is not None else ""
                self.close()
                raise RuntimeError(f"alert server {kind} did not start: {err}")
            time.sleep(0.05)
        self.port = int(open(port_file).read())

    def requests(self):
        path = os.path.join(self.state, "requests.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]

    def wait_for(self, pred, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.requests()
            if pred(got):
                return got
            time.sleep(0.05)
        return self.requests()

    def close(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc.stderr.close()
        shutil.rmtree(self.state, ignore_errors=True)


class Receiver(ServerProcess):
    """A webhook endpoint (HTTP, or HTTPS with `tls`) that records every POST; answers 503
    (Retry-After: 1) while `down`."""

    def __init__(self, tls=None):
        super().__init__("http", *(["--cert", tls["cert"], "--key", tls["key"]] if tls else []))
        self.scheme = "https" if tls else "http"

    @property
    def down(self):
        return os.path.exists(os.path.join(self.state, "down"))

    @down.setter
    def down(self, value):
        flag = os.path.join(self.state, "down")
        if value:
            open(flag, "w").close()
        elif os.path.exists(flag):
            os.remove(flag)

    @property
    def posts(self):
        """(path, headers, body, status) of every request so far."""
        return [(r["path"], r["headers"], base64.b64decode(r["body"]), r["status"])
                for r in self.requests()]

    @property
    def delivered(self):
        return [(p, h, b) for p, h, b, status in self.posts if status == 200]

    def url(self, path="/hook"):
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def wait_delivered(self, n=1, timeout=30):
        self.wait_for(lambda got: sum(r["status"] == 200 for r in got) >= n, timeout)
        return self.delivered


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A test CA and a server certificate for 127.0.0.1 it signed (openssl, EC keys)."""
    d = tmp_path_factory.mktemp("tls")
    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=trainscope test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    return {"ca": str(d / "ca.pem"), "cert": str(d / "server.pem"), "key": str(d / "server.key")}


class FiresAt(ts.Rule):
    """Fires at step `at`, so a test knows when its alert goes out."""

    def __init__(self, at, actions):
        super().__init__(actions=actions)
        self.at = at

    def invoke_at_step(self, step):
        if step >= self.at:
            raise ts.RuleFired(f"evidence at step {step}", value=1.0, threshold=0.0)
        return False


class FiresBetween(ts.Rule):
    """Violated at steps lo..hi only: fires, then recovers after `recover_after` clear steps."""

    def __init__(self, lo, hi, actions):
        super().__init__(actions=actions, recover_after=2)
        self.lo, self.hi = lo, hi

    def invoke_at_step(self, step):
        if self.lo <= step <= self.hi:
            raise ts.RuleFired(f"evidence at step {step}", value=1.0, threshold=0.0)
        return False


def run_training(run_dir, actions, steps=6, sleep_s=0.02, until=None, rule=None,
                 step_times=None):
    """A tiny training under a hook whose one rule fires at step 2 with `actions`; runs `steps`
    steps, or until `until()` is true (bounded by 60 s). `step_times` gets (start, duration) of
    each step (time.monotonic()). Returns the hook (closed)."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0, rules=[rule or FiresAt(2, actions)],
                   writer_options={"flush_interval_ms": 10})
    with hook:
        hook.register_module(model)
        deadline = time.monotonic() + 60
        step = 0
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            loss = model(torch.randn(3, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step_times is not None:
                step_times.append((t0, time.monotonic() - t0))
            time.sleep(sleep_s)
            if (until is None and step >= steps) or (until is not None and until()):
                break
    return hook


def outbox_files(run_dir):
    d = os.path.join(run_dir, "outbox")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_json_alert_is_signed_and_carries_an_idempotency_key(run_dir, receiver, monkeypatch):
    monkeypatch.setenv("TS_TEST_ALERT_SECRET", "s3cr3t")
    run_training(run_dir, [{"type": "webhook", "url": receiver.url(),
                            "secret_env": "TS_TEST_ALERT_SECRET"}])
    got = receiver.wait_delivered()
    assert len(got) == 1
    _, headers, body = got[0]
    want = hmac.new(b"s3cr3t", body, hashlib.sha256).hexdigest()
    assert headers["X-Trainscope-Signature"] == "sha256=" + want
    assert headers["Idempotency-Key"].startswith("ts-")
    event = json.loads(body)
    assert event["rule"] == "FiresAt" and event["status"] == "IssuesFound"
    assert event["run"] == "run" and "evidence at step" in event["text"]
    assert outbox_files(run_dir) == []
    assert "s3cr3t" not in open(os.path.join(run_dir, "run.json")).read()


def test_https_needs_the_private_ca(tmp_path, tls_files, monkeypatch):
    r = Receiver(tls=tls_files)
    try:
        # The system's store does not know the test CA: refused for good, not retried.
        refused = str(tmp_path / "refused")
        run_training(refused, [{"type": "webhook", "url": r.url(), "format": "slack"}])
        assert r.delivered == [] and r.posts == []
        assert outbox_files(refused) == []  # given up at once: a retry would not verify either
        accepted = str(tmp_path / "accepted")
        run_training(accepted, [{"type": "webhook", "url": r.url(), "format": "slack",
                                 "ca_file": tls_files["ca"],
                                 "dashboard_url": "http://ts.example:8080"}])
        got = r.wait_delivered()
        assert len(got) == 1
        msg = json.loads(got[0][2])
        assert "evidence at step" in msg["text"]
        assert msg["blocks"][0]["type"] == "header"
        buttons = [b for b in msg["blocks"] if b["type"] == "actions"]
        assert buttons[0]["elements"][0]["url"] == "http://ts.example:8080/#/run/accepted"
    finally:
        r.close()


def test_down_endpoint_gets_the_alert_once_when_it_comes_back(run_dir, receiver):
    """The endpoint answers 503 for the first 20 s of a run whose rule fires at step 2: the
    alert arrives once when it comes back, and the training's steps are not slowed meanwhile
    (deliveries run on the dispatcher's thread, never the training's)."""
    receiver.down = True  # 503 with Retry-After: 1
    outage_s = 20.0
    step_times = []  # (start, duration) of every step on the training thread
    started = time.monotonic()
    back = threading.Timer(outage_s, lambda: setattr(receiver, "down", False))
    back.start()
    try:
        run_training(run_dir, [{"type": "webhook", "url": receiver.url(), "format": "discord"}],
                     until=lambda: bool(receiver.delivered), step_times=step_times)
    finally:
        back.cancel()
    got = receiver.wait_delivered()
    assert len(got) == 1
    statuses = [p[3] for p in receiver.posts]
    assert statuses.count(503) >= 3, statuses  # retried while down (backoff, Retry-After)
    assert statuses[-1] == 200 and statuses.count(200) == 1
    keys = {p[1]["Idempotency-Key"] for p in receiver.posts}
    assert len(keys) == 1  # every attempt is the same alert
    assert json.loads(got[0][2])["embeds"][0]["title"] == "FiresAt"
    assert outbox_files(run_dir) == []
    # Step times while the endpoint was down vs after it came back, from the same run.
    during = [d for t, d in step_times if 1.0 < t - started < outage_s - 1.0]
    after = [d for t, d in step_times if t - started > outage_s + 0.5]
    assert len(during) > 100, "the training kept stepping while the alert waited"
    if len(after) >= 5:
        assert statistics.median(during) <= 1.5 * statistics.median(after), (
            statistics.median(during), statistics.median(after))


def test_pagerduty_triggers_then_resolves_with_one_dedup_key(run_dir, receiver, monkeypatch):
    monkeypatch.setenv("TS_TEST_PD_KEY", "R0UTING")
    action = {"type": "webhook", "format": "pagerduty", "url": receiver.url("/v2/enqueue"),
              "routing_key_env": "TS_TEST_PD_KEY"}
    run_training(run_dir, None, rule=FiresBetween(2, 3, [action]),
                 until=lambda: len(receiver.delivered) >= 2)
    got = receiver.wait_delivered(2)
    events = [json.loads(b) for _, _, b in got]
    assert [e["event_action"] for e in events] == ["trigger", "resolve"]
    assert events[0]["dedup_key"] == events[1]["dedup_key"]
    assert events[0]["routing_key"] == "R0UTING"
    assert events[0]["payload"]["source"] == "run"
    assert "evidence at step 2" in events[0]["payload"]["summary"]
    assert got[0][1]["Idempotency-Key"] != got[1][1]["Idempotency-Key"]
    assert "R0UTING" not in open(os.path.join(run_dir, "run.json")).read()


def test_notify_flush_delivers_what_a_run_left(run_dir, monkeypatch):
    cli = cli_path()
    monkeypatch.setenv("TS_TEST_HOOK_URL", "http://127.0.0.1:9/services/SECRETPATH")
    # Port 9 refuses: the alert stays in the outbox; close() waits at most 2 s for it.
    run_training(run_dir, [{"type": "webhook", "url_env": "TS_TEST_HOOK_URL"}])
    files = outbox_files(run_dir)
    assert len(files) == 1
    for name in ["run.json", os.path.join("outbox", files[0])]:
        assert "SECRETPATH" not in open(os.path.join(run_dir, name)).read()
    entry = json.load(open(os.path.join(run_dir, "outbox", files[0])))
    assert entry["action"]["url_secret"] == {"env": "TS_TEST_HOOK_URL"}
    assert entry["attempts"] >= 1 and entry["next_attempt_us"] > entry["created_us"]
    r = Receiver()
    try:
        env = dict(os.environ, TS_TEST_HOOK_URL=r.url())
        p = subprocess.run([cli, "notify", "--flush", run_dir], env=env, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "delivered 1" in p.stdout
        got = r.wait_delivered()
        assert len(got) == 1
        assert got[0][1]["Idempotency-Key"] == files[0][:-len(".json")]
        assert outbox_files(run_dir) == []
        p = subprocess.run([cli, "notify", "--flush", run_dir], env=env, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0 and "delivered 0" in p.stdout
        assert len(r.posts) == 1  # nothing sent twice
    finally:
        r.close()


@pytest.mark.parametrize("action,key", [
    ({"type": "webhook", "url": "https://hooks.example/services/SECRETPATH", "format": "slak"},
     "'format'"),
    ({"type": "webhook", "url": "https://hooks.example/services/SECRETPATH",
      "ca_file": "/nonexistent/ca.pem"}, "'ca_file'"),
    ({"type": "webhook", "url_env": "TS_TEST_SURELY_UNSET"}, "'url_env'"),
    ({"type": "webhook", "format": "pagerduty", "routing_key_env": "TS_TEST_SURELY_UNSET"},
     "'routing_key_env'"),
])
def test_bad_alert_config_is_one_error_at_start(run_dir, action, key):
    with pytest.raises(ts.ConfigError) as e:
        ts.Hook(run_dir, rules=[ts.Rule("dead_loss", actions=[action])])
    assert key in str(e.value)
    assert "SECRETPATH" not in str(e.value)
    assert not os.path.exists(os.path.join(run_dir, "run.json"))  # the training did not start


def test_bad_alert_config_stops_trainscope_run(tmp_path):
    cli = cli_path()
    cfg = tmp_path / "rules.json"
    cfg.write_text(json.dumps({"rules": [{"name": "dead_loss", "actions": [
        {"type": "webhook", "url_env": "TS_TEST_SURELY_UNSET"}]}]}))
    p = subprocess.run([cli, "run", "--out", str(tmp_path / "run"), "--config", str(cfg), "--",
                        "true"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert "'url_env'" in p.stderr and "TS_TEST_SURELY_UNSET" in p.stderr


def test_run_json_shows_action_urls_redacted(run_dir, receiver):
    run_training(run_dir, [{"type": "webhook", "url": receiver.url("/services/SECRETPATH")}])
    text = open(os.path.join(run_dir, "run.json")).read()
    assert "SECRETPATH" not in text
    assert f"http://127.0.0.1:{receiver.port}" in text  # the host stays: which endpoint


def test_email_goes_out_over_starttls_with_auth(run_dir, tls_files, monkeypatch):
    pytest.importorskip("aiosmtpd")
    smtp = ServerProcess("smtp", "--cert", tls_files["cert"], "--key", tls_files["key"],
                         "--user", "trainer", "--password", "pa55word")
    try:
        monkeypatch.setenv("TS_TEST_SMTP_PASSWORD", "pa55word")
        run_training(run_dir, [{"type": "email", "smtp_url": f"smtp://127.0.0.1:{smtp.port}",
                                "starttls": True, "ca_file": tls_files["ca"],
                                "from": "trainscope@example.com",
                                "to": ["oncall@example.com", "me@example.com"],
                                "username": "trainer",
                                "password_env": "TS_TEST_SMTP_PASSWORD"}])
        got = smtp.wait_for(lambda g: any("content" in r for r in g))
    finally:
        smtp.close()
    received = [r for r in got if "content" in r]
    logins = [r for r in got if "auth" in r]
    assert len(received) == 1
    mail = received[0]
    assert mail["tls"]  # STARTTLS happened before the mail
    assert logins and all(r["ok"] for r in logins)
    assert mail["from"] == "trainscope@example.com"
    assert mail["to"] == ["oncall@example.com", "me@example.com"]
    content = mail["content"]
    assert "Subject: [trainscope] FiresAt IssuesFound at step" in content
    assert "(run run)" in content and "evidence at step" in content
    assert "\nMessage-ID: <ts-" in content.replace("\r\n", "\n")
    assert outbox_files(run_dir) == []
    assert "pa55word" not in open(os.path.join(run_dir, "run.json")).read()


@pytest.mark.parametrize("action,key", [
    ({"type": "email", "smtp_url": "smtp://", "from": "a@x.org", "to": ["b@y.org"]},
     "'smtp_url'"),
    ({"type": "email", "smtp_url": "smtp://127.0.0.1:25", "from": "a@x.org", "to": ["b@y.org"],
      "username": "u", "password_env": "TS_TEST_SURELY_UNSET"}, "'password_env'"),
    ({"type": "email", "smtp_url": "smtp://127.0.0.1:25", "from": "a@x.org", "to": []},
     "\"to\""),
])
def test_bad_email_config_is_one_error_at_start(run_dir, action, key):
    with pytest.raises(ts.ConfigError) as e:
        ts.Hook(run_dir, rules=[ts.Rule("dead_loss", actions=[action])])
    assert key in str(e.value)


TRAINING_THAT_ALERTS = r"""
import os, sys, time
import torch
import trainscope as ts

class FiresAt(ts.Rule):
    def __init__(self, at, actions):
        super().__init__(actions=actions)
        self.at = at
    def invoke_at_step(self, step):
        if step >= self.at:
            raise ts.RuleFired(f"evidence at step {step}", value=1.0, threshold=0.0)
        return False

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
action = {"type": "webhook", "url": sys.argv[1], "format": "slack"}
with ts.Hook(os.environ["TRAINSCOPE_RUN_DIR"], system_monitor_interval_ms=0,
             rules=[FiresAt(2, [action])], writer_options={"flush_interval_ms": 10}) as hook:
    hook.register_module(model)
    outbox = os.path.join(os.environ["TRAINSCOPE_RUN_DIR"], "outbox")
    for step in range(1000):  # until the alert waits in the outbox (bounded: about 20 s)
        model(torch.randn(3, 4)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        time.sleep(0.02)
        if step >= 20 and os.path.isdir(outbox) and os.listdir(outbox):
            break
open(os.path.join(os.environ["TRAINSCOPE_RUN_DIR"], "closed"), "w").close()  # hook closed
"""


def test_trainscope_run_delivers_what_the_training_left(tmp_path, receiver):
    """The training ends while the endpoint is down (its hook gives the outbox 2 s): `trainscope
    run` keeps retrying after the child exited and delivers the alert once it comes back."""
    cli = cli_path()
    script = tmp_path / "train.py"
    script.write_text(TRAINING_THAT_ALERTS)
    receiver.down = True
    out = tmp_path / "run"
    stop = threading.Event()

    def back_once_the_hook_closed():  # the training has given up: trainscope run's turn
        while not stop.is_set() and not (out / "closed").exists():
            time.sleep(0.05)
        receiver.down = False

    back = threading.Thread(target=back_once_the_hook_closed, daemon=True)
    back.start()
    try:
        p = subprocess.run([cli, "run", "--out", str(out), "--no-instrument", "--interval-ms",
                            "200", "--alert-wait-s", "30", "--", sys.executable, str(script),
                            receiver.url("/services/T0/B0/SECRETPATH")],
                           capture_output=True, text=True, timeout=120)
    finally:
        stop.set()
        back.join(10)
    assert p.returncode == 0, p.stderr
    assert "delivering 1 alert the training left" in p.stderr, p.stderr
    assert "1 left alert delivered" in p.stderr, p.stderr
    assert "SECRETPATH" not in p.stderr
    statuses = [post[3] for post in receiver.posts]
    assert statuses.count(200) == 1 and statuses[-1] == 200, statuses
    assert 503 in statuses
    assert outbox_files(str(out)) == []
    assert len({post[1]["Idempotency-Key"] for post in receiver.posts}) == 1


def test_trainscope_run_keeps_undelivered_alerts_for_notify(tmp_path, receiver):
    cli = cli_path()
    script = tmp_path / "train.py"
    script.write_text(TRAINING_THAT_ALERTS)
    receiver.down = True  # for good
    out = tmp_path / "run"
    p = subprocess.run([cli, "run", "--out", str(out), "--no-instrument", "--alert-wait-s", "2",
                        "--", sys.executable, str(script), receiver.url()],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "1 alert not delivered" in p.stderr and "trainscope notify --flush" in p.stderr
    assert len(outbox_files(str(out))) == 1
    receiver.down = False
    q = subprocess.run([cli, "notify", "--flush", str(out)], capture_output=True, text=True,
                       timeout=60)
    assert q.returncode == 0 and "delivered 1" in q.stdout, q.stdout + q.stderr
    assert outbox_files(str(out)) == []

"""Alerts that reach people (docs/rules.md, "Webhook alerts"): HTTPS with a test CA, the
payload formats, HMAC signatures, secrets kept out of the run's files, configuration errors at
start, and the outbox that delivers an alert once when a down endpoint comes back.

The receivers are real HTTP(S) servers (http.server, wrapped with ssl) on 127.0.0.1, port 0,
in threads of the test, stopped at the end of each test."""
import hashlib
import hmac
import http.server
import json
import os
import ssl
import subprocess
import threading
import time

import pytest

import trainscope as ts
from conftest import cli_path

pytestmark = pytest.mark.skipif(not getattr(ts._core, "HAVE_RULES", False),
                                reason="built without the rules layer")


class Receiver:
    """An HTTP(S) endpoint that records every POST; answers 503 (Retry-After: 1) while `down`."""

    def __init__(self, tls=None):
        self.posts = []          # (path, headers, body, status) of every request
        self.delivered = []      # those answered 2xx
        self.down = False
        self.cond = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.cond:
                    down = outer.down
                    outer.posts.append((self.path, dict(self.headers), body,
                                        503 if down else 200))
                    if not down:
                        outer.delivered.append((self.path, dict(self.headers), body))
                    outer.cond.notify_all()
                self.send_response(503 if down else 200)
                if down:
                    self.send_header("Retry-After", "1")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls["cert"], tls["key"])
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if tls else "http"
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path="/hook"):
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def wait_delivered(self, n=1, timeout=30):
        with self.cond:
            self.cond.wait_for(lambda: len(self.delivered) >= n, timeout)
            return list(self.delivered)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


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


def run_training(run_dir, actions, steps=6, sleep_s=0.02, until=None, rule=None):
    """A tiny training under a hook whose one rule fires at step 2 with `actions`; runs `steps`
    steps, or until `until()` is true (bounded by 60 s). Returns the hook (closed)."""
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
            loss = model(torch.randn(3, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
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
    receiver.down = True  # 503 with Retry-After: 1
    back = threading.Timer(4.0, lambda: setattr(receiver, "down", False))
    back.start()
    try:
        run_training(run_dir, [{"type": "webhook", "url": receiver.url(), "format": "discord"}],
                     until=lambda: bool(receiver.delivered))
    finally:
        back.cancel()
    got = receiver.wait_delivered()
    assert len(got) == 1
    assert [p[3] for p in receiver.posts if p[3] == 503], "down for the first attempts"
    assert [p[3] for p in receiver.posts][-1] == 200
    keys = {p[1]["Idempotency-Key"] for p in receiver.posts}
    assert len(keys) == 1  # every attempt is the same alert
    assert json.loads(got[0][2])["embeds"][0]["title"] == "FiresAt"
    assert outbox_files(run_dir) == []


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


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_email_goes_out_over_starttls_with_auth(run_dir, tls_files, monkeypatch):
    aiosmtpd = pytest.importorskip("aiosmtpd")
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult
    del aiosmtpd

    received, logins = [], []

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            received.append((envelope.mail_from, list(envelope.rcpt_tos),
                             envelope.content.decode("utf-8"), bool(session.ssl)))
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = auth_data.login == b"trainer" and auth_data.password == b"pa55word"
        logins.append((mechanism, ok))
        return AuthResult(success=ok)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tls_files["cert"], tls_files["key"])
    port = _free_port()
    smtp = Controller(Handler(), hostname="127.0.0.1", port=port, tls_context=ctx,
                      require_starttls=True, auth_required=True, auth_require_tls=True,
                      authenticator=authenticator, ready_timeout=10)
    smtp.start()
    try:
        monkeypatch.setenv("TS_TEST_SMTP_PASSWORD", "pa55word")
        run_training(run_dir, [{"type": "email", "smtp_url": f"smtp://127.0.0.1:{port}",
                                "starttls": True, "ca_file": tls_files["ca"],
                                "from": "trainscope@example.com",
                                "to": ["oncall@example.com", "me@example.com"],
                                "username": "trainer",
                                "password_env": "TS_TEST_SMTP_PASSWORD"}])
    finally:
        smtp.stop()
    assert len(received) == 1
    mail_from, rcpt, content, tls = received[0]
    assert tls  # STARTTLS happened before the mail
    assert logins and all(ok for _, ok in logins)
    assert mail_from == "trainscope@example.com"
    assert rcpt == ["oncall@example.com", "me@example.com"]
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

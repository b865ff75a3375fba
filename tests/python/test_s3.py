"""Runs in S3-compatible object storage (#26, docs/storage.md), against a real S3 server: moto's
standalone server (requirements/dev.txt), started here on 127.0.0.1 (a second one with IAM
authentication on checks trainscope's SigV4 signatures and refuses wrong credentials). What trainscope
wrote is checked with an independent client (boto3). The store's outages are made by a TCP
proxy of this test between trainscope and the server (stopped: nothing listens, connections
are cut; started again on the same port)."""
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto")

import trainscope as ts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "s3_job.py")
BUCKET = "tsbucket"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """127.0.0.1:port -> upstream, which stop() makes unreachable and start() brings back."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.port = _free_port()
        self._lsock = None
        self._conns = []
        self._lock = threading.Lock()

    def start(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self._lsock = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def stop(self):
        s, self._lsock = self._lsock, None
        if s is not None:
            s.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def _accept(self, lsock):
        while True:
            try:
                c, _ = lsock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            except OSError:
                c.close()
                continue
            with self._lock:
                self._conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _moto(log_path, auth):
    port = _free_port()
    env = dict(os.environ)
    if auth:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = "4"  # then every request's signature is checked
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return proc, port
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                _stop(proc)
                pytest.fail("moto server did not start")
            time.sleep(0.2)


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _setup(port, auth):
    anon = dict(endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id="setup",
                aws_secret_access_key="setup", region_name="us-east-1")
    boto3.client("s3", **anon).create_bucket(Bucket=BUCKET)
    if not auth:
        # made for this run: moto without authentication takes any pair
        return {"AccessKeyId": "AKIA" + secrets.token_hex(8).upper(),
                "SecretAccessKey": secrets.token_urlsafe(30)}
    iam = boto3.client("iam", **anon)  # with the bucket: the 4 unauthenticated calls
    iam.create_user(UserName="trainer")
    key = iam.create_access_key(UserName="trainer")["AccessKey"]
    iam.put_user_policy(UserName="trainer", PolicyName="s3", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    return key


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """moto's S3 server behind the test's proxy; yields endpoint, key id, secret, proxy.
    (Without authentication: moto 5.1's signature check refuses listings whose prefix holds a
    '/' from boto3 as from trainscope; the `authstore` checks signatures.)"""
    proc, port = _moto(tmp_path_factory.mktemp("moto") / "moto.log", auth=False)
    try:
        key = _setup(port, auth=False)
        proxy = Proxy(port)
        proxy.start()
        yield {"endpoint": f"http://127.0.0.1:{proxy.port}", "key": key["AccessKeyId"],
               "secret": key["SecretAccessKey"], "proxy": proxy}
        proxy.stop()
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def authstore(tmp_path_factory):
    """moto's S3 server with IAM authentication on: trainscope's SigV4 signatures are checked,
    and wrong credentials are refused."""
    proc, port = _moto(tmp_path_factory.mktemp("moto-auth") / "moto.log", auth=True)
    try:
        key = _setup(port, auth=True)
        yield {"endpoint": f"http://127.0.0.1:{port}", "key": key["AccessKeyId"],
               "secret": key["SecretAccessKey"]}
    finally:
        _stop(proc)


@pytest.fixture
def s3env(store, tmp_path, monkeypatch):
    """The AWS variables of a machine that uses the store, a spool of this test's own."""
    env = {"AWS_ENDPOINT_URL": store["endpoint"], "AWS_ACCESS_KEY_ID": store["key"],
           "AWS_SECRET_ACCESS_KEY": store["secret"], "AWS_REGION": "us-east-1",
           "TRAINSCOPE_SPOOL_DIR": str(tmp_path / "spool"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
           "AWS_CONFIG_FILE": str(tmp_path / "none")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("TRAINSCOPE_RUN_DIR", raising=False)
    return dict(os.environ)


def _s3(store):
    return boto3.client("s3", endpoint_url=store["endpoint"], aws_access_key_id=store["key"],
                        aws_secret_access_key=store["secret"], region_name="us-east-1")


def _objects(store, prefix):
    out = {}
    for page in _s3(store).get_paginator("list_objects_v2").paginate(Bucket=BUCKET,
                                                                      Prefix=prefix + "/"):
        for o in page.get("Contents", []):
            out[o["Key"][len(prefix) + 1:]] = o["Size"]
    return out


def _job(env, out, tmp_path, *args, name="result.json"):
    result = tmp_path / name
    p = subprocess.run([sys.executable, JOB, "--out", out, "--result", str(result), *args],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(result.read_text()), p


def test_nan_run_in_a_bucket_stops_like_a_local_run_and_reports_in_place(s3env, store,
                                                                          tmp_path, cli):
    local, _ = _job(s3env, str(tmp_path / "local"), tmp_path, "--nan-at", "25", name="l.json")
    remote, p = _job(s3env, f"s3://{BUCKET}/nan", tmp_path, "--nan-at", "25")
    assert local["steps"] == remote["steps"] and remote["steps"] < 60, (local, remote)
    assert "exploding_tensor" in (remote["reason"] or ""), remote
    assert store["secret"] not in p.stderr
    objs = _objects(store, "nan")
    assert "run.json" in objs and "worker-0/LOCK" not in objs, objs  # complete: no heartbeat
    segs = sorted(k for k in objs if k.startswith("worker-0/seg-"))
    assert segs, objs
    spool = remote["spool"]
    assert spool.startswith(str(tmp_path / "spool"))
    for k in ["run.json"] + segs:  # the bucket holds what the local spool holds, byte for byte
        body = _s3(store).get_object(Bucket=BUCKET, Key="nan/" + k)["Body"].read()
        with open(os.path.join(spool, k), "rb") as f:
            assert body == f.read(), k
    run = ts.open_run(f"s3://{BUCKET}/nan")  # read in place
    steps, _ = run.scalar("losses/loss")
    assert steps.tolist() == ts.open_run(str(tmp_path / "local")).scalar("losses/loss")[0].tolist()
    r = subprocess.run([cli, "report", f"s3://{BUCKET}/nan"], env=s3env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "exploding_tensor" in r.stdout, r.stdout
    assert store["secret"] not in r.stdout + r.stderr
    v = subprocess.run([cli, "verify", f"s3://{BUCKET}/nan"], env=s3env, capture_output=True,
                       text=True, timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr


def test_store_down_for_10_s_mid_run_every_step_reaches_the_bucket(s3env, store, tmp_path):
    proc = subprocess.Popen([sys.executable, JOB, "--out", f"s3://{BUCKET}/outage", "--steps",
                             "300", "--step-ms", "50", "--result", str(tmp_path / "r.json")],
                            env=s3env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while "run.json" not in _objects(store, "outage"):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        time.sleep(1.0)
        store["proxy"].stop()
        time.sleep(10)
        store["proxy"].start()
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        if store["proxy"]._lsock is None:
            store["proxy"].start()
    assert proc.returncode == 0, err
    assert "cannot ship the run" in err and store["secret"] not in err
    steps, values = ts.open_run(f"s3://{BUCKET}/outage").scalar("losses/loss")
    assert steps.tolist() == list(range(300))
    assert "worker-0/LOCK" not in _objects(store, "outage")


def test_store_gone_for_good_the_spool_keeps_the_run_and_sync_ships_it(s3env, store, tmp_path,
                                                                         cli):
    proc = subprocess.Popen([sys.executable, JOB, "--out", f"s3://{BUCKET}/gone", "--steps",
                             "80", "--step-ms", "20", "--result", str(tmp_path / "r.json")],
                            env=s3env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while "run.json" not in _objects(store, "gone"):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        store["proxy"].stop()
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    try:
        assert proc.returncode == 0, err   # the training finished
        spool = json.loads((tmp_path / "r.json").read_text())["spool"]
        assert ts.open_run(spool).scalar("losses/loss")[0].tolist() == list(range(80))
        assert "trainscope sync" in err and spool in err
    finally:
        store["proxy"].start()
    s = subprocess.run([cli, "sync", spool], env=s3env, capture_output=True, text=True,
                       timeout=120)
    assert s.returncode == 0, s.stderr
    assert "shipped" in s.stdout
    steps, _ = ts.open_run(f"s3://{BUCKET}/gone").scalar("losses/loss")
    assert steps.tolist() == list(range(80))
    assert "worker-0/LOCK" not in _objects(store, "gone")


def test_two_ranks_with_separate_spools_make_one_run(s3env, store, tmp_path):
    procs = []
    for rank in (0, 1):
        env = dict(s3env, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                   TRAINSCOPE_SPOOL_DIR=str(tmp_path / f"spool-{rank}"))
        procs.append(subprocess.Popen(
            [sys.executable, JOB, "--out", f"s3://{BUCKET}/two", "--steps", "30",
             "--result", str(tmp_path / f"r{rank}.json")], env=env, stderr=subprocess.PIPE,
            text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    run = ts.open_run(f"s3://{BUCKET}/two")
    assert run.workers() == ["worker-0", "worker-1"]
    for w in ("worker-0", "worker-1"):
        assert run.scalar("losses/loss", worker=w)[0].tolist() == list(range(30))
    # one run.json: the first rank's; the other rank adopted it in its spool
    body = _s3(store).get_object(Bucket=BUCKET, Key="two/run.json")["Body"].read()
    for rank in (0, 1):
        assert (tmp_path / f"spool-{rank}" / BUCKET / "two" / "run.json").read_bytes() == body


def test_stop_through_the_bucket_reaches_the_training(s3env, store, tmp_path, cli):
    proc = subprocess.Popen([sys.executable, JOB, "--out", f"s3://{BUCKET}/live", "--steps",
                             "100000", "--step-ms", "10", "--result", str(tmp_path / "r.json")],
                            env=s3env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while "worker-0/LOCK" not in _objects(store, "live"):  # the heartbeat: running
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        s = subprocess.run([cli, "stop", f"s3://{BUCKET}/live", "--reason", "enough"],
                           env=s3env, capture_output=True, text=True, timeout=60)
        assert s.returncode == 0, s.stdout + s.stderr
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    result = json.loads((tmp_path / "r.json").read_text())
    assert "enough" in (result["reason"] or ""), result
    assert result["steps"] < 100000


@pytest.mark.parametrize("case", ["empty-bucket", "missing-bucket", "wrong-secret",
                                  "unknown-key", "wrong-endpoint", "scheme"])
def test_bad_locations_are_one_clear_error_naming_the_url(s3env, authstore, tmp_path,
                                                          monkeypatch, case, cli):
    store = authstore
    monkeypatch.setenv("AWS_ENDPOINT_URL", store["endpoint"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", store["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", store["secret"])
    url = {"empty-bucket": "s3:///run1", "missing-bucket": "s3://no-such-bucket/run1",
           "scheme": "gs://b/run1"}.get(case, f"s3://{BUCKET}/bad-{case}")
    secret = "wrong-secret-value-123" if case == "wrong-secret" else store["secret"]
    if case == "wrong-secret":
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    if case == "unknown-key":
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIANOTAKEY000000000")
    if case == "wrong-endpoint":
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(ts.ConfigError) as e:
        ts.Hook(out_dir=url, system_monitor_interval_ms=0)
    msg = str(e.value)
    assert url in msg and secret not in msg, msg
    want = {"empty-bucket": "bucket name is empty", "missing-bucket": "does not exist",
            "wrong-secret": "refused the credentials", "unknown-key": "refused the credentials",
            "wrong-endpoint": "does not answer", "scheme": "not supported"}[case]
    assert want in msg, msg
    p = subprocess.run([cli, "run", "--out", url, "--", sys.executable, "-c", "pass"],
                       env=dict(os.environ), capture_output=True, text=True, timeout=60,
                       cwd=str(work))
    assert p.returncode == 2 and url in p.stderr and secret not in p.stderr, p.stderr
    assert os.listdir(work) == []  # nothing local under a wrong name
    assert not (tmp_path / "spool").exists() or case == "scheme"


def test_trainscope_run_out_s3_ships_the_monitor_and_the_training(s3env, store, tmp_path, cli):
    p = subprocess.run([cli, "run", "--out", f"s3://{BUCKET}/cli", "--", sys.executable, JOB,
                        "--out", "ignored", "--steps", "20", "--result",
                        str(tmp_path / "r.json")],
                       env=s3env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert f"s3://{BUCKET}/cli" in p.stderr and store["secret"] not in p.stderr
    assert not (tmp_path / "ignored").exists()
    run = ts.open_run(f"s3://{BUCKET}/cli")
    assert "worker-0" in run.workers()
    assert run.scalar("losses/loss")[0].tolist() == list(range(20))
    objs = _objects(store, "cli")
    assert any(k.startswith("monitor-") for k in objs), objs
    assert not any(k.endswith("/LOCK") for k in objs), objs  # every stream complete


def test_sigkill_leaves_a_readable_run_up_to_about_a_second_before_and_sync_ships_the_rest(
        s3env, store, tmp_path, cli):
    proc = subprocess.Popen([sys.executable, JOB, "--out", f"s3://{BUCKET}/killed", "--steps",
                             "100000", "--step-ms", "10"], env=s3env, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while "worker-0/LOCK" not in _objects(store, "killed"):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        time.sleep(3)
        killed_us = time.time() * 1e6
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = ts.open_run(f"s3://{BUCKET}/killed")
    wall = run.scalar_records("losses/loss")["wall_us"]
    assert len(wall) > 0
    lag_s = (killed_us - float(wall[-1])) / 1e6
    assert lag_s <= 2.0, lag_s  # what the bucket holds: up to ~1 s before the kill
    spool = os.path.join(s3env["TRAINSCOPE_SPOOL_DIR"], BUCKET, "killed")
    spooled = ts.open_run(spool).scalar("losses/loss")[0].tolist()
    s = subprocess.run([cli, "sync", spool], env=s3env, capture_output=True, text=True,
                       timeout=120)
    assert s.returncode == 0, s.stderr
    assert ts.open_run(f"s3://{BUCKET}/killed").scalar("losses/loss")[0].tolist() == spooled
    assert "worker-0/LOCK" not in _objects(store, "killed")  # a dead writer's heartbeat goes

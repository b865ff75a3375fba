"""Broken and hostile run directories (issue 18, reader side): records with valid checksums but
impossible contents, FIFOs where files should be, and damage that `verify` must not call OK.

Every CLI call and every open_run that could hang runs in a subprocess with a timeout. Records are
built here byte by byte from docs/format.md (with correct CRCs), so the reader's checks, not the
checksums, are what is tested.
"""
import os
import shutil
import struct
import subprocess
import sys

import pytest

import trainscope as ts
from trainscope import _core
from conftest import ROOT, cli_path, crc32c

TIMEOUT_S = 30

# ---- the format, from docs/format.md ----------------------------------------------------------

def masked(data: bytes) -> int:
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def svarint(n: int) -> bytes:
    return varint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def string(s: str) -> bytes:
    b = s.encode()
    return varint(len(b)) + b


def frame(rtype: int, payload: bytes) -> bytes:
    head = struct.pack("<IBI", len(payload), rtype, masked(payload))
    return head + struct.pack("<I", masked(head)) + payload


def segment_header(seq: int, created_us: int) -> bytes:
    h = b"TSSEG\r\n\x1a" + struct.pack("<HHIQQ", 1, 0, 0, seq, created_us)
    return h + struct.pack("<I", masked(h))


NAME_DEF, SCALAR, RAW_CHUNK, STEP = 1, 2, 4, 5
SAME_STEP = 0x08  # mode_step == step


def name_def(name_id: int, name: str) -> bytes:
    return frame(NAME_DEF, varint(name_id) + string(name))


def scalar(name_id: int, step: int, value: float, flags: int = SAME_STEP) -> bytes:
    return frame(SCALAR, varint(name_id) + svarint(step) + bytes([flags])
                 + struct.pack("<d", value) + svarint(0))


def raw_chunk(name_id: int, step: int, shape, data: bytes, *, dtype: int = 7, index: int = 0,
              count: int = 1, compression: int = 0, raw_size=None, total_size=None) -> bytes:
    p = varint(name_id) + svarint(step) + bytes([SAME_STEP]) + bytes([dtype])
    p += varint(len(shape)) + b"".join(svarint(d) for d in shape) + svarint(0)
    p += varint(index) + varint(count) + bytes([compression])
    p += varint(len(data) if raw_size is None else raw_size)
    p += varint(len(data) if total_size is None else total_size)
    return frame(RAW_CHUNK, p + data)


def step_record(step: int, duration_us: int, flags: int = SAME_STEP) -> bytes:
    return frame(STEP, svarint(step) + bytes([flags]) + svarint(0) + svarint(duration_us)
                 + b"\x00" * 4)


# ---- runs ------------------------------------------------------------------------------------

def write_base_run(d: str, steps: int = 10) -> None:
    """A finished run: losses and step records 0..steps-1 and one raw tensor, in seg 0."""
    _core.create_or_open_run(d, name="hostile")
    w = _core.Writer(d)
    for s in range(steps):
        w.add_scalar("losses/loss", s, 0, s, 0.5 * s)
        w.add_step(s, 0, s, 1000 * s, 1000 * s + 10)
    w.add_raw("weights/w", 0, 0, 0, bytes(range(16)), 7)
    assert w.close() is None


def add_segment(d: str, frames: bytes, seq: int = 1) -> int:
    """Appends a hand-made segment to worker-0; returns the file offset of `frames`."""
    header = segment_header(seq, _core.now_us())
    with open(os.path.join(d, "worker-0", f"seg-{seq:08d}.tsseg"), "wb") as f:
        f.write(header + frames)
    return len(header)


def run_cli(*args, timeout=TIMEOUT_S):
    return subprocess.run([cli_path(), *args], capture_output=True, text=True, timeout=timeout)


def open_run_in_subprocess(d: str, code: str = "", timeout=TIMEOUT_S):
    """Runs ts.open_run(d) (then `code`, with the run as `run`) in a fresh interpreter."""
    src = ("import sys, trainscope as ts\n"
           f"run = ts.open_run({d!r})\n" + code)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                          timeout=timeout, env=env)


def segment_path(d: str, seq: int = 0) -> str:
    return os.path.join(d, "worker-0", f"seg-{seq:08d}.tsseg")


# ---- finding 1: one CRC-valid record must not take a run down --------------------------------

EVIL = {
    "chunk_count_2^62": lambda: raw_chunk(1, 20, [4], b"abcd", count=2 ** 62),
    "chunk_count_2^40": lambda: raw_chunk(1, 20, [4], b"abcd", count=2 ** 40),
    "total_size_2^62": lambda: raw_chunk(1, 20, [4], b"abcd", total_size=2 ** 62),
    "zstd_raw_size_2^40": lambda: raw_chunk(1, 20, [2 ** 40], b"\x28\xb5\x2f\xfd" + b"x" * 8,
                                            compression=1, raw_size=2 ** 40,
                                            total_size=2 ** 40),
    "shape_disagrees_with_data": lambda: raw_chunk(1, 20, [1000], b"abcd", dtype=1),
    "negative_dimension": lambda: raw_chunk(1, 20, [-4], b"abcd"),
    "unknown_dtype": lambda: raw_chunk(1, 20, [4], b"abcd", dtype=99),
    "mode_bits_3": lambda: scalar(0, 20, 1.0, flags=SAME_STEP | 3),
    "step_ends_before_it_starts": lambda: step_record(20, -5000),
}


@pytest.mark.parametrize("kind", sorted(EVIL))
def test_one_impossible_record_costs_only_that_record(tmp_path, kind):
    d = str(tmp_path / "run")
    write_base_run(d)
    frames = name_def(0, "losses/loss") + name_def(1, "weights/evil")
    frames += EVIL[kind]()
    good = scalar(0, 10, 5.0)
    offset = add_segment(d, frames + good)
    evil_at = offset + len(frames) - len(EVIL[kind]())

    run = ts.open_run(d)  # no MemoryError, ValueError or crash
    steps, values = run.scalar("losses/loss")
    assert list(steps) == list(range(11)), "the records around the bad one are read"
    assert list(values) == [0.5 * s for s in range(11)]
    stats = run.read_stats()
    assert stats["undecodable_records"] == 1, stats
    assert any(f"byte {evil_at}" in p for p in stats["problems"]), stats["problems"]
    assert run.modes() == [ts.Mode.TRAIN]
    for r in run.step_records():
        assert r["start_us"] <= r["end_us"] and r["mode"] == ts.Mode.TRAIN
    for name in run.tensor_names(scalars=False):
        t = run.tensor(name)
        for s in t.steps():
            assert t.value(s).nbytes == 16
    assert run.tensor_names(scalars=False) == ["weights/w"]

    v = run_cli("verify", d)
    assert v.returncode == 4, v.stdout + v.stderr
    assert f"byte {evil_at}" in v.stdout
    for args in (["inspect", d], ["inspect", d, "--json"], ["rules", d],
                 ["report", d, "--no-history", "--out", str(tmp_path / "r.html")],
                 ["export", "csv", d, str(tmp_path / "csv")],
                 ["export", "tensorboard", d, str(tmp_path / "tb")]):
        r = run_cli(*args)
        assert r.returncode == 0, (args, r.returncode, r.stderr)


def test_raw_tensor_whose_chunks_disagree_is_incomplete_not_garbage(tmp_path):
    d = str(tmp_path / "run")
    write_base_run(d)
    frames = name_def(0, "weights/big")
    frames += raw_chunk(0, 30, [8], b"abcd", index=0, count=2, total_size=8)
    frames += raw_chunk(0, 30, [8], b"efghij", index=1, count=2, total_size=8)  # 4 + 6 != 8
    add_segment(d, frames)
    run = ts.open_run(d)
    assert run.read_stats()["undecodable_records"] == 1
    assert not run.tensor("weights/big").has_raw(30)
    assert run.tensor("weights/w").value(0).nbytes == 16


# ---- finding 3: nothing blocks on a file ------------------------------------------------------

def fifo_cases():
    return ["run.json", "worker-0/LOCK", "worker-0/seg-00000001.tsseg"]


def cli_commands(d, tmp):
    return [["inspect", d], ["verify", d], ["rules", d],
            ["report", d, "--no-history", "--out", os.path.join(tmp, "r.html")],
            ["show", d, "--history", os.path.join(tmp, "h.db")],
            ["export", "csv", d, os.path.join(tmp, "csv")],
            ["watch", d, "--quiet", "--no-stop", "--wait-s", "2"]]


@pytest.mark.parametrize("where", fifo_cases())
def test_a_fifo_in_the_run_blocks_nothing(tmp_path, where):
    d = str(tmp_path / "run")
    write_base_run(d)
    path = os.path.join(d, where)
    if os.path.exists(path):
        os.remove(path)
    os.mkfifo(path)
    for args in cli_commands(d, str(tmp_path)):
        try:
            r = run_cli(*args)
        except subprocess.TimeoutExpired:
            pytest.fail(f"trainscope {args[0]} blocked on the FIFO {where}")
        assert r.returncode >= 0, (args, r.stderr)  # no crash
        if args[0] == "verify":
            assert r.returncode != 0, r.stdout
            assert "not a regular file" in r.stdout + r.stderr, r.stdout + r.stderr
            assert where.split("/")[-1] in r.stdout + r.stderr
    try:
        p = open_run_in_subprocess(d, "print(len(run.scalar('losses/loss')[0]))\n"
                                      "print(run.read_stats()['problems'])")
    except subprocess.TimeoutExpired:
        pytest.fail(f"ts.open_run blocked on the FIFO {where}")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "10"
    assert "not a regular file" in p.stdout


@pytest.mark.parametrize("name", ["functions-worker-0.json", "trace-worker-0.json"])
def test_a_fifo_named_like_a_profile_file_blocks_nothing(tmp_path, name):
    """RUN/profile/*.json are read with the same checks as the other run files: a FIFO (or
    anything that is not a regular file) is skipped with a warning naming it."""
    d = str(tmp_path / "run")
    write_base_run(d)
    os.makedirs(os.path.join(d, "profile"), exist_ok=True)
    os.mkfifo(os.path.join(d, "profile", name))
    for args in (["report", d, "--no-history", "--out", str(tmp_path / "r.html")],
                 ["report", d, "--no-history", "--json", "--out", str(tmp_path / "r2.html")],
                 ["show", d, "--history", str(tmp_path / "h.db")],
                 ["export", "chrome-trace", d, str(tmp_path / "t.json")]):
        try:
            r = run_cli(*args)
        except subprocess.TimeoutExpired:
            pytest.fail(f"trainscope {' '.join(args[:2])} blocked on the FIFO profile/{name}")
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        if args[0] != "show":
            assert "not a regular file" in r.stderr and name in r.stderr, (args, r.stderr)
        if "--json" in args:  # the report links no trace that is not a file
            assert "profile/" + name not in r.stdout, r.stdout


# ---- finding 5: verify and inspect never say OK about what they could not read ---------------

def test_verify_fails_on_an_unreadable_segment(tmp_path):
    d = str(tmp_path / "run")
    write_base_run(d)
    os.remove(segment_path(d))
    os.mkdir(segment_path(d))  # a name the reader must read, but cannot
    v = run_cli("verify", d)
    assert v.returncode != 0, v.stdout
    assert "seg-00000000.tsseg" in v.stdout and "not a regular file" in v.stdout
    assert not v.stdout.startswith("OK")


def _write_manifest(d: str, text: str) -> None:
    with open(os.path.join(d, "run.json"), "w") as f:
        f.write(text)


def test_newer_schema_version_is_refused(tmp_path):
    d = str(tmp_path / "run")
    write_base_run(d)
    _write_manifest(d, '{"schema_version": 99, "id": "x", "name": "n"}')
    v = run_cli("verify", d)
    assert v.returncode != 0
    out = v.stdout + v.stderr
    assert "schema_version 99" in out and "reads schema_version 1" in out, out
    i = run_cli("inspect", d)
    assert i.returncode != 0 and "schema_version 99" in i.stderr
    with pytest.raises(ValueError, match="schema_version 99"):
        ts.open_run(d)


@pytest.mark.parametrize("text", ["", "{not json", "[1, 2]", "\x00\x00\x00"])
def test_unparseable_run_json_is_reported_not_missing(tmp_path, text):
    d = str(tmp_path / "run")
    write_base_run(d)
    _write_manifest(d, text)
    v = run_cli("verify", d)
    assert v.returncode == 4, v.stdout
    assert "run.json" in v.stdout and "unparseable" in v.stdout, v.stdout
    i = run_cli("inspect", d)
    assert "no run.json" not in i.stdout and "run.json unparseable" in i.stdout, i.stdout
    run = ts.open_run(d)  # the data is still readable
    assert len(run.scalar("losses/loss")[0]) == 10
    assert any("run.json" in p for p in run.read_stats()["problems"])


def test_damaged_footer_of_a_sealed_segment_is_corruption_not_a_torn_tail(tmp_path):
    d = str(tmp_path / "run")
    write_base_run(d)
    with open(segment_path(d), "r+b") as f:
        f.seek(-3, os.SEEK_END)
        b = f.read(1)
        f.seek(-3, os.SEEK_END)
        f.write(bytes([b[0] ^ 0x10]))
    v = run_cli("verify", d)
    assert v.returncode == 4, v.stdout + v.stderr
    assert "torn" not in v.stdout + v.stderr
    assert "CORRUPT" in v.stdout


def test_zeroed_tail_of_a_sealed_segment_is_corruption(tmp_path):
    d = str(tmp_path / "run")
    write_base_run(d)
    size = os.path.getsize(segment_path(d))
    with open(segment_path(d), "r+b") as f:
        f.seek(size - 29)
        f.write(b"\x00" * 29)  # the footer
    v = run_cli("verify", d)
    assert v.returncode == 4, v.stdout + v.stderr
    assert "torn" not in v.stdout + v.stderr


def test_torn_tail_of_an_unsealed_last_segment_is_still_only_a_warning(tmp_path):
    d = str(tmp_path / "run")
    write_base_run(d)
    frames = name_def(0, "losses/loss") + scalar(0, 10, 5.0)
    add_segment(d, frames + scalar(0, 11, 5.5)[:20])  # a crash mid-append
    v = run_cli("verify", d)
    assert v.returncode == 0, v.stdout + v.stderr
    assert "torn" in v.stderr


def test_duplicate_segment_is_detected_and_not_double_counted(tmp_path):
    d = str(tmp_path / "run")
    write_base_run(d)
    shutil.copy(segment_path(d), segment_path(d, 5))
    run = ts.open_run(d)
    assert [r["step"] for r in run.step_records()] == list(range(10))
    assert run.read_stats()["duplicate_segments"] == 1
    v = run_cli("verify", d)
    assert v.returncode == 4, v.stdout
    assert "duplicate" in v.stdout and "seg-00000005.tsseg" in v.stdout


# ---- control files (finding 4) -----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    '{"reason":5,"requested_by":[],"wall_us":"x"}',
    '{"reason":"ok","wall_us":"x"}',
    '[1, 2]',
    'not json at all',
])
def test_a_malformed_stop_request_is_ignored_said_once_and_a_good_one_still_stops(tmp_path,
                                                                                  text):
    import json
    import torch
    from conftest import train
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.CrossEntropyLoss()
    batches = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(80)]
    run = str(tmp_path / "run")
    hook = ts.Hook(run, save_interval=5, system_monitor_interval_ms=0, stop_check_interval_ms=0)
    hook.register_module(model)
    crit = hook.register_loss(crit)
    hook.register_optimizer(opt)
    os.makedirs(os.path.join(run, "control"), exist_ok=True)
    with open(os.path.join(run, "control", "stop.json"), "w") as f:
        f.write(text)
    train(hook, model, opt, crit, batches[:60])
    hook._poll_stop()
    assert not hook.should_stop, "a malformed request must not stop the training"
    assert hook.error_count == 0 and not hook.errors, hook.errors
    assert hook._saving, "capture must stay on"
    _core.request_stop(run, "watcher says stop")  # a well-formed request replaces it
    steps_before = hook.step_count
    for x, y in batches[60:]:
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        hook._poll_stop()
        if hook.should_stop:
            break
    assert hook.should_stop and hook.stop_reason == "watcher says stop"
    assert hook.step_count - steps_before <= 2
    hook.close()
    events = [e for e in ts.open_run(run).events() if e["kind"] == "stop_request_invalid"]
    assert len(events) == 1, events

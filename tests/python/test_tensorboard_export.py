"""`trainscope export tensorboard` checked by an independent decoder.

A run is written by tests/tools/live_writer (tensor summaries of known values, whose raw float32
data it dumps), exported with the CLI, and every record of every events file is verified here:
both masked CRC-32C values (conftest.crc32c, from the Castagnoli polynomial), then the
Event is decoded by `protoc --decode=tensorboard.Event` against testdata/tensorboard/event.proto.
Histogram buckets must equal NumPy's np.histogram of the same values, and the reductions exported
next to each histogram (`<tensor>/<reduction>` simple values) NumPy's reductions.
"""
import pathlib
import re
import shutil
import struct
import subprocess

import numpy as np
import pytest

from conftest import cli_path as _bin, crc32c, live_writer_path as _live_writer

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "testdata" / "tensorboard"


# ---- CRC-32C (Castagnoli, conftest.crc32c), masked as TFRecord does ----------------------------
def masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283


def read_records(path):
    data = pathlib.Path(path).read_bytes()
    off, out = 0, []
    while off < len(data):
        assert len(data) - off >= 12, "truncated header"
        header = data[off:off + 8]
        (length,) = struct.unpack("<Q", header)
        (len_crc,) = struct.unpack("<I", data[off + 8:off + 12])
        assert len_crc == masked(crc32c(header)), f"length CRC mismatch at {off}"
        payload = data[off + 12:off + 12 + length]
        assert len(payload) == length, "truncated payload"
        (data_crc,) = struct.unpack("<I", data[off + 12 + length:off + 16 + length])
        assert data_crc == masked(crc32c(payload)), f"data CRC mismatch at {off}"
        out.append(payload)
        off += 16 + length
    return out


def decode(payload: bytes) -> str:
    r = subprocess.run(["protoc", f"--proto_path={PROTO_DIR}", "--decode=tensorboard.Event",
                        "event.proto"], input=payload, capture_output=True, check=True)
    return r.stdout.decode()


def floats(text, field):
    return [float(x) for x in re.findall(rf"^\s*{field}: (\S+)$", text, re.M)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    if not shutil.which("protoc"):
        pytest.skip("protoc (Debian protobuf-compiler) is not installed")
    tmp = tmp_path_factory.mktemp("tbexport")
    run, dump, out = tmp / "run", tmp / "dump", tmp / "tb"
    dump.mkdir()
    subprocess.run([_live_writer(), str(run), "--steps", "12", "--step-ms", "0",
                    "--tensor-every", "4", "--buckets", "15", "--dump-dir", str(dump)],
                   check=True, capture_output=True, timeout=120)
    r = subprocess.run([_bin(), "export", "tensorboard", str(run), str(out)],
                       check=True, capture_output=True, text=True, timeout=120)
    files = [pathlib.Path(p) for p in r.stdout.split()]
    return files, dump


def test_file_names_and_every_record_decodes(exported):
    files, _ = exported
    assert files, "no events file written"
    worker = [f for f in files if f.parent.name == "worker-0"]
    assert len(worker) == 1
    assert re.fullmatch(r"events\.out\.tfevents\.\d{10}\.[^.]+(\.[^.]+)*\.\d+\.\d+", worker[0].name)
    for f in files:
        records = read_records(f)
        assert len(records) > 1
        first = decode(records[0])
        assert 'file_version: "brain.Event:2"' in first
        for rec in records[1:]:
            text = decode(rec)
            assert "summary {" in text and "tag: " in text, text


def test_scalars_are_simple_values_with_mode_prefix(exported):
    files, _ = exported
    texts = [decode(r) for r in read_records(files[0])[1:]]
    train = [t for t in texts if 'tag: "losses/loss"' in t]
    evals = [t for t in texts if 'tag: "eval/losses/loss"' in t]
    assert len(train) == 12
    assert len(evals) == 1  # live_writer logs an eval loss at step 9
    steps = [int(re.search(r"^step: (\d+)$", t, re.M).group(1)) if "step:" in t else 0
             for t in train]
    assert steps == list(range(12))
    for t in train:
        v = floats(t, "simple_value")
        assert len(v) == 1 and 0 < v[0] < 3


def test_histograms_match_numpy(exported):
    files, dump = exported
    texts = [decode(r) for r in read_records(files[0])[1:]]
    histos = [t for t in texts if "histo {" in t]
    assert len(histos) == 3  # steps 0, 4, 8
    for t in histos:
        m = re.search(r"^step: (\d+)$", t, re.M)
        step = int(m.group(1)) if m else 0
        values = np.fromfile(dump / f"weights-{step}.f32", dtype=np.float32)
        counts, edges = np.histogram(values, bins=15, range=(float(values.min()), float(values.max())))
        assert floats(t, "bucket") == [float(c) for c in counts]
        # NumPy keeps float32 edges for float32 data; trainscope computes them in float64.
        np.testing.assert_allclose(floats(t, "bucket_limit"), edges[1:].astype(np.float64), rtol=1e-6)
        assert floats(t, "num")[0] == values.size
        assert floats(t, "min")[0] == pytest.approx(float(values.min()))
        assert floats(t, "max")[0] == pytest.approx(float(values.max()))
        assert floats(t, "sum")[0] == pytest.approx(float(values.astype(np.float64).sum()), abs=1e-6)
        assert floats(t, "sum_squares")[0] == pytest.approx(
            float((values.astype(np.float64) ** 2).sum()), rel=1e-9)


def test_reductions_are_scalars_next_to_the_histogram(exported):
    files, dump = exported
    texts = [decode(r) for r in read_records(files[0])[1:]]
    histos = [t for t in texts if "histo {" in t]
    assert len(histos) == 3
    for t in histos:
        m = re.search(r"^step: (\d+)$", t, re.M)
        step = int(m.group(1)) if m else 0
        x = np.fromfile(dump / f"weights-{step}.f32", dtype=np.float32).astype(np.float64)
        scalars = {tag: float(v) for tag, v in
                   re.findall(r'tag: "([^"]+)"\s*simple_value: (\S+)', t)}
        name = re.search(r'tag: "([^"]+)"\s*histo \{', t).group(1)
        want = {"min": x.min(), "max": x.max(), "mean": x.mean(), "std": x.std(),
                "var": x.var(), "l1": np.abs(x).sum(), "l2": np.sqrt((x * x).sum()),
                "abs_mean": np.abs(x).mean(), "count": x.size, "nan": 0, "inf": 0,
                "pos_inf": 0, "neg_inf": 0, "zeros": np.count_nonzero(x == 0),
                "negatives": np.count_nonzero(x < 0), "positives": np.count_nonzero(x > 0),
                "finite": x.size, "zero_fraction": np.count_nonzero(x == 0) / x.size}
        assert sorted(scalars) == sorted(f"{name}/{r}" for r in want)
        for r, v in want.items():
            assert scalars[f"{name}/{r}"] == pytest.approx(float(np.float32(v)), rel=1e-6,
                                                           abs=1e-12), r

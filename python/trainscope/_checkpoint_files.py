"""A checkpoint directory's files and commit records (docs/format.md §10, docs/checkpoints.md).

The record is the core's (include/trainscope/checkpoint_record.h), shared with the LibTorch
front end: the bytes torch.save writes are fed to a CRC-32C digest on their way out, the core
installs the data file and writes the record (temporary file, fsync, rename, fsync of the
directory). A checkpoint exists once its record does. Records of the previous version
(version 1, with a sha256) are still read and verified here.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from typing import Callable, List, Optional, Tuple

from . import _core

FORMAT = _core.CHECKPOINT_FORMAT
VERSION = _core.CHECKPOINT_RECORD_VERSION
_NAME_RE = re.compile(r"^ckpt-(\d{12})\.json$")
# temporary files: the data file's (.ckpt-N.pt.tmp-PID, version 1 records .ckpt-N.json.tmp-PID)
# and the core's for a record (ckpt-N.json.tmp.PID, util/env: WriteFileAtomic)
_TMP_RE = re.compile(r"^(?:\.ckpt-\d{12}\.(?:pt|json)\.tmp-|ckpt-\d{12}\.json\.tmp\.)(\d+)$")


def now_us() -> int:
    return time.time_ns() // 1000


def base_name(step: int) -> str:
    return f"ckpt-{int(step):012d}"


class _DigestWriter:
    """A file object for torch.save that feeds the bytes to the core's digest as they go out."""

    def __init__(self, f):
        self._f = f
        self.digest = _core.CheckpointDigest()

    def write(self, b) -> int:
        self.digest.update(b)
        return self._f.write(b)

    def flush(self) -> None:
        self._f.flush()


def write_checkpoint(dir: str, step: int, pid: int, save: Callable, stage: Callable, *,
                     global_step: int, wall_us: int, reason: str, extra: dict) -> Tuple[str, dict]:
    """Writes ``save(file)``'s bytes as checkpoint `step` of `dir` and commits it; returns the
    data file's path and the record. ``stage(name, path)`` is called between the steps."""
    name = base_name(step)
    pt = os.path.join(dir, name + ".pt")
    tmp = os.path.join(dir, f".{name}.pt.tmp-{pid}")
    installed = False
    try:
        with open(tmp, "wb") as f:
            w = _DigestWriter(f)
            save(w)
            f.flush()
        stage("payload", tmp)
        _core.install_checkpoint_data(dir, tmp, step)  # fsync, uncommit a replaced one, rename
        installed = True
        stage("renamed", pt)
        record = dict(format=FORMAT, version=VERSION, step=step, global_step=global_step,
                      file=os.path.basename(pt), bytes=w.digest.bytes,
                      crc32c=f"{w.digest.crc32c:08x}", wall_us=wall_us, reason=reason,
                      front_end="pytorch", **extra)
        return pt, _core.commit_checkpoint(dir, json.dumps(record))
    except BaseException:
        # Every failure (a full disk, torch.save raising, Ctrl-C half way): nothing of this
        # checkpoint stays behind, neither the temporary file nor a renamed data file without a
        # record (either may be as large as the checkpoint, on a disk that is full already).
        _discard(tmp)
        if installed and not os.path.exists(os.path.join(dir, name + ".json")):
            _discard(pt)
        raise


def _discard(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def list_checkpoints(dir: str) -> List[dict]:
    """Committed checkpoints of `dir` (their .json records, with "json" and "path" added),
    oldest first. Validity of the .pt files is not checked here (see verify_checkpoint)."""
    out = []
    try:
        names = os.listdir(dir)
    except FileNotFoundError:
        return out
    for n in names:
        m = _NAME_RE.match(n)
        if not m:
            continue
        jp = os.path.join(dir, n)
        try:
            meta = _core.read_checkpoint_record(jp)
        except (OSError, ValueError) as e:
            meta = {"step": int(m.group(1)), "invalid": f"bad record: {e}"}
        meta["json"] = jp
        meta["path"] = os.path.join(dir, n[:-5] + ".pt")
        out.append(meta)
    out.sort(key=lambda d: d["step"])
    return out


def verify_checkpoint(meta: dict) -> Optional[str]:
    """None when the .pt matches its record (size and checksum); else why not."""
    if meta.get("invalid"):
        return meta["invalid"]
    if "crc32c" not in meta:
        return _verify_sha256(meta)
    why = _core.verify_checkpoint(os.path.dirname(meta["json"]), meta["json"])
    return why or None


def read_verified(meta: dict) -> Tuple[Optional[str], Optional[dict], Optional[bytes]]:
    """(None, record, data) with the data file's bytes, read once and checked against its record
    (read again from disk: the one the bytes were checked against), or (why, record, None).
    Load from these bytes, never from the file: what is loaded is then what was verified."""
    if meta.get("invalid"):
        return meta["invalid"], None, None
    why, record, data = _core.read_verified_checkpoint(os.path.dirname(meta["json"]),
                                                       meta["json"])
    if why:
        return why, record, None
    if data is None:  # a version 1 record: sha256, over the same bytes that are returned
        try:
            fd = os.open(meta["path"], os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as f:
                data = f.read(int(record.get("bytes", 0)) + 1)
        except OSError as e:
            return f"unreadable: {e}", record, None
        if len(data) != int(record.get("bytes", -1)):
            return (f"size {len(data)} != recorded {record.get('bytes')} bytes (torn write)",
                    record, None)
        if hashlib.sha256(data).hexdigest() != record.get("sha256"):
            return "sha256 mismatch (corrupt file)", record, None
    return None, record, data


def _verify_sha256(meta: dict) -> Optional[str]:
    """A version 1 record (written by trainscope before the core's record): sha256."""
    h = hashlib.sha256()
    n = 0
    try:
        with open(meta["path"], "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                h.update(b)
                n += len(b)
    except OSError as e:
        return f"unreadable: {e}"
    if n != int(meta.get("bytes", -1)):
        return f"size {n} != recorded {meta.get('bytes')} bytes (torn write)"
    if h.hexdigest() != meta.get("sha256"):
        return "sha256 mismatch (corrupt file)"
    return None


def delete_checkpoint(c: dict) -> None:
    """The record first (uncommitted), then the data."""
    for p in (c["json"], c["path"]):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_temp(dir: str, own_pid: int) -> None:
    """Removes temporary files of dead writers (and this process's) and .pt files without a
    record."""
    try:
        names = os.listdir(dir)
    except OSError:
        return
    committed = {n[:-5] for n in names if _NAME_RE.match(n)}
    for n in names:
        m = _TMP_RE.match(n)
        p = os.path.join(dir, n)
        try:
            if m and (int(m.group(1)) == own_pid or not _pid_alive(int(m.group(1)))):
                os.unlink(p)
            elif n.startswith("ckpt-") and n.endswith(".pt") and n[:-3] not in committed:
                os.unlink(p)
        except OSError:
            pass

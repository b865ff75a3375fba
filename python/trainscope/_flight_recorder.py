"""PyTorch's own flight recorder (the ring buffer of recent collectives torch.distributed keeps
per process group), switched on for the job's ranks and dumped into the run on a hang.

- Settings (environment variables torch reads when a process group is created; names of
  torch 2.x, the older TORCH_NCCL_* spelling beside the newer TORCH_FR_* one):
  TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE (entries kept, 0 = off),
  TORCH_NCCL_DUMP_ON_TIMEOUT (torch's watchdog dumps when a NCCL collective times out), and
  TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE (the prefix of those dumps; torch
  appends the rank). A value the user set is never replaced (either spelling counts).
  ``trainscope run`` sets them for its child (tools/cli/flight_recorder.cc) on a machine with
  an NVIDIA driver; a hook created before ``init_process_group`` sets them where torch has CUDA
  and NCCL. TRAINSCOPE_FLIGHT_RECORDER=0 turns both off, =1 turns them on anywhere.
- Dumps: when stalled_training_loop fires (or another rank asks for stacks, _stacks.py), each
  rank also asks torch for its flight recorder's contents (``_dump_fr_trace``, else
  ``_dump_nccl_trace``, where torch has them) and writes them to
  ``RUN/flight_recorder/<capture request>/rank_<N>``: torch's pickle, one folder per capture
  as torch's analyser expects (``python -m torch.distributed.flight_recorder.fr_trace
  RUN/flight_recorder/<capture>``). torch's own dumps on a NCCL timeout land in
  ``RUN/flight_recorder/rank_<N>``.
  ``trainscope stacks RUN`` lists both.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import Dict, MutableMapping, Optional

log = logging.getLogger("trainscope")

DIR = "flight_recorder"          # RUN/flight_recorder/
BUFFER_ENTRIES = "2000"          # torch's own suggestion for a useful buffer
BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
FILE_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
DUMP_ON_TIMEOUT = "TORCH_NCCL_DUMP_ON_TIMEOUT"
SWITCH = "TRAINSCOPE_FLIGHT_RECORDER"


def settings(run_dir: str, environ: MutableMapping[str, str]) -> Dict[str, str]:
    """The variables to add to `environ` so that torch records collectives and dumps them into
    `run_dir` (none that the user set, in either spelling)."""
    out: Dict[str, str] = {}
    if not any(v in environ for v in BUFFER_VARS):
        for v in BUFFER_VARS:
            out[v] = BUFFER_ENTRIES
    if DUMP_ON_TIMEOUT not in environ:
        out[DUMP_ON_TIMEOUT] = "1"
    if not any(v in environ for v in FILE_VARS):
        prefix = os.path.join(os.path.abspath(run_dir), DIR, "rank_")
        for v in FILE_VARS:
            out[v] = prefix
    return out


def _nccl_possible() -> bool:
    torch = sys.modules.get("torch")
    try:
        import torch.distributed as dist
        return bool(torch is not None and torch.cuda.is_available()
                    and dist.is_available() and dist.is_nccl_available())
    except Exception:
        return False


def configure(run_dir: str, environ: Optional[MutableMapping[str, str]] = None) -> Dict[str, str]:
    """Sets the flight recorder's variables in this process (before its process group exists:
    a hook made before init_process_group) where NCCL can be used, or everywhere with
    TRAINSCOPE_FLIGHT_RECORDER=1. Returns what was set (nothing once a group exists)."""
    env = os.environ if environ is None else environ
    switch = env.get(SWITCH, "")
    if switch == "0":
        return {}
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return {}  # torch read its settings when the group was made
    except Exception:
        return {}
    if switch != "1" and not _nccl_possible():
        return {}
    new = settings(run_dir, env)
    if new:
        try:
            os.makedirs(os.path.join(run_dir, DIR), exist_ok=True)
        except OSError:
            pass
        env.update(new)
    return new


def _recording() -> bool:
    for v in BUFFER_VARS:
        try:
            if int(os.environ.get(v, "0")) > 0:
                return True
        except ValueError:
            pass
    return False


def dump(run_dir: str, request: str) -> Optional[str]:
    """Writes this process's flight recorder contents into
    RUN/flight_recorder/<request>/rank_<rank> (the layout torch's fr_trace analyser reads: one
    folder per capture, one file per rank); the path, or None where there is nothing to dump
    (no process group, recorder off, no such API in this torch)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not _recording():
        return None
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return None
        rank = int(dist.get_rank())
        import torch._C._distributed_c10d as c10d
    except Exception:
        return None
    fn = getattr(c10d, "_dump_fr_trace", None) or getattr(c10d, "_dump_nccl_trace", None)
    if fn is None:
        return None
    data = fn(True, True, False)  # collectives, stack traces, not only the active ones
    name = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in request) or "capture"
    d = os.path.join(run_dir, DIR, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "rank_%d" % rank)
    tmp = os.path.join(d, ".rank_%d.tmp" % rank)
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path

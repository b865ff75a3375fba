"""Python stacks of every rank of a hung job, captured into the run.

Each hook runs one small daemon thread (``StackWatch``) that wakes every 0.5 s and captures
this process's Python stacks (all threads, with ``faulthandler.dump_traceback``) into
``RUN/stacks/<worker>-<n>.txt`` when

- an in-process ``stalled_training_loop`` rule of this hook fired (a new firing), and then it
  also writes the capture request ``RUN/control/stacks.json`` so that every other rank
  captures its stacks too; or
- a capture request it has not answered yet appears in ``RUN/control/stacks.json`` (written by
  another rank as above, or by ``trainscope stacks RUN --capture``).

It works while the training thread is blocked inside a C++ collective, a data-loader wait or
any other call that released the GIL (torch's collectives, ``Work.wait``, autograd's backward
and blocking I/O all do): the watch thread then runs, and faulthandler walks every thread's
frames. A thread that spins in C while holding the GIL would block it (py-spy works there).
``trainscope stacks RUN`` prints the captures; the report lists them. Event ``stacks_captured``
({path, reason, request}) in the rank's stream.
"""
from __future__ import annotations

import faulthandler
import json
import logging
import os
import socket
import threading
import time
from typing import Optional

from ._schema import EVENT, FILE

log = logging.getLogger("trainscope")

POLL_S = 0.5
REQUEST = os.path.join(FILE.CONTROL_DIR, FILE.STACKS_REQUEST)
RULE = "stalled_training_loop"
SAME_HANG_S = 10  # a rank's own firing this soon after another rank's request: one capture
MAX_CAPTURES = 20  # per hook: a request repeated forever must not fill the disk


def request_capture(run_dir: str, reason: str, by: str) -> str:
    """Writes RUN/control/stacks.json (atomically); returns the request id."""
    rid = "%d-%s-%d" % (time.time_ns() // 1000, socket.gethostname(), os.getpid())
    d = os.path.join(run_dir, FILE.CONTROL_DIR)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, ".stacks.json.%d" % os.getpid())
    with open(tmp, "w") as f:
        json.dump({"id": rid, "reason": reason, "requested_by": by,
                   "requested_at_us": time.time_ns() // 1000}, f)
    os.replace(tmp, os.path.join(run_dir, REQUEST))
    return rid


def read_request(run_dir: str) -> Optional[dict]:
    try:
        with open(os.path.join(run_dir, REQUEST)) as f:
            req = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(req, dict) or not isinstance(req.get("id"), str):
        return None
    return req


class StackWatch:
    """The capture thread of one hook (see the module docstring)."""

    def __init__(self, hook):
        self._hook = hook
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._firings = 0
        self._answered = None
        # a request older than this hook is not for it (a previous run in the same dir)
        self._since_us = time.time_ns() // 1000
        self.captures = 0
        self._last_capture = -1e9

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="trainscope-stacks",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self._poll()
            except Exception as e:  # never into the training; said once by the hook
                self._hook._fail("stacks", e)

    def _poll(self) -> None:
        h = self._hook
        if self.captures >= MAX_CAPTURES:
            return
        fired = self._new_firing()
        if fired:
            # another rank's request of the last seconds is this hang's too: answering it
            # keeps one capture id (one flight recorder folder) for all ranks
            req = read_request(h.out_dir)
            at = int(req.get("requested_at_us") or 0) if req is not None else 0
            if req is not None and at >= self._since_us and \
                    time.time_ns() // 1000 - at < SAME_HANG_S * 1e6:
                rid = req["id"]
            else:
                rid = request_capture(h.out_dir, fired, h.worker)
            self._answered = rid
            self.capture(fired, rid)
            return
        req = read_request(h.out_dir)
        if req is None or req["id"] == self._answered:
            return
        if time.monotonic() - self._last_capture < 5:  # just captured (its own firing)
            self._answered = req["id"]
            return
        if int(req.get("requested_at_us") or 0) < self._since_us:
            self._answered = req["id"]
            return
        self._answered = req["id"]
        self.capture(str(req.get("reason") or "capture requested"), req["id"])

    def _new_firing(self) -> Optional[str]:
        rt = self._hook._runtime
        if rt is None or not rt.has_rules:
            return None
        for s in rt.rule_statuses():
            if s.get("type", s.get("rule")) == RULE or s.get("rule") == RULE:
                n = int(s.get("firings", 0))
                if n > self._firings:
                    self._firings = n
                    return "%s fired on %s: %s" % (s.get("rule"), self._hook.worker,
                                                   s.get("message", ""))
        return None

    def capture(self, reason: str, request: str) -> Optional[str]:
        """Dumps every thread's Python stack into RUN/stacks/<worker>-<n>.txt."""
        h = self._hook
        d = os.path.join(h.out_dir, "stacks")
        os.makedirs(d, exist_ok=True)
        self.captures += 1
        self._last_capture = time.monotonic()
        path = os.path.join(d, "%s-%d.txt" % (h.worker, int(time.time() * 1000)))
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("# trainscope stacks: %s pid %d host %s step %d at %s\n"
                    % (h.worker, os.getpid(), socket.gethostname(), h.step_count,
                       time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
            f.write("# reason: %s\n# request: %s\n" % (reason.replace("\n", " "), request))
            f.write("# threads: %s\n" % ", ".join(
                "%s=%#x" % (t.name, t.ident or 0) for t in threading.enumerate()))
            f.flush()
            faulthandler.dump_traceback(file=f, all_threads=True)
        os.replace(tmp, path)
        log.warning("trainscope: Python stacks of %s captured in %s (%s)", h.worker, path,
                    reason)
        fr = None
        try:  # and torch's flight recorder: the collectives each rank was in (where it exists)
            from . import _flight_recorder
            fr = _flight_recorder.dump(h.out_dir, request)
        except Exception as e:
            h._fail("flight recorder", e)
        w = h._writer
        if w is not None:
            w.add_event(EVENT.STACKS_CAPTURED, json.dumps({"path": os.path.relpath(path, h.out_dir),
                                                       "reason": reason,
                                                       "request": request,
                                                       "step": h.step_count,
                                                       "flight_recorder": fr and os.path.relpath(
                                                           fr, h.out_dir)}))
        return path

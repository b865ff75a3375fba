"""Reading a run: ``ts.open_run(path)``, also while the training is still writing it.

    >>> import trainscope as ts
    >>> run = ts.open_run("runs/exp1")                           # doctest: +SKIP
    >>> run.tensor_names(collection="gradients")                 # doctest: +SKIP
    ['gradients/fc1.bias', 'gradients/fc1.weight', ...]
    >>> t = run.tensor("gradients/fc1.weight")                   # doctest: +SKIP
    >>> t.reduction(t.steps()[-1], "l2")                         # doctest: +SKIP
    0.0123
    >>> steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN)  # doctest: +SKIP

(tests/python/test_docstrings.py runs these examples on a real run.)

Every accessor refreshes the view first (at most every ``refresh_interval_s``; call
``run.refresh()`` to force), so a loop over a live run sees new steps as they are written.
Missing tensors, scalars, steps and reductions raise ``ts.NotFoundError`` (a KeyError) whose
message names the nearest existing ones.
"""
from __future__ import annotations

import json
import time
from typing import Dict, List, Optional, Tuple

import numpy as np

from . import _core
from ._dtypes import FLOAT64, raw_to_numpy
from ._modes import Mode, NotFoundError
from ._schema import STREAM


def _mode_arg(mode) -> int:
    return int(Mode.parse(mode))


class Run:
    """A run directory opened for reading (see module docs)."""

    def __init__(self, path: str, refresh_interval_s: float = 0.05):
        # Damaged records and unreadable files do not raise: they are skipped and counted in
        # read_stats(). A run.json of a newer schema_version raises ValueError.
        try:
            self._r = _core.RunReader(str(path))
        except FileNotFoundError as e:
            raise NotFoundError("run directory", str(path), context="",
                                hint=str(e)) from None
        self.path = str(path)
        self.refresh_interval_s = refresh_interval_s
        self._last_refresh = time.monotonic()

    # ---- freshness ---------------------------------------------------------------------------
    def refresh(self) -> int:
        """Reads what was appended since the last refresh; returns the number of new records."""
        self._last_refresh = time.monotonic()
        return self._r.refresh()

    def _fresh(self) -> None:
        if time.monotonic() - self._last_refresh >= self.refresh_interval_s:
            self.refresh()

    # ---- run-level ---------------------------------------------------------------------------
    @property
    def manifest(self) -> dict:
        """run.json: id, name, command, host, pid, start_us, config (dict), framework."""
        m = self._r.manifest()
        try:
            m["config"] = json.loads(m.pop("config_json") or "{}")
        except ValueError:
            m["config"] = {}
        return m

    def workers(self) -> List[str]:
        self._fresh()
        return self._r.workers()

    def streams(self) -> List[str]:
        self._fresh()
        return self._r.streams()

    def ended(self) -> bool:
        """True when every stream wrote its end or its writer is gone (watchers' own
        ``watch-*`` streams are not waited for)."""
        self._fresh()
        if self._r.ended():
            return True
        streams = [s for s in self._r.streams() if not s.startswith(STREAM.WATCH_PREFIX)]
        return bool(streams) and not any(self._r.stream_live(s) for s in streams)

    def steps(self, mode=None, worker: Optional[str] = None) -> List[int]:
        """Global steps at which anything was recorded (mode None: all modes)."""
        self._fresh()
        return self._r.steps(_mode_arg(mode), worker or "")

    def modes(self) -> List[Mode]:
        self._fresh()
        return [Mode(m) for m in self._r.modes()]

    def tensor_names(self, collection: Optional[str] = None, regex: Optional[str] = None,
                     scalars: bool = True) -> List[str]:
        """Every recorded name, sorted: tensors with summaries or raw data and (unless
        ``scalars=False``) scalar series such as "losses/loss", as smdebug's
        ``trial.tensor_names()`` lists them. Filters: collection (the part before '/', e.g.
        "losses", "gradients") and a regex searched in the name. ``run.tensor(name)`` opens
        any of them; scalars also read as series with ``run.scalar(name)``."""
        self._fresh()
        return self._r.tensor_names(collection or "", regex or "", bool(scalars))

    def scalar_names(self) -> List[str]:
        self._fresh()
        return self._r.scalar_names()

    def tensor(self, name: str, worker: Optional[str] = None) -> "Tensor":
        """A tensor by full name ("gradients/fc1.weight", or a scalar such as "losses/loss",
        whose value at a step is a 0-d float64 array); NotFoundError when unknown."""
        self._fresh()
        names = self._r.tensor_names("", "", True)
        if name not in names:
            raise NotFoundError("tensor", name, names)
        return Tensor(self, name, worker)

    def scalar(self, name: str, mode=None, worker: Optional[str] = None,
               x: str = "step") -> Tuple[np.ndarray, np.ndarray]:
        """(steps, values) numpy arrays of a scalar series ("losses/loss", "scalars/val_acc").

        x="step" gives global steps, x="mode_step" the steps within the mode."""
        self._fresh()
        d = self._r.scalar(name, _mode_arg(mode), worker or "")
        if len(d["steps"]) == 0:
            names = self._r.scalar_names()
            if name in names:
                raise NotFoundError("value of scalar", name, [],
                                    context=f"in mode {Mode.parse(mode).name}"
                                    + (f" of {worker}" if worker else ""))
            raise NotFoundError("scalar", name, names)
        steps = d["mode_steps"] if x == "mode_step" else d["steps"]
        return steps, d["values"]

    def scalar_records(self, name: str, mode=None, worker: Optional[str] = None) -> dict:
        """All columns of a scalar series: steps, mode_steps, modes, wall_us, values."""
        self._fresh()
        return self._r.scalar(name, _mode_arg(mode), worker or "")

    def step_records(self, worker: Optional[str] = None) -> List[dict]:
        """StepRecords (step, mode, mode_step, start_us, end_us, data_wait_us, forward_us,
        backward_us, optimizer_us) of a worker (default: the first)."""
        self._fresh()
        w = worker or self._first_worker()
        if w is None:
            return []
        out = self._r.step_records(w)
        for r in out:
            r["mode"] = Mode(r["mode"])
        return out

    def system_samples(self, stream: Optional[str] = None) -> List[dict]:
        """System samples ({"wall_us", "metrics": {name: value}}) of a stream (default: all
        streams that have some, merged by time)."""
        self._fresh()
        streams = [stream] if stream else self._r.streams()
        out = []
        for s in streams:
            out.extend(self._r.system_samples(s))
        out.sort(key=lambda r: r["wall_us"])
        return out

    def rule_events(self) -> List[dict]:
        """Rule events of every stream, by time: rule, status, step, mode, worker, tensors,
        value, threshold, message, firing, wall_us, details."""
        self._fresh()
        out = self._r.rule_events()
        for e in out:
            e["mode"] = Mode(e["mode"])
            dj = e.pop("details_json", "")
            try:
                e["details"] = json.loads(dj) if dj else {}
            except ValueError:
                e["details"] = {}
        return out

    def rule_statuses(self) -> Dict[str, dict]:
        """The latest status of each rule: {rule: {"status", "message", "step", "firings",
        "worker"}} (Warning events do not change a status)."""
        out: Dict[str, dict] = {}
        for e in self.rule_events():
            cur = out.setdefault(e["rule"], {"status": "InProgress", "message": "", "step": -1,
                                             "firings": 0, "worker": e["worker"]})
            cur["firings"] = max(cur["firings"], int(e["firing"]))
            if e["status"] == "Warning":
                cur.setdefault("warnings", []).append(e["message"])
                continue
            cur.update(status=e["status"], message=e["message"], step=e["step"],
                       worker=e["worker"])
        return out

    def events(self, kind: Optional[str] = None) -> List[dict]:
        """Generic events (run_start, run_end, hook_error, profiler_window, stop_requested...)
        as {"kind", "wall_us", **fields}."""
        self._fresh()
        out = []
        for e in self._r.events():
            if kind is not None and e["kind"] != kind:
                continue
            try:
                fields = json.loads(e["json"] or "{}")
            except ValueError:
                fields = {"raw": e["json"]}
            if not isinstance(fields, dict):
                fields = {"value": fields}
            fields.update(kind=e["kind"], wall_us=e["wall_us"])
            out.append(fields)
        return out

    def writer_stats(self, stream: Optional[str] = None) -> Optional[dict]:
        self._fresh()
        s = stream or self._first_worker()
        return None if s is None else self._r.last_writer_stats(s)

    def bytes_by_collection(self) -> Dict[str, int]:
        self._fresh()
        return self._r.bytes_by_collection()

    def read_stats(self) -> dict:
        """What the reader saw: segments, records, bytes, corrupt_regions, corrupt_bytes,
        torn_tail_bytes, unknown_records, undecodable_records (valid checksums, impossible
        contents), unreadable_files (FIFOs, devices, I/O errors), duplicate_segments,
        manifest_error (why run.json could not be read, or None), problems (damage, with file
        and byte offset) and warnings (torn tails a crash leaves behind)."""
        return self._r.read_stats()

    # ---- tables (the Parquet export's, docs/export.md) -----------------------------------------
    def table(self, name: str, stream: Optional[str] = None):
        """The run's `name` table as a pyarrow.Table, with the columns and types of the Parquet
        export's files (``run.table("steps").to_pandas()`` for pandas). Tables: runs, steps,
        scalars, summaries, system, rule_events, events (``ts.TABLES``); every stream's rows,
        or one stream's, as the run holds them now (one pass over its files: a live run's
        table grows between calls). Needs pyarrow (``pip install pyarrow``)."""
        from . import _tables
        return _tables.run_table(self.path, name, stream)

    def _first_worker(self) -> Optional[str]:
        ws = self._r.workers()
        return ws[0] if ws else None

    def __repr__(self) -> str:
        return f"<trainscope.Run {self.path!r}>"


class Tensor:
    """One tensor's saved steps: summaries (reductions) and, when saved raw, its values."""

    def __init__(self, run: Run, name: str, worker: Optional[str] = None):
        self.run = run
        self.name = name
        self.worker = worker
        # A scalar series ("losses/loss") read as a tensor of one element per step.
        self._scalar = (name in run._r.scalar_names()
                        and name not in run._r.tensor_names("", "", False))

    def _scalar_value(self, step: int, mode) -> Optional[Tuple[dict, float, int]]:
        d = self.run._r.scalar(self.name, _mode_arg(mode), self.worker or "")
        hits = np.nonzero(d["steps"] == int(step))[0]
        if len(hits) == 0:
            return None
        i = int(hits[-1])
        return d, float(d["values"][i]), i

    def steps(self, mode=None) -> List[int]:
        """Global steps at which this tensor was saved (summary or raw)."""
        self.run._fresh()
        if self._scalar:
            d = self.run._r.scalar(self.name, _mode_arg(mode), self.worker or "")
            return sorted({int(s) for s in d["steps"]})
        return self.run._r.tensor_steps(self.name, _mode_arg(mode), self.worker or "")

    def _missing_step(self, step: int, mode) -> NotFoundError:
        return NotFoundError("step", step, self.steps(mode),
                             context=f"for tensor {self.name!r}")

    def summary(self, step: int, mode=None) -> dict:
        """The summary record at `step`: name, step, mode, mode_step, dtype, shape, stats."""
        self.run._fresh()
        if self._scalar:
            hit = self._scalar_value(step, mode)
            if hit is None:
                raise self._missing_step(step, mode)
            d, v, i = hit
            st = _core.compute_stats(np.array([v], dtype=np.float64), FLOAT64)
            return {"name": self.name, "step": int(step), "mode": Mode(int(d["modes"][i])),
                    "mode_step": int(d["mode_steps"][i]), "shape": [], "stats": st,
                    "wall_us": int(d["wall_us"][i])}
        s = self.run._r.summary(self.name, int(step), _mode_arg(mode), self.worker or "")
        if s is None:
            if self.has_raw(step, mode):
                raw = self.run._r.raw(self.name, int(step), _mode_arg(mode), self.worker or "")
                arr = np.frombuffer(raw["data"], dtype=np.uint8)
                st = _core.compute_stats(arr.view(_np_view(raw["dtype"])), raw["dtype"])
                return {"name": self.name, "step": raw["step"], "mode": Mode(raw["mode"]),
                        "mode_step": raw["mode_step"], "shape": raw["shape"], "stats": st}
            raise self._missing_step(step, mode)
        s["mode"] = Mode(s["mode"])
        return s

    def reductions(self, step: int, mode=None) -> Dict[str, float]:
        """All reductions at `step`: min max mean std var l1 l2 abs_mean count nan inf pos_inf
        neg_inf zeros negatives positives finite zero_fraction (and histogram when saved)."""
        return self.summary(step, mode)["stats"]

    def reduction(self, step: int, name: str, mode=None) -> float:
        r = self.reductions(step, mode)
        if name not in r:
            raise NotFoundError("reduction", name, sorted(r), context=f"for {self.name!r}")
        return r[name]

    def has_raw(self, step: int, mode=None) -> bool:
        if self._scalar:
            return self._scalar_value(step, mode) is not None
        return self.run._r.has_raw(self.name, int(step), _mode_arg(mode), self.worker or "")

    def value(self, step: int, mode=None, bf16: str = "float32") -> np.ndarray:
        """The saved values at `step` as a numpy array of the tensor's dtype and shape (raw
        tensors only). bfloat16 comes back as float32 (exact) or, with bf16="uint16", as
        the raw bit patterns."""
        self.run._fresh()
        if self._scalar:
            hit = self._scalar_value(step, mode)
            if hit is None:
                raise self._missing_step(step, mode)
            return np.array(hit[1], dtype=np.float64)
        raw = self.run._r.raw(self.name, int(step), _mode_arg(mode), self.worker or "")
        if raw is None:
            if self.run._r.summary(self.name, int(step), _mode_arg(mode), self.worker or ""):
                raise NotFoundError(
                    "raw value of", self.name, None, context=f"at step {step}",
                    hint="only summaries were saved; use reductions(), or save it with "
                         "ts.Collection(..., raw=True)")
            raise self._missing_step(step, mode)
        return raw_to_numpy(raw["data"], raw["dtype"], raw["shape"], bf16=bf16)

    def values(self, mode=None) -> Dict[int, np.ndarray]:
        """{step: value} for every step with raw data."""
        return {s: self.value(s, mode) for s in self.steps(mode) if self.has_raw(s, mode)}

    def __repr__(self) -> str:
        return f"<trainscope.Tensor {self.name!r}>"


def _np_view(code: int):
    from ._dtypes import NUMPY_OF_CODE
    return NUMPY_OF_CODE[code]


def open_run(path: str, refresh_interval_s: float = 0.05) -> Run:
    """Opens a run directory for reading (works while it is being written)."""
    return Run(path, refresh_interval_s)

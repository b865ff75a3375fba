"""The framework-profiling window of ts.ProfilerConfig: torch.profiler operators (a Kineto Chrome
trace, which Holistic Trace Analysis, Perfetto and TensorBoard read) and cProfile Python functions,
for global steps [start_step, start_step + num_steps) only.

The hook drives a window with three calls, all on the training thread:

- ``start(step)`` when global step ``step`` begins (the profilers start inside that step);
- ``step(closed)`` when step ``closed`` ends inside the window and the window goes on: the
  trace's ``ProfilerStep#<closed>`` span ends and ``ProfilerStep#<closed + 1>`` begins;
- ``stop(last)`` when the window ends with step ``last`` (the last ``ProfilerStep`` span ends),
  which writes RUN/profile/trace-<worker>.json and functions-<worker>.json and returns the
  fields of the ``profiler_window`` event.
"""
from __future__ import annotations

import json
import logging
import os
import time

from ._errors import check_bool, check_int
from ._schema import FILE, profile_file

log = logging.getLogger("trainscope")

STEP_SPAN_PREFIX = "ProfilerStep#"  # torch.profiler's step annotation; HTA splits iterations by it


def _record_every_step(step: int):
    """The window's torch.profiler schedule. A schedule is what makes torch.profiler annotate
    steps (ProfilerStep#N); this one always records, because the hook, not the schedule,
    decides where the window ends."""
    from torch.profiler import ProfilerAction
    return ProfilerAction.RECORD


def _distributed_initialized() -> bool:
    try:
        import torch.distributed as dist
        return dist.is_available() and dist.is_initialized()
    except Exception:
        return False


class ProfilerWindow:
    def __init__(self, config, run_dir: str, worker: str, role: str = ""):
        # role: "culprit" (the worker a rule named), "reference" (the one profiled beside it
        # for comparison), or "" (a window nobody singled out)
        self.role = role
        self.config = config
        self.dir = os.path.join(run_dir, FILE.PROFILE_DIR)
        self.worker = worker
        self.trace_path = os.path.join(self.dir, profile_file("trace", worker))
        self._torch = None
        self._cprofile = None
        self._start_ns = 0
        self._start_step = 0
        self._trace_written = False
        self._trace_error = ""

    # ------------------------------------------------------------------------------- start
    def start(self, step: int) -> None:
        os.makedirs(self.dir, exist_ok=True)
        self._start_step = step
        try:
            if self.config.torch_profiler:
                self._start_torch(step)
            if self.config.python_profiler:
                import cProfile
                self._cprofile = cProfile.Profile()
                self._cprofile.enable()
        except BaseException:
            self._abandon()
            raise
        self._start_ns = time.perf_counter_ns()

    def _start_torch(self, step: int) -> None:
        import torch
        from torch.profiler import ProfilerActivity
        acts = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts, record_shapes=self.config.record_shapes,
                                      schedule=_record_every_step,
                                      on_trace_ready=self._write_trace)
        prof.step_num = step  # the first span is ProfilerStep#<step>: trainscope's global step
        prof.__enter__()
        self._torch = prof
        if not _distributed_initialized():  # else torch writes distributedInfo itself
            from ._run import _worker_rank
            prof.add_metadata_json("distributedInfo", json.dumps({"rank": _worker_rank()}))

    def _abandon(self) -> None:
        """Stops whatever start() had started, writing nothing."""
        if self._cprofile is not None:
            self._cprofile.disable()
            self._cprofile = None
        if self._torch is not None:
            prof, self._torch = self._torch, None
            prof.on_trace_ready = None
            try:
                prof.__exit__(None, None, None)
            except Exception:
                pass

    # -------------------------------------------------------------------------------- step
    def step(self, closed_step: int) -> None:
        """Step ``closed_step`` ended and the window goes on (see the module docstring)."""
        if self._torch is not None:
            self._torch.step_num = closed_step  # span numbers follow the hook's global steps
            self._torch.step()

    def _write_trace(self, prof) -> None:
        """torch.profiler's on_trace_ready: the Kineto trace, written atomically."""
        tmp = self.trace_path + ".tmp"
        prof.export_chrome_trace(tmp)
        os.replace(tmp, self.trace_path)
        self._trace_written = True

    # -------------------------------------------------------------------------------- stop
    def stop(self, last_step: int) -> dict:
        """Stops both profilers, writes the files, returns the profiler_window event fields."""
        elapsed_ns = time.perf_counter_ns() - self._start_ns
        if self._cprofile is not None:
            self._cprofile.disable()
        steps = max(1, last_step - self._start_step + 1)
        operators = []
        if self._torch is not None:
            operators = self._stop_torch(last_step)
        functions = self._functions() if self._cprofile is not None else []
        table = {
            "window": {"start_step": self._start_step, "num_steps": steps},
            "step_time_us": elapsed_ns / 1000.0 / steps,
            "functions": functions,
            "operators": operators[:max(self.config.top_functions, 100)],
        }
        if self.role:
            table["role"] = self.role
        fpath = os.path.join(self.dir, profile_file("functions", self.worker))
        tmp = fpath + ".tmp"
        with open(tmp, "w") as f:
            json.dump(table, f)
        os.replace(tmp, fpath)
        run_dir = os.path.dirname(self.dir)
        info = {"start_step": self._start_step, "end_step": last_step, "num_steps": steps,
                "worker": self.worker,
                "trace": os.path.relpath(self.trace_path, run_dir) if self._trace_written else "",
                "functions": os.path.relpath(fpath, run_dir)}
        if self._trace_error:
            info["trace_error"] = self._trace_error
        if self.role:
            info["role"] = self.role
        return info

    def _stop_torch(self, last_step: int) -> list:
        prof, self._torch = self._torch, None
        try:
            prof.add_metadata_json("trainscope", json.dumps(
                {"worker": self.worker, "start_step": self._start_step, "end_step": last_step}))
            prof.__exit__(None, None, None)  # ends the last ProfilerStep, calls _write_trace
        except Exception as e:
            self._trace_error = f"{type(e).__name__}: {e}"
            log.warning("trainscope: the torch.profiler trace was not written: %s",
                        self._trace_error)
            return []
        operators = []
        for ev in prof.key_averages():
            if ev.key.startswith(STEP_SPAN_PREFIX):
                continue  # a step, not an operator
            operators.append({"name": ev.key, "calls": int(ev.count),
                              "total_us": float(ev.cpu_time_total),
                              "self_us": float(ev.self_cpu_time_total)})
        operators.sort(key=lambda o: -o["total_us"])
        return operators

    def _functions(self) -> list:
        import pstats
        st = pstats.Stats(self._cprofile)
        functions = []
        for (file, line, name), (cc, nc, tt, ct, _callers) in st.stats.items():
            functions.append({"name": name, "file": file, "line": int(line), "calls": int(nc),
                              "total_us": ct * 1e6, "self_us": tt * 1e6})
        functions.sort(key=lambda f: -f["total_us"])
        return functions[:self.config.top_functions]


class ProfilerConfig:
    """A framework-profiling window: ``num_steps`` global steps from ``start_step``.

    Inside the window the hook records operator timings with torch.profiler (Chrome trace JSON
    at RUN/profile/trace-<worker>.json) and Python function timings with cProfile
    (RUN/profile/functions-<worker>.json). Outside it costs one integer comparison per step.
    """

    def __init__(self, start_step: int = 5, num_steps: int = 10, torch_profiler: bool = True,
                 python_profiler: bool = True, record_shapes: bool = False,
                 top_functions: int = 50):
        w = "ProfilerConfig"
        self.start_step = check_int(w, "start_step", start_step, minimum=0)
        self.num_steps = check_int(w, "num_steps", num_steps, minimum=1, maximum=1_000_000)
        self.torch_profiler = check_bool(w, "torch_profiler", torch_profiler)
        self.python_profiler = check_bool(w, "python_profiler", python_profiler)
        self.record_shapes = check_bool(w, "record_shapes", record_shapes)
        self.top_functions = check_int(w, "top_functions", top_functions, minimum=0,
                                       maximum=1_000_000)

    @property
    def end_step(self) -> int:  # exclusive
        return self.start_step + self.num_steps

    def to_config(self) -> dict:
        return {"start_step": self.start_step, "num_steps": self.num_steps,
                "torch_profiler": self.torch_profiler, "python_profiler": self.python_profiler}

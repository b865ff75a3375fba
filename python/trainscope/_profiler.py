"""The framework-profiling window of ts.ProfilerConfig: torch.profiler operators (Chrome trace)
and cProfile Python functions, for [start_step, start_step + num_steps) only."""
from __future__ import annotations

import json
import os
import time


class ProfilerWindow:
    def __init__(self, config, run_dir: str, worker: str):
        self.config = config
        self.dir = os.path.join(run_dir, "profile")
        self.worker = worker
        self._torch = None
        self._cprofile = None
        self._start_ns = 0
        self._start_step = 0

    def start(self, step: int) -> None:
        os.makedirs(self.dir, exist_ok=True)
        self._start_step = step
        if self.config.torch_profiler:
            import torch
            acts = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            self._torch = torch.profiler.profile(activities=acts,
                                                 record_shapes=self.config.record_shapes)
            self._torch.__enter__()
        if self.config.python_profiler:
            import cProfile
            self._cprofile = cProfile.Profile()
            self._cprofile.enable()
        self._start_ns = time.perf_counter_ns()

    def stop(self, last_step: int) -> dict:
        """Stops both profilers, writes the files, returns the profiler_window event fields."""
        elapsed_ns = time.perf_counter_ns() - self._start_ns
        if self._cprofile is not None:
            self._cprofile.disable()
        steps = max(1, last_step - self._start_step + 1)
        operators = []
        trace_path = os.path.join(self.dir, f"trace-{self.worker}.json")
        if self._torch is not None:
            self._torch.__exit__(None, None, None)
            try:
                self._torch.export_chrome_trace(trace_path)
            except Exception:
                trace_path = ""
            for ev in self._torch.key_averages():
                operators.append({"name": ev.key, "calls": int(ev.count),
                                  "total_us": float(ev.cpu_time_total),
                                  "self_us": float(ev.self_cpu_time_total)})
            operators.sort(key=lambda o: -o["total_us"])
        else:
            trace_path = ""
        functions = []
        if self._cprofile is not None:
            import pstats
            st = pstats.Stats(self._cprofile)
            for (file, line, name), (cc, nc, tt, ct, _callers) in st.stats.items():
                functions.append({"name": name, "file": file, "line": int(line), "calls": int(nc),
                                  "total_us": ct * 1e6, "self_us": tt * 1e6})
            functions.sort(key=lambda f: -f["total_us"])
            functions = functions[:self.config.top_functions]
        table = {
            "window": {"start_step": self._start_step, "num_steps": steps},
            "step_time_us": elapsed_ns / 1000.0 / steps,
            "functions": functions,
            "operators": operators[:max(self.config.top_functions, 100)],
        }
        fpath = os.path.join(self.dir, f"functions-{self.worker}.json")
        tmp = fpath + ".tmp"
        with open(tmp, "w") as f:
            json.dump(table, f)
        os.replace(tmp, fpath)
        return {"start_step": self._start_step, "end_step": last_step, "num_steps": steps,
                "worker": self.worker, "trace": os.path.relpath(trace_path, os.path.dirname(self.dir))
                if trace_path else "", "functions": os.path.relpath(fpath, os.path.dirname(self.dir))}

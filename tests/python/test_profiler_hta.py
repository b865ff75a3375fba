"""The profiling window on torch 2.x (Kineto): RUN/profile/trace-<worker>.json holds the real
operator timings and one ProfilerStep#N span per profiled global step, at the times the run's
step records give, and Holistic Trace Analysis loads it and splits it into those steps.

Tolerance: a span's edges are taken on the training thread by torch.profiler's step() in the
same step-boundary call that took the step record's time, 0.1-0.3 ms later (the call into Python
and step()'s own work); Kineto's clock, converted to Unix time with baseTimeNanoseconds, agrees
with time.time_ns() to a few µs, and HTA rounds to 1 µs. TOL_US = 2 ms leaves room for the
scheduler on a shared machine and is a tenth of a step (each step sleeps STEP_SLEEP_S, as an
input pipeline would), so a span placed at a neighbouring step's time fails. The first span
begins only once the profiler has started inside its step (a few ms: the hook imports this
module, torch.profiler starts), so only its end is held to TOL_US; that it still holds all of
its step's operators is checked by counting them.
"""
import glob
import json
import os
import subprocess
import time

import pytest
import torch

import trainscope as ts

TraceAnalysis = pytest.importorskip("hta.trace_analysis").TraceAnalysis

START, NUM = 3, 4
STEPS = 10
STEP_SLEEP_S = 0.02
TOL_US = 2000
RANK = 2                 # from RANK, as torchrun sets it: worker-2, distributedInfo.rank 2
WORKER = f"worker-{RANK}"
N_LINEAR = 3             # aten::addmm per forward


def _train(run_dir, steps, profiler):
    """Trains an MLP for `steps` steps under a hook; returns (the run, hook.errors)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(16, 16, generator=g), torch.randint(0, 4, (16,), generator=g))
               for _ in range(steps)]
    # No stop checks inside the run: none runs between a step's start and the profiler's.
    with ts.Hook(run_dir, system_monitor_interval_ms=0, stop_check_interval_ms=600_000,
                 profiler=profiler) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        for x, y in batches:
            time.sleep(STEP_SLEEP_S)
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return ts.open_run(run_dir), hook.errors


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """(run dir, run, trace dict, profiler_window event) of a run profiled at steps 3..6."""
    run_dir = str(tmp_path_factory.mktemp("hta") / "run")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RANK", str(RANK))
        run, errors = _train(run_dir, STEPS, ts.ProfilerConfig(start_step=START, num_steps=NUM))
    assert errors == {}
    with open(os.path.join(run_dir, "profile", f"trace-{WORKER}.json")) as f:
        trace = json.load(f)
    (window,) = run.events("profiler_window")
    return run_dir, run, trace, window


def _step_spans(events, base_us=0.0):
    """{step: (start_us, end_us)} of the ProfilerStep#N complete events; a step seen twice fails."""
    spans = {}
    for e in events:
        if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"):
            n = int(e["name"].split("#")[1])
            assert n not in spans, f"two spans for step {n}"
            spans[n] = (e["ts"] + base_us, e["ts"] + e["dur"] + base_us)
    return spans


def _assert_where_the_run_has_them(spans, run):
    records = {r["step"]: r for r in run.step_records()}
    assert sorted(spans) == list(range(START, START + NUM))
    for n, (start, end) in spans.items():
        rec = records[n]
        latest = rec["end_us"] if n == START else rec["start_us"] + TOL_US
        assert rec["start_us"] - TOL_US <= start < latest, (n, start, rec)
        assert abs(end - rec["end_us"]) <= TOL_US, (n, end, rec)


def test_trace_has_real_operators_inside_step_spans(profiled):
    run_dir, run, trace, window = profiled
    assert trace["distributedInfo"]["rank"] == RANK
    assert trace["trainscope"] == {"worker": WORKER, "start_step": START,
                                   "end_step": START + NUM - 1}
    events = trace["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    names = {e["name"] for e in ops}
    assert {"aten::addmm", "aten::relu", "aten::mm", "aten::threshold_backward"} <= names, names
    assert all(e["dur"] > 0 for e in ops if e["name"] in ("aten::addmm", "aten::mm"))
    spans = _step_spans(events)
    assert sorted(spans) == list(range(START, START + NUM))
    for n, (start, end) in spans.items():
        inside = [e for e in ops if e["name"] == "aten::addmm" and start <= e["ts"] < end]
        assert len(inside) == N_LINEAR, (n, len(inside))  # each step's own forward
    assert window["start_step"] == START and window["end_step"] == START + NUM - 1
    assert window["trace"] == f"profile/trace-{WORKER}.json"
    with open(os.path.join(run_dir, "profile", f"functions-{WORKER}.json")) as f:
        table = json.load(f)
    op_names = {o["name"] for o in table["operators"]}
    assert "aten::addmm" in op_names
    assert not any(n.startswith("ProfilerStep#") for n in op_names)  # steps are not operators


def test_trace_steps_are_where_the_run_has_them(profiled):
    _, run, trace, _ = profiled
    base_us = trace["baseTimeNanoseconds"] / 1000.0  # Kineto: Unix µs = ts + base
    _assert_where_the_run_has_them(_step_spans(trace["traceEvents"], base_us), run)


def test_hta_loads_the_steps_where_the_run_has_them(profiled):
    run_dir, run, _, _ = profiled
    files = sorted(glob.glob(os.path.join(os.path.abspath(run_dir), "profile", "trace-*.json")))
    # The rank comes from each file's distributedInfo; the last step is complete on a CPU.
    analyzer = TraceAnalysis(trace_files=files, include_last_profiler_step=True)
    assert analyzer.t.get_ranks() == [RANK]
    assert analyzer.get_profiler_steps() == list(range(START, START + NUM))
    df = analyzer.t.get_trace(RANK)
    analyzer.t.decode_symbol_ids(use_shorten_name=False)
    # HTA shifts ts so the trace starts at 0 (min_ts); Unix µs = ts + min_ts + base.
    base_us = analyzer.t.min_ts + analyzer.t.meta_data[RANK]["baseTimeNanoseconds"] / 1000.0
    rows = df[df["s_name"].str.startswith("ProfilerStep#")]
    events = [{"ph": "X", "name": r.s_name, "ts": r.ts, "dur": r.dur} for r in rows.itertuples()]
    _assert_where_the_run_has_them(_step_spans(events, base_us), run)
    addmm = df[df["s_name"] == "aten::addmm"]
    assert (addmm["dur"] > 0).all()
    assert addmm["iteration"].value_counts().sort_index().to_dict() == {
        n: N_LINEAR for n in range(START, START + NUM)}


def test_window_cut_short_by_close_ends_at_the_last_step(tmp_path):
    """Training ends inside the window: the spans and the event stop at the last step run."""
    run_dir = str(tmp_path / "run")
    run, errors = _train(run_dir, 6, ts.ProfilerConfig(start_step=START, num_steps=10))
    assert errors == {}
    (window,) = run.events("profiler_window")
    assert (window["start_step"], window["end_step"], window["num_steps"]) == (START, 5, 3)
    with open(os.path.join(run_dir, window["trace"])) as f:
        trace = json.load(f)
    assert sorted(_step_spans(trace["traceEvents"])) == [3, 4, 5]


def test_exported_chrome_trace_puts_the_steps_on_the_run_timeline(profiled, cli, tmp_path):
    """`trainscope export chrome-trace` merges the Kineto trace shifted by baseTimeNanoseconds:
    each ProfilerStep#N lies on the exported `step N` slice."""
    run_dir, run, _, _ = profiled
    out = str(tmp_path / "trace.json")
    subprocess.run([cli, "export", "chrome-trace", run_dir, out], check=True)
    with open(out) as f:
        events = json.load(f)["traceEvents"]
    slices = {e["args"]["step"]: (e["ts"], e["ts"] + e["dur"])
              for e in events if e.get("cat") == "step"}
    assert all(slices[r["step"]] == (r["start_us"], r["end_us"]) for r in run.step_records())
    _assert_where_the_run_has_them(_step_spans(events), run)


def test_a_failed_start_leaves_no_profiler_running(tmp_path, monkeypatch):
    """cProfile failing after torch.profiler started (another Python profiler active, say):
    the window is abandoned, one hook error, torch.profiler stopped, no trace written."""
    import cProfile

    def busy(self):
        raise ValueError("Another profiling tool is already active")

    monkeypatch.setattr(cProfile.Profile, "enable", busy)
    run_dir = str(tmp_path / "run")
    run, errors = _train(run_dir, 5, ts.ProfilerConfig(start_step=START, num_steps=NUM))
    assert errors == {"profiler": 1}
    assert not torch._C._autograd._profiler_enabled()
    assert glob.glob(os.path.join(run_dir, "profile", "trace-*")) == []
    assert run.events("profiler_window") == []

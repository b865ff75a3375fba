"""The shared vocabulary reaches Python from the core (trainscope._core.schema): the names the
hook writes are the schema's, and the core's readers understand them."""
import json
import os

import trainscope as ts
from trainscope import _core, _schema

from conftest import train


def test_python_names_are_the_cores():
    d = json.loads(_core.schema.JSON)
    assert _schema.EVENT.RUN_END == d["events"]["run_end"] == "run_end"
    assert _schema.METRIC.CPU_UTIL == "cpu.util"
    assert _schema.gpu_metric(2, _schema.GPU_FIELD.MEM_USED_BYTES) == "gpu2.mem_used_bytes"
    assert _schema.parse_gpu_metric("gpu12.util") == (12, "util")
    assert _schema.parse_gpu_metric("gpu.count") is None
    assert _schema.worker_stream(3) == "worker-3"
    assert _schema.profile_file("trace", "worker-1") == "trace-worker-1.json"
    assert _schema.parse_profile_file_name("functions-worker-1.json") == ("functions", "worker-1")
    assert _schema.parse_profile_file_name("notes.txt") is None
    # Aliases older writers used read as the canonical kind; other kinds pass through.
    for alias, canonical in _schema.EVENT_ALIASES.items():
        assert _schema.canonical_event_kind(alias) == canonical
        assert canonical in vars(_schema.EVENT).values()
    assert _schema.canonical_event_kind("my_event") == "my_event"
    js = _core.schema.web_script()
    assert "root.TrainscopeSchema" in js and _core.schema.JSON in js


def test_every_event_the_hook_writes_is_a_schema_kind(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(run_dir, system_monitor_interval_ms=0,
                 profiler=ts.ProfilerConfig(start_step=2, num_steps=2)) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        train(hook, model, opt, crit, batches[:6])
        hook.add_event("my_event", {"x": 1})  # a user's own kind is kept as written
    kinds = {e["kind"] for e in ts.open_run(run_dir).events()}
    known = set(vars(_schema.EVENT).values())
    assert {_schema.EVENT.RUN_START, _schema.EVENT.RUN_END, _schema.EVENT.PROFILER_WINDOW} <= kinds
    assert kinds - known == {"my_event"}, kinds - known
    worker = _schema.worker_stream(0)
    assert os.path.isdir(os.path.join(run_dir, worker))
    for kind in ("functions", "trace"):
        assert os.path.isfile(os.path.join(run_dir, _schema.FILE.PROFILE_DIR,
                                           _schema.profile_file(kind, worker)))

"""Distributed training under torchrun (gloo, CPU, 2 ranks): the stop that every rank takes at
the same step (python/trainscope/_distributed.py). Each job is a real `torch.distributed.run`
launch of tests/python/dist_job.py, bounded by a subprocess timeout.

TRAINSCOPE_DIST_JOBS=20 repeats the NaN job 20 times (docs/distributed.md records such a run);
CI runs one job of TRAINSCOPE_DIST_TRIALS (default 5) fresh hooks in a row.
"""
import json
import os
import subprocess
import time
import sys

import pytest

import trainscope as ts

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "dist_job.py")
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")


def torchrun(tmp_path, *args, nproc=2, timeout=150):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TRAINSCOPE_RUN_DIR", None)
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={nproc}", JOB, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(tmp_path),
                       env=env)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-5000:])
    return p


def _exits(trial_dir, nproc=2):
    return [json.load(open(os.path.join(trial_dir, f"exit-{r}.json"))) for r in range(nproc)]


def _check_trial(trial_dir, requester):
    exits = _exits(trial_dir)
    stops = {e["stopped_at"] for e in exits}
    assert len(stops) == 1 and None not in stops, exits  # every rank left at the same step
    stop = stops.pop()
    for e in exits:
        assert e["sync"]["state"] == "stopped", e
        assert e["sync"]["agreed_step"] == stop
    asked = exits[requester]["sync"]["requested_at_step"]
    assert asked is not None and asked < stop, exits
    other = exits[1 - requester]
    assert other["reason"].startswith(f"rank {requester}: "), other
    run = ts.open_run(trial_dir)
    agreed = run.events("stop_agreed")
    assert sorted(e["rank"] for e in agreed) == [0, 1], agreed
    assert {e["step"] for e in agreed} == {stop}
    assert all(e["requested_by"] == requester for e in agreed)
    return stop - asked


def test_nan_on_one_rank_stops_every_rank_at_the_same_step(tmp_path):
    # Rank 1's loss is NaN (its gradients stay finite): it marks the step's first gradient
    # bucket, and every rank reads the reduced mark and stops at that very step, without
    # waiting for the ranks' stop agreement (_comm_timing.py).
    jobs = int(os.environ.get("TRAINSCOPE_DIST_JOBS", "1"))
    trials = int(os.environ.get("TRAINSCOPE_DIST_TRIALS", "5"))
    for j in range(jobs):
        out = tmp_path / f"job-{j}"
        torchrun(tmp_path, "--scenario", "nan", "--out", str(out), "--trials", str(trials))
        for t in range(trials):
            exits = _exits(str(out / f"trial-{t}"))
            assert len({e["stopped_at"] for e in exits}) == 1, exits
            rank1 = exits[1]
            # crit.calls counts from 1, the hook's steps from 0: the NaN's own step
            assert rank1["stopped_at"] == rank1["inject"] - 1, exits
            for e in exits:
                assert "exploding_tensor" in e["reason"], e
                assert "non-finite gradient after the all-reduce" in e["reason"], e


def test_stop_request_file_is_taken_by_every_rank_together(tmp_path):
    out = tmp_path / "job"
    torchrun(tmp_path, "--scenario", "stopfile", "--out", str(out), "--trials", "2")
    for t in range(2):
        exits = _exits(str(out / f"trial-{t}"))
        assert len({e["stopped_at"] for e in exits}) == 1 and exits[0]["stopped_at"], exits
        assert all("test stop" in e["reason"] for e in exits), exits


def test_nan_input_on_one_rank_with_the_readme_usage_stops_both_at_its_step(tmp_path):
    # register_module + register_loss only (no register_optimizer); rank 1's input turns
    # infinite at step 60 of 400 (1-2 ms steps): both ranks leave at that step or the next,
    # nobody hangs, and no checkpoint holds non-finite weights.
    import torch
    out = tmp_path / "run"
    p = torchrun(tmp_path, "--scenario", "naninput", "--out", str(out), "--inject", "60")
    # quiet by default: rank 0 speaks for the job, one line for the stop
    said = [ln for ln in p.stderr.splitlines() if ln.startswith("trainscope:")]
    assert len([ln for ln in said if "stop" in ln]) == 1, said
    exits = _exits(str(out))
    for e in exits:
        assert e["stopped_at"] in (60, 61), exits
        assert "exploding_tensor" in e["reason"], e
        assert e["checkpoints"] and max(e["checkpoints"]) <= 61, e
    # where it began: on rank 1, in its data, at the step of the NaN (nobody else replays)
    origins = ts.open_run(str(out)).events("nonfinite_origin")
    assert len(origins) == 1, origins
    o = origins[0]
    assert o["rank"] == 1 and o["worker"] == "worker-1" and o["step"] == 60, o
    assert o["direction"] == "forward" and o["bad_input"].startswith("input 0 of the model"), o
    for r in range(2):
        d = out / f"ckpt-{r}"
        for f in d.glob("ckpt-*.pt"):
            state = torch.load(str(f), weights_only=False)
            for k, v in state["model"].items():
                assert torch.isfinite(v).all(), (f, k)


def test_hook_on_rank_0_only_keeps_stops_local_and_waits_for_nobody(tmp_path):
    out = tmp_path / "run"
    torchrun(tmp_path, "--scenario", "rank0only", "--out", str(out))
    e = json.load(open(out / "exit-0.json"))
    assert "exploding_tensor" in e["reason"] and e["sync"]["state"] == "off", e
    off = ts.open_run(str(out)).events("stop_sync_off")
    assert off and "1 of 2 ranks" in off[0]["reason"], off


def test_single_process_hook_has_no_coordinator(tmp_path, tiny, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    model, opt, crit, batches = tiny
    with ts.Hook(out_dir=str(tmp_path / "run"), system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        for x, y in batches[:3]:
            crit(model(x), y).backward()
        assert hook._dist is None and hook._clock.sync_step == -1


def test_straggler_names_the_slow_rank_and_phase_and_balanced_jobs_raise_nothing(tmp_path, cli):
    # one job, three run dirs in a row: rank 1 slow in its data loader, then in its forward,
    # then nobody slow. The straggler rule runs in rank 0's process over both streams.
    out = tmp_path / "job"
    torchrun(tmp_path, "--scenario", "straggler", "--out", str(out), "--cases",
             "data,compute,none", "--max-steps", "45", "--slow-ms", "20", "--rules")
    for case, phase in (("data", "data wait"), ("compute", "forward")):
        run = ts.open_run(str(out / case))
        fired = [e for e in run.rule_events()
                 if e["rule"] == "straggler" and e["status"] == "IssuesFound"]
        assert fired, (case, run.rule_events())
        e = fired[0]
        assert e["worker"] == "worker-1" and e["step"] <= 30, e
        assert "rank 1 is the straggler" in e["message"], e["message"]
        assert f"the slow phase is {phase} " in e["message"], e["message"]
        # the waiting rank's collective wait is measured, so rank 0 is never the one named
        assert all(f["worker"] == "worker-1" for f in fired)
        steps, waits = run.scalar("dist/comm_wait_us", worker="worker-0")
        assert len(steps) >= 40 and float(waits[10:].mean()) > 10_000  # rank 0 waits ~20 ms
    # the report shows every rank, and the slow one with its phase
    rep = subprocess.run([cli, "report", str(out / "data"), "--json"], capture_output=True,
                         text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    ranks = json.loads(rep.stdout)["ranks"]
    assert [r["worker"] for r in ranks["per_rank"]] == ["worker-0", "worker-1"], ranks
    assert ranks["slowest"] == "worker-1" and "data wait" in ranks["why"], ranks
    assert ranks["per_rank"][0]["collective_wait_ms"] > 10, ranks
    none = ts.open_run(str(out / "none"))
    assert not [e for e in none.rule_events() if e["status"] == "IssuesFound"]
    st = none.rule_statuses()["straggler"]
    assert st["status"] == "NoIssuesFound", st


def test_straggler_fires_with_the_readme_usage_without_register_optimizer(tmp_path, cli):
    # The README's three lines register no optimizer: backward then ends where DDP's last
    # gradient reduction completes (the waiting rank's wait stays inside it), so the waiting
    # rank's busy time is its step minus the wait, as with register_optimizer.
    out = tmp_path / "job"
    torchrun(tmp_path, "--scenario", "straggler", "--out", str(out), "--cases", "data,none",
             "--max-steps", "45", "--slow-ms", "12", "--rules", "--no-optimizer")
    run = ts.open_run(str(out / "data"))
    fired = [e for e in run.rule_events()
             if e["rule"] == "straggler" and e["status"] == "IssuesFound"]
    assert fired, run.rule_events()
    assert fired[0]["worker"] == "worker-1" and fired[0]["step"] <= 30, fired[0]
    assert "the slow phase is data wait " in fired[0]["message"], fired[0]["message"]
    assert all(f["worker"] == "worker-1" for f in fired)
    rep = subprocess.run([cli, "report", str(out / "data"), "--json"], capture_output=True,
                         text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    ranks = json.loads(rep.stdout)["ranks"]
    assert ranks["slowest"] == "worker-1" and "data wait" in ranks["why"], ranks
    r0 = ranks["per_rank"][0]
    assert r0["collective_wait_ms"] > 5, ranks
    assert r0["backward_ms"] > 0, ranks
    none = ts.open_run(str(out / "none"))
    assert not [e for e in none.rule_events() if e["status"] == "IssuesFound"]


def test_straggler_profiles_the_slow_rank_and_a_reference_rank(tmp_path, cli, monkeypatch):
    # Issue 34, item 3: when straggler fires (in rank 0's hook, over both streams), the rank it
    # names and a reference rank each record a profiler window; the report compares the two.
    monkeypatch.setenv("TRAINSCOPE_PROFILE_ON_FIRE", "3")
    out = tmp_path / "job"
    torchrun(tmp_path, "--scenario", "straggler", "--out", str(out), "--cases", "data",
             "--max-steps", "70", "--slow-ms", "20", "--rules")
    run = ts.open_run(str(out / "data"))
    fired = [e for e in run.rule_events()
             if e["rule"] == "straggler" and e["status"] == "IssuesFound"]
    assert fired and fired[0]["worker"] == "worker-1", run.rule_events()
    windows = run.events("profiler_window")
    by_worker = {w["worker"]: w for w in windows}
    assert set(by_worker) == {"worker-0", "worker-1"}, windows
    for w in windows:
        assert w["num_steps"] == 3 and w["reason"].startswith("rule straggler"), w
        assert w["start_step"] > fired[0]["step"], (w, fired[0])
        trace = out / "data" / "profile" / f"trace-{w['worker']}.json"
        assert trace.stat().st_size > 0
        json.load(open(trace))  # a whole Chrome trace
    rep = subprocess.run([cli, "report", str(out / "data"), "--no-history"],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    summary = json.load(open(out / "data" / "report" / "summary.json"))
    cmp = summary["profile_comparison"]
    assert cmp["culprit"] == "worker-1" and cmp["reference"] == "worker-0", cmp
    assert cmp["culprit_step_us"] > 0 and cmp["operators"], cmp
    assert {w["worker"]: w.get("role") for w in windows} == {"worker-1": "culprit",
                                                             "worker-0": "reference"}


def test_hang_captures_every_ranks_stacks_and_trainscope_run_ends_the_job(tmp_path, cli):
    # rank 1 blocks in its data loader, rank 0 in its DDP backward's all-reduce. The hooks'
    # stalled_training_loop (2 s) captures both ranks' stacks; trainscope run's own (20 s: it
    # also counts the job's start-up; with
    # stop_training) asks for a stop that no rank can take at a step, then SIGTERMs the job.
    run = tmp_path / "run"
    config = tmp_path / "rules.json"
    config.write_text(json.dumps({"rules": [{"name": "stalled_training_loop",
                                             "params": {"threshold": 20,
                                                        "stop_training_on_fire": True}}]}))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("WORLD_SIZE", None)
    env["TORCH_FR_BUFFER_SIZE"] = "200"  # torch's flight recorder (gloo too, in torch 2.13)
    cmd = [cli, "run", "--out", str(run), "--config", str(config), "--quiet",
           "--term-after-s", "3", "--kill-after-s", "5", "--",
           sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           JOB, "--scenario", "hang", "--out", str(run), "--max-steps", "40"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=150, cwd=str(tmp_path),
                       env=env)
    assert p.returncode != 0, (p.stdout, p.stderr[-3000:])  # it did not finish: it was ended
    assert "the training was stopped (rule stalled_training_loop" in p.stderr, p.stderr[-3000:]
    assert "ended by SIGTERM" in p.stderr or "ended by SIGKILL" in p.stderr, p.stderr[-3000:]
    brief = subprocess.run([cli, "stacks", str(run), "--brief"], capture_output=True,
                           text=True, timeout=30)
    assert brief.returncode == 0, brief
    lines = [l for l in brief.stdout.splitlines() if l.startswith("== ")]
    assert len(lines) == 2, brief.stdout
    assert lines[0].startswith("== worker-0: main thread in _engine_run_backward"), lines
    assert lines[1].startswith("== worker-1: main thread in blocking_loader"), lines
    full = subprocess.run([cli, "stacks", str(run)], capture_output=True, text=True,
                          timeout=30).stdout
    assert "trainscope-stacks" in full and "Thread 0x" in full  # every thread, not just one
    # each rank's flight recorder, dumped beside its stacks: the collectives it was in
    import glob
    import pickle
    for r in (0, 1):
        dumps = glob.glob(str(run / "flight_recorder" / "*" / f"rank_{r}"))
        assert dumps, os.listdir(run)
        entries = pickle.load(open(dumps[0], "rb"))["entries"]
        assert any("gloo:all_reduce" in e["profiling_name"] for e in entries), entries[-1]
        assert f"rank_{r} (" in full
    rep = subprocess.run([cli, "report", str(run), "--json"], capture_output=True, text=True,
                         timeout=60)
    stacks = json.loads(rep.stdout)["stacks"]
    assert [s["worker"] for s in stacks] == ["worker-0", "worker-1"], stacks
    assert "blocking_loader" in stacks[1]["where"], stacks


def test_stacks_cli_without_captures_and_bad_arguments(tmp_path, cli):
    run = tmp_path / "run"
    run.mkdir()
    p = subprocess.run([cli, "stacks", str(run)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 3 and "no stacks captured" in p.stdout  # not found (docs/cli.md)
    p = subprocess.run([cli, "stacks", str(tmp_path / "missing")], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 3  # no such run
    p = subprocess.run([cli, "stacks", str(run), "--wait-s", "x"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2
    # a half-written or foreign file is skipped, not shown
    (run / "stacks").mkdir()
    (run / "stacks" / "worker-0-12.txt").write_text("not a capture")
    (run / "stacks" / "worker-0-13.txt.tmp").write_text("# trainscope stacks: partial")
    p = subprocess.run([cli, "stacks", str(run)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 3, p.stdout


def test_stack_capture_on_request_in_one_process(tmp_path, tiny):
    from trainscope import _stacks
    model, opt, crit, batches = tiny
    with ts.Hook(out_dir=str(tmp_path / "run"), system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        crit(model(batches[0][0]), batches[0][1]).backward()
        rid = _stacks.request_capture(hook.out_dir, "test", "test")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not os.path.isdir(os.path.join(hook.out_dir,
                                                                             "stacks")):
            time.sleep(0.05)
        time.sleep(0.2)
    files = os.listdir(tmp_path / "run" / "stacks")
    assert len(files) == 1 and files[0].startswith("worker-0-"), files
    text = open(tmp_path / "run" / "stacks" / files[0]).read()
    assert rid in text and "test_stack_capture_on_request_in_one_process" in text
    ev = ts.open_run(str(tmp_path / "run")).events("stacks_captured")
    assert ev and ev[0]["request"] == rid


@pytest.fixture(scope="module")
def norms_job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("norms")
    torchrun(tmp, "--scenario", "norms", "--out", str(tmp / "job"))
    return tmp / "job"


def _grad_sq(run, names, step):
    return {w: sum(run.tensor(n, worker=w).reduction(step, "l2") ** 2 for n in names)
            for w in ("worker-0", "worker-1")}


def test_global_gradient_norm_across_fsdp_shards_and_ddp_ranks(norms_job):
    out = norms_job
    for kind in ("fsdp", "ddp"):
        direct = json.load(open(out / f"{kind}-norms-0.json"))
        assert direct == pytest.approx(json.load(open(out / f"{kind}-norms-1.json")))
        run = ts.open_run(str(out / kind))
        names = run.tensor_names("gradients")
        # full parameter names, sharded or not (DDP's are those of its wrapper: "module.")
        pre = "module." if kind == "ddp" else ""
        assert names == [f"gradients/{pre}{n}" for n in ("0.bias", "0.weight", "2.bias",
                                                         "2.weight")], names
        for w in ("worker-0", "worker-1"):  # the recorded global norm (clip_grad_norm_'s)
            assert list(run.scalar("grad_norm/total", worker=w)[1]) == pytest.approx(direct)
        if kind == "fsdp":
            for step in range(3):  # each rank holds a shard: the squared norms add up
                sq = _grad_sq(run, names, step)
                assert (sq["worker-0"] + sq["worker-1"]) ** 0.5 == pytest.approx(
                    direct[step], rel=1e-5)
                assert sq["worker-0"] ** 0.5 < direct[step]
            # the shard's shape (dim 0 split over the 2 ranks), under the full name
            shape = run.tensor(names[1], worker="worker-1").summary(0)["shape"]
            assert list(shape) == [32, 32], shape


def test_ddp_gradient_summaries_are_the_all_reduced_gradients(norms_job):
    direct = json.load(open(norms_job / "ddp-norms-0.json"))
    run = ts.open_run(str(norms_job / "ddp"))
    names = run.tensor_names("gradients")
    for step in range(3):
        for w, sq in _grad_sq(run, names, step).items():
            assert sq ** 0.5 == pytest.approx(direct[step], rel=1e-5), (w, step)


def test_fsdp1_global_gradient_norm_and_shards_under_full_names(norms_job):
    # FullyShardedDataParallel (FSDP1, nested units) with use_orig_params True and False
    out = norms_job
    for orig in ("True", "False"):
        direct = [json.load(open(out / f"fsdp1-{orig}-{r}.json")) for r in (0, 1)]
        assert direct[0]["norms"] == pytest.approx(direct[1]["norms"])
        # torch.nn.utils.clip_grad_norm_ over FSDP1's shards is each rank's local norm: not
        # what is recorded
        assert direct[0]["local"] != pytest.approx(direct[0]["norms"])
        run = ts.open_run(str(out / f"fsdp1-{orig}"))
        for w in ("worker-0", "worker-1"):  # FSDP1's model.clip_grad_norm_: the global norm
            assert list(run.scalar("grad_norm/total", worker=w)[1]) == pytest.approx(
                direct[0]["norms"]), (orig, w)
        names = run.tensor_names("gradients")
        assert names == [f"gradients/{n}" for n in ("0.bias", "0.weight", "2.bias",
                                                    "2.weight")], (orig, names)
        for step in range(3):
            sq = 0.0
            for w in ("worker-0", "worker-1"):
                for n in names:  # a rank holding none of a parameter has no series for it
                    t = run.tensor(n, worker=w)
                    if step in list(t.steps()):
                        sq += t.reduction(step, "l2") ** 2
            assert sq ** 0.5 == pytest.approx(direct[0]["norms"][step], rel=1e-5), (orig, step)
            for n in ("0.weight", "2.weight"):  # weights: the pieces make the full parameter
                wsq = sum(run.tensor(f"weights/{n}", worker=w).reduction(step, "l2") ** 2
                          for w in ("worker-0", "worker-1")
                          if step in list(run.tensor(f"weights/{n}", worker=w).steps()))
                assert wsq ** 0.5 == pytest.approx(direct[0]["weights"][step][n], rel=1e-5)
        assert not run.events("hook_error")


def test_a_rank_killed_mid_run_is_named_dead_and_the_run_crashed(tmp_path):
    """Rank 1 SIGKILLs itself at step 60 of 800 (issue 29): its stream has no clean end, so
    inspect, report and the dashboard's API name it dead with its last step and last record,
    and the run is "crashed", not "ended"."""
    from conftest import cli_path
    trainscope_bin = cli_path()
    out = tmp_path / "run"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TRAINSCOPE_RUN_DIR", None)
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           JOB, "--scenario", "killrank", "--out", str(out), "--max-steps", "800",
           "--kill-at", "60"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                       env=env)
    assert p.returncode != 0, "torchrun reports the killed rank"  # the job did fail
    d = str(out)

    js = json.loads(subprocess.run([trainscope_bin, "inspect", d, "--json"], capture_output=True,
                                   text=True, timeout=120, check=True).stdout)
    assert js["status"] == "crashed", js["status"]
    dead = {x["stream"]: x for x in js["dead_streams"]}
    assert "worker-1" in dead, js["dead_streams"]
    last = dead["worker-1"]["last_step"]
    assert 50 <= last <= 60, dead  # what reached a segment or the crash journal before the kill
    assert dead["worker-1"]["last_record_us"] > 0
    w1 = next(s for s in js["streams"] if s["stream"] == "worker-1")
    assert w1["writer"] == "died" and not w1["live"]

    text = subprocess.run([trainscope_bin, "inspect", d], capture_output=True, text=True,
                          timeout=120, check=True).stdout
    assert "crashed)" in text.splitlines()[0], text
    assert f"worker-1 DIED at step {last} (last record " in text, text
    assert "the run did not end cleanly" in text
    w1_row = next(l for l in text.splitlines() if l.strip().startswith("worker-1") and "steps" in l)
    assert "DEAD" in w1_row and "done" not in w1_row, w1_row

    rep = subprocess.run([trainscope_bin, "report", d, "--out", str(tmp_path / "report.html")],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    head = rep.stdout.splitlines()
    assert "crashed" in head[0], rep.stdout
    # right under the first line, one per dead rank: rank 1, and rank 0 too when torchrun
    # ended it (it terminates the other ranks once one fails, sometimes before rank 0's close)
    died = [l for l in head[1:3] if " died at step " in l]
    assert any(f"rank 1 died at step {last} (last record " in l for l in died), rep.stdout
    assert all("the run did not end cleanly" in l for l in died), died
    assert "ranks balanced" not in rep.stdout and "No rule fired" not in rep.stdout
    findings = rep.stdout[rep.stdout.index("Findings ("):]
    assert findings.splitlines()[1].split("[")[-1].startswith("rank_died]"), findings

    # the dashboard's API: the run list and the run's own status
    import socket
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "dead-rank-token"
    serve = subprocess.Popen([trainscope_bin, "serve", str(tmp_path), "--port", str(port),
                              "--token", token], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        def get(path):
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
            req.add_header("Authorization", f"Bearer {token}")
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read().decode())
        deadline = time.monotonic() + 60
        while True:
            try:
                runs = get("/api/runs")
                break
            except OSError:
                if time.monotonic() > deadline or serve.poll() is not None:
                    raise
                time.sleep(0.2)
        listed = next(r for r in runs["runs"] if r["name"] == "run")
        assert listed["status"] == "crashed", listed
        assert "worker-1" in [x["stream"] for x in listed["dead_streams"]], listed
        run = get("/api/runs/run")["run"]
        assert run["status"] == "crashed"
        assert {x["stream"]: x["last_step"] for x in run["dead_streams"]}["worker-1"] == last
        assert {s["name"]: s["dead"] for s in run["streams"]}["worker-1"] is True
    finally:
        serve.terminate()
        serve.wait(timeout=30)

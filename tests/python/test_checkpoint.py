"""Checkpoints: atomic saves, retention, preemption (SIGTERM) and resume, torn and corrupt
checkpoints, stop_training's final checkpoint, and rollback on divergence.

The preemption, SIGKILL and rollback tests run the real examples in subprocesses
(examples/pytorch/preemptible.py, rollback.py); each training is a few hundred tiny steps."""
import errno
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

ts = pytest.importorskip("trainscope")
torch = pytest.importorskip("torch")

from conftest import ROOT, train  # noqa: E402

EXAMPLES = os.path.join(ROOT, "examples", "pytorch")


def _env():
    env = dict(os.environ)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(ts.__file__)))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TRAINSCOPE_RUN_DIR", None)
    return env


def _example(name, *args):
    return [sys.executable, os.path.join(EXAMPLES, name), *map(str, args)]


def _wait_for(pred, proc, what, timeout_s=120.0):
    deadline = time.monotonic() + timeout_s
    while not pred():
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            pytest.fail(f"the training exited ({proc.returncode}) before {what}:\n{out}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _tiny_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


# =============================================================================== in-process
def test_after_step_without_hook_saves_atomically_and_keeps_last(tmp_path, tiny):
    model, opt, crit, batches = tiny
    d = str(tmp_path / "ck")
    ckpt = ts.Checkpointer(d, model, opt, every_steps=5, keep_last=2, handle_preemption=False)
    for step, (x, y) in enumerate(batches[:23]):
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ckpt.after_step(step)
    names = sorted(os.listdir(d))
    assert names == ["ckpt-000000000015.json", "ckpt-000000000015.pt",
                     "ckpt-000000000020.json", "ckpt-000000000020.pt"]  # no temp files left
    with open(os.path.join(d, "ckpt-000000000020.json")) as f:
        meta = json.load(f)
    assert meta["step"] == 20 and meta["bytes"] == os.path.getsize(
        os.path.join(d, "ckpt-000000000020.pt"))
    st = ckpt.stats()
    assert st["checkpoints"] == 4 and st["total_s"] > 0 and 0 < st["share"] <= 1
    # a fresh model resumes at step 20 with the weights saved there
    saved = torch.load(os.path.join(d, "ckpt-000000000020.pt"))["model"]
    m2 = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16),
                             torch.nn.Tanh(), torch.nn.Linear(16, 3))
    o2 = torch.optim.SGD(m2.parameters(), lr=0.05)
    c2 = ts.Checkpointer(d, m2, o2, handle_preemption=False)
    assert c2.resume() == 20
    assert all(torch.equal(saved[k], v) for k, v in m2.state_dict().items())


def test_resume_without_checkpoint_returns_zero(tmp_path):
    model, opt = _tiny_model()
    assert ts.Checkpointer(str(tmp_path / "none"), model, opt,
                           handle_preemption=False).resume() == 0


def test_corrupt_torn_and_uncommitted_checkpoints_are_skipped(tmp_path, run_dir):
    model, opt = _tiny_model()
    d = str(tmp_path / "ck")
    c = ts.Checkpointer(d, model, opt, every_steps=1, keep_last=10, handle_preemption=False)
    for s in range(4):
        with torch.no_grad():
            model[0].weight.fill_(float(s))
        c.after_step(s)            # checkpoints 1..4; weight value s in checkpoint s+1
    p4 = os.path.join(d, "ckpt-000000000004.pt")
    p3 = os.path.join(d, "ckpt-000000000003.pt")
    with open(p4, "r+b") as f:     # corrupt the newest: flip bytes in the middle
        f.seek(os.path.getsize(p4) // 2)
        b = f.read(8)
        f.seek(os.path.getsize(p4) // 2)
        f.write(bytes(x ^ 0xFF for x in b))
    with open(p3, "r+b") as f:     # the one before is torn (cut short)
        f.truncate(os.path.getsize(p3) // 2)
    # an uncommitted .pt (crash between its rename and its record) is not a checkpoint
    with open(os.path.join(d, "ckpt-000000000009.pt"), "wb") as f:
        f.write(b"partial")
    with ts.Hook(run_dir, system_monitor_interval_ms=0) as hook:
        m2, o2 = _tiny_model()
        hook.register_module(m2)
        c2 = ts.Checkpointer(d, m2, o2, hook=hook, handle_preemption=False)
        assert c2.resume() == 2
        assert float(m2[0].weight[0, 0]) == 1.0
        assert hook.step_count == 2
    assert not os.path.exists(os.path.join(d, "ckpt-000000000009.pt"))
    run = ts.open_run(run_dir)
    bad = {e["step"]: e["reason"] for e in run.events("checkpoint_invalid")}
    assert "crc32c" in bad[4] and "torn" in bad[3]
    assert run.events("resumed")[0]["from_step"] == 2


def _checkpoints_with_weight_values(tmp_path, n):
    """Checkpoints 1..n of a tiny model whose first weight is s in checkpoint s + 1."""
    model, opt = _tiny_model()
    d = str(tmp_path / "ck")
    c = ts.Checkpointer(d, model, opt, every_steps=1, keep_last=10, handle_preemption=False)
    for s in range(n):
        with torch.no_grad():
            model[0].weight.fill_(float(s))
        c.after_step(s)
    return d


def _flip_bytes_in_the_middle(path, n=4):
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(n)
        f.seek(os.path.getsize(path) // 2)
        f.write(bytes(x ^ 0xFF for x in b))


def _as_previous_version(d, step, libtorch=False):
    """Rewrites checkpoint `step`'s record as the previous version wrote it: Python's version 1
    (sha256, written by checkpoint.py before the core's record) or LibTorch's (crc32c, its own
    format name)."""
    import hashlib
    jp = os.path.join(d, f"ckpt-{step:012d}.json")
    with open(jp) as f:
        meta = json.load(f)
    with open(os.path.join(d, f"ckpt-{step:012d}.pt"), "rb") as f:
        data = f.read()
    if libtorch:
        old = {"format": "trainscope-checkpoint-libtorch", "version": 1, "step": step,
               "bytes": len(data), "crc32c": meta["crc32c"], "wall_us": meta["wall_us"],
               "reason": "interval"}
    else:
        old = {"format": "trainscope-checkpoint", "version": 1, "step": step,
               "global_step": meta["global_step"], "file": meta["file"], "bytes": len(data),
               "sha256": hashlib.sha256(data).hexdigest(), "wall_us": meta["wall_us"],
               "reason": meta["reason"], "lr_scale": 1.0, "finite": True}
    with open(jp, "w") as f:
        json.dump(old, f)


def test_checkpoints_of_the_previous_version_are_accepted_on_resume(tmp_path):
    d = _checkpoints_with_weight_values(tmp_path, 3)  # weight value s in checkpoint s+1
    with open(os.path.join(d, "ckpt-000000000003.json")) as f:
        rec = json.load(f)
    assert rec["version"] == 2 and len(rec["crc32c"]) == 8 and "sha256" not in rec
    for step in (1, 2, 3):
        _as_previous_version(d, step, libtorch=step == 2)
    m2, o2 = _tiny_model()
    assert ts.Checkpointer(d, m2, o2, handle_preemption=False).resume() == 3
    assert float(m2[0].weight[0, 0]) == 2.0
    # a corrupt version 1 record's file is caught by its sha256, as before
    _flip_bytes_in_the_middle(os.path.join(d, "ckpt-000000000003.pt"))
    metas = {m["step"]: m for m in ts.checkpoint.list_checkpoints(d)}
    assert "sha256" in ts.checkpoint.verify_checkpoint(metas[3])
    assert ts.checkpoint.verify_checkpoint(metas[2]) is None   # LibTorch's record: crc32c
    m3, o3 = _tiny_model()
    assert ts.Checkpointer(d, m3, o3, handle_preemption=False).resume() == 2
    assert float(m3[0].weight[0, 0]) == 1.0


@pytest.mark.parametrize("crafted", ["names-another-checkpoint", "escapes-the-directory",
                                     "renamed-to-another-step"])
def test_a_record_naming_another_file_is_rejected_and_never_loaded(tmp_path, run_dir, crafted):
    """Issue 29: the check read the file a record's `file` named while resume loaded
    ckpt-<step>.pt, so a record pointing at another valid checkpoint verified that one and
    loaded another training's weights. A record names only its own step's file; the bytes
    checked are the bytes loaded."""
    d = _checkpoints_with_weight_values(tmp_path, 2)  # ours: weight 0 in ckpt 1, 1 in ckpt 2
    # another training's checkpoint (weight 99), valid on its own, in a directory of its own
    model, opt = _tiny_model()
    other = str(tmp_path / "other")
    with torch.no_grad():
        model[0].weight.fill_(99.0)
    c = ts.Checkpointer(other, model, opt, every_steps=1, handle_preemption=False)
    for s in range(3):
        c.after_step(s)
    theirs = os.path.join(other, "ckpt-000000000003.pt")
    with open(os.path.join(d, "ckpt-000000000002.json")) as f:
        rec2 = json.load(f)
    import shutil
    if crafted == "names-another-checkpoint":
        # their weights as our step 3's data file, with a record whose `file` names our valid
        # step 2 (its size and crc32c): the old check passed on step 2, resume loaded step 3
        shutil.copy(theirs, os.path.join(d, "ckpt-000000000003.pt"))
        crafted_rec = dict(rec2, step=3, global_step=3)
        path = os.path.join(d, "ckpt-000000000003.json")
        expected = "is not the data file of step 3"
    elif crafted == "escapes-the-directory":
        shutil.copy(theirs, os.path.join(d, "ckpt-000000000003.pt"))
        with open(os.path.join(other, "ckpt-000000000003.json")) as f:
            crafted_rec = dict(json.load(f), file="../other/ckpt-000000000003.pt")
        path = os.path.join(d, "ckpt-000000000003.json")
        expected = "is not the data file of step 3"
    else:
        # their checkpoint 3, record and all, copied in as our step 4: the record says step 3
        shutil.copy(theirs, os.path.join(d, "ckpt-000000000004.pt"))
        with open(os.path.join(other, "ckpt-000000000003.json")) as f:
            crafted_rec = dict(json.load(f), file="ckpt-000000000004.pt")
        path = os.path.join(d, "ckpt-000000000004.json")
        expected = "is not the data file of step 3"
    with open(path, "w") as f:
        json.dump(crafted_rec, f)
    with ts.Hook(run_dir, system_monitor_interval_ms=0) as hook:
        m2, o2 = _tiny_model()
        c2 = ts.Checkpointer(d, m2, o2, hook=hook, handle_preemption=False)
        assert c2.resume() == 2  # the previous good checkpoint: ours
        assert float(m2[0].weight[0, 0]) == 1.0  # never their 99
    bad = ts.open_run(run_dir).events("checkpoint_invalid")
    assert len(bad) == 1 and expected in bad[0]["reason"], bad


def test_stop_training_writes_a_final_checkpoint(tmp_path, run_dir, tiny):
    model, opt, crit, batches = tiny
    d = str(tmp_path / "ck")
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0, raise_on_stop=True,
                   stop_check_interval_ms=0)
    hook.register_module(model)
    ckpt = ts.Checkpointer(d, model, opt, hook=hook, every_steps=100, handle_preemption=False)
    train(hook, model, opt, crit, batches[:7])
    ts.request_stop(run_dir, "enough", "test")
    with pytest.raises(ts.TrainingStopped):
        train(hook, model, opt, crit, batches[7:])
    hook.close()
    assert [c["step"] for c in ckpt.checkpoints()] == [7]
    evs = ts.open_run(run_dir).events("checkpoint")
    assert [(e["step"], e["reason"]) for e in evs] == [(7, "stop")]
    assert evs[0]["bytes"] > 0 and evs[0]["duration_us"] > 0


def test_non_finite_parameters_are_not_saved(tmp_path):
    model, opt = _tiny_model()
    ckpt = ts.Checkpointer(str(tmp_path / "ck"), model, opt, every_steps=1,
                           handle_preemption=False)
    ckpt.after_step(0)
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    ckpt.after_step(1)
    assert [c["step"] for c in ckpt.checkpoints()] == [1]


def _leftovers(d):
    """Files of the directory that are neither a committed record nor its data file."""
    names = os.listdir(d)
    committed = {n[:-5] for n in names if n.endswith(".json") and n.startswith("ckpt-")}
    return [n for n in names if not (n.startswith("ckpt-") and n.rsplit(".", 1)[0] in committed
                                     and n.rsplit(".", 1)[1] in ("json", "pt"))]


def _full_disk(*_a, **_k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("where", ["write", "fsync", "record"])
def test_a_failed_checkpoint_leaves_no_file_behind(tmp_path, monkeypatch, caplog, where):
    """A full disk at any stage (torch.save's writes, the fsync before the rename, the record):
    the temporary file (and a renamed data file without its record) is removed at once, the
    failure is counted and logged once, and the training and later checkpoints go on."""
    from trainscope import _checkpoint_files as cf
    model, opt = _tiny_model()
    d = str(tmp_path / "ck")
    ckpt = ts.Checkpointer(d, model, opt, every_steps=1, handle_preemption=False)
    ckpt.after_step(0)  # one good checkpoint first
    real_write = cf._DigestWriter.write
    if where == "write":
        calls = []

        def write(self, b):  # some bytes reach the file, then the disk is full
            calls.append(len(b))
            if len(calls) > 1:
                _full_disk()
            return real_write(self, b)
        monkeypatch.setattr(cf._DigestWriter, "write", write)
    elif where == "fsync":
        monkeypatch.setattr(cf._core, "install_checkpoint_data", _full_disk)
    else:
        monkeypatch.setattr(cf._core, "commit_checkpoint", _full_disk)
    with caplog.at_level("WARNING", logger="trainscope"):
        for step in (1, 2, 3):
            ckpt.after_step(step)
            assert _leftovers(d) == []
    assert ckpt.stats()["errors"] == 3
    assert len([r for r in caplog.records if "checkpoint save failed" in r.getMessage()]) == 1
    assert [c["step"] for c in ckpt.checkpoints()] == [1]
    monkeypatch.undo()  # room again: the next checkpoint is written
    ckpt.after_step(4)
    assert [c["step"] for c in ckpt.checkpoints()][-1] == 5 and _leftovers(d) == []


def test_an_interrupted_checkpoint_leaves_no_temporary_file(tmp_path, monkeypatch):
    """Ctrl-C during torch.save: the KeyboardInterrupt reaches the training (it is not
    swallowed) and the partly written temporary file is gone."""
    model, opt = _tiny_model()
    d = str(tmp_path / "ck")
    ckpt = ts.Checkpointer(d, model, opt, every_steps=1, handle_preemption=False)
    seen = []

    def interrupted_save(obj, f, *a, **k):
        f.write(b"x" * 4096)  # part of it is on disk
        seen.append(os.listdir(d))
        raise KeyboardInterrupt
    monkeypatch.setattr(torch, "save", interrupted_save)
    with pytest.raises(KeyboardInterrupt):
        ckpt.after_step(0)
    assert seen and seen[0] != [] and os.listdir(d) == []


def test_split_rollback_takes_the_action_out_of_the_rules_config():
    rules, actions, rb = ts.checkpoint.split_rollback(
        ["exploding_tensor", ts.Rule("dead_loss", actions=["rollback", "log"])],
        [ts.Rollback(lr_factor=0.1), "stop_training"])
    assert actions == ["stop_training"]
    assert rb["rules"] == ["exploding_tensor", "dead_loss"]
    assert rb["action"].lr_factor == 0.1
    assert rules[1].actions == ["log"]
    assert ts.checkpoint.split_rollback(["dead_loss"], ["stop_training"])[2] is None


def test_signal_handler_chains_and_ignores_forked_children(tmp_path):
    seen = []
    prev = signal.signal(signal.SIGUSR1, lambda s, f: seen.append(s))
    try:
        model, opt = _tiny_model()
        ckpt = ts.Checkpointer(str(tmp_path / "ck"), model, opt,
                               preempt_signals=(signal.SIGUSR1,), exit_on_preempt=False)
        ckpt._pid = -1            # as in a forked data-loader worker: nothing at all
        ckpt._on_signal(signal.SIGUSR1, None)
        assert not ckpt._preempt_signal and not seen
        ckpt._pid = os.getpid()
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.01)          # let the interpreter run the handler
        assert ckpt._preempt_signal == signal.SIGUSR1 and seen == [signal.SIGUSR1]
        ckpt.after_step(4)        # the next boundary checkpoints (no hook: no exit asked)
        assert ckpt.preempted and [c["step"] for c in ckpt.checkpoints()] == [5]
        ckpt.close()
        assert signal.getsignal(signal.SIGUSR1) is not ckpt._on_signal
    finally:
        signal.signal(signal.SIGUSR1, prev)


# ============================================================================ subprocesses
def test_sigterm_then_resume_equals_uninterrupted_run(tmp_path):
    ref_w, w = str(tmp_path / "ref.pt"), str(tmp_path / "resumed.pt")
    common = ["--steps", 160, "--every", 20]
    ref = subprocess.run(_example("preemptible.py", "--out", tmp_path / "ref", *common,
                                  "--save-weights", ref_w),
                         env=_env(), capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "run"
    cmd = _example("preemptible.py", "--out", out, *common, "--save-weights", w)
    # two data-loader worker processes; SIGTERM goes to the whole process group, workers too
    p = subprocess.Popen(cmd + ["--step-sleep-ms", "15", "--workers", "2"], env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    ck = str(out / "checkpoints")
    _wait_for(lambda: glob.glob(os.path.join(ck, "*.json")), p, "the first checkpoint")
    os.killpg(p.pid, signal.SIGTERM)
    output = p.communicate(timeout=120)[0]
    assert p.returncode == ts.PREEMPTED_EXIT_CODE, output
    assert not os.path.exists(w)
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    start = int(r.stdout.split("start step ")[1].split()[0])
    assert 20 <= start < 160

    a, b = torch.load(ref_w), torch.load(w)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    run = ts.open_run(str(out))
    steps, values = run.scalar("losses/loss")
    assert steps.tolist() == list(range(160))             # every step exactly once
    _, ref_values = ts.open_run(str(tmp_path / "ref")).scalar("losses/loss")
    assert values.tolist() == ref_values.tolist()
    pre, res = run.events("preempted"), run.events("resumed")
    assert len(pre) == 1 and pre[0]["signal"] == signal.SIGTERM and pre[0]["step"] == start
    assert len(res) == 1 and res[0]["from_step"] == start and res[0]["lost_steps"] == 0
    assert res[0]["down_time_s"] > 0
    cks = run.events("checkpoint")
    assert {e["reason"] for e in cks} == {"interval", "preempt"}
    assert all(e["duration_us"] > 0 and e["bytes"] > 0 for e in cks)


def test_sigkill_during_checkpoint_write_resumes_from_previous(tmp_path):
    out = tmp_path / "run"
    ck = str(out / "checkpoints")
    p = subprocess.Popen(_example("preemptible.py", "--out", out, "--steps", 200, "--every", 10,
                                  "--pause-in-checkpoint", 30),
                         env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    _wait_for(lambda: glob.glob(os.path.join(ck, ".ckpt-000000000030.pt.tmp-*")), p,
              "the checkpoint of step 30 to be half written")
    time.sleep(0.5)  # the writer flushes the steps before it (every 200 ms)
    p.kill()
    p.wait(timeout=60)
    assert sorted(c["step"] for c in ts.checkpoint.list_checkpoints(ck)) == [10, 20]
    with ts.Hook(str(out), system_monitor_interval_ms=0) as hook:
        model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(),
                                    torch.nn.Dropout(0.1), torch.nn.Linear(32, 3))
        hook.register_module(model)
        ckpt = ts.Checkpointer(ck, model, torch.optim.Adam(model.parameters()), hook=hook,
                               handle_preemption=False)
        assert ckpt.resume() == 20
        assert hook.step_count == 20
    assert not glob.glob(os.path.join(ck, ".ckpt-*"))      # the dead writer's temp file
    res = ts.open_run(str(out)).events("resumed")[0]
    assert res["from_step"] == 20 and 0 <= res["lost_steps"] <= 10 and res["lost_time_s"] >= 0


def test_rollback_after_learning_rate_spike(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run(_example("rollback.py", "--out", out, "--steps", 150, "--spike-at", 50,
                                "--every", 10, "--lr", 0.05, "--lr-factor", 0.5),
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rollbacks 1" in r.stdout and "lr 0.025" in r.stdout, r.stdout
    run = ts.open_run(str(out))
    rb = run.events("rollback")
    assert len(rb) == 1
    e = rb[0]
    assert e["rule"] == "exploding_tensor" and e["count"] == 1 and e["lr_factor"] == 0.5
    assert e["to_step"] <= 50 < e["bad_step"] <= e["from_step"]
    steps, values = run.scalar("losses/loss")
    assert steps.tolist() == list(range(150))
    assert all(v == v and abs(v) != float("inf") for v in values.tolist())   # diverged steps
    assert values[-1] < values[0]                                          # overwritten
    fired = [x for x in run.rule_events() if x["status"] == "IssuesFound"]
    assert fired and fired[0]["rule"] == "exploding_tensor"


def test_rollback_in_process_scales_lr_skips_batches_and_gives_up(tmp_path, run_dir, tiny):
    """A rule firing (simulated statuses) rolls back in place at the next step boundary; the
    second firing without recovery exceeds max_rollbacks=1 and stops the training."""
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0)
    hook.register_module(model)
    firing = {"firings": 0, "last_step": -1}
    hook.rule_statuses = lambda: {"fake": dict(firing)}
    ckpt = ts.Checkpointer(str(tmp_path / "ck"), model, opt, hook=hook, every_steps=2,
                           keep_last=10, handle_preemption=False, rollback_poll_ms=0,
                           rollback=ts.Rollback(rules=["fake"], lr_factor=0.5, skip_batches=2,
                                                max_rollbacks=1))
    ckpt._firing_step = lambda rid, n, st: st["last_step"]   # no rule events to read here
    for x, y in batches[:9]:
        crit(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        hook.step()
    assert hook.step_count == 9 and [c["step"] for c in ckpt.checkpoints()] == [2, 4, 6, 8]
    saved6 = torch.load(os.path.join(ckpt.dir, "ckpt-000000000006.pt"))["model"]
    firing.update(firings=1, last_step=7)                  # first bad step 7
    hook.step()                                            # the boundary where it acts
    assert hook.step_count == 6 and ckpt.step == 6
    assert all(torch.equal(saved6[k], v) for k, v in model.state_dict().items())
    assert opt.param_groups[0]["lr"] == pytest.approx(0.025)
    assert [c["step"] for c in ckpt.checkpoints()] == [2, 4, 6]   # abandoned timeline gone
    assert len(list(ckpt.wrap(batches[9:14]))) == 3                 # skip_batches=2
    firing.update(firings=2, last_step=6)      # diverged again after the rollback
    hook.step()
    assert hook.should_stop and "rollback" in hook.stop_reason
    hook.close()
    run = ts.open_run(run_dir)
    rb = run.events("rollback")
    assert [(e["from_step"], e["to_step"], e["bad_step"], e["count"]) for e in rb] == \
        [(10, 6, 7, 1)]
    assert run.events("rollback_failed")[0]["reason"].startswith("1 rollbacks without")
    assert not [e for e in run.events("checkpoint") if e["reason"] == "stop"]  # diverged state

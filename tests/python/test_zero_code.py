"""Zero-code capture: `trainscope run -- python train.py` on scripts that do not mention
trainscope (tests/python/scripts/plain_digits.py), as a new user runs them."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import trainscope as ts

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "plain_digits.py")
STOPPED = 76  # _autorun.STOPPED_EXIT_CODE


def run_under(cli, run, *script_args, cli_args=(), env=None, script=SCRIPT, timeout=240,
              python_args=()):
    cmd = [cli, "run", "--out", str(run), "--quiet", *cli_args, "--",
           sys.executable, *python_args, script, *script_args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    return p


def printed_losses(stdout: str):
    rows = [line.split() for line in stdout.splitlines() if line.startswith("loss ")]
    return np.array([int(r[1]) for r in rows]), np.array([float(r[2]) for r in rows])


def statuses(run):
    d = os.path.join(run, "instrument")
    return [json.load(open(os.path.join(d, f))) for f in sorted(os.listdir(d))
            if f.endswith(".json")]


def test_fault_is_caught_and_stops_the_job(cli, tmp_path):
    run = tmp_path / "nan"
    p = run_under(cli, run, "--steps", "3000", "--fault-step", "150",
                  cli_args=["--rules", "exploding_tensor,loss_not_decreasing",
                            "--actions", "stop_training"])
    assert p.returncode == STOPPED, p.stderr
    assert "finished" not in p.stdout
    r = ts.open_run(str(run))
    fired = [e for e in r.rule_events()
             if e["rule"] == "exploding_tensor" and e["status"] == "IssuesFound"]
    assert fired, r.rule_events()
    assert 150 <= fired[0]["step"] <= 150 + 100  # within one save interval (100)
    steps, losses = r.scalar("losses/loss")
    # the NaN loss stops the training at its own step, before the optimizer applies it:
    # the script never got to print step 150
    assert steps[-1] == 150 and np.isnan(losses[-1]) and np.isfinite(losses[:-1]).all()
    assert printed_losses(p.stdout)[0][-1] == 149
    assert r.events("nonfinite_loss_stop")[0]["step"] == 150
    # the script multiplies the loss by NaN: the model replays finite, the loss is named
    origin = r.events("nonfinite_origin")
    assert len(origin) == 1 and origin[0]["step"] == 150 and origin[0]["where"] == "loss", origin
    assert "the loss computation, outside the model" in origin[0]["summary"], origin
    assert r.events("stop_requested"), "the stop is recorded in the worker's stream"
    exited = r.events("child_exited")[-1]
    assert exited["stopped_by_rule"] and exited["exit_code"] == STOPPED
    assert statuses(str(run))[-1]["state"] == "stopped"


def test_healthy_script_records_what_it_printed(cli, tmp_path):
    run = tmp_path / "ok"
    p = run_under(cli, run, "--steps", "250", "--loader",
                  cli_args=["--rules", "exploding_tensor,loss_not_decreasing",
                            "--actions", "stop_training"])
    assert p.returncode == 0, p.stderr
    assert "finished" in p.stdout
    r = ts.open_run(str(run))
    final = r.rule_statuses()
    assert final["exploding_tensor"]["status"] == "NoIssuesFound", final
    assert all(v["status"] != "IssuesFound" for v in final.values()), final
    steps, losses = r.scalar("losses/loss")
    want_steps, want = printed_losses(p.stdout)
    np.testing.assert_array_equal(steps, want_steps)
    np.testing.assert_allclose(losses, want, rtol=1e-6)
    # what an explicit hook records: gradients and weights on the default schedule, step
    # records with phases and the data loader's wait
    names = r.tensor_names()
    assert {"gradients/fc1.weight", "weights/fc2.weight"} <= set(names), names
    # the model is found at the first optimizer step: tensors from the next save step on
    assert list(r.tensor("gradients/fc1.weight").steps()) == [100, 200]
    recs = r.step_records()
    assert len(recs) == 250
    later = recs[5:]
    assert all(s["forward_us"] >= 0 and s["backward_us"] >= 0 and s["optimizer_us"] >= 0
               for s in later)
    assert all(s["data_wait_us"] >= 0 for s in later)
    st = statuses(str(run))[-1]
    assert st["state"] == "active" and st["model"]["class"] == "Net"
    assert st["loss"] == "the scalar on which backward() is called"


def test_gradient_accumulation_records_the_unscaled_loss(cli, tmp_path):
    run = tmp_path / "acc"
    p = run_under(cli, run, "--steps", "40", "--accumulate", "3")
    assert p.returncode == 0, p.stderr
    steps, losses = ts.open_run(str(run)).scalar("losses/loss")
    want_steps, want = printed_losses(p.stdout)
    np.testing.assert_array_equal(steps, want_steps)  # one optimizer step = one step
    np.testing.assert_allclose(losses, want, rtol=1e-5)


def test_several_models_choose_the_trained_one_and_regex_overrides(cli, tmp_path):
    run = tmp_path / "gan"
    p = run_under(cli, run, "--steps", "20", "--gan")
    assert p.returncode == 0, p.stderr
    st = statuses(str(run))[-1]
    assert st["model"]["class"] == "Net" and st["other_optimizers"] == ["SGD"], st
    assert any("critic (Sequential" in c for c in st["candidates"])
    names = ts.open_run(str(run)).tensor_names()
    assert "weights/fc1.weight" in names

    run2 = tmp_path / "critic"
    p = run_under(cli, run2, "--steps", "20", "--gan", cli_args=["--model-regex", "^crit"])
    assert p.returncode == 0, p.stderr
    st = statuses(str(run2))[-1]
    assert st["model"]["name"] == "critic" and st["model_regex"] == "^crit"
    assert "weights/0.weight" in ts.open_run(str(run2)).tensor_names()


def test_instrumentation_failure_leaves_the_training_running(cli, tmp_path):
    run = tmp_path / "broken"
    p = run_under(cli, run, "--steps", "30", "--broken")
    assert p.returncode == 0, p.stderr
    assert "finished" in p.stdout
    assert "instrumentation failed" in p.stderr
    st = statuses(str(run))[-1]
    assert st["state"] == "failed" and "hides its parameters" in st["message"]
    kinds = [(e["kind"], e.get("state")) for e in ts.open_run(str(run)).events()]
    assert ("instrumentation", "failed") in kinds  # recorded in the run, not only printed


def test_a_script_hook_wins_and_nothing_is_recorded_twice(cli, tmp_path):
    script = tmp_path / "own_hook.py"
    script.write_text(textwrap.dedent("""
        import torch, trainscope as ts
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        hook = ts.Hook(save_interval=5)
        hook.register_module(model)
        crit = hook.register_loss(torch.nn.MSELoss())
        for i in range(20):
            loss = crit(model(torch.randn(8, 4)), torch.zeros(8, 1))
            loss.backward(); opt.step(); opt.zero_grad()
        hook.close()
        print("finished")
    """))
    run = tmp_path / "own"
    p = run_under(cli, run, script=str(script))
    assert p.returncode == 0, p.stderr
    r = ts.open_run(str(run))
    assert [w for w in r.workers()] == ["worker-0"]
    steps, _ = r.scalar("losses/loss")
    assert list(steps) == list(range(20))
    assert len(r.step_records()) == 20
    assert all(s["state"] in ("searching", "stood_down") for s in statuses(str(run)))


def test_no_instrument_records_no_training_data(cli, tmp_path):
    run = tmp_path / "off"
    p = run_under(cli, run, "--steps", "10", cli_args=["--no-instrument"])
    assert p.returncode == 0, p.stderr
    assert not os.path.exists(os.path.join(run, "instrument"))
    assert ts.open_run(str(run)).workers() == []


def test_python_m_pythonpath_and_own_sitecustomize_keep_working(cli, tmp_path):
    pkg = tmp_path / "lib" / "mytrain"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    # python -m mytrain, found through the user's PYTHONPATH, whose own sitecustomize ran
    (pkg / "__main__.py").write_text(
        "import os\nassert os.environ.get('USER_SITE_RAN') == '1', 'user sitecustomize'\n"
        + open(SCRIPT).read())
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = '1'\n")
    run = tmp_path / "m"
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "lib"), str(site)]
                                         + [os.environ.get("PYTHONPATH", "")])}
    p = run_under(cli, run, "--steps", "12", env=env, script="mytrain", python_args=["-m"])
    assert p.returncode == 0, p.stderr
    assert "finished" in p.stdout
    steps, _ = ts.open_run(str(run)).scalar("losses/loss")
    assert list(steps) == list(range(12))


def test_a_run_directory_with_colons_and_spaces_is_captured(cli, tmp_path):
    """PYTHONPATH splits at ':': the bootstrap then lives in a private temporary folder (removed
    after the run), and the run directory itself may hold any character."""
    run = tmp_path / "a:b c" / "run: 1"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = run_under(cli, run, "--steps", "12", env={"TMPDIR": str(tmp)})
    assert p.returncode == 0, p.stderr
    assert "finished" in p.stdout and "disabled" not in p.stderr
    steps, _ = ts.open_run(str(run)).scalar("losses/loss")
    assert list(steps) == list(range(12))
    assert statuses(str(run))[-1]["state"] == "active"
    # the temporary bootstrap folder is gone (torch may leave its own caches there)
    assert [n for n in os.listdir(tmp) if n.startswith("trainscope-boot-")] == []


def test_capture_that_cannot_be_set_up_says_why(cli, tmp_path):
    run = tmp_path / "blocked"
    run.mkdir()
    (run / "instrument").write_text("a file where the bootstrap's folder goes")
    p = subprocess.run([cli, "run", "--out", str(run), "--", sys.executable, SCRIPT,
                        "--steps", "3"], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    assert "finished" in p.stdout
    assert "zero-code capture was not set up (cannot create" in p.stderr, p.stderr
    assert "not a Python command" not in p.stderr, p.stderr


def test_torchrun_job_records_every_rank(cli, tmp_path):
    run = tmp_path / "ddp"
    script = os.path.join(os.path.dirname(__file__), "scripts", "plain_ddp.py")
    cmd = [cli, "run", "--out", str(run), "--quiet", "--", sys.executable, "-m",
           "torch.distributed.run", "--standalone", "--nproc_per_node", "2", script,
           "--steps", "30", "--losses", str(tmp_path / "losses")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    r = ts.open_run(str(run))
    assert r.workers() == ["worker-0", "worker-1"]
    printed = {f"worker-{k}": [float(v) for v in open(tmp_path / f"losses-{k}")]
               for k in (0, 1)}
    for w in r.workers():
        steps, losses = r.scalar("losses/loss", worker=w)
        assert list(steps) == list(range(30))
        np.testing.assert_allclose(losses, printed[w], rtol=1e-6)
        assert len(r.step_records(w)) == 30
    active = [s for s in statuses(str(run)) if s["state"] == "active"]
    assert len(active) == 2 and {s["worker"] for s in active} == {"worker-0", "worker-1"}
    assert all(s["model"]["class"] == "DistributedDataParallel" for s in active)


AMP_SCRIPT = """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
for i in range(30):
    x = torch.randn(16, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = ((m(x) - 1) ** 2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print(f"loss {i} {loss.item()!r}", flush=True)
"""


@pytest.mark.parametrize("style", ["closure", "compile", "amp"])
def test_other_training_styles(cli, tmp_path, style):
    """optimizer.step(closure) (Lightning's way: the model runs inside the step),
    torch.compile, and autocast with a GradScaler (the unscaled loss is recorded)."""
    run = tmp_path / style
    if style == "amp":
        script = tmp_path / "amp.py"
        script.write_text(AMP_SCRIPT)
        p = run_under(cli, run, script=str(script))
    else:
        p = run_under(cli, run, "--steps", "40", f"--{style}")
    assert p.returncode == 0, p.stderr
    r = ts.open_run(str(run))
    steps, losses = r.scalar("losses/loss")
    want_steps, want = printed_losses(p.stdout)
    np.testing.assert_array_equal(steps, want_steps)
    np.testing.assert_allclose(losses, want, rtol=1e-6)
    st = statuses(str(run))[-1]
    assert st["state"] == "active", st
    if style == "amp":
        assert st["scaler"] and list(r.scalar("amp/loss_scale")[1][:3]) == [1024.0] * 3
    else:
        assert st["model"]["parameters"] == 2410


HF_SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "hf_tiny.py")


def test_hugging_face_trainer_without_callback_is_captured(cli, tmp_path):
    run = tmp_path / "hf"
    p = run_under(cli, run, str(tmp_path / "out"), "--steps", "30", script=HF_SCRIPT)
    assert p.returncode == 0, p.stderr
    r = ts.open_run(str(run))
    st = [s for s in statuses(str(run)) if s["state"] == "active"]
    assert len(st) == 1 and st[0]["model"]["class"] == "BertForSequenceClassification", st
    steps, losses = r.scalar("losses/loss")
    assert list(steps) == list(range(30))
    logged = json.load(open(tmp_path / "out" / "losses.json"))
    # the Trainer logs its losses rounded to 4 significant digits
    np.testing.assert_allclose(losses, logged, rtol=1e-3, atol=1e-4)
    assert "weights/bert.embeddings.word_embeddings.weight" in r.tensor_names()


def test_with_the_callback_under_trainscope_run_nothing_is_recorded_twice(cli, tmp_path):
    run = tmp_path / "hfcb"
    p = run_under(cli, run, str(tmp_path / "out"), "--steps", "400", "--fault", "12",
                  "--callback", script=HF_SCRIPT)
    assert p.returncode == 0, p.stderr
    r = ts.open_run(str(run))
    assert r.workers() == ["worker-0"]
    steps, _ = r.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    assert len(steps) == len(set(steps)) and steps[-1] < 400  # once per step, stopped early
    assert any(e["rule"] == "exploding_tensor" and e["status"] == "IssuesFound"
               for e in r.rule_events())
    assert all(s["state"] in ("armed", "searching", "stood_down")
               for s in statuses(str(run))), statuses(str(run))


def test_torchrun_nan_on_one_rank_stops_every_rank_at_one_step(cli, tmp_path):
    run = tmp_path / "ddpnan"
    script = os.path.join(os.path.dirname(__file__), "scripts", "plain_ddp.py")
    cmd = [cli, "run", "--out", str(run), "--rules", "exploding_tensor", "--actions",
           "stop_training", "--", sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node", "2", script, "--steps", "5000", "--fault-step", "100"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert "collective" not in p.stderr.lower() or "timeout" not in p.stderr.lower()
    r = ts.open_run(str(run))
    last = {w: r.step_records(w)[-1]["step"] for w in r.workers()}
    assert set(last) == {"worker-0", "worker-1"} and len(set(last.values())) == 1, last
    assert 100 <= last["worker-0"] < 4999
    stopped = [s for s in statuses(str(run)) if s["state"] == "stopped"]
    assert len(stopped) == 2 and len({s["step"] for s in stopped}) == 1, stopped
    assert "(stopped by rule exploding_tensor" in p.stderr, p.stderr[-2000:]


SPAWN_SCRIPT = """
import os, socket, torch, torch.distributed as dist, torch.multiprocessing as mp
def work(rank, port):
    os.environ.pop("RANK", None)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for i in range(20):
        loss = m(torch.randn(8, 4)).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    dist.destroy_process_group()
if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(work, args=(port,), nprocs=2)
"""


def test_mp_spawn_ranks_are_named_by_the_process_group(cli, tmp_path):
    """mp.spawn sets no RANK variable: each process's stream is named by its group rank."""
    script = tmp_path / "spawn.py"
    script.write_text(SPAWN_SCRIPT)
    run = tmp_path / "spawn"
    p = run_under(cli, run, script=str(script))
    assert p.returncode == 0, p.stderr
    r = ts.open_run(str(run))
    assert r.workers() == ["worker-0", "worker-1"]
    assert [len(r.step_records(w)) for w in r.workers()] == [20, 20]

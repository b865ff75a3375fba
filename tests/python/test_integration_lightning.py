"""The PyTorch Lightning callback on real Lightning trainings (CPU, generated data, no
downloads): steps are optimizer steps, the recorded losses are the training's, validation
metrics become EVAL losses and scalars, a rule's stop ends the fit through trainer.should_stop
after a Lightning checkpoint, SIGTERM checkpoints through Lightning's own handler, and a
failure inside trainscope leaves the training running."""
import math
import os
import signal
import warnings

import pytest
import torch

pl = pytest.importorskip("lightning.pytorch")

import trainscope as ts  # noqa: E402
from trainscope.integrations.lightning import TrainscopeCallback  # noqa: E402

warnings.filterwarnings("ignore", module="lightning")
warnings.filterwarnings("ignore", ".*does not have many workers.*")


def _data(n=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    y = (x[:, :4].sum(1) > 0).long()
    return torch.utils.data.TensorDataset(x, y)


def _loader(ds, batch_size=16, shuffle=False):
    return torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=shuffle, num_workers=0)


class Classifier(pl.LightningModule):
    """An MLP; `fault`: from this global step on the loss is multiplied by NaN (NaN gradients);
    `log_val_only`: validation_step logs val_loss and returns nothing."""

    def __init__(self, fault=None, lr=0.1, log_val_only=False, sigterm_at=None):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(),
                                       torch.nn.Linear(16, 2))
        self.fault = fault
        self.lr = lr
        self.log_val_only = log_val_only
        self.sigterm_at = sigterm_at
        self.train_losses = []  # (global_step, loss) as the training saw them
        self.val_means = []     # mean validation loss of each validation run (not sanity)
        self._val = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        if self.fault is not None and self.global_step >= self.fault:
            loss = loss * float("nan")
        if self.sigterm_at is not None and self.global_step == self.sigterm_at:
            os.kill(os.getpid(), signal.SIGTERM)
        self.train_losses.append((self.global_step, float(loss.detach())))
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("val_loss", loss, prog_bar=False)
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean())
        if not self.trainer.sanity_checking:
            self._val.append(float(loss) * len(y))
        return None if self.log_val_only else loss

    def on_validation_epoch_end(self):
        if not self.trainer.sanity_checking and self._val:
            self.val_means.append(sum(self._val) / 64)
        self._val = []

    def test_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def _trainer(cb, module=pl, **kw):
    opts = dict(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                enable_model_summary=False, enable_checkpointing=False,
                num_sanity_val_steps=0)
    opts.update(kw)
    return module.Trainer(callbacks=[cb], **opts)


def _mode_steps(run):
    """{global step: (mode, mode_step)} from the step records."""
    return {r["step"]: (r["mode"], r["mode_step"]) for r in run.step_records()}


def test_healthy_fit_records_the_training_losses_per_optimizer_step(tmp_path):
    model = Classifier()
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"), save_interval=5,
                            rules=["exploding_tensor"], actions=["stop_training"])
    trainer = _trainer(cb, max_epochs=3, num_sanity_val_steps=2)
    trainer.fit(model, _loader(_data()), _loader(_data(64, seed=1), batch_size=32))
    assert trainer.global_step == 48 and cb.hook is None and cb.errors == {}

    run = ts.open_run(cb.out_dir)
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    assert list(steps) == [s for s, _ in model.train_losses] == list(range(48))
    assert values.tolist() == pytest.approx([v for _, v in model.train_losses], rel=1e-6)
    # validation_step's losses are EVAL losses: 3 runs x 2 batches (sanity check not recorded)
    _, val = run.scalar("losses/loss", mode=ts.Mode.EVAL)
    assert len(val) == 6
    assert [sum(val[i:i + 2]) / 2 for i in (0, 2, 4)] == pytest.approx(model.val_means, rel=1e-5)
    # the logged metrics, as scalars of the EVAL step that ended each validation run
    _, logged = run.scalar("scalars/val_loss", mode=ts.Mode.EVAL)
    assert logged.tolist() == pytest.approx(model.val_means, rel=1e-5)
    assert len(run.scalar("scalars/val_acc", mode=ts.Mode.EVAL)[1]) == 3
    # gradients and weights of the LightningModule on the save schedule (TRAIN mode steps)
    modes = _mode_steps(run)
    grad_steps = run.tensor("gradients/net.0.weight").steps()
    assert sorted(modes[s][1] for s in grad_steps) == list(range(0, 48, 5))
    assert "weights/net.2.weight" in run.tensor_names()
    st = run.rule_statuses()["exploding_tensor"]
    assert st["status"] != "IssuesFound" and st["firings"] == 0
    assert not run.events("stop_honoured") and run.events("run_end")


def test_nan_fault_fires_the_rule_and_stops_through_lightning(tmp_path):
    fault, interval = 12, 4
    model = Classifier(fault=fault)
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"), save_interval=interval,
                            rules=["exploding_tensor"], actions=["stop_training"])
    trainer = _trainer(cb, max_steps=2000, max_epochs=-1)
    trainer.fit(model, _loader(_data()))
    assert fault < trainer.global_step < 2000  # stopped early, gracefully (fit returned)

    run = ts.open_run(cb.out_dir)
    modes = _mode_steps(run)
    fired = [e for e in run.rule_events() if e["rule"] == "exploding_tensor"
             and e["status"] == "IssuesFound"]
    assert fired
    mode, first = modes[fired[0]["step"]]
    assert mode == ts.Mode.TRAIN and fault <= first < fault + interval
    honoured = run.events("stop_honoured")
    assert len(honoured) == 1 and "exploding_tensor" in honoured[0]["reason"]
    assert honoured[0]["global_step"] == trainer.global_step
    ckpt = [e for e in run.events("checkpoint") if e["reason"] == "stop"]
    assert len(ckpt) == 1 and os.path.isfile(ckpt[0]["path"]) and ckpt[0]["bytes"] > 0
    state = torch.load(ckpt[0]["path"], weights_only=False)
    assert state["global_step"] == trainer.global_step
    assert "hook" in state["callbacks"][cb.state_key]  # the counters resume with the model
    # the loss series is still the training's, NaNs included
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    seen = dict(model.train_losses)
    assert [seen[s] for s in steps if not math.isnan(seen[s])] == \
        pytest.approx([v for v in values if not math.isnan(v)], rel=1e-6)
    assert all(math.isnan(v) for s, v in zip(steps, values) if s >= fault)
    # its training_step calls self.net, never the LightningModule's forward: nothing to replay,
    # and the origin says why instead of guessing
    origin = run.events("nonfinite_origin")
    assert len(origin) == 1 and not origin[0]["replayed"], origin
    assert "forward was never called" in origin[0]["why"], origin


def test_gradient_accumulation_one_step_per_optimizer_step(tmp_path):
    model = Classifier()
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"), save_interval=3)
    trainer = _trainer(cb, max_epochs=2, accumulate_grad_batches=4)
    trainer.fit(model, _loader(_data(160)))  # 10 batches/epoch: windows of 4, 4, 2
    assert trainer.global_step == 6
    run = ts.open_run(cb.out_dir)
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    assert list(steps) == list(range(6))
    by_step = {}
    for s, v in model.train_losses:
        by_step.setdefault(s, []).append(v)
    assert values.tolist() == pytest.approx([sum(v) / len(v) for _, v in
                                             sorted(by_step.items())], rel=1e-6)
    assert [len(by_step[s]) for s in range(6)] == [4, 4, 2, 4, 4, 2]
    records = [r for r in run.step_records() if r["mode"] == ts.Mode.TRAIN]
    assert [r["mode_step"] for r in records] == list(range(6))


def test_resume_from_a_lightning_checkpoint_continues_the_series(tmp_path):
    run_dir, ckpt = str(tmp_path / "run"), str(tmp_path / "six.ckpt")
    first = Classifier()
    cb = TrainscopeCallback(out_dir=run_dir, save_interval=4)
    trainer = _trainer(cb, max_steps=6)
    trainer.fit(first, _loader(_data(), shuffle=False))
    trainer.save_checkpoint(ckpt)  # after fit: the closed hook's counters go in too
    assert torch.load(ckpt, weights_only=False)["callbacks"][cb.state_key]["hook"][
        "mode_steps"]["0"] == 6

    second = Classifier()  # a new process would build the same objects
    cb2 = TrainscopeCallback(out_dir=run_dir, save_interval=4)
    _trainer(cb2, max_steps=12).fit(second, _loader(_data()), ckpt_path=ckpt)
    run = ts.open_run(run_dir)
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    assert list(steps) == list(range(12))
    assert values.tolist() == pytest.approx(
        [v for _, v in first.train_losses + second.train_losses], rel=1e-6)
    assert [s for s, _ in second.train_losses] == list(range(6, 12))
    # the global steps continue too (no step recorded twice)
    assert [r["step"] for r in run.step_records()] == list(range(12))


def test_logged_val_loss_feeds_eval_losses_and_the_overfit_rule(tmp_path):
    # validation_step returns nothing: the logged val_loss is the EVAL loss. A net that
    # memorises 32 random labels: the validation loss on other random labels climbs.
    g = torch.Generator().manual_seed(3)
    train = torch.utils.data.TensorDataset(torch.randn(32, 12, generator=g),
                                           torch.randint(0, 2, (32,), generator=g))
    val = torch.utils.data.TensorDataset(torch.randn(64, 12, generator=g),
                                         torch.randint(0, 2, (64,), generator=g))

    class Memoriser(Classifier):
        def __init__(self):
            super().__init__(lr=0.5, log_val_only=True)
            self.net = torch.nn.Sequential(torch.nn.Linear(12, 128), torch.nn.ReLU(),
                                           torch.nn.Linear(128, 2))

    model = Memoriser()
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"),
                            rules=[ts.Rule("overfit", trend_evaluations=3)])
    trainer = _trainer(cb, max_epochs=40)
    trainer.fit(model, _loader(train, batch_size=8), _loader(val, batch_size=64))
    run = ts.open_run(cb.out_dir)
    _, val_losses = run.scalar("losses/loss", mode=ts.Mode.EVAL)
    assert val_losses.tolist() == pytest.approx(model.val_means, rel=1e-5)
    assert run.scalar("scalars/val_loss", mode=ts.Mode.EVAL)[1].tolist() == \
        pytest.approx(model.val_means, rel=1e-5)
    st = run.rule_statuses()["overfit"]
    assert st["status"] == "IssuesFound", st


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_mixed_precision(tmp_path, precision):
    model = Classifier()
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"), save_interval=4,
                            rules=["exploding_tensor"])
    if precision == "16-mixed":
        # Trainer(precision="16-mixed") falls back to bf16-mixed on CPU; Lightning's plugin
        # itself runs fp16 autocast with a GradScaler on CPU
        from lightning.pytorch.plugins.precision import MixedPrecision
        plugin = MixedPrecision("16-mixed", "cpu", torch.amp.GradScaler("cpu"))
        trainer = _trainer(cb, max_steps=16, plugins=[plugin])
    else:
        trainer = _trainer(cb, max_steps=16, precision=precision)
    trainer.fit(model, _loader(_data()))
    run = ts.open_run(cb.out_dir)
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    assert list(steps) == list(range(16))
    assert values.tolist() == pytest.approx([v for _, v in model.train_losses], rel=1e-3)
    assert run.tensor("gradients/net.0.weight").steps()
    if precision == "16-mixed":  # Lightning's GradScaler is followed: amp/loss_scale
        assert len(run.scalar("amp/loss_scale")[1]) == 16
    assert run.rule_statuses()["exploding_tensor"]["firings"] == 0


def test_sigterm_saves_a_lightning_checkpoint(tmp_path):
    model = Classifier(sigterm_at=5)
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"))
    trainer = _trainer(cb, max_steps=100)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit):  # Lightning's SIGTERMException after that batch
        trainer.fit(model, _loader(_data()))
    run = ts.open_run(cb.out_dir)
    pre = run.events("preempted")
    assert len(pre) == 1 and pre[0]["step"] == 6 and os.path.isfile(pre[0]["checkpoint"])
    assert torch.load(pre[0]["checkpoint"], weights_only=False)["global_step"] == 6
    assert run.events("run_end")  # the hook closed (Lightning calls no teardown here)
    assert signal.getsignal(signal.SIGTERM) is before  # Lightning restored its handler


def test_pytorch_lightning_package_and_test_stage(tmp_path):
    ptl = pytest.importorskip("pytorch_lightning")
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"), save_interval=10)
    assert isinstance(cb, ptl.Callback) and isinstance(cb, pl.Callback)

    class Module(ptl.LightningModule):  # the same module on the other package
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Linear(12, 2)

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.cross_entropy(self.net(batch[0]), batch[1])

        test_step = training_step

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    model = Module()
    trainer = _trainer(cb, module=ptl, max_steps=8)
    trainer.fit(model, _loader(_data()))
    trainer.test(model, _loader(_data(32, seed=2), batch_size=16))
    run = ts.open_run(cb.out_dir)
    assert len(run.scalar("losses/loss", mode=ts.Mode.TRAIN)[1]) == 8
    # the test stage continues the same run: 2 EVAL steps after the 8 TRAIN steps
    records = run.step_records()
    assert [(r["mode"], r["step"]) for r in records][-2:] == [(ts.Mode.EVAL, 8),
                                                              (ts.Mode.EVAL, 9)]
    assert len(run.scalar("losses/loss", mode=ts.Mode.EVAL)[1]) == 2


def test_bad_arguments_fail_when_the_callback_is_built():
    with pytest.raises(TypeError, match="unknown argument 'save_intervall'; did you mean "
                                        "'save_interval'"):
        TrainscopeCallback(save_intervall=5)
    with pytest.raises(ValueError, match="test_mode"):
        TrainscopeCallback(test_mode="global")


def test_a_failure_inside_trainscope_leaves_the_training_running(tmp_path, caplog):
    # the run directory cannot be created (a file is in the way): training runs unmonitored
    blocker = tmp_path / "file"
    blocker.write_text("x")
    model = Classifier()
    cb = TrainscopeCallback(out_dir=str(blocker / "run"))
    trainer = _trainer(cb, max_steps=5)
    trainer.fit(model, _loader(_data()))
    assert trainer.global_step == 5

    # an error in the middle of the fit (the loss recorder breaks) is counted, not raised
    model = Classifier()
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run2"))

    class Broken(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if batch_idx == 2:
                cb._d._record_loss = None  # the next loss record raises TypeError
    trainer = _trainer(cb, max_steps=30)
    trainer.callbacks.append(Broken())
    trainer.fit(model, _loader(_data()))
    assert trainer.global_step == 30
    # 20 errors: the callback gives up (closes its hook) and the training goes on
    assert cb.errors == {"train batch end": 20} and cb.hook is None
    run = ts.open_run(cb.out_dir)
    assert run.events("hook_error") and run.events("run_end")
    assert len(run.scalar("losses/loss", mode=ts.Mode.TRAIN)[1]) == 2
    assert len([r for r in run.step_records() if r["mode"] == ts.Mode.TRAIN]) == 22


def _launch(cli, tmp_path, *job_args):
    import json
    import subprocess
    import sys
    run, out = str(tmp_path / "run"), str(tmp_path / "out.json")
    job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lightning_job.py")
    cmd = [cli, "run", "--out", run, "--quiet", "--interval-ms", "200", "--rules",
           "exploding_tensor", "--actions", "stop_training", "--",
           sys.executable, job, out, *job_args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    with open(out) as f:
        return run, json.load(f)


def test_under_trainscope_run_the_launchers_rules_stop_the_fit(cli, tmp_path):
    # the callback writes into the launcher's run; the launcher's rule and stop_training
    # action stop the fit through trainer.should_stop, after a Lightning checkpoint
    fault = 15
    run_dir, out = _launch(cli, tmp_path, "--fault", str(fault), "--max-steps", "3000")
    assert os.path.abspath(out["out_dir"]) == os.path.abspath(run_dir)
    assert fault < out["global_step"] < 3000
    run = ts.open_run(run_dir)
    assert run.workers() == ["worker-0"]
    honoured = run.events("stop_honoured")
    assert len(honoured) == 1 and honoured[0]["global_step"] == out["global_step"]
    assert out["checkpoints"] and os.path.isfile(out["checkpoints"][0])
    modes = _mode_steps(run)
    fired = [e for e in run.rule_events() if e["rule"] == "exploding_tensor"
             and e["status"] == "IssuesFound"]
    assert fired and fault <= modes[fired[0]["step"]][1] < fault + 5


def test_under_trainscope_run_a_healthy_fit_is_recorded_once(cli, tmp_path):
    run_dir, out = _launch(cli, tmp_path, "--max-steps", "30")
    run = ts.open_run(run_dir)
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    assert list(steps) == [s for s, _ in out["losses"]] == list(range(30))
    assert values.tolist() == pytest.approx([v for _, v in out["losses"]], rel=1e-6)
    assert len(run.step_records()) == 30  # one stream, no step recorded twice
    assert run.rule_statuses()["exploding_tensor"]["firings"] == 0


def test_ddp_two_cpu_processes_stop_together(tmp_path):
    # Trainer(strategy="ddp", devices=2) under torchrun (gloo): one run, a stream per rank,
    # the stop decision reduced across ranks so both leave at the same global step, and one
    # collective Lightning checkpoint
    import json
    import subprocess
    import sys
    fault = 15
    run_dir, out = str(tmp_path / "run"), str(tmp_path / "out-RANK.json")
    job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lightning_job.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           job, out, "--ddp", "--out-dir", run_dir, "--rules", "exploding_tensor",
           "--fault", str(fault), "--max-steps", "3000"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    outs = []
    for r in range(2):
        with open(out.replace("RANK", str(r))) as f:
            outs.append(json.load(f))
    assert [o["world"] for o in outs] == [2, 2]
    stopped = {o["global_step"] for o in outs}
    assert len(stopped) == 1 and fault < stopped.pop() < 3000
    run = ts.open_run(run_dir)
    assert sorted(run.workers()) == ["worker-0", "worker-1"]
    for o in outs:
        steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN,
                                   worker=f"worker-{o['rank']}", x="mode_step")
        assert list(steps) == [s for s, _ in o["losses"]]
        finite = [(a, b) for (_, a), b in zip(o["losses"], values) if a == a]
        assert [a for a, _ in finite] == pytest.approx([b for _, b in finite], rel=1e-6)
    assert len(run.events("stop_honoured")) == 2  # one per rank, at the same step
    assert os.path.isfile(outs[0]["checkpoints"][0])
    assert "gradients/net.0.weight" in run.tensor_names()  # the module's own names

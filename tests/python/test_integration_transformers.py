"""The Hugging Face Trainer callback on real Trainer trainings: a 2-layer BERT built from a
config with random weights, a made-up vocabulary and a data set made here (no download, no
tokenizer). The recorded losses are the Trainer's logged ones at its step numbers, evaluations
are EVAL steps, a rule's stop makes the Trainer save its checkpoint and leave the loop."""
import math
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

transformers = pytest.importorskip("transformers")
import torch  # noqa: E402

import trainscope as ts  # noqa: E402
from trainscope.integrations.transformers import TrainscopeCallback  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    """Sequences of a 40-token vocabulary; the label says whether token 7 occurs."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, 40, (n, 12), generator=g)
        self.labels = (self.ids == 7).any(1).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(12, dtype=torch.long),
                "labels": self.labels[i]}


def _model():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=16, num_labels=2)
    return transformers.BertForSequenceClassification(config)


def _args(tmp_path, **kw):
    opts = dict(output_dir=str(tmp_path / "hf"), use_cpu=True, report_to="none",
                per_device_train_batch_size=8, per_device_eval_batch_size=16,
                learning_rate=1e-3, logging_steps=1, save_strategy="no",
                disable_tqdm=True, dataloader_num_workers=0, seed=0)
    opts.update(kw)
    return transformers.TrainingArguments(**opts)


class Poison(transformers.TrainerCallback):
    """Makes the classifier's weights NaN before optimizer step `at` (1-based, as the
    Trainer counts): that step's loss and gradients are NaN."""

    def __init__(self, at):
        self.at = at

    def on_step_begin(self, args, state, control, model=None, **kw):
        if state.global_step + 1 == self.at:
            with torch.no_grad():
                model.classifier.weight.mul_(float("nan"))


def test_healthy_training_records_the_trainers_losses_and_evaluations(tmp_path):
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"), save_interval=5,
                            rules=["exploding_tensor"], actions=["stop_training"])
    trainer = transformers.Trainer(
        model=_model(), args=_args(tmp_path, max_steps=30, eval_strategy="steps", eval_steps=10,
                                   gradient_accumulation_steps=2),
        train_dataset=Tokens(256, 0), eval_dataset=Tokens(32, 1), callbacks=[cb])
    trainer.train()
    assert trainer.state.global_step == 30 and cb.hook is None and cb.errors == {}

    run = ts.open_run(cb.out_dir)
    logged = [(h["step"], h["loss"]) for h in trainer.state.log_history if "loss" in h]
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    assert list(steps) == [s for s, _ in logged] == list(range(1, 31))
    assert values.tolist() == pytest.approx([v for _, v in logged], rel=1e-9)
    # one EVAL step per evaluation, eval_loss as its loss, every metric as a scalar
    evals = [h for h in trainer.state.log_history if "eval_loss" in h]
    _, eval_losses = run.scalar("losses/loss", mode=ts.Mode.EVAL)
    assert eval_losses.tolist() == pytest.approx([h["eval_loss"] for h in evals])
    assert len(run.scalar("scalars/eval_runtime", mode=ts.Mode.EVAL)[1]) == 3
    _, lr = run.scalar("scalars/learning_rate", mode=ts.Mode.TRAIN)
    assert len(lr) == 30
    # gradients of the model (one optimizer step = one step: accumulation of 2) on schedule
    by_step = {r["step"]: r for r in run.step_records()}
    train_records = [r for r in by_step.values() if r["mode"] == ts.Mode.TRAIN]
    assert [r["mode_step"] for r in train_records] == list(range(1, 31))
    grad_steps = run.tensor("gradients/classifier.weight").steps()
    assert sorted(by_step[s]["mode_step"] for s in grad_steps) == [5, 10, 15, 20, 25, 30]
    st = run.rule_statuses()["exploding_tensor"]
    assert st["status"] != "IssuesFound" and st["firings"] == 0
    assert not run.events("stop_honoured") and run.events("run_end")


def test_nan_fault_stops_the_trainer_after_its_checkpoint(tmp_path):
    fault, interval = 8, 3
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"), save_interval=interval,
                            rules=["exploding_tensor"], actions=["stop_training"])
    trainer = transformers.Trainer(
        model=_model(), args=_args(tmp_path, max_steps=3000),
        train_dataset=Tokens(256, 0), callbacks=[Poison(fault), cb])
    trainer.train()
    stopped_at = trainer.state.global_step
    # the NaN's own step: its non-finite gradients are seen when its backward ends
    assert fault <= stopped_at < 3000

    run = ts.open_run(cb.out_dir)
    origin = run.events("nonfinite_origin")  # where it began: the poisoned weights
    assert len(origin) == 1, origin
    assert origin[0]["bad_input"].startswith("parameter classifier.weight"), origin
    by_step = {r["step"]: r for r in run.step_records()}
    fired = [e for e in run.rule_events() if e["rule"] == "exploding_tensor"
             and e["status"] == "IssuesFound"]
    assert fired
    first = by_step[fired[0]["step"]]["mode_step"]
    assert fault <= first < fault + interval
    honoured = run.events("stop_honoured")
    assert len(honoured) == 1 and honoured[0]["global_step"] == stopped_at
    # the Trainer's own checkpoint of the step it stopped at, written before it left
    ckpt = os.path.join(str(tmp_path / "hf"), f"checkpoint-{stopped_at}")
    assert honoured[0]["checkpoint"] == ckpt and os.path.isdir(ckpt)
    assert os.path.isfile(os.path.join(ckpt, "trainer_state.json"))
    saved = [e for e in run.events("checkpoint") if e["reason"] == "stop"]
    assert len(saved) == 1 and saved[0]["path"] == ckpt and saved[0]["bytes"] > 0
    # the Trainer logs a NaN loss as the mean of the previous ones (logging_nan_inf_filter):
    # the record is what the Trainer reported
    logged = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    assert values.tolist() == pytest.approx([logged[s] for s in steps])
    assert all(math.isfinite(v) for v in values)


def test_logging_every_n_steps_and_evaluate_after_training(tmp_path):
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"), save_interval=100)
    trainer = transformers.Trainer(
        model=_model(), args=_args(tmp_path, max_steps=12, logging_steps=4),
        train_dataset=Tokens(128, 0), eval_dataset=Tokens(32, 1), callbacks=[cb])
    trainer.train()
    metrics = trainer.evaluate()  # after train(): recorded into the same run
    run = ts.open_run(cb.out_dir)
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")
    logged = [(h["step"], h["loss"]) for h in trainer.state.log_history if "loss" in h]
    assert list(steps) == [4, 8, 12] and values.tolist() == pytest.approx([v for _, v in logged])
    assert [r["mode_step"] for r in run.step_records() if r["mode"] == ts.Mode.TRAIN] == \
        list(range(1, 13))
    _, ev = run.scalar("losses/loss", mode=ts.Mode.EVAL)
    assert ev.tolist() == pytest.approx([metrics["eval_loss"]])

    # logging_strategy="epoch": the epoch's mean loss at the epoch's last step
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run2"), save_interval=100)
    trainer = transformers.Trainer(
        model=_model(), args=_args(tmp_path, num_train_epochs=2, logging_strategy="epoch"),
        train_dataset=Tokens(64, 0), callbacks=[cb])
    trainer.train()
    steps, values = ts.open_run(cb.out_dir).scalar("losses/loss", x="mode_step")
    logged = [(h["step"], h["loss"]) for h in trainer.state.log_history if "loss" in h]
    assert list(steps) == [s for s, _ in logged] == [8, 16]
    assert values.tolist() == pytest.approx([v for _, v in logged])


def test_bf16_on_cpu_and_a_failing_hook(tmp_path):
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run"), save_interval=2)
    trainer = transformers.Trainer(
        model=_model(), args=_args(tmp_path, max_steps=6, bf16=True),
        train_dataset=Tokens(64, 0), callbacks=[cb])
    trainer.train()
    run = ts.open_run(cb.out_dir)
    assert len(run.scalar("losses/loss", mode=ts.Mode.TRAIN)[1]) == 6
    assert run.tensor("gradients/classifier.weight").steps()

    # errors inside trainscope are counted, never raised into the Trainer
    cb = TrainscopeCallback(out_dir=str(tmp_path / "run2"))
    cb._d.loss = None  # every log's loss record now raises TypeError
    trainer = transformers.Trainer(
        model=_model(), args=_args(tmp_path, max_steps=4),
        train_dataset=Tokens(64, 0), callbacks=[cb])
    trainer.train()
    assert trainer.state.global_step == 4 and cb.errors.get("log", 0) == 4
    assert ts.open_run(cb.out_dir).events("hook_error")


def test_two_processes_stop_at_the_same_step(tmp_path):
    # DDP on CPU (gloo) under torchrun: one run (rank 0's default directory, broadcast), a
    # stream per rank, the stop agreed at the same step, one Trainer checkpoint
    import json
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    out = str(tmp_path / "out-RANK.json")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(here, "transformers_job.py"), str(tmp_path), out, "--fault", "8"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    outs = []
    for r in range(2):
        with open(out.replace("RANK", str(r))) as f:
            outs.append(json.load(f))
    assert [o["world"] for o in outs] == [2, 2]
    assert outs[0]["out_dir"] == outs[1]["out_dir"]
    stopped = {o["global_step"] for o in outs}
    assert len(stopped) == 1
    step = stopped.pop()
    assert 8 < step < 3000
    run = ts.open_run(outs[0]["out_dir"])
    assert sorted(run.workers()) == ["worker-0", "worker-1"]
    honoured = run.events("stop_honoured")
    assert len(honoured) == 2 and {h["global_step"] for h in honoured} == {step}
    ckpt = os.path.join(str(tmp_path / "hf"), f"checkpoint-{step}")
    assert all(h["checkpoint"] == ckpt for h in honoured) and os.path.isdir(ckpt)


def test_under_trainscope_run_the_hook_writes_into_the_launchers_run(tmp_path, monkeypatch):
    # what `trainscope run` sets for its child: the callback's hook writes there, whatever
    # out_dir says, and leaves system sampling to the launcher
    launcher_run = str(tmp_path / "launcher-run")
    monkeypatch.setenv("TRAINSCOPE_RUN_DIR", launcher_run)
    monkeypatch.setenv("TRAINSCOPE_MONITORED", "1")
    cb = TrainscopeCallback(out_dir=str(tmp_path / "mine"), save_interval=2)
    trainer = transformers.Trainer(model=_model(), args=_args(tmp_path, max_steps=4),
                                   train_dataset=Tokens(64, 0), callbacks=[cb])
    trainer.train()
    assert os.path.abspath(cb.out_dir) == os.path.abspath(launcher_run)
    assert not os.path.exists(tmp_path / "mine")
    run = ts.open_run(launcher_run)
    assert run.workers() == ["worker-0"]
    assert len(run.scalar("losses/loss")[1]) == 4 and not run.system_samples()

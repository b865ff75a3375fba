"""The hook on real (tiny) torch trainings: names, steps, modes, save configuration, raw
round trips, timings."""
import json

import numpy as np
import pytest
import torch

import trainscope as ts
from conftest import train


def test_default_collections_names_steps_modes(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(run_dir, save_interval=10, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        losses = train(hook, model, opt, crit, batches[:25])
        model.eval()
        with torch.no_grad():
            for x, y in batches[:3]:
                crit(model(x), y)
        hook.save_scalar("val_acc", 0.75)
    run = ts.open_run(run_dir)
    assert run.workers() == ["worker-0"]
    params = [n for n, _ in model.named_parameters()]
    weights = sorted(f"weights/{n}" for n in params if not n.endswith("bias"))
    grads = sorted(f"gradients/{n}" for n in params)
    assert run.tensor_names(collection="weights") == weights
    assert run.tensor_names(collection="gradients") == grads
    assert run.tensor_names(collection="biases") == []
    # 25 train steps (0..24), then 3 eval steps (global 25..27, eval mode steps 0..2)
    assert run.steps() == list(range(28))
    assert run.steps(mode=ts.Mode.TRAIN) == list(range(25))
    assert run.steps(mode=ts.Mode.EVAL) == [25, 26, 27]
    assert run.tensor("gradients/0.weight").steps(mode=ts.Mode.TRAIN) == [0, 10, 20]
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN)
    assert list(steps) == list(range(25))
    np.testing.assert_allclose(values, losses, rtol=1e-6)
    esteps, evals = run.scalar("losses/loss", mode=ts.Mode.EVAL)
    assert list(esteps) == [25, 26, 27]
    msteps, _ = run.scalar("losses/loss", mode=ts.Mode.EVAL, x="mode_step")
    assert list(msteps) == [0, 1, 2]
    s, v = run.scalar("scalars/val_acc")
    assert list(v) == [0.75]
    recs = run.step_records()
    assert [r["step"] for r in recs] == list(range(28))
    assert [r["mode"] for r in recs] == [ts.Mode.TRAIN] * 25 + [ts.Mode.EVAL] * 3
    assert all(r["end_us"] >= r["start_us"] > 0 for r in recs)
    assert all(r["forward_us"] >= 0 for r in recs)
    kinds = [e["kind"] for e in run.events()]
    assert "run_start" in kinds and "run_end" in kinds
    end = run.events("run_end")[0]
    assert end["steps"] == 28 and end["mode_steps"]["TRAIN"] == 25
    man = run.manifest
    assert man["framework"].startswith("pytorch")
    assert man["config"]["save_interval"] == 10


def test_reductions_equal_torch(run_dir, tiny):
    model, opt, crit, batches = tiny
    captured = {}
    with ts.Hook(run_dir, save_interval=5, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        for i, (x, y) in enumerate(batches[:6]):
            if i == 5:
                captured["w"] = model[0].weight.detach().clone()
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            if i == 5:
                captured["g"] = model[0].weight.grad.detach().clone()
            opt.step()
    t = ts.open_run(run_dir).tensor("gradients/0.weight")
    g = captured["g"].double()
    r = t.reductions(5)
    assert r["l2"] == pytest.approx(float(g.norm()), rel=1e-6)
    assert r["mean"] == pytest.approx(float(g.mean()), rel=1e-6, abs=1e-12)
    assert r["max"] == pytest.approx(float(g.max()), rel=1e-6)
    assert r["std"] == pytest.approx(float(g.std(unbiased=False)), rel=1e-6)
    w = captured["w"].double()  # weights are saved before the step's update
    rw = ts.open_run(run_dir).tensor("weights/0.weight").reductions(5)
    assert rw["l1"] == pytest.approx(float(w.abs().sum()), rel=1e-6)
    assert t.reduction(5, "l2") == r["l2"]


def test_save_interval_steps_range_and_modes(run_dir, tiny):
    model, opt, crit, batches = tiny
    colls = [
        "losses",
        ts.Collection("weights", save_steps=[1, 4, 7]),
        ts.Collection("gradients", save_interval=3, start_step=2, end_step=12),
        ts.Collection("activations", save_interval=4, modes=[ts.Mode.EVAL]),
    ]
    with ts.Hook(run_dir, save_interval=100, collections=colls,
                 system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        train(hook, model, opt, crit, batches[:15])
        hook.set_mode(ts.Mode.EVAL)
        with torch.no_grad():
            for x, _ in batches[:5]:
                model(x)
    run = ts.open_run(run_dir)
    assert run.tensor("weights/0.weight").steps(mode=ts.Mode.TRAIN) == [1, 4, 7]
    # modes=None saves in every mode: eval mode steps 1 and 4 are global steps 16 and 19
    assert run.tensor("weights/0.weight").steps(mode=ts.Mode.EVAL) == [16, 19]
    assert run.tensor("gradients/0.weight").steps() == [3, 6, 9]
    act = run.tensor_names(collection="activations")
    assert act == ["activations/0", "activations/1", "activations/2", "activations/3",
                   "activations/4"]
    # eval mode steps 0 and 4 = global steps 15 and 19
    assert run.tensor("activations/4").steps() == [15, 19]
    assert run.tensor("activations/4").summary(15)["mode_step"] == 0


def test_explicit_steps(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(run_dir, save_interval=2, system_monitor_interval_ms=0,
                 auto_step=False) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        # two forward calls per iteration (e.g. gradient accumulation): explicit steps
        for i in range(6):
            for x, y in batches[2 * i:2 * i + 2]:
                crit(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            hook.step()
    run = ts.open_run(run_dir)
    assert run.steps() == list(range(6))
    assert run.tensor("weights/0.weight").steps() == [0, 2, 4]
    assert run.tensor("gradients/0.weight").steps() == [0, 2, 4]
    steps, vals = run.scalar("losses/loss")
    assert list(steps) == list(range(6))  # the reader keeps one value per step


def test_first_explicit_step_call_turns_auto_stepping_off(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(run_dir, save_interval=2, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        train(hook, model, opt, crit, batches[:5], explicit_step=True)
    run = ts.open_run(run_dir)
    assert run.steps() == list(range(5))
    assert [r["step"] for r in run.step_records()] == list(range(5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16,
                                   torch.bfloat16, torch.int64, torch.int32, torch.uint8,
                                   torch.bool, torch.int8, torch.int16])
def test_raw_round_trip_bit_exact(run_dir, dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 7, generator=g) * 100
    if dtype == torch.bool:
        t = x > 0
    elif dtype.is_floating_point:
        t = x.to(dtype)
        t.view(-1)[0] = float("nan")
        t.view(-1)[1] = float("-inf")
    else:
        t = x.to(dtype)
    with ts.Hook(run_dir, system_monitor_interval_ms=0) as hook:
        hook.save_tensor("x", t, raw=True)
    tt = ts.open_run(run_dir).tensor("tensors/x")
    if dtype == torch.bfloat16:
        bits = tt.value(0, bf16="uint16")
        assert bits.dtype == np.uint16
        np.testing.assert_array_equal(bits, t.view(torch.int16).numpy().view(np.uint16))
        np.testing.assert_array_equal(tt.value(0), t.float().numpy())
    else:
        v = tt.value(0)
        assert v.dtype == t.numpy().dtype and v.shape == (5, 7)
        assert v.tobytes() == t.numpy().tobytes()


def test_raw_activations_relu_and_inputs(run_dir, tiny):
    model, opt, crit, batches = tiny
    outs = {}
    model[1].register_forward_hook(lambda m, i, o: outs.setdefault(len(outs), o.detach().clone()))
    colls = [ts.Collection("relu_output", raw=True, save_interval=1),
             ts.Collection("tanh_input", raw=True, save_interval=1),
             ts.Collection("inputs", include=r"^inputs/0$", save_interval=2, raw=True)]
    with ts.Hook(run_dir, collections=colls, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        train(hook, model, opt, crit, batches[:3])
    run = ts.open_run(run_dir)
    assert run.tensor_names(scalars=False) == ["inputs/0", "relu_output/1", "tanh_input/3"]
    r = run.tensor("relu_output/1")
    assert r.steps() == [0, 1, 2]
    for s in range(3):
        np.testing.assert_array_equal(r.value(s), outs[s].numpy())
    np.testing.assert_array_equal(run.tensor("inputs/0").value(2), batches[2][0].numpy())


def test_custom_collection_and_regex(run_dir, tiny):
    model, opt, crit, batches = tiny
    colls = ["losses", ts.Collection("gradients", include=r"\.bias$", save_interval=1),
             ts.Collection("mine", include=r"activations/2$", save_interval=3)]
    with ts.Hook(run_dir, collections=colls, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        train(hook, model, opt, crit, batches[:4])
    run = ts.open_run(run_dir)
    assert run.tensor_names(collection="gradients") == ["gradients/0.bias", "gradients/2.bias",
                                                        "gradients/4.bias"]
    assert run.tensor_names(regex="activations") == ["activations/2"]
    assert run.tensor("activations/2").steps() == [0, 3]


def test_loss_function_and_data_wait(run_dir, tiny):
    import time
    model, opt, _, batches = tiny
    import torch.nn.functional as F

    def slow(bs):
        for b in bs:
            time.sleep(0.01)
            yield b
    with ts.Hook(run_dir, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_optimizer(opt)
        loss_fn = hook.register_loss(F.cross_entropy, name="ce")
        for x, y in hook.wrap(slow(batches[:4])):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    run = ts.open_run(run_dir)
    assert list(run.scalar("losses/ce")[0]) == [0, 1, 2, 3]
    recs = run.step_records()
    assert len(recs) == 4
    assert all(r["data_wait_us"] >= 9000 for r in recs)
    assert all(r["optimizer_us"] >= 0 and r["backward_us"] >= 0 for r in recs)
    # the step includes its data wait
    assert all(r["end_us"] - r["start_us"] >= r["data_wait_us"] for r in recs)


def test_device_stats_path_forced_on_cpu(tmp_path, tiny):
    model, opt, crit, batches = tiny
    dirs = {}
    for mode in ("core", "torch"):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
        o = torch.optim.SGD(m.parameters(), lr=0.05)
        d = str(tmp_path / mode)
        dirs[mode] = d
        with ts.Hook(d, save_interval=2, device_stats=mode, system_monitor_interval_ms=0,
                     collections=["losses", "weights", "gradients", "activations"]) as hook:
            hook.register_module(m)
            hook.register_loss(crit)
            train(hook, m, o, crit, batches[:5])
    a, b = ts.open_run(dirs["core"]), ts.open_run(dirs["torch"])
    assert a.tensor_names() == b.tensor_names()
    for name in a.tensor_names():
        for s in a.tensor(name).steps():
            ra, rb = a.tensor(name).reductions(s), b.tensor(name).reductions(s)
            for k in ("min", "max", "mean", "std", "l1", "l2", "nan", "zeros", "count"):
                assert rb[k] == pytest.approx(ra[k], rel=1e-5, abs=1e-7), (name, s, k)
    np.testing.assert_allclose(a.scalar("losses/loss")[1], b.scalar("losses/loss")[1])


def test_storage_projection_warns_once(run_dir, tiny, caplog):
    model, opt, crit, batches = tiny
    colls = [ts.Collection("weights", raw=True, save_interval=1)]
    with caplog.at_level("WARNING", logger="trainscope"):
        with ts.Hook(run_dir, collections=colls, storage_budget_bytes=20_000,
                     system_monitor_interval_ms=0) as hook:
            hook.register_module(model)
            train(hook, model, opt, crit, batches[:20])
            est = hook.storage_estimate()
    warnings = [r for r in caplog.records if "projects to" in r.getMessage()]
    assert len(warnings) == 1
    assert est["projected_bytes"] > 20_000
    run = ts.open_run(run_dir)
    assert run.events("storage_warning")
    # raw tensors stop before the budget: far fewer than 20 steps were kept
    assert len(run.tensor("weights/0.weight").steps()) < 20


def test_worker_rank_and_run_dir_from_env(tmp_path, monkeypatch, tiny):
    model, opt, crit, batches = tiny
    env_dir = str(tmp_path / "from_env")
    monkeypatch.setenv("TRAINSCOPE_RUN_DIR", env_dir)
    monkeypatch.setenv("RANK", "3")
    with ts.Hook(str(tmp_path / "ignored"), system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        train(hook, model, opt, crit, batches[:2])
    assert ts.open_run(env_dir).workers() == ["worker-3"]
    assert hook.out_dir == env_dir


def test_config_written_to_manifest(run_dir):
    hook = ts.Hook(run_dir, save_interval=7,
                   collections=[ts.Collection("gradients", include="fc", raw=True)],
                   system_monitor_interval_ms=0)
    hook.close()
    cfg = ts.open_run(run_dir).manifest["config"]
    assert cfg["save_interval"] == 7
    assert cfg["collections"][0] == {**cfg["collections"][0], "name": "gradients",
                                     "include": ["fc"], "raw": True, "save_interval": 7}
    json.dumps(cfg)


def test_system_monitor_samples(run_dir, tiny):
    if not ts._core.HAVE_SYSMON:
        pytest.skip("built without the system monitor")
    import time
    with ts.Hook(run_dir, system_monitor_interval_ms=100) as hook:
        time.sleep(0.35)
    samples = ts.open_run(run_dir).system_samples()
    assert len(samples) >= 2
    assert any(k.startswith("cpu") for k in samples[-1]["metrics"])


def test_monitor_skipped_under_trainscope_run(run_dir, monkeypatch):
    monkeypatch.setenv("TRAINSCOPE_MONITORED", "1")
    import time
    with ts.Hook(run_dir, system_monitor_interval_ms=100):
        time.sleep(0.25)
    assert ts.open_run(run_dir).system_samples() == []


def test_device_path_one_host_copy_per_save_step(run_dir, tiny, monkeypatch):
    """The batched torch path (used for CUDA tensors; forced here on CPU) copies one table per
    save step to the host and never calls .item() per tensor."""
    model, opt, crit, batches = tiny
    calls = {"cpu": 0, "item": 0}
    orig_cpu, orig_item = torch.Tensor.cpu, torch.Tensor.item

    def cpu(self, *a, **k):
        calls["cpu"] += 1
        return orig_cpu(self, *a, **k)

    def item(self, *a, **k):
        calls["item"] += 1
        return orig_item(self, *a, **k)
    hook = ts.Hook(run_dir, save_interval=5, device_stats="torch", system_monitor_interval_ms=0,
                   collections=["losses", "weights", "gradients", "activations"])
    hook.register_module(model)
    hook.register_loss(crit)
    monkeypatch.setattr(torch.Tensor, "cpu", cpu)
    monkeypatch.setattr(torch.Tensor, "item", item)
    for x, y in batches[:10]:
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    monkeypatch.undo()
    # step 0 and step 5: one copy each (summaries + pending losses); close: remaining losses
    assert calls == {"cpu": 3, "item": 0}
    run = ts.open_run(run_dir)
    assert len(run.scalar("losses/loss")[0]) == 10
    assert run.tensor("activations/4").steps() == [0, 5]


def _grad_hook_count(model):
    # the hook's gradient hooks are post-accumulate hooks (they read .grad once accumulated)
    return sum(len(p._backward_hooks or {}) + len(p._post_accumulate_grad_hooks or {})
               for p in model.parameters())


def test_every_step_saving_keeps_step_hooks_and_records_each_step(run_dir, tiny):
    """Consecutive save steps with the same plan reuse the gradient hooks; they are removed
    when the next step does not save, and every saved step still gets its gradients and
    weights with the values of that step."""
    model, opt, crit, batches = tiny
    colls = ["losses", ts.Collection("weights", save_steps=list(range(0, 6)) + [9]),
             ts.Collection("gradients", save_steps=list(range(0, 6)) + [9])]
    seen = []
    with ts.Hook(run_dir, collections=colls, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        for i, (x, y) in enumerate(batches[:12]):
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            seen.append({n: p.grad.abs().max().item() for n, p in model.named_parameters()})
            opt.step()
            if i == 3:  # steps 0..5 save: hooks installed once and kept
                assert _grad_hook_count(model) == len(list(model.parameters()))
            if i == 7:  # 6..8 do not save: removed
                assert _grad_hook_count(model) == 0
    assert _grad_hook_count(model) == 0
    run = ts.open_run(run_dir)
    for n, _ in model.named_parameters():
        t = run.tensor(f"gradients/{n}")
        assert t.steps() == [0, 1, 2, 3, 4, 5, 9]
        for step in t.steps():
            r = t.reductions(step)
            assert max(abs(r["max"]), abs(r["min"])) == pytest.approx(seen[step][n], rel=1e-6)


def test_parameter_views_follow_replaced_storage(run_dir, tiny):
    """The hook keeps numpy views of parameters between saves; assigning new storage to a
    parameter (p.data = ...) must be seen at the next save."""
    model, opt, crit, batches = tiny
    colls = [ts.Collection("weights", save_interval=1)]
    w = model[0].weight
    with ts.Hook(run_dir, collections=colls, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        model(batches[0][0])
        model(batches[1][0])
        with torch.no_grad():
            w.data = torch.full((16, 8), 7.0)  # new storage, same Parameter object
        model(batches[2][0])
        with torch.no_grad():
            w.copy_(torch.full((16, 8), -3.0))  # in place: the kept view sees it
        model(batches[3][0])
    run = ts.open_run(run_dir)
    t = run.tensor("weights/0.weight")
    assert t.steps() == [0, 1, 2, 3]
    assert t.reduction(1, "max") != 7.0
    assert t.reduction(2, "max") == 7.0 and t.reduction(2, "min") == 7.0
    assert t.reduction(3, "max") == -3.0 and t.reduction(3, "min") == -3.0


def test_step_records_and_losses_are_written_in_bursts_without_loss(run_dir, tiny):
    """StepRecords and losses are handed to the core in bursts: all of them arrive, in step
    order, after flush() and after close, and a reader sees them after flush() while the
    hook is still open."""
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0, stop_check_interval_ms=10**6)
    hook.register_module(model)
    hook.register_loss(crit)
    losses = train(hook, model, opt, crit, batches[:30])
    hook.flush()
    run = ts.open_run(run_dir)
    steps, values = run.scalar("losses/loss")
    assert list(steps) == list(range(30))
    np.testing.assert_allclose(values, losses, rtol=1e-6)
    assert [r["step"] for r in run.step_records()] == list(range(29))  # step 29 still open
    hook.close()
    run = ts.open_run(run_dir)
    assert [r["step"] for r in run.step_records()] == list(range(30))


def test_weights_only_steps_after_a_gradient_step_are_pre_update(run_dir, tiny):
    """A save step's weights are the values before that step's optimizer.step(), whether the
    step also saves gradients (summarised together during backward) or not."""
    model, opt, crit, batches = tiny
    colls = [ts.Collection("weights", save_interval=1),
             ts.Collection("gradients", save_steps=[0, 3])]
    before = []
    with ts.Hook(run_dir, collections=colls, system_monitor_interval_ms=0) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        for x, y in batches[:6]:
            before.append(model[0].weight.detach().clone())
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    t = ts.open_run(run_dir).tensor("weights/0.weight")
    assert t.steps() == list(range(6))
    for step in range(6):
        w = before[step].double()
        assert t.reduction(step, "l1") == pytest.approx(float(w.abs().sum()), rel=1e-9), step
    assert ts.open_run(run_dir).tensor("gradients/0.weight").steps() == [0, 3]

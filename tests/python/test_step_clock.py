"""The hook's per-step fast path (the C step clock): what it records must equal what the
Python hook recorded, its slow paths must keep the failure policy, and the objects it gives
torch must behave like ordinary hooks (schedulers, copies, pickling, loaders)."""
import copy
import io
import os
import time

import numpy as np
import pytest
import torch

import trainscope as ts
from conftest import train


def _hooked(run_dir, tiny, **kw):
    model, opt, crit, batches = tiny
    kw.setdefault("system_monitor_interval_ms", 0)
    hook = ts.Hook(run_dir, **kw)
    hook.register_module(model)
    crit = hook.register_loss(crit)
    hook.register_optimizer(opt)
    return hook, model, opt, crit, batches


def test_losses_and_step_records_match_the_training(run_dir, tiny):
    hook, model, opt, crit, batches = _hooked(run_dir, tiny)
    seen = []
    for x, y in hook.wrap(batches[:12]):
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen.append(loss.item())
    hook.close()
    run = ts.open_run(run_dir)
    steps, values = run.scalar("losses/loss", mode=ts.Mode.TRAIN)
    assert list(steps) == list(range(12))
    np.testing.assert_array_equal(values, np.array(seen))
    records = run.step_records()
    assert [r["step"] for r in records] == list(range(12))
    for r in records:
        assert r["end_us"] >= r["start_us"] > 0
        assert r["forward_us"] >= 0 and r["backward_us"] >= 0 and r["optimizer_us"] >= 0
        assert r["data_wait_us"] >= 0


def test_loss_schedule_interval_end_and_explicit_steps(run_dir, tiny):
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0,
                   collections=[ts.Collection("losses", save_interval=3, end_step=10)])
    hook.register_module(model)
    crit = hook.register_loss(crit)
    train(hook, model, opt, crit, batches[:14])
    hook.close()
    steps, _ = ts.open_run(run_dir).scalar("losses/loss")
    assert list(steps) == [0, 3, 6, 9]

    d2 = run_dir + "-b"
    model, opt, crit, batches = tiny
    hook = ts.Hook(d2, system_monitor_interval_ms=0,
                   collections=[ts.Collection("losses", save_steps=[1, 4, 5, 11])])
    hook.register_module(model)
    crit = hook.register_loss(crit)
    train(hook, model, opt, crit, batches[:8])
    hook.close()
    steps, _ = ts.open_run(d2).scalar("losses/loss")
    assert list(steps) == [1, 4, 5]


def test_non_scalar_loss_is_recorded_as_its_mean(run_dir, tiny):
    model, opt, _, batches = tiny
    crit = torch.nn.CrossEntropyLoss(reduction="none")
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0)
    hook.register_module(model)
    crit = hook.register_loss(crit)
    means = []
    for x, y in batches[:4]:
        per_sample = crit(model(x), y)
        means.append(float(per_sample.detach().float().mean()))
        opt.zero_grad()
        per_sample.mean().backward()
        opt.step()
    hook.close()
    _, values = ts.open_run(run_dir).scalar("losses/loss")
    np.testing.assert_allclose(values, means, rtol=1e-6)
    assert not hook.errors


def test_modes_are_counted_apart_and_loss_uses_mode_steps(run_dir, tiny):
    hook, model, opt, crit, batches = _hooked(run_dir, tiny)
    train(hook, model, opt, crit, batches[:3])
    model.eval()
    with torch.no_grad():
        for x, y in batches[3:5]:
            crit(model(x), y)
    model.train()
    train(hook, model, opt, crit, batches[5:7])
    hook.close()
    run = ts.open_run(run_dir)
    assert list(run.scalar("losses/loss", mode=ts.Mode.EVAL)[0]) == [3, 4]
    assert list(run.scalar("losses/loss", mode=ts.Mode.EVAL, x="mode_step")[0]) == [0, 1]
    assert list(run.scalar("losses/loss", mode=ts.Mode.TRAIN, x="mode_step")[0]) == [0, 1, 2,
                                                                                     3, 4]
    assert hook.step_count == 7 and hook._mode_steps[ts.Mode.TRAIN] == 5
    assert [r["mode"] for r in run.step_records()] == [0, 0, 0, 1, 1, 0, 0]


def test_lr_scheduler_made_after_the_wrapper_counts_optimizer_steps(run_dir, tiny, recwarn):
    hook, model, opt, crit, batches = _hooked(run_dir, tiny)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for x, y in batches[:4]:
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    hook.close()
    # torch's scheduler patches opt.step to note that it was called: through our wrapper too
    assert getattr(opt, "_opt_called", False)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05 * 0.25)
    assert not [w for w in recwarn if "lr_scheduler.step()" in str(w.message)]
    assert all(r["optimizer_us"] >= 0 for r in ts.open_run(run_dir).step_records())


def test_copies_of_hooked_objects_are_inert(run_dir, tiny):
    hook, model, opt, crit, batches = _hooked(run_dir, tiny)
    train(hook, model, opt, crit, batches[:3])
    ema = copy.deepcopy(model)  # e.g. an EMA model
    for x, _ in batches[:5]:
        ema(x)
    assert hook.step_count == 2  # the copy's forward calls are not steps
    buf = io.BytesIO()
    torch.save(model, buf)  # whole-module pickling works and loads without the hook
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)  # a whole module is a pickle
    loaded(batches[0][0])
    assert hook.step_count == 2
    opt2 = copy.deepcopy(opt)  # steps its own parameters, untimed
    p_before = [p.detach().clone() for p in model.parameters()]
    for g in opt2.param_groups:
        for p in g["params"]:
            p.grad = torch.ones_like(p)
    opt2.step()
    assert all(torch.equal(a, b) for a, b in zip(p_before, model.parameters()))
    train(hook, model, opt, crit, batches[3:5])
    hook.close()
    assert hook.step_count == 5 and not hook.errors


def test_gradient_hooks_leave_no_trace_on_parameters(run_dir, tiny):
    model, opt, crit, batches = tiny
    user_calls = []
    first = next(model.parameters())
    first.register_hook(lambda g: user_calls.append(1))
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0, save_interval=4)
    hook.register_module(model)
    crit = hook.register_loss(crit)
    train(hook, model, opt, crit, batches[:2])  # step 0 saved gradients, step 1 did not
    params = list(model.parameters())
    # torch would otherwise call into Python for every later backward of each parameter
    assert all(p._backward_hooks is None for p in params[1:])
    assert all(p._post_accumulate_grad_hooks is None for p in params)
    assert first._backward_hooks  # the user's own hook stays
    train(hook, model, opt, crit, batches[2:6])
    assert len(user_calls) == 6
    hook.close()
    names = ts.open_run(run_dir).tensor_names(collection="gradients")
    assert names and ts.open_run(run_dir).tensor(names[0]).steps() == [0, 4]


def test_gradient_accumulation_keeps_the_first_backward_of_a_step(run_dir, tiny):
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0, save_interval=1)
    hook.register_module(model)
    expected = None
    (x1, y1), (x2, y2) = batches[0], batches[1]
    out = model(torch.cat([x1, x2]))  # one forward: one step
    opt.zero_grad()
    l1 = crit(out[:8], y1)
    l1.backward(retain_graph=True)
    expected = model[0].weight.grad.detach().clone()
    crit(out[8:], y2).backward()
    opt.step()
    hook.close()
    t = ts.open_run(run_dir).tensor("gradients/0.weight")
    assert t.reduction(0, "l2") == pytest.approx(float(expected.double().norm()), rel=1e-6)


def test_loader_exhaustion_errors_and_epochs(run_dir, tiny):
    hook, model, opt, crit, batches = _hooked(run_dir, tiny)

    class Slow:
        def __iter__(self):
            for b in batches[:3]:
                time.sleep(0.01)
                yield b

    loader = hook.wrap(Slow())
    for _ in range(2):  # two epochs over the same wrapper
        it = iter(loader)
        for x, y in it:
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with pytest.raises(StopIteration):
            next(it)  # stays exhausted

    def broken():
        yield batches[0]
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):  # the loader's own error reaches the loop
        for x, y in hook.wrap(broken()):
            model(x)
    hook.close()
    records = ts.open_run(run_dir).step_records()
    assert len(records) == 7
    waits = [r["data_wait_us"] for r in records[:6]]
    assert all(w >= 9000 for w in waits), waits


def test_slow_path_errors_are_counted_and_training_goes_on(run_dir, tiny, monkeypatch):
    hook, model, opt, crit, batches = _hooked(run_dir, tiny, save_interval=2)

    def boom(*a):
        raise RuntimeError("save plan exploded")

    monkeypatch.setattr(hook, "_slow_begin_save", boom)
    monkeypatch.setattr(hook, "_slow_loss_next", boom)
    losses = train(hook, model, opt, crit, batches[:6])
    hook.close()
    assert len(losses) == 6 and hook.step_count == 6  # close() ends the last step
    assert hook.errors.get("forward", 0) >= 1 and hook.errors.get("loss", 0) >= 1


def test_base_exceptions_from_step_callbacks_propagate(run_dir, tiny):
    hook, model, opt, crit, batches = _hooked(run_dir, tiny)

    def preempted(event):
        if event == "step" and hook.step_count == 2:
            raise SystemExit(75)

    hook.add_step_callback(preempted)
    with pytest.raises(SystemExit):
        train(hook, model, opt, crit, batches[:5])
    assert hook.step_count == 2
    hook.remove_step_callback(preempted)
    assert hook._clock.step_callbacks is False
    train(hook, model, opt, crit, batches[5:7])
    hook.close()


def test_hook_time_on_non_save_steps_is_measured_by_the_clock(run_dir, tiny):
    hook, model, opt, crit, batches = _hooked(run_dir, tiny, save_interval=1000)
    train(hook, model, opt, crit, batches[:3])
    clock = hook._clock
    slow_before = clock.slow_calls
    clock.timing = True
    clock.self_ns = 0
    train(hook, model, opt, crit, batches[3:8])
    clock.timing = False
    hook.close()
    assert clock.self_ns > 0
    # non-save steps: no Python slow path but the periodic stop check
    assert clock.slow_calls - slow_before <= 1


def test_device_copies_are_written_when_they_land_and_at_flush(run_dir, tiny, monkeypatch):
    """Device summaries and losses reach the host by copies the hook does not wait for
    (CUDA: pinned memory and an event; forced here on CPU): nothing is written while a copy
    is in flight, flush() and close() wait for them, and each series stays in step order."""
    from trainscope import _device_stats
    landed = {"now": False}
    monkeypatch.setattr(_device_stats.HostCopy, "ready", lambda self: landed["now"])
    hook, model, opt, crit, batches = _hooked(run_dir, tiny, device_stats="torch",
                                              save_interval=2)
    train(hook, model, opt, crit, batches[:7])
    assert hook._host_copies  # in flight
    hook._writer.flush()
    run = ts.open_run(run_dir)
    assert "weights/0.weight" not in run.tensor_names()
    hook.flush()  # waits for them
    assert not hook._host_copies
    run.refresh()
    assert run.tensor("weights/0.weight").steps() == [0, 2, 4]  # step 6 is still open
    landed["now"] = True  # from here on copies land at once
    train(hook, model, opt, crit, batches[7:12])
    hook.close()
    run = ts.open_run(run_dir)
    assert run.tensor("weights/0.weight").steps() == [0, 2, 4, 6, 8, 10]
    steps, _ = run.scalar("losses/loss")
    assert list(steps) == list(range(12))
    assert not hook.errors


def test_device_losses_cost_no_python_per_step(run_dir, tiny):
    """One-element device losses (forced on CPU) are kept by the clock and reach Python 16
    at a time; every value is recorded, in step order, at the step it was computed."""
    hook, model, opt, crit, batches = _hooked(run_dir, tiny, device_stats="torch",
                                              save_interval=1000)
    seen = train(hook, model, opt, crit, batches[:4])
    clock = hook._clock
    before = clock.slow_calls
    seen += train(hook, model, opt, crit, batches[4:36])
    assert clock.slow_calls - before <= 2 + 2  # 32 losses: two batches of 16, + stop checks
    hook.close()
    steps, values = ts.open_run(run_dir).scalar("losses/loss")
    assert list(steps) == list(range(36))
    np.testing.assert_allclose(values, seen, rtol=1e-6)


def test_gradient_hooks_let_torch_keep_its_gradient_buffers(run_dir, tiny):
    """On a save step the gradients the hook summarises are the parameters' .grad tensors
    themselves: no copy of any gradient (a tensor hook keeping the incoming gradient made
    AccumulateGrad copy every one)."""
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0, save_interval=1,
                   collections=["losses", ts.Collection("gradients", save_interval=1)])
    hook._grad_lane_enabled = False  # the Python path; the clock's lane: the next tests
    hook.register_module(model)
    crit = hook.register_loss(crit)
    seen = {}
    original = hook._save_items

    def spy(items):
        for full, t, *_ in items:
            if full.startswith("gradients/"):
                seen[full] = t
        return original(items)

    hook._save_items = spy
    x, y = batches[0]
    loss = crit(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grads = {f"gradients/{n}": p.grad for n, p in model.named_parameters()}
    opt.step()
    hook.close()
    assert set(seen) == set(grads)
    for name, g in grads.items():
        assert seen[name].data_ptr() == g.data_ptr(), name
    assert not hook.errors


def _lane_run(run_dir, model, opt, crit, batches, lane, steps=4, buckets=0):
    colls = ["losses", ts.Collection("weights", save_interval=2),
             ts.Collection("gradients", save_interval=1, histogram_buckets=buckets)]
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0, collections=colls)
    hook._grad_lane_enabled = lane
    hook.register_module(model)
    hook.register_optimizer(opt)
    crit = hook.register_loss(crit)
    by_python = []  # gradients the hook's Python path summarised
    original = hook._save_items

    def spy(items):
        by_python.extend(full for full, *_ in items if full.startswith("gradients/"))
        return original(items)

    hook._save_items = spy
    lane_on = []
    for x, y in batches[:steps]:
        loss = crit(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        lane_on.append(hook._clock.grad_lane)
        opt.step()
    hook.close()
    storage = hook._storage.bytes  # the lane's summaries are accounted at each step's end
    assert not hook.errors
    return ts.open_run(run_dir), lane_on, by_python, storage


def _same_stats(a: dict, b: dict, where) -> None:
    assert sorted(a) == sorted(b), where
    for k in a:
        if isinstance(a[k], dict):
            _same_stats(a[k], b[k], (where, k))
        else:
            np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]),
                                          err_msg=f"{where} {k}")


def _same_runs(a, b) -> None:
    """Runs a and b hold the same tensors at the same steps, with the same summaries."""
    assert a.tensor_names() == b.tensor_names()
    for name in a.tensor_names():
        if name.startswith("losses/"):
            continue
        ta, tb = a.tensor(name), b.tensor(name)
        assert ta.steps() == tb.steps(), name
        for st in ta.steps():
            sa, sb = ta.summary(st), tb.summary(st)
            for k in ("mode", "mode_step", "shape", "dtype"):
                assert sa[k] == sb[k], (name, st, k)
            _same_stats(sa["stats"], sb["stats"], (name, st))


def _tiny_model(dtype=torch.float32, strided=False):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    if strided:  # a transposed (non-contiguous) weight: its .grad has the same strides
        w = model[2].weight
        model[2].weight = torch.nn.Parameter(w.detach().t().contiguous().t())
        assert not model[2].weight.is_contiguous()
    model.to(dtype)
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_gradient_lane_writes_what_the_python_path_writes(tmp_path, tiny, dtype):
    """With the clock's gradient lane (the clock summarises the gradients when the last one
    arrives, no Python) a run records the same gradient summaries, histograms, weights and
    storage accounting as with the hook's Python path, for float32, bfloat16 and float16."""
    _, _, crit, batches = tiny
    batches = [(x.to(dtype), y) for x, y in batches]
    runs = {}
    for lane in (True, False):
        model, opt = _tiny_model(dtype)
        runs[lane] = _lane_run(str(tmp_path / f"lane{lane}"), model, opt, crit, batches, lane,
                               buckets=8)
    (a, on_a, up_a, st_a), (b, on_b, up_b, st_b) = runs[True], runs[False]
    # the lane is on where the step saves no weights (1, 3: the hook's one core call for
    # weights and gradients costs less there) and took every gradient of those steps
    assert on_a == [False, True, False, True] and not any(on_b)
    assert len(up_a) == 4 * 2 and len(up_b) == 4 * 4
    _same_runs(a, b)
    grads = [n for n in a.tensor_names() if n.startswith("gradients/")]
    assert len(grads) == 4
    assert a.tensor("gradients/0.weight").steps() == [0, 1, 2, 3]
    assert st_a == st_b


class _WithUnused(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.unused = torch.nn.Linear(3, 3)  # gets no gradient: backward ends with one pending

    def forward(self, x):
        return self.inner(x)


def test_the_gradient_lane_takes_the_gradients_when_a_parameter_gets_none(tmp_path, tiny):
    """With a parameter that gets no gradient the last hooked gradient never arrives; the
    lane takes the others at backward end, with the same summaries as the Python path."""
    _, _, crit, batches = tiny
    runs = {}
    for lane in (True, False):
        model, _ = _tiny_model()
        model = _WithUnused(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        runs[lane] = _lane_run(str(tmp_path / f"lane{lane}"), model, opt, crit, batches, lane,
                               steps=3)
    a, b = runs[True][0], runs[False][0]
    assert len(runs[True][2]) == 4 * 2  # steps 0, 2 (weights): the lane took 1's at backward end
    grads = [n for n in a.tensor_names() if n.startswith("gradients/")]
    assert sorted(grads) == sorted(n for n in b.tensor_names() if n.startswith("gradients/"))
    assert len(grads) == 4 and not any("unused" in n for n in grads)
    for n in grads:
        for st in (0, 1, 2):
            _same_stats(a.tensor(n).summary(st)["stats"], b.tensor(n).summary(st)["stats"], n)
    assert runs[True][3] == runs[False][3]


def test_the_gradient_lane_leaves_what_it_cannot_read_in_place_to_python(tmp_path, tiny):
    """A non-contiguous gradient (a transposed weight's) is summarised by the hook's Python
    path while the lane takes the others: every gradient is recorded, with torch's values."""
    _, _, crit, batches = tiny
    model, opt = _tiny_model(strided=True)
    run, on, by_python, _ = _lane_run(str(tmp_path / "run"), model, opt, crit, batches, True,
                                      steps=2)
    assert on == [False, True]  # step 0 saves weights: the hook's path
    assert by_python[-1:] == ["gradients/2.weight"]  # step 1: the strided one, the lane the rest
    assert len(by_python) == 4 + 1
    names = [n for n in run.tensor_names() if n.startswith("gradients/")]
    assert sorted(names) == ["gradients/0.bias", "gradients/0.weight", "gradients/2.bias",
                             "gradients/2.weight"]
    for n in names:
        assert run.tensor(n).steps() == [0, 1]
    # step 1's gradient of the strided weight, computed again by hand
    torch.manual_seed(0)
    m2, o2 = _tiny_model(strided=True)
    for i, (x, y) in enumerate(batches[:2]):
        loss = crit(m2(x), y)
        o2.zero_grad()
        loss.backward()
        if i == 1:
            g = m2[2].weight.grad.double()
        o2.step()
    r = run.tensor("gradients/2.weight").reductions(1)
    assert r["l2"] == pytest.approx(float(g.norm()), rel=1e-6)
    assert r["min"] == pytest.approx(float(g.min()), rel=1e-6)


def test_repeated_save_steps_run_in_the_clock_and_record_the_same(tmp_path, tiny):
    """Gradients every step with weights every 5: between two weight saves the clock ends and
    begins the save steps itself (no call into the hook), with eval forwards in between; the
    run records what the hook's Python path records, and the hook stops saving when told to."""
    _, _, crit, batches = tiny
    out = {}
    for lane in (True, False):
        model, opt = _tiny_model()
        colls = ["losses", ts.Collection("weights", save_interval=5),
                 ts.Collection("gradients", save_interval=1)]
        hook = ts.Hook(str(tmp_path / f"lane{lane}"), system_monitor_interval_ms=0,
                       collections=colls)
        hook._grad_lane_enabled = lane
        hook.register_module(model)
        hook.register_optimizer(opt)
        crit2 = hook.register_loss(crit)
        begins = []
        original = hook._slow_begin_save

        def spy(mode, ms, original=original, begins=begins):
            begins.append((mode, ms))
            return original(mode, ms)

        hook._slow_begin_save = spy
        for i, (x, y) in enumerate(batches[:13]):
            if i == 7:  # an eval forward in the middle of a run of gradient steps
                model.eval()
                with torch.no_grad():
                    model(x)
                model.train()
            loss = crit2(model(x), y)
            opt.zero_grad(set_to_none=i % 2 == 0)
            loss.backward()
            opt.step()
        hook.close()
        assert not hook.errors
        out[lane] = (ts.open_run(str(tmp_path / f"lane{lane}")), begins, hook._storage.bytes)
    (a, begins_a, bytes_a), (b, begins_b, bytes_b) = out[True], out[False]
    train_a = [ms for mode, ms in begins_a if mode == int(ts.Mode.TRAIN)]
    train_b = [ms for mode, ms in begins_b if mode == int(ts.Mode.TRAIN)]
    assert train_b == list(range(13))  # every train step is a save step the hook begins
    # the hook begins the weight saves (0, 5, 10), the first gradient-only step after each
    # (1, 6, 11) and the first after the eval forward (7); the clock began the others itself
    assert train_a == [0, 1, 5, 6, 7, 10, 11], begins_a
    _same_runs(a, b)
    assert len(a.tensor("gradients/0.weight").steps()) == 13  # train steps (eval: no backward)
    assert a.tensor("weights/0.weight").steps() == b.tensor("weights/0.weight").steps()
    assert a.tensor("weights/0.weight").steps() == [0, 5, 7, 11]  # 7: the eval step
    assert bytes_a == bytes_b


def test_a_hook_that_stops_saving_stops_a_repeated_save_step(run_dir, tiny):
    _, _, crit, batches = tiny
    model, opt = _tiny_model()
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0,
                   collections=["losses", ts.Collection("gradients", save_interval=1)])
    hook.register_module(model)
    hook.register_optimizer(opt)
    crit = hook.register_loss(crit)
    for i, (x, y) in enumerate(batches[:8]):
        if i == 4:
            assert hook._clock.repeat_until > 4  # the clock runs these save steps
            hook._stop_saving()  # what max_errors internal errors do
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    steps = ts.open_run(run_dir).tensor("gradients/0.weight").steps()
    assert steps == [0, 1, 2, 3]


def test_the_gradient_lane_is_off_where_python_must_read_the_gradients(run_dir, tiny):
    """A GradScaler's gradients are divided by its scale, a raw copy needs Python: the lane
    stays off for them (their own tests check the values)."""
    model, opt, crit, batches = tiny
    hook = ts.Hook(run_dir, system_monitor_interval_ms=0,
                   collections=["losses", ts.Collection("gradients", save_interval=1, raw=True)])
    hook.register_module(model)
    crit = hook.register_loss(crit)
    x, y = batches[0]
    crit(model(x), y).backward()
    assert not hook._clock.grad_lane
    hook.close()
    hook = ts.Hook(run_dir + "2", system_monitor_interval_ms=0,
                   collections=["losses", ts.Collection("gradients", save_interval=1)])
    hook.register_module(model)
    hook.register_scaler(torch.amp.GradScaler("cpu", enabled=True))
    crit(model(x), y).backward()
    assert not hook._clock.grad_lane
    hook.close()
    assert not hook.errors


def test_the_clock_and_the_hook_declare_the_same_upcalls():
    """The C clock's one table of calls into the hook (python/stepclock/upcalls.h, exported as
    StepClock.UPCALLS) and the Python declaration (_step_clock.UPCALLS) name the same methods
    in the same order, and the Hook has each, taking the arguments the clock passes."""
    import inspect

    from trainscope import _core, _step_clock
    assert tuple(_core.StepClock.UPCALLS) == tuple(_step_clock.UPCALLS)
    for name, args in _step_clock.UPCALLS.items():
        method = getattr(ts.Hook, name, None)
        assert callable(method), name
        inspect.signature(method).bind(object(), *args)  # TypeError: the arity differs


def test_callback_and_counter_kinds_are_the_clocks_named_constants():
    """clock.callback and clock.get/set take the clock's CALLBACK_* and COUNTER_* constants
    (no bare integers in the hook): each names its own hook object and counter array."""
    import re
    import trainscope

    from trainscope import _core, _step_clock
    clock = _core.StepClock(object())
    kinds = {"model_pre": _step_clock.CALLBACK_MODEL_PRE,
             "model_post": _step_clock.CALLBACK_MODEL_POST,
             "loss": _step_clock.CALLBACK_LOSS, "grad": _step_clock.CALLBACK_GRADIENT}
    for name, kind in kinds.items():
        assert repr(clock.callback(kind, 0)) == f"<trainscope hook {name}>"
    with pytest.raises(ValueError):
        clock.callback(max(kinds.values()) + 1)
    counters = (_step_clock.COUNTER_MODE_STEPS, _step_clock.COUNTER_NEXT_SAVE,
                _step_clock.COUNTER_LOSS_NEXT)
    for i, kind in enumerate(counters):
        clock.set(kind, int(ts.Mode.EVAL), 100 + i)
    assert [clock.get(k, int(ts.Mode.EVAL)) for k in counters] == [100, 101, 102]
    with pytest.raises(ValueError):
        clock.get(max(counters) + 1, 0)
    # the hook's modules pass the constants, never the numbers behind them
    package = os.path.dirname(trainscope.__file__)
    bare = re.compile(r"\.callback\(\d|clock\.(get|set)\(\d|_ModeArray\([^,]+, \d")
    for fname in sorted(os.listdir(package)):
        if fname.endswith(".py"):
            with open(os.path.join(package, fname), encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    assert not bare.search(line), f"{fname}:{n}: {line.strip()}"

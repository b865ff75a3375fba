"""The hook on PyTorch 2: torch.compile (values equal to eager; no graph breaks or recompiles
added), autocast and low precision (summaries against NumPy), GradScaler (skipped steps,
amp_loss_scale), fused/foreach optimizers, clip_grad_norm_, gradient accumulation, loaders with
workers, state dicts and copies, and the version gate. Every check reads the run back."""
import copy
import io

import numpy as np
import pytest
import torch
# imported before any hook exists, as training scripts do: the hook must still see the calls
from torch.nn.utils import clip_grad_norm_
from torch._dynamo.utils import counters

import trainscope as ts
from trainscope import hook as hook_module

torch.set_num_threads(1)

REDUCTIONS = ("min", "max", "mean", "std", "l1", "l2", "count", "nan", "pos_inf", "neg_inf",
              "zeros")


class MLP(torch.nn.Module):
    """A user-defined model class (dynamo runs its module hooks outside the graph)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def _batches(n, seed=1, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(6, 8, generator=g).to(dtype), torch.randn(6, 4, generator=g).to(dtype))
            for _ in range(n)]


def _hook(run_dir, **kw):
    kw.setdefault("system_monitor_interval_ms", 0)
    return ts.Hook(str(run_dir), **kw)


def _dynamo_counts():
    """(graph breaks, unique graphs, frames dynamo converted, frames it compiled)."""
    return (sum(counters["graph_break"].values()), counters["stats"]["unique_graphs"],
            counters["frames"]["total"], counters["frames"]["ok"])


def _recorded(run):
    """{tensor name: {step: {reduction: value}}} of a run, plus its losses and steps."""
    out = {}
    for name in run.tensor_names(scalars=False):
        t = run.tensor(name)
        out[name] = {s: {k: t.reduction(s, k) for k in REDUCTIONS} for s in t.steps()}
    steps, losses = run.scalar("losses/loss")
    return out, list(steps), losses, [r["step"] for r in run.step_records()]


def _assert_same_records(a, b, rtol):
    tensors_a, steps_a, losses_a, records_a = a
    tensors_b, steps_b, losses_b, records_b = b
    assert sorted(tensors_a) == sorted(tensors_b)  # names of the uncompiled model, no _orig_mod
    assert steps_a == steps_b and records_a == records_b
    np.testing.assert_allclose(losses_a, losses_b, rtol=rtol)
    for name, by_step in tensors_a.items():
        assert sorted(by_step) == sorted(tensors_b[name]), name
        for s, red in by_step.items():
            for k, v in red.items():
                assert tensors_b[name][s][k] == pytest.approx(v, rel=rtol, abs=1e-7), (name, s, k)


# ================================================================================ compile
def _compiled_training(run_dir, backend=None, where=None, steps=9, save_interval=4,
                       collections=None, model=None):
    """Trains an MLP (seeded) for `steps`; where: None (no hook), "eager" (hook, no compile),
    "before" (register_module(model), then torch.compile), "after" (register the compiled
    OptimizedModule), "original" (compile, then register the original), "in_place"
    (model.compile()). Returns the hook (closed) and the dynamo counts added by each step."""
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = model or MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = torch.nn.MSELoss()
    hook = _hook(run_dir, save_interval=save_interval, collections=collections) if where else None
    if where == "before":
        hook.register_module(model)
    call = model
    if where == "in_place":
        model.compile(backend=backend)
    elif backend is not None:
        call = torch.compile(model, backend=backend)
    if where == "after":
        hook.register_module(call)
    elif where in ("eager", "original", "in_place"):
        hook.register_module(model)
    if hook is not None:
        crit = hook.register_loss(crit)
        hook.register_optimizer(opt)
    per_step = []
    for x, y in _batches(steps):
        before = _dynamo_counts()
        loss = crit(call(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        per_step.append(tuple(b - a for a, b in zip(before, _dynamo_counts())))
    if hook is not None:
        hook.close()
    return hook, per_step


@pytest.mark.parametrize("backend,where", [("inductor", "before"), ("inductor", "after"),
                                           ("aot_eager", "original"),
                                           ("aot_eager", "in_place")])
def test_compiled_model_records_what_the_eager_model_records(tmp_path, backend, where):
    _compiled_training(tmp_path / "eager", where="eager")
    hook, _ = _compiled_training(tmp_path / "compiled", backend, where)
    assert hook.step_count == 9 and not hook.errors
    eager = _recorded(ts.open_run(str(tmp_path / "eager")))
    compiled = _recorded(ts.open_run(str(tmp_path / "compiled")))
    assert eager[1] == list(range(9)) and sorted(eager[0]) == [
        "gradients/fc1.bias", "gradients/fc1.weight", "gradients/fc2.bias",
        "gradients/fc2.weight", "weights/fc1.weight", "weights/fc2.weight"]
    assert sorted(eager[0]["gradients/fc1.weight"]) == [0, 4, 8]
    # inductor fuses and reorders float32 arithmetic: equal to a few ulps after 9 updates
    _assert_same_records(eager, compiled, rtol=1e-5)


@pytest.mark.parametrize("backend,where", [("inductor", "before"), ("inductor", "after"),
                                           ("aot_eager", "original"),
                                           ("aot_eager", "in_place")])
def test_hook_adds_no_graph_breaks_or_recompiles(tmp_path, backend, where):
    _, plain = _compiled_training(None, backend, where=None)
    hook, hooked = _compiled_training(tmp_path / "run", backend, where)
    # steps 0, 4, 8 save weights and gradients (hooks on the parameters, run by autograd
    # outside the compiled graph); the others save only the loss. Neither adds anything:
    assert hooked == plain, (hooked, plain)
    assert hooked[0][:2] == (0, 1)  # one graph, compiled at the first step, no break
    assert all(c == (0, 0, 0, 0) for c in hooked[1:])
    assert hook._clock.slow_calls > 0  # the save steps did call into the Python hook


def test_hook_registered_on_a_builtin_container_before_compile_breaks_once(tmp_path):
    """nn.Sequential: dynamo inlines Module.__call__ of torch's own modules, hooks included,
    and cannot trace the step clock's C hook: one graph break at the model's entry, once, at
    compile time; registering the compiled module avoids it (documented)."""
    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                   torch.nn.Linear(16, 4))
    x = torch.randn(6, 8)
    torch._dynamo.reset()
    assert torch._dynamo.explain(make())(x).graph_break_count == 0
    for register_compiled, breaks in ((False, 1), (True, 0)):
        hook, per_step = _compiled_training(tmp_path / f"run{register_compiled}", "aot_eager",
                                            "after" if register_compiled else "before",
                                            model=make())
        assert per_step[0][0] == breaks
        assert all(c == (0, 0, 0, 0) for c in per_step[1:])  # nothing per step after that
        assert hook.step_count == 9
        steps, _ = ts.open_run(str(tmp_path / f"run{register_compiled}")).scalar("losses/loss")
        assert list(steps) == list(range(9))
    torch._dynamo.reset()
    hook = _hook(tmp_path / "explain2")
    model = MLP()
    hook.register_module(model)  # a model class of the user's: the hooks stay outside
    assert torch._dynamo.explain(model)(x).graph_break_count == 0
    hook.close()


class _WithCompiledEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh())
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.enc(x))


def test_layers_inside_compiled_code_get_no_hooks(tmp_path):
    colls = ["losses", "activations", "gradients"]
    torch.manual_seed(0)
    eager = _WithCompiledEncoder()
    torch.manual_seed(0)
    part = _WithCompiledEncoder()
    part.enc = torch.compile(part.enc, backend="aot_eager")
    for name, model in (("eager", eager), ("part", part)):
        _compiled_training(tmp_path / name, where="eager", collections=colls, model=model)
        if name == "part":
            assert sum(counters["graph_break"].values()) == 0
    run_e, run_p = ts.open_run(str(tmp_path / "eager")), ts.open_run(str(tmp_path / "part"))
    assert run_e.tensor_names(collection="activations") == [
        "activations/enc.0", "activations/enc.1", "activations/head"]
    # the compiled encoder's output is hooked on its OptimizedModule (outside the compiled
    # code); the layers inside it are not: they would be traced into the graph
    assert run_p.tensor_names(collection="activations") == ["activations/enc",
                                                             "activations/head"]
    for s in (0, 4, 8):
        assert run_p.tensor("activations/enc").reduction(s, "l2") == pytest.approx(
            run_e.tensor("activations/enc.1").reduction(s, "l2"), rel=1e-6)
        assert run_p.tensor("activations/head").reduction(s, "l2") == pytest.approx(
            run_e.tensor("activations/head").reduction(s, "l2"), rel=1e-6)
    assert run_p.tensor_names(collection="gradients") == run_e.tensor_names(
        collection="gradients")
    assert [e["layer"] for e in run_p.events(kind="torch_compile")] == ["enc.0"]

    # the whole model compiled, the hook registered before compiling: seen at run time
    _, plain = _compiled_training(None, "aot_eager", None, collections=colls)
    hook, per_step = _compiled_training(tmp_path / "whole", "aot_eager", "before",
                                        collections=colls)
    assert per_step == plain and not hook.errors
    run = ts.open_run(str(tmp_path / "whole"))
    assert run.tensor_names(collection="activations") == []
    assert len(run.tensor_names(collection="gradients")) == 4
    events = run.events(kind="torch_compile")
    assert len(events) == 1 and "activations" in events[0]["message"]
    assert events[0]["layer"] == "fc1"


def test_mode_of_a_compiled_model_follows_the_original_module(tmp_path):
    torch.manual_seed(0)
    model = MLP()
    compiled = torch.compile(model, backend="aot_eager")
    with _hook(tmp_path) as hook:
        hook.register_module(compiled)
        for x, _ in _batches(3):
            compiled(x)
        model.eval()  # the original, as users do; compiled.training is a copy
        with torch.no_grad():
            for x, _ in _batches(2):
                compiled(x)
    run = ts.open_run(str(tmp_path))
    assert run.steps(mode=ts.Mode.TRAIN) == [0, 1, 2]
    assert run.steps(mode=ts.Mode.EVAL) == [3, 4]


# ============================================================== autocast and low precision
def _np_reductions(t):
    x = t.detach().to(torch.float64).numpy().ravel()  # exact widening of every dtype
    fin = x[np.isfinite(x)]
    out = {"count": x.size, "nan": int(np.isnan(x).sum()), "pos_inf": int((x == np.inf).sum()),
           "neg_inf": int((x == -np.inf).sum()), "zeros": int((x == 0).sum())}
    if fin.size:
        out.update(min=fin.min(), max=fin.max(), mean=fin.mean(), std=fin.std(),
                   l1=np.abs(fin).sum(), l2=np.sqrt((fin * fin).sum()))
    return out


def _assert_reductions(t, step, expected, rtol):
    for k, v in expected.items():
        assert t.reduction(step, k) == pytest.approx(v, rel=rtol, abs=1e-300), (
            t.name if hasattr(t, "name") else "", step, k)


def _hard_values(dtype):
    """Subnormals, a large offset with small noise, signed zeros and non-finite values in
    `dtype`; and the ends of its range (kept apart: no float64 sum can add 100 to 3e38 and
    take 3e38 away again without losing it)."""
    info = torch.finfo(dtype)
    g = torch.Generator().manual_seed(5)
    vals = torch.cat([
        torch.tensor([info.tiny / 4, -info.tiny / 8, 0.0, -0.0,
                      float("inf"), float("-inf"), float("nan")]),
        100.0 + torch.randn(300, generator=g),
        torch.randn(300, generator=g) * 1e-3])
    return vals.to(dtype), torch.tensor([info.max, info.max / 2, -info.max / 4,
                                         info.tiny / 2]).to(dtype)


@pytest.mark.parametrize("device_stats", ["auto", "torch"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_parameters_record_exact_summaries(tmp_path, dtype, device_stats):
    torch.manual_seed(0)
    model = MLP().to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.MSELoss()
    seen = {}  # (name, step) -> tensor the training had
    for name, m in model.named_modules():
        if name:
            m.register_forward_hook(
                lambda m, i, o, name=name: seen.__setitem__((f"activations/{name}", step),
                                                             o.detach().clone()))
    with _hook(tmp_path, save_interval=1, device_stats=device_stats,
               collections=["losses", "weights", "biases", "gradients", "activations"]) as hook:
        hook.register_module(model)
        crit = hook.register_loss(crit)
        for step, (x, y) in enumerate(_batches(3, dtype=dtype)):
            for n, p in model.named_parameters():
                kind = "biases" if n.endswith("bias") else "weights"
                seen[(f"{kind}/{n}", step)] = p.detach().clone()
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            for n, p in model.named_parameters():
                seen[(f"gradients/{n}", step)] = p.grad.detach().clone()
            opt.step()
        hard, extremes = _hard_values(dtype)
        hook.save_tensor("hard", hard)  # at the current step, 2
        hook.save_tensor("extremes", extremes)
    run = ts.open_run(str(tmp_path))
    assert len(seen) == 3 * (4 + 4 + 3) and sorted({n for n, _ in seen}) == sorted(
        n for n in run.tensor_names(scalars=False) if not n.startswith("tensors/"))
    # every value of a half-precision tensor is exact in float64: the summaries must equal
    # NumPy's float64 statistics of the same values to rounding of the sums
    for (name, step), t in seen.items():
        assert t.dtype == dtype
        _assert_reductions(run.tensor(name), step, _np_reductions(t), rtol=1e-9)
    small = hard.float().abs()
    assert ((small > 0) & (small < torch.finfo(dtype).tiny)).sum() >= 2  # subnormal in dtype
    for name, t in (("tensors/hard", hard), ("tensors/extremes", extremes)):
        _assert_reductions(run.tensor(name), 2, _np_reductions(t), rtol=1e-9)
    assert run.tensor("tensors/extremes").reduction(2, "max") == float(torch.finfo(dtype).max)


def test_autocast_bf16_training(tmp_path):
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.MSELoss()
    seen = {}
    model.fc1.register_forward_hook(lambda m, i, o: seen.__setitem__(("fc1", step), o.detach()))
    losses = []
    with _hook(tmp_path, save_interval=2,
               collections=["losses", "weights", "gradients", "activations"]) as hook:
        hook.register_module(model)
        crit = hook.register_loss(crit)
        for step, (x, y) in enumerate(_batches(5)):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(x)
                loss = crit(out, y)
            assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
            seen[("grad", step)] = None
            opt.zero_grad()
            loss.backward()
            seen[("grad", step)] = model.fc2.weight.grad.detach().clone()  # float32 master
            opt.step()
            losses.append(loss.item())
    run = ts.open_run(str(tmp_path))
    steps, values = run.scalar("losses/loss")
    assert list(steps) == list(range(5))
    np.testing.assert_array_equal(values, losses)
    for s in (0, 2, 4):
        assert seen[("fc1", s)].dtype == torch.bfloat16
        _assert_reductions(run.tensor("activations/fc1"), s, _np_reductions(seen[("fc1", s)]),
                           rtol=1e-9)
        _assert_reductions(run.tensor("gradients/fc2.weight"), s,
                           _np_reductions(seen[("grad", s)]), rtol=1e-9)


# ========================================================================== GradScaler
def _scaler_training(run_dir, steps, inject, optimizer="sgd", register_scaler=True, rules=None,
                     save_interval=1, device_stats="auto"):
    """fp16 autocast training with torch.amp.GradScaler("cpu"); `inject`: steps whose
    gradients become inf/NaN (in backward, as an overflow would). Returns what the training
    saw: the scale each step used, which steps the optimizer stepped, the scaled gradients."""
    torch.manual_seed(0)
    model = MLP()
    if optimizer == "fused":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu")
    crit = torch.nn.MSELoss()
    seen = {"scale": [], "stepped": [], "grads": {}}
    hook = _hook(run_dir, save_interval=save_interval, rules=rules, device_stats=device_stats)
    hook.register_module(model)
    crit = hook.register_loss(crit)
    if register_scaler:
        hook.register_scaler(scaler)
    for step, (x, y) in enumerate(_batches(steps)):
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(x)
        loss = crit(out.float(), y)
        if step in inject:
            out.register_hook(lambda g: g * float("inf"))
        seen["scale"].append(scaler.get_scale())
        opt.zero_grad()
        scaler.scale(loss).backward()
        seen["grads"][step] = model.fc1.weight.grad.detach().clone()
        before = model.fc1.weight.detach().clone()
        scaler.step(opt)
        scaler.update()
        seen["stepped"].append(not torch.equal(before, model.fc1.weight))
    hook.close()
    return hook, seen, scaler


# device_stats="torch" takes the device path on CPU: the scale and a fused optimizer's found_inf
# copied and kept with the device losses, gradients divided by the scale tensor
@pytest.mark.parametrize("device_stats", ["auto", "torch"])
@pytest.mark.parametrize("optimizer", ["sgd", "fused"])
def test_grad_scaler_steps_scale_and_skips_are_recorded(tmp_path, optimizer, device_stats):
    hook, seen, _ = _scaler_training(tmp_path, 10, inject={3, 4, 7}, optimizer=optimizer,
                                     device_stats=device_stats)
    assert seen["stepped"] == [s not in (3, 4, 7) for s in range(10)]  # what the scaler did
    run = ts.open_run(str(tmp_path))
    steps, scales = run.scalar("amp/loss_scale")
    assert list(steps) == list(range(10))
    assert list(scales) == seen["scale"]  # 65536 until the first skip, halved after each
    assert seen["scale"][5] == 65536 / 4
    steps, skipped = run.scalar("amp/skipped")
    if optimizer == "fused" and device_stats == "torch":  # found_inf copied every step: 0 / 1
        assert list(steps) == list(range(10))
        steps = steps[skipped > 0]
        skipped = skipped[skipped > 0]
    assert list(steps) == [3, 4, 7] and list(skipped) == [1, 1, 1]
    device_found_inf = optimizer == "fused" and device_stats == "torch"
    assert hook._clock.amp_skips == (0 if device_found_inf else 3) and not hook.errors
    # gradients are recorded unscaled: what the optimizer uses, comparable with fp32 runs
    t = run.tensor("gradients/fc1.weight")
    for s in range(10):
        expected = _np_reductions(seen["grads"][s].double() / seen["scale"][s])
        if s in (3, 4, 7):
            assert expected["nan"] + expected["pos_inf"] + expected["neg_inf"] == 128
        _assert_reductions(t, s, expected, rtol=1e-9)


def test_exploding_tensor_ignores_the_gradients_of_skipped_steps(tmp_path):
    _scaler_training(tmp_path / "scaler", 12, inject={3, 4}, rules=["exploding_tensor"])
    _scaler_training(tmp_path / "unknown", 12, inject={3, 4}, rules=["exploding_tensor"],
                     register_scaler=False)

    def fired(path):
        return [e for e in ts.open_run(str(path)).rule_events()
                if e["rule"] == "exploding_tensor" and e["status"] == "IssuesFound"]

    assert fired(tmp_path / "scaler") == []  # the scaler handled it
    assert fired(tmp_path / "unknown")[0]["step"] == 3  # the same run without register_scaler
    statuses = ts.open_run(str(tmp_path / "scaler")).rule_statuses()
    assert statuses["exploding_tensor"]["status"] == "NoIssuesFound"


def test_amp_loss_scale_rule_fires_when_the_scale_collapses(tmp_path):
    _scaler_training(tmp_path / "collapse", 30, inject=set(range(8, 30)),
                     rules=["amp_loss_scale"], save_interval=100)
    _scaler_training(tmp_path / "healthy", 30, inject={0, 1, 2},  # a calibration's first skips
                     rules=["amp_loss_scale"], save_interval=100)
    run = ts.open_run(str(tmp_path / "collapse"))
    fired = [e for e in run.rule_events() if e["status"] == "IssuesFound"]
    assert fired and fired[0]["rule"] == "amp_loss_scale" and fired[0]["step"] == 18
    assert "skipped the last 11" in fired[0]["message"]
    healthy = ts.open_run(str(tmp_path / "healthy")).rule_statuses()["amp_loss_scale"]
    assert healthy["status"] == "NoIssuesFound", healthy
    assert "30 evaluations" in healthy["message"]


# ============================================================== optimizers and loops
@pytest.mark.parametrize("make", [
    lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
    lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True),
    lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=True),
    lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False),
], ids=["adamw-fused", "adamw-foreach", "sgd-foreach", "adam-for-loop"])
def test_optimizers_record_the_tensors_they_use(tmp_path, make):
    def training(hooked):
        torch.manual_seed(0)
        model = MLP()
        opt = make(model.parameters())
        crit = torch.nn.MSELoss()
        seen = {}
        hook = _hook(tmp_path / str(hooked), save_interval=2) if hooked else None
        if hook:
            hook.register_module(model)
            crit = hook.register_loss(crit)
            hook.register_optimizer(opt)
        for step, (x, y) in enumerate(_batches(6)):
            seen[("weights/fc1.weight", step)] = model.fc1.weight.detach().clone()
            loss = crit(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            seen[("gradients/fc1.weight", step)] = model.fc1.weight.grad.detach().clone()
            opt.step()
        if hook:
            hook.close()
        return model, seen, hook

    plain, _, _ = training(False)
    model, seen, hook = training(True)
    # the hook changes nothing in the training
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), model.parameters()))
    run = ts.open_run(str(tmp_path / "True"))
    assert [r["step"] for r in run.step_records()] == list(range(6))
    assert all(r["optimizer_us"] >= 0 for r in run.step_records()) and not hook.errors
    for (name, step), t in seen.items():
        if step % 2 == 0:
            _assert_reductions(run.tensor(name), step, _np_reductions(t), rtol=1e-9)
    assert run.tensor("gradients/fc1.weight").steps() == [0, 2, 4]


def test_clip_grad_norm_is_recorded_when_called(tmp_path):
    original = torch.nn.utils.clip_grad._get_total_norm
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.MSELoss()
    norms = []
    with _hook(tmp_path / "clip") as hook:
        hook.register_module(model)
        crit = hook.register_loss(crit)
        for step, (x, y) in enumerate(_batches(6)):
            opt.zero_grad()
            crit(model(x), y).backward()
            if step != 2:  # not called at step 2: nothing recorded there
                norms.append((step, float(clip_grad_norm_(model.parameters(), max_norm=0.5))))
            opt.step()
        other = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # the module's name too
    assert torch.nn.utils.clip_grad._get_total_norm is original  # restored at close
    steps, values = ts.open_run(str(tmp_path / "clip")).scalar("grad_norm/total")
    # the last call, after the loop, is in the still open step 5: the record written last wins
    assert list(steps) == [s for s, _ in norms]
    np.testing.assert_array_equal(values, [v for _, v in norms[:-1]] + [float(other)])
    clip_grad_norm_(model.parameters(), 1.0)  # no hook: nothing records, nothing breaks

    with _hook(tmp_path / "none") as hook:  # never called: no series, no cost
        hook.register_module(model)
        for x, y in _batches(3):
            crit(model(x), y).backward()
    assert "grad_norm/total" not in ts.open_run(str(tmp_path / "none")).scalar_names()


def test_clip_grad_norm_is_recorded_where_torch_computes_the_norm_inline(tmp_path,
                                                                          monkeypatch):
    """torch versions whose clip_grad_norm_ has no _get_total_norm: the function is wrapped."""
    monkeypatch.setattr(hook_module._GradNormRecorder, "_NORM_FUNCTION", "_no_such_function")
    original = torch.nn.utils.clip_grad_norm_
    torch.manual_seed(0)
    model = MLP()
    crit = torch.nn.MSELoss()
    with _hook(tmp_path) as hook:
        hook.register_module(model)
        norms = []
        for x, y in _batches(2):
            model.zero_grad()
            crit(model(x), y).backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)))
    assert torch.nn.utils.clip_grad_norm_ is original
    steps, values = ts.open_run(str(tmp_path)).scalar("grad_norm/total")
    assert list(steps) == [0, 1] and list(values) == norms


def test_gradient_accumulation_over_four_micro_batches(tmp_path):
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.MSELoss()
    k, micro = 4, _batches(20)
    means, first_grads = [], []
    with _hook(tmp_path, save_interval=2, auto_step=False) as hook:
        hook.register_module(model)
        crit = hook.register_loss(crit)
        hook.register_optimizer(opt)
        for step in range(5):
            losses = []
            for i, (x, y) in enumerate(micro[k * step:k * step + k]):
                loss = crit(model(x), y)
                (loss / k).backward()
                losses.append(loss.item())
                if i == 0:
                    first_grads.append(model.fc1.weight.grad.detach().clone() * k)
            opt.step()
            opt.zero_grad(set_to_none=True)
            hook.step()
            means.append(np.mean(losses))
    run = ts.open_run(str(tmp_path))
    assert hook.step_count == 5 and [r["step"] for r in run.step_records()] == list(range(5))
    steps, values = run.scalar("losses/loss")  # the mean of the step's micro-batch losses
    assert list(steps) == list(range(5))
    np.testing.assert_allclose(values, means, rtol=1e-12)
    # gradients: the first micro-batch's (of the loss the training backpropagated: loss / k)
    t = run.tensor("gradients/fc1.weight")
    assert t.steps() == [0, 2, 4]
    for s in (0, 2, 4):
        assert t.reduction(s, "l2") == pytest.approx(
            float(first_grads[s].double().norm()) / k, rel=1e-6)
    assert all(r["optimizer_us"] >= 0 for r in run.step_records())


def test_lr_schedulers_made_before_and_after_registration(tmp_path, recwarn):
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    crit = torch.nn.MSELoss()
    warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    with _hook(tmp_path) as hook:
        hook.register_module(model)
        crit = hook.register_loss(crit)
        hook.register_optimizer(opt)
        cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)
        for x, y in _batches(6):
            opt.zero_grad()
            crit(model(x), y).backward()
            opt.step()
            warmup.step()
            cosine.step()
    assert not [w for w in recwarn if "lr_scheduler.step()" in str(w.message)]
    records = ts.open_run(str(tmp_path)).step_records()
    assert len(records) == 6 and all(r["optimizer_us"] >= 0 for r in records)
    # the hook does not record learning rates (save_scalar("lr", ...) does)
    assert "scalars/lr" not in ts.open_run(str(tmp_path)).scalar_names()


class _Pairs(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(4)
        self.x, self.y = torch.randn(48, 8, generator=g), torch.randn(48, 4, generator=g)

    def __len__(self):
        return 48

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def test_dataloader_with_persistent_workers_and_pinned_memory(tmp_path):
    loader = torch.utils.data.DataLoader(_Pairs(), batch_size=8, num_workers=2,
                                         persistent_workers=True, pin_memory=True)
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.MSELoss()
    losses = []
    with _hook(tmp_path) as hook:
        hook.register_module(model)
        crit = hook.register_loss(crit)
        hook.register_optimizer(opt)
        wrapped = hook.wrap(loader)
        assert len(wrapped) == 6 and wrapped.num_workers == 2
        for epoch in range(2):  # the same workers serve both epochs
            for x, y in wrapped:
                loss = crit(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
    run = ts.open_run(str(tmp_path))
    steps, values = run.scalar("losses/loss")
    assert list(steps) == list(range(12))
    np.testing.assert_array_equal(values, losses)
    records = run.step_records()
    assert [r["step"] for r in records] == list(range(12))
    assert all(r["data_wait_us"] >= 0 for r in records)


def test_state_dicts_saves_and_copies_of_hooked_objects(tmp_path):
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    scaler = torch.amp.GradScaler("cpu")
    crit = torch.nn.MSELoss()
    batches = _batches(8)

    def train(hook, model, opt, scaler, batches):
        for x, y in batches:
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(x)
            opt.zero_grad()
            scaler.scale(crit(out.float(), y)).backward()
            scaler.step(opt)
            scaler.update()

    hook = _hook(tmp_path / "a")
    hook.register_module(model)
    hook.register_optimizer(opt)
    hook.register_scaler(scaler)
    train(hook, model, opt, scaler, batches[:4])
    buf = io.BytesIO()  # a checkpoint as torch 2 loads it (weights_only=True)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "scaler": scaler.state_dict(), "hook": hook.state_dict()}, buf)
    # copies (an EMA model, a second optimizer and scaler) train on their own, unrecorded
    ema, opt2, scaler2 = copy.deepcopy((model, opt, scaler))
    pickled = torch.load(io.BytesIO(_saved(scaler)), weights_only=False)  # a whole scaler
    before = [p.detach().clone() for p in model.parameters()]
    train(hook, ema, opt2, scaler2, batches[4:6])
    train(hook, ema, opt2, pickled, batches[6:7])
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(before, ema.parameters()))
    assert hook.step_count == 3 and hook._clock.opt_calls == 4
    train(hook, model, opt, scaler, batches[4:])
    hook.close()
    final = [p.detach().clone() for p in model.parameters()]

    # resume from the checkpoint in a new process's objects: the same training, the same steps
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    torch.manual_seed(1)
    model = MLP()
    model.load_state_dict(state["model"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    opt.load_state_dict(state["opt"])
    scaler = torch.amp.GradScaler("cpu")
    scaler.load_state_dict(state["scaler"])
    hook = _hook(tmp_path / "b")
    hook.register_module(model)
    hook.register_optimizer(opt)
    hook.register_scaler(scaler)
    hook.load_state_dict(state["hook"])
    train(hook, model, opt, scaler, batches[4:])
    hook.close()
    assert all(torch.equal(a, b) for a, b in zip(final, model.parameters()))
    run_a, run_b = ts.open_run(str(tmp_path / "a")), ts.open_run(str(tmp_path / "b"))
    assert state["hook"]["step_count"] == 4  # taken after step 3: the next one is 4
    assert [r["step"] for r in run_b.step_records()] == list(range(4, 8))
    assert run_a.scalar("amp/loss_scale")[1][4:].tolist() == run_b.scalar(
        "amp/loss_scale")[1].tolist()
    assert not hook.errors


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


# ============================================================================ version gate
def test_older_torch_is_refused_with_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(torch, "__version__", "1.13.1")
    with pytest.raises(RuntimeError) as e:
        ts.Hook(str(tmp_path))
    msg = str(e.value)
    assert "PyTorch >= 2.1" in msg and "found torch 1.13.1" in msg
    assert not (tmp_path / "run.json").exists()
    for ok in ("2.1.0", "2.13.0+cpu", "3.0.0a0+git1234"):
        assert hook_module._torch_version(ok) >= hook_module.MIN_TORCH
    for old in ("2.0.1", "1.13.1+cu117", "1.9"):
        assert hook_module._torch_version(old) < hook_module.MIN_TORCH

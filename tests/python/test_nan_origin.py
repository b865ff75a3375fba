"""Where a NaN/Inf began (python/trainscope/_nan_origin.py): injected faults, each in a real
small model trained with exploding_tensor + stop_training; the nonfinite_origin event names the
step, the direction, the first module whose output (forward) or input gradient (backward) went
non-finite from finite values, and the op."""
import contextlib

import pytest
import torch
from torch import nn

import trainscope as ts

FAULT_STEP = 4


class Fault(nn.Module):
    """An op that goes wrong once the loop arms it: log of a negative number, a division by
    zero (``kind``)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.armed = False

    def forward(self, x):
        if self.kind == "log":
            return torch.log(x.abs() + 1 - (10.0 if self.armed else 0.0))
        return x / (0.0 if self.armed else 2.0)


class Net(nn.Module):
    def __init__(self, middle=None):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.body = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), middle or nn.Identity(),
                                  nn.Linear(16, 16))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(torch.relu(self.body(self.embed(x))))


class SqrtNorm(nn.Module):
    """A length that is finite forward but NaN backward where its input is 0 (d sqrt at 0)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.armed = False

    def forward(self, x):
        h = self.proj(x)
        if self.armed:
            h = h * 0  # sqrt(0): forward 0, backward 1/0
        return x + torch.sqrt(h * h)


def train(tmp_path, model, *, inject=None, steps=12, lr=0.01, autocast=None, x_fn=None):
    """The README's loop with the NaN stop; inject(step) arms a fault. Returns
    (origin events, stop reason, the step the loop left at)."""
    torch.manual_seed(0)
    hook = ts.Hook(str(tmp_path / "run"), system_monitor_interval_ms=0,
                   rules=[ts.Rule("exploding_tensor", actions=["stop_training"])])
    hook.register_module(model)
    crit = hook.register_loss(nn.MSELoss())
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(1)
    left = None
    for step in range(steps):
        x, y = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
        if inject is not None:
            inject(step)
        if x_fn is not None:
            x = x_fn(step, x)
        ctx = torch.autocast("cpu", dtype=autocast) if autocast else contextlib.nullcontext()
        with ctx:
            out = model(x)
        loss = crit(out.float(), y)
        opt.zero_grad()
        loss.backward()
        if hook.should_stop:  # before the optimizer step: the NaN update is never applied
            left = step
            break
        opt.step()
    hook.close()
    run = ts.open_run(str(tmp_path / "run"))
    return run.events("nonfinite_origin"), hook.stop_reason, left


def arm(module, at=FAULT_STEP):
    def inject(step):
        module.armed = step >= at
    return inject


def only(events):
    assert len(events) == 1, events
    return events[0]


def test_log_of_a_negative_number_is_named_forward_in_its_module(tmp_path):
    fault = Fault("log")
    origins, reason, left = train(tmp_path, Net(fault), inject=arm(fault))
    o = only(origins)
    assert left == FAULT_STEP and o["step"] == FAULT_STEP, (left, o)
    assert o["direction"] == "forward" and o["module"] == "body.2", o
    assert o["module_type"] == "Fault" and o["op"] == "torch.log", o
    assert o["bad_input"] is None and o["rank"] == 0 and o["trigger"] == "losses/loss", o
    assert "body.2 (Fault)" in o["summary"] and "torch.log" in o["summary"], o
    assert "where it began: forward of rank 0, step 4: body.2" in reason, reason


def test_division_by_zero_is_named_forward_in_its_module(tmp_path):
    fault = Fault("div")
    origins, _, left = train(tmp_path, Net(fault), inject=arm(fault))
    o = only(origins)
    assert left == FAULT_STEP, left
    assert o["direction"] == "forward" and o["module"] == "body.2", o
    assert "div" in o["op"], o


def test_fp16_overflow_in_a_matmul_under_autocast_is_named(tmp_path):
    # CPU autocast to float16: the Linear's matmul runs in fp16 and finite inputs of 2e4-4e4
    # overflow it (16 of them times ~1.0 > 65504); bf16 has fp32's range and would not.
    class Gain(nn.Module):  # a finite amplification once armed (fp32 under autocast)
        def __init__(self):
            super().__init__()
            self.armed = False

        def forward(self, x):
            return x.abs() * 2e4 + 2e4 if self.armed else x

    model = Net()
    with torch.no_grad():
        model.body[3].weight.fill_(1.0)
    gain = Gain()
    model.body[2] = gain
    origins, _, left = train(tmp_path, model, inject=arm(gain), autocast=torch.float16)
    o = only(origins)
    assert left == FAULT_STEP, left
    assert o["direction"] == "forward" and o["module"] == "body.3", o
    assert o["module_type"] == "Linear" and o["op"] == "F.linear", o


def test_a_learning_rate_that_explodes_the_weights_says_so(tmp_path):
    # lr 1e37: after one update the weights are huge but finite; the next forward overflows in
    # the first Linear whose input is already large (embed's output) and names its weights
    origins, reason, left = train(tmp_path, Net(), lr=1e37, steps=20)
    o = only(origins)
    assert left == o["step"] == 1, (left, o)
    assert o["direction"] == "forward" and o["module"] == "body.0" and o["op"] == "F.linear", o
    assert "the weights exploded (check the learning rate)" in o["summary"], o


def test_weights_already_non_finite_are_named_as_the_parameter(tmp_path):
    model = Net()

    def inject(step):
        if step == FAULT_STEP:  # what an update that overflowed leaves behind
            with torch.no_grad():
                model.body[3].weight[1, 2] = float("inf")
    origins, _, left = train(tmp_path, model, inject=inject)
    o = only(origins)
    assert left == FAULT_STEP, left
    assert o["direction"] == "forward" and o["module"] == "body.3", o
    assert o["bad_input"] == "parameter body.3.weight (1 Inf of 256 non-finite)", o
    assert "(the weights exploded: check the learning rate)" in o["summary"], o


def test_a_bad_input_batch_is_named_as_the_data(tmp_path):
    def nan_batch(step, x):
        if step == FAULT_STEP:
            x = x.clone()
            x[2, 3] = float("nan")
        return x
    origins, _, left = train(tmp_path, Net(), x_fn=nan_batch)
    o = only(origins)
    assert left == FAULT_STEP, left
    assert o["direction"] == "forward" and o["module"] == "", o
    assert o["bad_input"] == "input 0 of the model (1 NaN of 48 non-finite)", o
    assert "(the data)" in o["summary"], o


def test_a_nan_only_in_backward_is_named_backward_in_its_module(tmp_path):
    norm = SqrtNorm()
    origins, reason, left = train(tmp_path, Net(norm), inject=arm(norm))
    o = only(origins)
    assert left == FAULT_STEP and o["step"] == FAULT_STEP, (left, o)  # the loss was finite
    assert o["trigger"].startswith("gradients/"), o
    assert o["direction"] == "backward" and o["module"] == "body.2", o
    assert o["module_type"] == "SqrtNorm" and o["op"].startswith("aten."), o
    assert "where it began: backward of rank 0, step 4: body.2 (SqrtNorm)" in reason, reason


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_compiled_model_is_replayed_eagerly(tmp_path, backend):
    # dynamo's graphs skip submodule hooks: the replay runs the original module eagerly
    # ("eager": dynamo alone; "inductor": compiled C++ kernels, about 20 s on 2 vCPUs)
    fault = Fault("log")
    model = torch.compile(Net(fault), backend=backend)
    origins, _, left = train(tmp_path, model, inject=arm(fault))
    o = only(origins)
    assert left == FAULT_STEP, left
    assert o["direction"] == "forward" and o["module"] == "body.2" and o["op"] == "torch.log", o


def test_the_replay_changes_nothing_and_is_once(tmp_path):
    # BatchNorm statistics, the RNG and the training mode are as before the replay; a second
    # NaN replays nothing
    bn = nn.BatchNorm1d(16)
    fault = Fault("log")
    model = Net(nn.Sequential(bn, fault))
    hook = ts.Hook(str(tmp_path / "run"), system_monitor_interval_ms=0,
                   rules=[ts.Rule("exploding_tensor", min_consecutive=3,
                                  actions=["stop_training"])])
    hook.register_module(model)
    crit = hook.register_loss(nn.MSELoss())
    fault.armed = True
    x, y = torch.randn(6, 8), torch.randn(6, 4)
    for _ in range(2):
        out = model(x)
        mean, rng = bn.running_mean.clone(), torch.get_rng_state()
        crit(out, y)
        assert torch.equal(bn.running_mean, mean) and torch.equal(torch.get_rng_state(), rng)
    assert model.training and not hook.should_stop  # min_consecutive=3: no stop yet
    crit(model(x), y)  # the third NaN in a row stops, with the origin found at the first
    assert hook.should_stop and "where it began: forward of rank 0, step 0: body.2.1" \
        in hook.stop_reason, hook.stop_reason
    hook.close()
    origins = ts.open_run(str(tmp_path / "run")).events("nonfinite_origin")
    assert [o["module"] for o in origins] == ["body.2.1"], origins


def test_without_a_nan_stop_nothing_is_armed(tmp_path):
    hook = ts.Hook(str(tmp_path / "run"), system_monitor_interval_ms=0)
    model = Net()
    hook.register_module(model)
    assert hook._origin_tracer is None
    assert len(model._forward_hooks) == 1  # the step clock's own
    hook.close()


def test_an_in_place_op_after_a_module_falls_back_to_parameter_gradients(tmp_path):
    # ReLU(inplace=True) on a hooked module's output refuses full backward hooks: the module
    # is then the last one in forward order with a non-finite parameter gradient
    norm = SqrtNorm()
    model = Net(norm)
    model.body[1] = nn.ReLU(inplace=True)
    origins, _, left = train(tmp_path, model, inject=arm(norm))
    o = only(origins)
    assert left == FAULT_STEP and o["direction"] == "backward", o
    assert o["by"] == "parameter gradients" and o["module"] == "body.2.proj", o
    assert "in-place op refused module backward hooks" in o["summary"], o


def test_a_nan_from_the_loss_computation_is_named_outside_the_model(tmp_path):
    torch.manual_seed(0)
    model = Net()
    hook = ts.Hook(str(tmp_path / "run"), system_monitor_interval_ms=0,
                   rules=[ts.Rule("exploding_tensor", actions=["stop_training"])])
    hook.register_module(model)
    crit = hook.register_loss(lambda out, y: ((out - y) ** 2).mean().log() * 0 / 0)
    crit(model(torch.randn(6, 8)), torch.randn(6, 4))
    assert hook.should_stop
    hook.close()
    o = only(ts.open_run(str(tmp_path / "run")).events("nonfinite_origin"))
    assert o["direction"] == "forward" and o["where"] == "loss" and o["module"] is None, o
    assert "the loss computation, outside the model" in o["summary"], o


def test_the_report_and_trainscope_rules_say_where_it_began(tmp_path, cli):
    import json
    import subprocess
    fault = Fault("log")
    train(tmp_path, Net(fault), inject=arm(fault))
    run = str(tmp_path / "run")
    said = "forward of rank 0, step 4: body.2 (Fault) produced it from finite inputs (op torch.log)"
    rules = subprocess.run([cli, "rules", run], capture_output=True, text=True, timeout=60)
    assert rules.returncode == 0, rules.stderr
    assert f"where the non-finite value began:\n  {said}\n" in rules.stdout, rules.stdout
    rep = subprocess.run([cli, "report", run, "--json", "--no-history"], capture_output=True,
                         text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    nan = [f for f in json.loads(rep.stdout)["findings"] if f["rule"] == "exploding_tensor"]
    assert len(nan) == 1 and nan[0]["evidence"].endswith(f"; where it began: {said}"), nan
    assert nan[0]["recommendation"].startswith("Guard torch.log in body.2: "), nan


def test_a_failing_tracer_is_counted_once_and_disarms(tmp_path, monkeypatch):
    from trainscope import _nan_origin

    def broken():
        raise RuntimeError("injected")
    monkeypatch.setattr(_nan_origin, "_autocast_state", broken)
    fault = Fault("log")
    origins, reason, left = train(tmp_path, Net(fault), inject=arm(fault))
    assert left == FAULT_STEP, left  # the NaN stop itself is untouched
    o = only(origins)
    assert not o["replayed"] and "inputs of step 4 are gone" in o["why"], o
    hook_errors = ts.open_run(str(tmp_path / "run")).events("hook_error")
    assert [e["where"] for e in hook_errors] == ["nan origin"], hook_errors

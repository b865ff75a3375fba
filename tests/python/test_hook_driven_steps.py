"""Steps driven from outside the model (what the framework callbacks do):
register_module(model, forward_steps=False), begin_step(), step()."""
import pytest
import torch

import trainscope as ts


def test_forward_calls_do_not_make_steps_and_begin_step_opens_them(run_dir, tiny):
    model, opt, crit, batches = tiny
    with ts.Hook(out_dir=run_dir, save_interval=2) as hook:
        hook.register_module(model, forward_steps=False)
        crit = hook.register_loss(crit)
        model(batches[0][0])  # outside any step: neither opens nor counts one
        assert hook.step_count == 0 and not hook._open
        losses = []
        for i, (x, y) in enumerate(batches[:6]):
            hook.begin_step()
            hook.begin_step()  # a second call in the same step changes nothing
            for xs, ys in ((x[:4], y[:4]), (x[4:], y[4:])):  # two forwards, one step
                loss = crit(model(xs), ys)
                (loss / 2).backward()
                losses.append(float(loss.detach()))
            opt.step()
            opt.zero_grad()
            hook.step()
        hook.set_mode(ts.Mode.EVAL)
        with torch.no_grad():
            model(batches[7][0])  # an evaluation forward between steps: still no step
        assert hook.step_count == 6
    run = ts.open_run(run_dir)
    assert [r["step"] for r in run.step_records()] == list(range(6))
    steps, values = run.scalar("losses/loss")
    assert list(steps) == list(range(6))
    assert values.tolist() == pytest.approx([(losses[2 * i] + losses[2 * i + 1]) / 2
                                             for i in range(6)], rel=1e-6)
    # save steps opened by begin_step read the weights and hooked the gradients
    assert run.tensor("gradients/0.weight").steps() == [0, 2, 4]
    assert run.tensor("weights/0.weight").steps() == [0, 2, 4]
    # no forward timing from the model (its forward hooks are not installed)
    assert all(r["forward_us"] == -1 for r in run.step_records())

"""`trainscope export tensorboard` read back by TensorBoard's own reader.

A short real training (an MLP on random data, the Python hook with histograms for gradients and
layer outputs, then one EVAL batch holding a NaN) is exported with the CLI and loaded with
TensorBoard's EventAccumulator (which checks the TFRecord CRCs). Every tag, step, wall time and
value is compared with what trainscope's reader (`ts.open_run`) reads from the run itself:

- losses: `losses/loss`, `eval/losses/loss`;
- every reduction of every tensor summary: `<tensor>/<reduction>` (`gradients/0.weight/l2`,
  `eval/activations/2/nan`), as the float32 TensorBoard stores;
- histograms: `<tensor>` (HistogramProto min/max/num/sum/sum_squares/bucket_limit/bucket, as
  docs/export.md derives them from the summary's statistics and buckets).
"""
import math
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator")

import trainscope as ts  # noqa: E402
from conftest import cli_path as _bin  # noqa: E402

STEPS, SAVE = 12, 4
GRAD_BUCKETS, ACT_BUCKETS = 20, 7


def _train(run_dir):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = torch.nn.CrossEntropyLoss()
    collections = ["losses", "weights",
                   ts.Collection("gradients", histogram_buckets=GRAD_BUCKETS),
                   ts.Collection("activations", histogram_buckets=ACT_BUCKETS)]
    with ts.Hook(out_dir=str(run_dir), save_interval=SAVE, collections=collections,
                 system_monitor_interval_ms=0, strict=True) as hook:
        hook.register_module(model)
        hook.register_loss(criterion)
        hook.register_optimizer(opt)
        for _ in range(STEPS):
            x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
            loss = criterion(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        hook.set_mode(ts.Mode.EVAL)
        with torch.no_grad():
            x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
            x[0, 0] = float("nan")  # non-finite counts in the EVAL layer outputs
            criterion(model(x), y)
        assert hook.error_count == 0, hook.errors


def _tag(name, mode):
    mode = ts.Mode(mode)
    return name if mode == ts.Mode.TRAIN else f"{mode.name.lower()}/{name}"


def _f32(v):
    return float(np.float32(v))


def _same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tbreader")
    run_dir, out = tmp / "run", tmp / "tb"
    _train(run_dir)
    r = subprocess.run([_bin(), "export", "tensorboard", str(run_dir), str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    guidance = {k: 0 for k in event_accumulator.DEFAULT_SIZE_GUIDANCE}
    acc = event_accumulator.EventAccumulator(str(out / "worker-0"), size_guidance=guidance)
    acc.Reload()
    return ts.open_run(str(run_dir)), acc


def _expected_scalars(run):
    """{tag: [(step, wall_time, float32 value)]} of every scalar series and every reduction."""
    out = {}
    for name in run.scalar_names():
        d = run.scalar_records(name)
        for step, mode, wall_us, value in zip(d["steps"], d["modes"], d["wall_us"], d["values"]):
            out.setdefault(_tag(name, mode), []).append((int(step), wall_us / 1e6, _f32(value)))
    for name in run.tensor_names(scalars=False):
        t = run.tensor(name)
        for step in t.steps():
            s = t.summary(step)
            for reduction, value in s["stats"].items():
                if reduction == "histogram":
                    continue
                out.setdefault(_tag(f"{name}/{reduction}", s["mode"]), []).append(
                    (step, s["wall_us"] / 1e6, _f32(value)))
    return {tag: sorted(v) for tag, v in out.items()}


def _expected_histograms(run):
    """{tag: [(step, wall_time, HistogramProto fields)]} of every summary with buckets."""
    out = {}
    for name in run.tensor_names(scalars=False):
        t = run.tensor(name)
        for step in t.steps():
            s = t.summary(step)
            st = s["stats"]
            if "histogram" not in st:
                continue
            lo, hi = st["histogram"]["lo"], st["histogram"]["hi"]
            counts = [float(c) for c in st["histogram"]["counts"]]
            n = len(counts)
            w = (hi - lo) / n
            limits = [lo + (i + 1) * w for i in range(n - 1)] + [hi]
            h = dict(min=st["min"], max=st["max"], num=sum(counts), sum=st["mean"] * st["finite"],
                     sum_squares=st["l2"] * st["l2"], bucket_limit=limits, bucket=counts)
            out.setdefault(_tag(name, s["mode"]), []).append((step, s["wall_us"] / 1e6, h))
    return out


def test_the_run_has_what_the_export_must_show(exported):
    run, _ = exported
    names = run.tensor_names()
    for collection in ("weights", "gradients", "activations"):
        assert any(n.startswith(collection + "/") for n in names), names
    grad = run.tensor("gradients/0.weight")
    assert grad.steps() == [0, 4, 8]
    assert len(grad.summary(4)["stats"]["histogram"]["counts"]) == GRAD_BUCKETS
    assert "histogram" not in run.tensor("weights/0.weight").summary(4)["stats"]
    evals = [n for n in names if STEPS in run.tensor(n).steps(mode=ts.Mode.EVAL)]
    assert evals and any(run.tensor(n).summary(STEPS)["stats"]["nan"] > 0 for n in evals)


def test_scalar_tags_are_the_losses_and_one_per_reduction(exported):
    run, acc = exported
    expected = _expected_scalars(run)
    assert sorted(acc.Tags()["scalars"]) == sorted(expected)
    reductions = set(run.tensor("gradients/0.weight").reductions(0)) - {"histogram"}
    assert {"min", "max", "mean", "std", "l1", "l2", "nan", "inf", "zeros", "count"} <= reductions
    for r in reductions:
        assert f"gradients/0.weight/{r}" in expected
        assert f"eval/activations/2/{r}" in expected
    assert "losses/loss" in expected and "eval/losses/loss" in expected


def test_every_scalar_equals_the_run_at_its_step_and_wall_time(exported):
    run, acc = exported
    expected = _expected_scalars(run)
    nan_seen = False
    for tag, want in expected.items():
        got = [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)]
        assert [g[:2] for g in got] == [w[:2] for w in want], tag
        for (step, _, g), (_, _, w) in zip(got, want):
            assert _same(g, w), f"{tag} at step {step}: TensorBoard {g}, run {w}"
            nan_seen |= math.isnan(w)
    assert nan_seen  # the EVAL batch's NaN reached the export
    steps, losses = run.scalar("losses/loss", mode=ts.Mode.TRAIN)
    assert list(steps) == list(range(STEPS))
    assert [e.value for e in acc.Scalars("losses/loss")] == [_f32(v) for v in losses]


def test_histograms_equal_the_summaries_buckets(exported):
    run, acc = exported
    expected = _expected_histograms(run)
    assert sorted(acc.Tags()["histograms"]) == sorted(expected)
    assert any(t.startswith("gradients/") for t in expected)
    assert any(t.startswith("eval/activations/") for t in expected)
    for tag, want in expected.items():
        got = acc.Histograms(tag)
        assert [(e.step, e.wall_time) for e in got] == [(s, w) for s, w, _ in want], tag
        for e, (step, _, h) in zip(got, want):
            v = e.histogram_value
            for field in ("min", "max", "num", "sum", "sum_squares"):
                assert getattr(v, field) == h[field], f"{tag} step {step} {field}"
            assert list(v.bucket_limit) == h["bucket_limit"], f"{tag} step {step}"
            assert list(v.bucket) == h["bucket"], f"{tag} step {step}"
            assert v.num == run.tensor(tag.removeprefix("eval/")).summary(step)["stats"]["finite"]

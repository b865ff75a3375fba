"""Reductions computed by the core kernel and by the batched torch (device) path equal NumPy's
on the same data, including hard inputs."""
import math

import numpy as np
import pytest
import torch

import trainscope as ts
from trainscope import _core
from trainscope._device_stats import DeviceBatch


def reference(a: np.ndarray) -> dict:
    x = a.astype(np.float64).ravel()
    fin = x[np.isfinite(x)]
    out = {"count": x.size, "nan": int(np.isnan(x).sum()), "pos_inf": int((x == np.inf).sum()),
           "neg_inf": int((x == -np.inf).sum()), "zeros": int((x == 0).sum()),
           "negatives": int((x < 0).sum()), "positives": int((x > 0).sum())}
    if fin.size:
        out.update(min=fin.min(), max=fin.max(), mean=fin.mean(), var=fin.var(),
                   std=fin.std(), l1=np.abs(fin).sum(), l2=np.sqrt((fin * fin).sum()),
                   abs_mean=np.abs(fin).mean())
    return out


def check(got: dict, ref: dict, rtol=1e-9):
    for k, v in ref.items():
        if k in ("count", "nan", "pos_inf", "neg_inf", "zeros", "negatives", "positives"):
            assert got[k] == v, (k, got[k], v)
        else:
            assert got[k] == pytest.approx(v, rel=rtol, abs=1e-300), (k, got[k], v)


def device_path(t: torch.Tensor) -> dict:
    b = DeviceBatch()
    b.add("x", t, 1)
    return _core.stats_from_row(b.table()[0])


CASES = {
    "float32_normal": lambda r: r.standard_normal(1000).astype(np.float32),
    "float64_offset_1e8": lambda r: 1e8 + r.standard_normal(5000),
    "denormals": lambda r: np.array([5e-324, 1e-310, -2e-310, 0.0, 1e-300]),
    "nan_inf": lambda r: np.array([1.0, np.nan, np.inf, -np.inf, -2.0, 0.0, 3.5]),
    "float16": lambda r: r.standard_normal(777).astype(np.float16),
    "int32": lambda r: r.integers(-1000, 1000, 333).astype(np.int32),
    "int64": lambda r: r.integers(-10**12, 10**12, 333).astype(np.int64),
    "uint8": lambda r: r.integers(0, 255, 100).astype(np.uint8),
    "bool": lambda r: r.integers(0, 2, 100).astype(np.bool_),
    "odd_length": lambda r: r.standard_normal(17).astype(np.float32),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_core_kernel_matches_numpy(case):
    a = CASES[case](np.random.default_rng(0))
    check(ts.compute_stats(a), reference(a))
    check(ts.compute_stats(torch.from_numpy(a)), reference(a))


@pytest.mark.parametrize("case", sorted(CASES))
def test_batched_torch_path_matches_numpy(case):
    a = CASES[case](np.random.default_rng(0))
    rtol = 1e-6 if case == "float64_offset_1e8" else 1e-9
    check(device_path(torch.from_numpy(a)), reference(a), rtol=rtol)


def test_bfloat16_both_paths():
    t = torch.randn(1000).to(torch.bfloat16)
    ref = reference(t.float().numpy())
    check(ts.compute_stats(t), ref)
    check(device_path(t), ref)


def test_all_nonfinite_and_empty():
    s = ts.compute_stats(np.array([np.nan, np.inf]))
    assert math.isnan(s["mean"]) and s["nan"] == 1 and s["inf"] == 1
    d = device_path(torch.tensor([float("nan"), float("inf")]))
    assert math.isnan(d["mean"]) and d["nan"] == 1 and d["inf"] == 1
    e = ts.compute_stats(np.zeros(0, dtype=np.float32))
    assert e["count"] == 0 and e["l2"] == 0
    de = device_path(torch.zeros(0))
    assert de["count"] == 0 and de["l2"] == 0


def test_non_contiguous_tensor_is_handled():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    check(ts.compute_stats(t), reference(t.contiguous().numpy()))


def test_hook_summaries_from_tensor_addresses_match_numpy(tmp_path):
    """The hook hands contiguous CPU tensors to the core by address (data_ptr/numel) and
    everything else through numpy; both give NumPy's reductions, for every dtype, views with
    a storage offset, non-contiguous tensors and empty ones."""
    g = torch.Generator().manual_seed(3)
    base = torch.randn(40, 30, generator=g)
    tensors = {
        "f32": base,
        "f64": base.double() * 1e3 + 1e8,
        "f16": base.half(),
        "bf16": base.bfloat16(),
        "i32": (base * 100).int(),
        "i64": (base * 1e6).long(),
        "u8": (base.abs() * 50).to(torch.uint8),
        "bool": base > 0,
        "offset_view": base[7:, 3],  # non-contiguous column
        "row_view": base[5],  # contiguous, storage offset 150 elements
        "transposed": base.t(),
        "empty": torch.zeros(0, 4),
        "scalar": torch.tensor(2.5),
        "nan_inf": torch.tensor([1.0, float("nan"), float("inf"), -2.0]),
    }
    run_dir = str(tmp_path / "run")
    with ts.Hook(run_dir, system_monitor_interval_ms=0, collections=[]) as hook:
        for name, t in tensors.items():
            hook.save_tensor(name, t)
        assert hook.errors == {}
    run = ts.open_run(run_dir)
    for name, t in tensors.items():
        ref_src = t.float() if t.dtype == torch.bfloat16 else t
        ref = reference(ref_src.contiguous().numpy())
        got = run.tensor(f"tensors/{name}").reductions(0)
        got.update(run.tensor(f"tensors/{name}").summary(0))
        for k in ("min", "max", "mean", "l1", "l2"):
            if k in ref:
                assert got[k] == pytest.approx(ref[k], rel=1e-9), (name, k)
        assert list(run.tensor(f"tensors/{name}").summary(0)["shape"]) == list(t.shape), name


def test_add_summaries_batch_reads_in_place_and_hands_back_the_rest(tmp_path):
    from trainscope._dtypes import _torch_codes
    run_dir = str(tmp_path / "run")
    _core.create_or_open_run(run_dir, name="", command=[], config_json="{}", framework="x")
    w = _core.Writer(run_dir, "worker-0")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) - 7.5
    codes = {k: v for k, v in _torch_codes().items() if k != torch.int16}
    batch = [("t/plain", base, 0),
             ("t/column", base[:, 2], 0),           # non-contiguous: handed back
             ("t/row", base[2], 0),                 # contiguous view with a storage offset
             ("t/int16", base.to(torch.int16), 0),  # dtype not in codes: handed back
             ("t/hist", base, 4),
             "not a tuple",
             ("t/not_a_tensor", object(), 0)]
    rest = w.add_summaries_batch(batch, 3, 0, 3, codes)
    assert rest == [1, 3, 5, 6]
    w.close()
    run = ts.open_run(run_dir)
    assert sorted(run.tensor_names()) == ["t/hist", "t/plain", "t/row"]
    for name, t in (("t/plain", base), ("t/row", base[2])):
        got = run.tensor(name).reductions(3)
        ref = reference(t.numpy())
        for k in ("min", "max", "mean", "l2"):
            assert got[k] == pytest.approx(ref[k], rel=1e-12), (name, k)
        assert list(run.tensor(name).summary(3)["shape"]) == list(t.shape)


def ts_code(a: np.ndarray) -> int:
    from trainscope._dtypes import torch_to_buffer
    return torch_to_buffer(torch.from_numpy(a))[1]

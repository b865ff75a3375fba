#!/usr/bin/python3
"""Generates the golden fixtures for src/stats/stats_golden_test.cc.

Each case is a small little-endian array <name>.bin plus NumPy's results in golden.json:
statistics over the finite values computed in float64 (np.min, np.max, np.mean, np.var,
np.sum(np.abs(x)), np.sqrt(np.sum(x * x))), the NaN/Inf/sign counts and np.histogram(x, 10).
mean_exact/var_exact are the exact values of the float64 data (rational arithmetic), rounded
once: NumPy's two-pass var carries the rounding error of its mean squared, which is visible
when the offset is large compared with the spread (f64_offset_small_noise).
Deterministic (fixed seed); rerun with Debian's /usr/bin/python3 (numpy) after changing it:
    /usr/bin/python3 testdata/stats/gen_golden.py
"""
import json
import os
from fractions import Fraction

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
N = 1000


def to_bfloat16_bits(x32):
    """float32 -> bfloat16 bits, round to nearest even (NaN kept quiet)."""
    u = x32.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x32)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def from_bfloat16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def sprinkle(x, rng, fraction):
    x = x.copy()
    idx = rng.random(x.size) < fraction
    x[idx] = rng.choice(np.array([np.nan, np.inf, -np.inf], dtype=x.dtype), idx.sum())
    return x


def cases(rng):
    yield "f32_offset_1e4", "float32", (1e4 + rng.standard_normal(N)).astype(np.float32)
    yield "f64_offset_1e8", "float64", 1e8 + rng.standard_normal(N)
    yield "f64_offset_small_noise", "float64", -3e12 + 1e-3 * rng.standard_normal(N)
    yield "f32_denormals", "float32", (rng.standard_normal(N) * 1e-40).astype(np.float32)
    yield "f32_nan_inf", "float32", sprinkle(rng.standard_normal(N).astype(np.float32), rng, 0.05)
    f16 = np.concatenate([rng.standard_normal(N // 2) * 1e-6, 300 + rng.standard_normal(N // 2)])
    yield "f16_denormals_offset", "float16", sprinkle(f16.astype(np.float16), rng, 0.02)
    bf = (5e5 + 1e3 * rng.standard_normal(N)).astype(np.float32)
    yield "bf16_offset", "bfloat16", to_bfloat16_bits(sprinkle(bf, rng, 0.02))
    yield "f64_all_nan", "float64", np.full(N, np.nan)
    yield "f32_single", "float32", np.array([-2.5], dtype=np.float32)
    yield "f32_empty", "float32", np.zeros(0, dtype=np.float32)
    yield "f32_constant", "float32", np.full(N, 7.25, dtype=np.float32)
    yield "i16_values", "int16", rng.integers(-30000, 30000, N).astype(np.int16)
    yield "u8_values", "uint8", rng.integers(0, 256, N).astype(np.uint8)


def number(v):
    v = float(v)
    return None if np.isnan(v) else v  # JSON has no NaN: null


def summarize(values):
    x = values.astype(np.float64)
    f = x[np.isfinite(x)]
    out = {
        "count": int(x.size),
        "nan": int(np.isnan(x).sum()),
        "pos_inf": int(np.isposinf(x).sum()),
        "neg_inf": int(np.isneginf(x).sum()),
        "zeros": int((f == 0).sum()),
        "negatives": int((x < 0).sum()),
        "positives": int((x > 0).sum()),
    }
    if f.size:
        out.update(min=np.min(f), max=np.max(f), mean=np.mean(f), var=np.var(f),
                   l1=np.sum(np.abs(f)), l2=np.sqrt(np.sum(f * f)),
                   abs_mean=np.mean(np.abs(f)))
        exact = [Fraction(float(v)) for v in f]
        mean = sum(exact) / len(exact)
        out.update(mean_exact=float(mean),
                   var_exact=float(sum((v - mean) ** 2 for v in exact) / len(exact)))
    else:
        out.update(mean_exact=np.nan, var_exact=np.nan)
        out.update(min=np.nan, max=np.nan, mean=np.nan, var=np.nan, l1=0.0, l2=0.0,
                   abs_mean=np.nan)
    counts, edges = np.histogram(f, bins=10)
    out["histogram"] = {"lo": edges[0], "hi": edges[-1], "counts": [int(c) for c in counts]}
    for k in ("min", "max", "mean", "var", "l1", "l2", "abs_mean", "mean_exact", "var_exact"):
        out[k] = number(out[k])
    out["histogram"]["lo"] = number(out["histogram"]["lo"])
    out["histogram"]["hi"] = number(out["histogram"]["hi"])
    return out


def main():
    rng = np.random.default_rng(20261130)
    golden = {"numpy_version": np.__version__, "cases": []}
    for name, dtype, arr in cases(rng):
        with open(os.path.join(HERE, name + ".bin"), "wb") as fh:
            fh.write(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
        values = from_bfloat16_bits(arr) if dtype == "bfloat16" else arr
        case = {"name": name, "file": name + ".bin", "dtype": dtype}
        case.update(summarize(values))
        golden["cases"].append(case)
    with open(os.path.join(HERE, "golden.json"), "w") as fh:
        json.dump(golden, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()

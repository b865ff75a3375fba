"""GPU check: tensor summaries against NumPy float64 references."""

from .common import NO_CUDA, _torch, _ts, cuda_ok, f64, mlp, run_dir, batches


# ============================================================================== summaries
COUNT_KEYS = ("count", "nan", "pos_inf", "neg_inf", "zeros", "negatives", "positives")
EXACT_KEYS = ("min", "max")  # float64 widening is exact, so min/max must be too
RTOL = 1e-9


def reference(x):
    import numpy as np
    x = x.ravel()
    fin = x[np.isfinite(x)]
    out = {"count": x.size, "nan": int(np.isnan(x).sum()), "pos_inf": int((x == np.inf).sum()),
           "neg_inf": int((x == -np.inf).sum()), "zeros": int((x == 0).sum()),
           "negatives": int((x < 0).sum()), "positives": int((x > 0).sum())}
    if fin.size:
        out.update(min=fin.min(), max=fin.max(), mean=fin.mean(), std=fin.std(),
                   l1=np.abs(fin).sum(), l2=np.sqrt((fin * fin).sum()), abs_mean=np.abs(fin).mean())
    return out


def compare(got, ref, stats):
    """Adds to stats: compared values, max relative error; returns mismatch strings."""
    bad = []
    scale = max(abs(ref.get("min", 0.0)), abs(ref.get("max", 0.0)), 1e-300)
    for k, v in ref.items():
        g = got.get(k)
        stats["values"] += 1
        if g is None:
            bad.append(f"{k} missing")
        elif k in COUNT_KEYS or k in EXACT_KEYS:
            if g != v:
                bad.append(f"{k} {g!r} != {v!r}")
        else:
            err = abs(g - v) / max(abs(v), 1e-12 * scale)
            stats["max_rel"] = max(stats["max_rel"], err)
            if not err <= RTOL:
                bad.append(f"{k} {g!r} vs {v!r} (rel {err:.1e})")
    return bad


def special_tensors(device):
    """name -> tensor: dtypes and values the summaries must get right."""
    torch = _torch()
    g = torch.Generator().manual_seed(7)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    nan, inf = float("nan"), float("inf")
    t = {
        "f32_normal": r(100_000),
        "f32_offset_1e4": 1e4 + r(50_000),
        "f64_offset_1e8": (1e8 + r(50_000).double()),
        "f16_normal": r(30_000).half(),
        "f16_overflow": torch.tensor([1.0, 70000.0, -70000.0, 65504.0, 6e-8, 0.0]).half(),
        "bf16_offset_100": (100 + r(30_000)).bfloat16(),
        "i32": torch.randint(-1000, 1000, (4096,), generator=g, dtype=torch.int32),
        "f32_nan_inf": torch.tensor([1.0, nan, inf, -inf, -2.0, 0.0, 3.5, nan]),
        "bf16_nan_inf": torch.tensor([nan, inf, -inf, 1.5, -0.25, 0.0]).bfloat16(),
        "f32_all_nan": torch.full((33,), nan),
        "f32_empty": torch.empty(0),
        "f32_transposed": r(300, 200).t(),  # non-contiguous
        "f32_large": r(2**24 + 3),
    }
    return {k: v.to(device) for k, v in t.items()}


def summaries_run(device, device_stats, work):
    """Trains float32, float16 and bfloat16 MLPs with the hook and saves special tensors;
    returns (tensors compared, stats, mismatches)."""
    torch = _torch()
    ts = _ts()
    stats = {"values": 0, "max_rel": 0.0}
    bad, compared = [], 0
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        model = mlp([64, 256, 256, 10]).to(device=device, dtype=dtype)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        crit = torch.nn.CrossEntropyLoss()
        data = batches(7, 128, 64, 10, device, dtype=dtype)
        d = run_dir(work, f"summ-{device}-{device_stats}-{dtype}")
        refs = {}
        hook = ts.Hook(d, save_interval=3, collections=["losses", "weights", "biases", "gradients"],
                       device_stats=device_stats, system_monitor_interval_ms=0)
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        for i, (x, y) in enumerate(data):
            save = i % 3 == 0
            if save:  # weights are summarised at the step's first forward, before the update
                for n, p in model.named_parameters():
                    coll = "biases" if n.split(".")[-1].startswith("bias") else "weights"
                    refs[(f"{coll}/{n}", i)] = f64(p)
            loss = crit(model(x).float(), y)
            opt.zero_grad()
            loss.backward()
            if save:
                for n, p in model.named_parameters():
                    refs[(f"gradients/{n}", i)] = f64(p.grad)
            opt.step()
        if dtype == torch.float32:
            for name, t in special_tensors(device).items():
                hook.save_tensor(name, t)
                refs[(f"tensors/{name}", None)] = f64(t)
        hook.close()
        run = ts.open_run(d)
        for (name, step), ref in refs.items():
            try:
                t = run.tensor(name)
                s = step if step is not None else t.steps()[-1]
                got = t.reductions(s)
            except Exception as e:
                bad.append(f"{name}@{step}: {e}")
                continue
            compared += 1
            for m in compare(got, reference(ref), stats):
                bad.append(f"{str(dtype)[6:]} {name}@{step}: {m}")
    return compared, stats, bad


def check_summaries(rows, work):
    cases = [("cpu", "auto", "summaries cpu (C++ kernel)"),
             ("cpu", "torch", "summaries cpu (torch path)")]
    if cuda_ok():
        cases.append(("cuda", "auto", "summaries cuda"))
    for device, mode, label in cases:
        compared, stats, bad = summaries_run(device, mode, work)
        rows.add(label, "PASS" if not bad and compared else "FAIL",
                 f"{compared} tensors (f32/f16/bf16 models' weights, biases, gradients at 3 "
                 f"steps; f64, i32, NaN/±Inf, all-NaN, empty, non-contiguous, 2^24+3), "
                 f"{stats['values']} values vs NumPy float64: counts and min/max exact, "
                 f"max rel err {stats['max_rel']:.1e} (tolerance {RTOL:.0e})"
                 + (f"; {len(bad)} mismatches: " + "; ".join(bad[:3]) if bad else ""))
    if not cuda_ok():
        rows.add("summaries cuda", NO_CUDA, "same comparison on cuda tensors")

"""GPU checks: synchronisations and step time, torch.compile, AMP with GradScaler."""
import time
import warnings

from .common import NO_CUDA, _torch, _ts, batches, cuda_ok, median, mlp, run_dir


# =================================================================================== sync
def train_step(model, opt, crit, x, y):
    loss = crit(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def make_training(sizes, batch, n_batches, device, hooked, work, label, save_interval=100):
    torch = _torch()
    ts = _ts()
    model = mlp(sizes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    crit = torch.nn.CrossEntropyLoss()
    data = batches(n_batches, batch, sizes[0], sizes[-1], device)
    hook = None
    if hooked:
        hook = ts.Hook(run_dir(work, label), save_interval=save_interval)
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
    return model, opt, crit, data, hook


def sync_counts(device, work):
    """Sync warnings per hooked step kind ("warn" mode), then hook errors in "error" mode on
    non-save steps. On a CPU there is no sync debug mode: the same steps run and are counted."""
    torch = _torch()
    cuda = device == "cuda"
    sizes, batch = ([1024, 2048, 2048, 10], 256) if cuda else ([64, 256, 256, 10], 64)
    model, opt, crit, data, hook = make_training(sizes, batch, 8, device, True, work, "sync",
                                                 save_interval=50)
    base, bopt, bcrit, bdata, _ = make_training(sizes, batch, 8, device, False, work, "sync-base")
    set_mode = torch.cuda.set_sync_debug_mode if cuda else (lambda mode: None)
    for i in range(3):  # warm-up (cuBLAS handles, allocator)
        train_step(base, bopt, bcrit, *bdata[i % 8])
    if cuda:
        torch.cuda.synchronize()
    counts = {"base": 0, "nonsave": 0, "save": 0, "nonsave_steps": 0, "save_steps": 0}
    what = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        set_mode("warn")
        try:
            for i in range(20):
                train_step(base, bopt, bcrit, *bdata[i % 8])
            counts["base"] = len(w)
            for i in range(120):  # mode steps 0..119: tensors saved at 0, 50, 100
                before = len(w)
                train_step(model, opt, crit, *data[i % 8])
                kind = "save" if hook.mode_step % 50 == 0 else "nonsave"
                counts[kind] += len(w) - before
                counts[kind + "_steps"] += 1
                if len(w) > before and len(what) < 2:
                    what.append(f"step {hook.mode_step}: {str(w[before].message)[:120]}")
        finally:
            set_mode("default")
    # "error": a sync inside a hook callback raises there (and is counted as a hook error)
    errors_before = hook.error_count
    raised = None
    set_mode("error")
    try:
        for i in range(29):  # mode steps 120..148: none saves tensors
            train_step(model, opt, crit, *data[i % 8])
    except Exception as e:
        raised = f"{type(e).__name__}: {str(e)[:150]}"
    finally:
        set_mode("default")
    err = hook.error_count - errors_before
    err_where = sorted(hook.errors)[:3] if err else []
    steps_done = hook.step_count
    hook.close()
    return counts, what, raised, err, err_where, steps_done


def time_steps(sizes, batch, device, work, rounds=6, block=40, sync=None):
    """Median per-step time (s) of an unhooked and a hooked copy, interleaved by blocks."""
    torch = _torch()
    sync = sync or (torch.cuda.synchronize if device == "cuda" else (lambda: None))
    runs = {}
    for hooked in (False, True):
        runs[hooked] = make_training(sizes, batch, 8, device, hooked, work, f"time-{hooked}")
    times = {False: [], True: []}
    for r in range(rounds + 1):  # round 0 warms up
        for hooked in ((False, True) if r % 2 else (True, False)):
            model, opt, crit, data, _ = runs[hooked]
            sync()
            t0 = time.perf_counter()
            for i in range(block):
                train_step(model, opt, crit, *data[i % 8])
            sync()
            if r:
                times[hooked].append((time.perf_counter() - t0) / block)
    hook = runs[True][4]
    errors = hook.error_count
    hook.close()
    return median(times[False]), median(times[True]), errors


def check_sync(rows, work):
    cuda = cuda_ok()
    # CPU part: the harness (steps counted and classified) and the step-time comparison
    counts, what, raised, err, err_where, steps = sync_counts("cpu", work)
    ok = (counts["save_steps"] == 3 and counts["nonsave_steps"] == 117 and steps == 148
          and raised is None and err == 0)
    rows.add("sync harness (cpu)", "PASS" if ok else "FAIL",
             f"149 hooked steps, save steps seen {counts['save_steps']} (expect 3: 0, 50, 100), "
             f"non-save {counts['nonsave_steps']}, last step {steps}, hook errors {err}"
             + (f", raised {raised}" if raised else "") + "; no sync debug mode without CUDA")
    base, hooked, errors = time_steps([64, 256, 256, 10], 64, "cpu", work, rounds=4, block=30)
    rows.add("step time (cpu)", "INFO" if not errors else "FAIL",
             f"MLP 64-256-256-10 batch 64: no hook {base * 1e6:.0f} us, default hook "
             f"{hooked * 1e6:.0f} us per step ({hooked / base:.3f}x); hook errors {errors}")
    if not cuda:
        rows.add("no sync on non-save steps", NO_CUDA, "torch.cuda.set_sync_debug_mode")
        rows.add("no sync on save steps", NO_CUDA, "torch.cuda.set_sync_debug_mode")
        rows.add("step time (cuda)", NO_CUDA, "hooked vs unhooked on cuda")
        return
    counts, what, raised, err, err_where, steps = sync_counts("cuda", work)
    ok = counts["nonsave"] == 0 and counts["base"] == 0 and raised is None and err == 0 \
        and counts["save_steps"] == 3
    rows.add("no sync on non-save steps", "PASS" if ok else "FAIL",
             f"sync warnings: unhooked {counts['base']} in 20 steps, hooked non-save "
             f"{counts['nonsave']} in {counts['nonsave_steps']} steps; 'error' mode, 29 non-save "
             f"steps: {'raised ' + raised if raised else 'no exception'}, hook errors {err}"
             + (f" {err_where}" if err_where else "") + (f"; {'; '.join(what)}" if what else ""))
    rows.add("no sync on save steps", "PASS" if counts["save"] == 0 else "WARN",
             f"sync warnings on the {counts['save_steps']} save steps (weights + gradients "
             f"summaries, one device copy): {counts['save']}")
    for sizes, batch, label in (([1024, 4096, 4096, 10], 512, "GPU-bound MLP 1024-4096-4096-10 b512"),
                                ([64, 256, 256, 10], 64, "launch-bound MLP 64-256-256-10 b64")):
        base, hooked, errors = time_steps(sizes, batch, "cuda", work)
        ratio = hooked / base
        rows.add("step time (cuda)", "PASS" if ratio <= 1.05 and not errors else "WARN",
                 f"{label}: no hook {base * 1e6:.0f} us, default hook {hooked * 1e6:.0f} us per "
                 f"step ({ratio:.3f}x; WARN above 1.05x); hook errors {errors}")


# ================================================================================ compile
def compile_variant(variant, device, work, steps=12):
    torch = _torch()
    ts = _ts()
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    model = mlp([32, 128, 128, 10]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.CrossEntropyLoss()
    data = batches(4, 64, 32, 10, device)
    hook, fwd, d = None, model, None
    if variant != "eager":
        if variant in ("hook before compile", "hook after compile"):
            d = run_dir(work, variant.replace(" ", "-"))
            hook = ts.Hook(d, save_interval=5, system_monitor_interval_ms=0)
        if variant == "hook before compile":
            hook.register_module(model)
        fwd = torch.compile(model)
        if variant == "hook after compile":
            hook.register_module(fwd)
        if hook is not None:
            hook.register_loss(crit)
            hook.register_optimizer(opt)
    losses = []
    t0 = time.perf_counter()
    for i in range(steps):
        x, y = data[i % 4]
        losses.append(train_step(fwd, opt, crit, x, y).detach())
    losses = [float(v) for v in torch.stack(losses).cpu().double()]
    secs = time.perf_counter() - t0
    info = {"losses": losses, "secs": secs,
            "graph_breaks": sum(counters["graph_break"].values()),
            "break_reasons": [" ".join(str(k).split())[:240]
                              for k in list(counters["graph_break"])[:2]],
            "graphs": counters["stats"]["unique_graphs"], "frames": counters["frames"]["total"]}
    if hook is not None:
        info["hook_errors"] = hook.error_count
        hook.close()
        run = ts.open_run(d)
        info["steps_recorded"] = len(run.step_records())
        info["losses_recorded"] = [float(v) for v in run.scalar("losses/loss")[1]]
        info["grad_steps"] = run.tensor(run.tensor_names("gradients")[0]).steps() \
            if run.tensor_names("gradients") else []
    return info


def max_rel(a, b):
    return max((abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)), default=float("nan"))


def check_compile(rows, work):
    devices = ["cpu"] + (["cuda"] if cuda_ok() else [])
    for device in devices:
        try:
            res = {v: compile_variant(v, device, work) for v in
                   ("eager", "compiled", "hook before compile", "hook after compile")}
        except Exception as e:
            rows.add(f"torch.compile ({device})", "FAIL", f"{type(e).__name__}: {str(e)[:300]}")
            continue
        eager, comp = res["eager"], res["compiled"]
        base_rel = max_rel(comp["losses"], eager["losses"])
        for v in ("hook before compile", "hook after compile"):
            r = res[v]
            steps_ok = r["steps_recorded"] == len(r["losses"])
            rec_rel = max_rel(r["losses_recorded"], r["losses"]) \
                if len(r["losses_recorded"]) == len(r["losses"]) else float("inf")
            rel_c = max_rel(r["losses"], comp["losses"])
            rel_e = max_rel(r["losses"], eager["losses"])
            ok = steps_ok and rec_rel <= 1e-6 and rel_c <= 1e-4 and not r["hook_errors"]
            extra = (r["graph_breaks"] > comp["graph_breaks"] or r["graphs"] > comp["graphs"])
            result = ("WARN" if extra else "PASS") if ok else "FAIL"
            rows.add(f"torch.compile ({device}), {v}", result,
                     f"steps recorded {r['steps_recorded']}/{len(r['losses'])}, losses recorded "
                     f"{len(r['losses_recorded'])} (rel {rec_rel:.1e} to the training's); losses vs "
                     f"compiled without hook rel {rel_c:.1e} (tolerance 1e-4), vs eager {rel_e:.1e} "
                     f"(compiled vs eager {base_rel:.1e}); graph breaks {r['graph_breaks']} "
                     f"(without hook {comp['graph_breaks']}), graphs {r['graphs']} (without hook "
                     f"{comp['graphs']}), frames {r['frames']}; gradients saved at "
                     f"{r['grad_steps']}; hook errors {r['hook_errors']}; {r['secs']:.1f} s"
                     + (f"; breaks: {r['break_reasons']}" if r["break_reasons"] else ""))
    if not cuda_ok():
        rows.add("torch.compile (cuda)", NO_CUDA, "inductor/triton with the hook")


# ==================================================================================== amp
def check_amp(rows, work):
    torch = _torch()
    devices = ["cpu"] + (["cuda"] if cuda_ok() else [])
    for device in devices:
        label = f"amp + GradScaler ({device})"
        try:
            rows.add(label, *amp_run(device, work))
        except Exception as e:
            rows.add(label, "FAIL", f"{type(e).__name__}: {str(e)[:300]}")
    if not cuda_ok():
        rows.add("amp + GradScaler (cuda)", NO_CUDA, "fp16 autocast on cuda")


def amp_run(device, work, steps=16, k=7):
    torch = _torch()
    ts = _ts()
    import numpy as np
    dtype = torch.float16
    if device == "cpu":
        try:  # fp16 autocast on CPU is recent; bf16 is the CPU's usual one
            with torch.autocast("cpu", dtype=torch.float16):
                torch.nn.Linear(4, 4)(torch.randn(2, 4))
        except Exception:
            dtype = torch.bfloat16
    model = mlp([64, 256, 256, 10]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.CrossEntropyLoss()
    data = batches(4, 128, 64, 10, device)
    scaler = torch.amp.GradScaler(device)
    around = [k - 1, k, k + 1, k + 2]
    d = run_dir(work, f"amp-{device}")
    hook = ts.Hook(d, system_monitor_interval_ms=0, collections=[
        "losses", "scalars", ts.Collection("weights", save_steps=around),
        ts.Collection("gradients", save_steps=around)])
    hook.register_module(model)
    hook.register_loss(crit)
    hook.register_optimizer(opt)
    follows_scaler = hasattr(hook, "register_scaler")  # amp/loss_scale, amp/skipped
    if follows_scaler:
        hook.register_scaler(scaler)
    init_scale = scaler.get_scale()
    for i in range(steps):
        x, y = data[i % 4]
        with torch.autocast(device, dtype=dtype):
            loss = crit(model(x), y)
        scaled = scaler.scale(loss)
        if i == k:
            scaled = scaled * float("inf")  # every gradient non-finite: the scaler must skip
        opt.zero_grad()
        scaled.backward()
        scaler.step(opt)
        scaler.update()
        hook.save_scalar("amp_scale", scaler.get_scale())
    errors = hook.error_count
    hook.close()
    run = ts.open_run(d)
    _, losses = run.scalar("losses/loss")
    sc_steps, scales = run.scalar("scalars/amp_scale")
    prev = [init_scale] + list(scales[:-1])
    skipped = [int(s) for s, a, b in zip(sc_steps, scales, prev) if a < b]
    recs = {r["step"]: r for r in run.step_records()}
    no_opt = sorted(s for s, r in recs.items() if r["optimizer_us"] < 0)
    grads = run.tensor_names("gradients")
    nonfinite = {s: sum(1 for g in grads if (lambda r: r["nan"] + r["inf"])(
        run.tensor(g).reductions(s)) > 0) for s in around}
    wname = run.tensor_names("weights")[0]
    w = {s: run.tensor(wname).reductions(s) for s in around}
    same_after_skip = all(w[k][m] == w[k + 1][m] for m in ("mean", "l2", "min", "max"))
    moved_before = any(w[k - 1][m] != w[k][m] for m in ("mean", "l2"))
    ok = (len(losses) == steps and bool(np.isfinite(losses).all()) and k in skipped
          and no_opt == skipped and nonfinite[k] == len(grads) and nonfinite[k - 1] == 0
          and nonfinite[k + 1] == 0 and same_after_skip and moved_before and not errors)
    amp = "hook has no register_scaler: amp/* scalars not checked"
    if follows_scaler:
        # the hook's own record of the scaler: the scale each step's backward used, and 1 on
        # the steps the scaler skipped
        name_scale = getattr(ts._core, "AMP_LOSS_SCALE", "amp/loss_scale")
        name_skip = getattr(ts._core, "AMP_SKIPPED", "amp/skipped")
        try:
            st_scale, v_scale = run.scalar(name_scale)
            used = dict(zip((int(x) for x in st_scale), v_scale))
            scale_ok = all(used.get(int(s)) == b for s, b in zip(sc_steps, prev))
            st_skip, v_skip = run.scalar(name_skip)
            hook_skipped = sorted(int(s) for s, v in zip(st_skip, v_skip) if v >= 0.5)
            amp = (f"{name_scale} at {len(used)} steps, equal to the scale used: {scale_ok}; "
                   f"{name_skip} = 1 at {hook_skipped}")
            ok = ok and scale_ok and hook_skipped == skipped
        except Exception as e:
            amp = f"register_scaler: {type(e).__name__}: {str(e)[:150]}"
            ok = False
    return ("PASS" if ok else "FAIL",
            f"{str(dtype)[6:]} autocast, {steps} steps, inf forced at step {k}: losses recorded "
            f"{len(losses)} (finite {int(np.isfinite(losses).sum())}); skipped per recorded scale "
            f"{skipped}, steps without optimizer time {no_opt}; gradients with NaN/Inf at "
            f"{k - 1}/{k}/{k + 1}: {nonfinite[k - 1]}/{nonfinite[k]}/{nonfinite[k + 1]} of "
            f"{len(grads)}; weights unchanged over the skip {same_after_skip}, changed before "
            f"{moved_before}; scale {init_scale:g} -> {scales[-1]:g}; {amp}; hook errors {errors}")

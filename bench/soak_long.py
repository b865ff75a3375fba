#!/usr/bin/env python3
"""Long soak of the PyTorch hook: does a long run stay flat? (issue 17, part 6)

Trains a tiny MLP (8-16-4, batch 8, one torch thread) for STEPS steps under the default
``ts.Hook`` (losses every step, weights and gradients summaries every 100 steps, phases, the
loader wrapper), the default rules (``_core.default_rule_names()``) run in-process and the
system monitor on (500 ms). Every ``--sample-every`` steps it samples the process's resident
memory (/proc/self/statm) and its open file descriptors (/proc/self/fd). At the end it reads
the run back and checks:

  steps      every step of the training is in the run (StepRecords and losses/loss)
  drops      the writer dropped nothing (records_dropped, bytes_dropped, io_errors all 0),
             the hook counted no internal error, the rule runner no failed or dropped action,
             and the reader found no damage
  rss        after the warm-up (--warmup-frac of the steps, and at least the system monitor's
             first WARMUP_MIN_S seconds), resident memory stays within
             --rss-tolerance-mb of its value at the end of the warm-up
  fds        the number of open descriptors after the warm-up never changes

Prints a table of the samples and the verdicts, writes them as JSON with --json, and exits 1
on a violation (2 on a setup error).

  ./dev soak-long [STEPS]              # 1,000,000 steps by default
  python3 bench/soak_long.py --steps 20000 --no-rss-check --json out.json
"""
import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import time

try:
    import trainscope as ts
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
    import trainscope as ts
from trainscope import _core

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd")) - 1  # less the listing's own descriptor


def fd_targets() -> dict:
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out


def dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def train(run_dir: str, steps: int, sample_every: int, log_every: int):
    """Runs the training; returns (samples, hook summary)."""
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 8, generator=g), torch.randint(0, 4, (8,), generator=g))
               for _ in range(64)]

    def loader():
        for b in itertools.islice(itertools.cycle(batches), steps):
            yield b

    samples = []
    t0 = time.monotonic()
    hook = ts.Hook(out_dir=run_dir, rules=list(_core.default_rule_names()),
                   expected_steps=steps)
    with hook:
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        samples.append({"step": 0, "t_s": 0.0, "rss": rss_bytes(), "fds": fd_count()})
        last_fds = {f"{k}:{v}" for k, v in fd_targets().items()}
        for i, (x, y) in enumerate(hook.wrap(loader()), 1):
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i % sample_every == 0 or i == steps:
                samples.append({"step": i, "t_s": time.monotonic() - t0, "rss": rss_bytes(),
                                "fds": fd_count()})
                if samples[-1]["fds"] != samples[-2]["fds"]:
                    # Which descriptors changed: a leak names a file again and again, another
                    # thread's momentary open (a /proc read of the sampler) once.
                    now = fd_targets()
                    samples[-1]["fd_change"] = sorted(
                        {f"{k}:{v}" for k, v in now.items()} ^ last_fds)
                    last_fds = {f"{k}:{v}" for k, v in now.items()}
                if log_every and i % log_every == 0:
                    s = samples[-1]
                    print(f"  step {i:>9,}  {s['t_s']:8.1f} s  {i / s['t_s']:7.0f} steps/s  "
                          f"rss {s['rss'] / 2**20:7.1f} MiB  fds {s['fds']}", flush=True)
        summary = {
            "hook_errors": hook.error_count,
            "errors": dict(hook.errors) if hasattr(hook, "errors") else {},
            "rule_statuses": {k: v.get("status") for k, v in hook.rule_statuses().items()},
            "action_stats": None, "rule_runner_error": None,
        }
        runtime = getattr(hook, "_runtime", None)  # the core runtime runs the hook's rules
        if runtime is not None and runtime.has_rules:
            summary["action_stats"] = dict(runtime.action_stats())
            summary["rule_runner_error"] = runtime.rule_runner_error() or None
    summary["train_s"] = time.monotonic() - t0
    # After close: the run's steps are the training's (the loader ended the loop).
    summary["steps"] = hook.step_count
    summary["fds_after_close"] = fd_count()
    return samples, summary


def read_back(run_dir: str, steps: int) -> dict:
    run = ts.open_run(run_dir)
    got = run.steps(mode=ts.Mode.TRAIN)
    loss_steps, _ = run.scalar("losses/loss", mode=ts.Mode.TRAIN)
    rs = run.read_stats()
    ws = run.writer_stats() or {}
    first = got[0] if got else None
    expected = list(range(first, first + steps)) if first is not None else []
    return {
        "steps_recorded": len(got), "first_step": first,
        "steps_contiguous": got == expected,
        "loss_steps": int(len(loss_steps)),
        "loss_steps_match": [int(s) for s in loss_steps] == expected,
        "records_written": ws.get("records_written"),
        "records_dropped": ws.get("records_dropped"),
        "bytes_dropped": ws.get("bytes_dropped"),
        "io_errors": ws.get("io_errors"),
        "queue_high_water": ws.get("queue_high_water"),
        "corrupt_regions": rs.get("corrupt_regions"),
        "torn_tail_bytes": rs.get("torn_tail_bytes"),
        "undecodable_records": rs.get("undecodable_records"),
        "segments": rs.get("segments"),
        "hook_error_events": len(run.events("hook_error")),
        "system_samples": len(run.system_samples()),
        "rule_events": len(run.rule_events()),
        "ended": run.ended(),
    }


WARMUP_MIN_S = 1.5  # three samples of the system monitor (500 ms)


def verdicts(samples, summary, back, steps, warmup_frac, rss_tol_mb, check_rss):
    out = []

    def check(name, ok, detail):
        out.append({"check": name, "ok": bool(ok), "detail": detail})

    check("steps", back["steps_contiguous"] and back["loss_steps_match"]
          and back["steps_recorded"] == steps,
          f"{back['steps_recorded']:,} step records, {back['loss_steps']:,} losses of "
          f"{steps:,} steps (contiguous: {back['steps_contiguous']})")
    acts = summary["action_stats"] or {}
    dropped = {k: v for k, v in {
        "records_dropped": back["records_dropped"], "bytes_dropped": back["bytes_dropped"],
        "io_errors": back["io_errors"], "hook_errors": summary["hook_errors"],
        "hook_error_events": back["hook_error_events"],
        "actions_failed": acts.get("failed", 0), "actions_dropped": acts.get("dropped", 0),
        "corrupt_regions": back["corrupt_regions"],
        "undecodable_records": back["undecodable_records"]}.items() if v}
    check("drops", not dropped and back["records_dropped"] is not None,
          "none" if not dropped else json.dumps(dropped))
    # The warm-up also spans the system monitor's first samples: its descriptor cache
    # (src/sysmon/proc_file.h) opens the process tree's /proc files at the first sample and
    # keeps them, so a short run that is fast would otherwise see that as growth.
    warm_i = next((i for i, s in enumerate(samples)
                   if s["step"] >= warmup_frac * steps and s["t_s"] >= WARMUP_MIN_S),
                  len(samples) - 1)
    after = samples[warm_i:]
    base = after[0]["rss"]
    growth = max(s["rss"] for s in after) - base
    end_growth = after[-1]["rss"] - base
    detail = (f"{base / 2**20:.1f} MiB at step {after[0]['step']:,}, max +"
              f"{growth / 2**20:.2f} MiB, end {end_growth / 2**20:+.2f} MiB "
              f"(tolerance {rss_tol_mb} MB)")
    if check_rss:
        check("rss", growth <= rss_tol_mb * 1e6, detail)
    else:
        out.append({"check": "rss", "ok": True, "detail": detail + " (not checked)"})
    # Descriptors: the count at the end of the warm-up must hold to the end. Another thread's
    # momentary open (the system sampler reading /proc, a segment being rotated) can land in
    # one sample; a leak stays, so the check looks at the lowest count of the last tenth.
    fd0 = after[0]["fds"]
    tail = after[-max(3, len(after) // 10):]
    persistent = min(s["fds"] for s in tail) - fd0
    momentary = sum(1 for s in after if s["fds"] != fd0)
    check("fds", persistent == 0 and max(s["fds"] for s in after) - fd0 <= 2,
          f"{fd0} open after warm-up, {fd0 + persistent} at the end"
          + (f" ({momentary} samples saw another thread's momentary open)" if momentary else ""))
    return out, {"rss_warm": base, "rss_end": after[-1]["rss"], "rss_max_growth": growth,
                 "warm_step": after[0]["step"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("steps", nargs="?", type=int, default=1_000_000)
    ap.add_argument("--steps", dest="steps_opt", type=int, default=None)
    ap.add_argument("--sample-every", type=int, default=0,
                    help="steps between samples (default: steps / 200, at least 100)")
    ap.add_argument("--warmup-frac", type=float, default=0.1)
    ap.add_argument("--rss-tolerance-mb", type=float, default=10.0)
    ap.add_argument("--no-rss-check", action="store_true",
                    help="report the RSS growth without judging it (short runs)")
    ap.add_argument("--run-dir", default=None, help="keep the run here (default: a temp dir)")
    ap.add_argument("--json", default=None, help="write samples, checks and numbers here")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    steps = a.steps_opt or a.steps
    if steps < 100:
        print("soak_long: need at least 100 steps", file=sys.stderr)
        return 2
    sample_every = a.sample_every or max(100, steps // 200)
    tmp = None
    run_dir = a.run_dir
    if run_dir is None:
        tmp = tempfile.mkdtemp(prefix="ts-soak-")
        run_dir = os.path.join(tmp, "run")
    os.environ.pop("TRAINSCOPE_MONITORED", None)  # the hook's own system monitor
    try:
        print(f"soak: {steps:,} steps, sample every {sample_every:,}, run {run_dir}", flush=True)
        samples, summary = train(run_dir, steps, sample_every,
                                 0 if a.quiet else max(sample_every, steps // 20))
        back = read_back(run_dir, steps)
        checks, nums = verdicts(samples, summary, back, steps, a.warmup_frac,
                                a.rss_tolerance_mb, not a.no_rss_check)
        size = dir_bytes(run_dir)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"\n{'step':>10} {'time s':>8} {'RSS MiB':>9} {'fds':>4}")
    shown = samples if len(samples) <= 24 else [samples[i * (len(samples) - 1) // 20]
                                                 for i in range(21)]
    for s in shown:
        print(f"{s['step']:>10,} {s['t_s']:>8.1f} {s['rss'] / 2**20:>9.1f} {s['fds']:>4}")
    rate = steps / summary["train_s"]
    print(f"\n{steps:,} steps in {summary['train_s']:.0f} s ({rate:.0f} steps/s); run "
          f"{size / 2**20:.1f} MiB in {back['segments']} segments; "
          f"{back['records_written']:,} records written, "
          f"{back['system_samples']:,} system samples, {back['rule_events']} rule events; "
          f"queue high water {back['queue_high_water']}; fds after close "
          f"{summary['fds_after_close']}")
    for c in checks:
        print(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['check']:<6} {c['detail']}")
    ok = all(c["ok"] for c in checks)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"steps": steps, "train_s": summary["train_s"], "steps_per_s": rate,
                       "run_bytes": size, "samples": samples, "checks": checks,
                       "summary": summary, "read_back": back, **nums}, f, indent=1)
    print("soak: " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

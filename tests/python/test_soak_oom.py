"""A long run stays flat, a read-only run directory, an OOM-killer death (issue 17, parts 2, 6).

The soak here is short (bench/soak_long.py at a small step count: every step present, no drop,
no descriptor growth); `./dev soak-long` runs it for 1,000,000 steps and also judges resident
memory. The read-only and OOM tests need root (to drop privileges, to make a memory cgroup) and
skip where that is impossible."""
import ctypes
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import trainscope as ts

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY = sys.executable


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python")
    env.pop("TRAINSCOPE_MONITORED", None)
    env.pop("TRAINSCOPE_RUN_DIR", None)
    env.update(extra)
    return env


# ---- the soak, short ---------------------------------------------------------------------------
def test_short_soak_keeps_every_step_drops_nothing_and_leaks_no_descriptor(tmp_path):
    out = tmp_path / "soak.json"
    p = subprocess.run([PY, os.path.join(ROOT, "bench", "soak_long.py"), "12000",
                        "--sample-every", "200", "--no-rss-check", "--quiet", "--json", str(out)],
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(out.read_text())
    checks = {c["check"]: c for c in r["checks"]}
    assert checks["steps"]["ok"] and checks["drops"]["ok"] and checks["fds"]["ok"], checks
    assert r["read_back"]["steps_recorded"] == 12000
    assert r["read_back"]["records_dropped"] == 0 and r["read_back"]["io_errors"] == 0
    assert r["read_back"]["system_samples"] > 0  # the system monitor ran
    assert r["summary"]["action_stats"] is not None  # the default rules ran in-process
    assert r["summary"]["fds_after_close"] <= r["samples"][0]["fds"]  # close gave them back


# ---- a read-only run directory at start ---------------------------------------------------------
TRAIN_RO = textwrap.dedent("""
    import json, math, sys
    import torch
    import trainscope as ts
    from trainscope import _core
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.CrossEntropyLoss()
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    losses = []
    with ts.Hook(sys.argv[1], rules=list(_core.default_rule_names()),
                 save_interval=5) as hook:
        hook.register_module(model)
        hook.register_loss(crit)
        hook.register_optimizer(opt)
        for _ in range(80):
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            hook.save_scalar("custom", 1.0)
            if hook.should_stop:
                break
    print(json.dumps({"steps": hook.step_count, "losses": losses,
                      "writer_stats": hook.writer_stats(), "errors": hook.errors,
                      "error_count": hook.error_count}))
""")


def _without_dac_override():
    """preexec_fn: as root, the training loses the capabilities that ignore file modes
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER) from its bounding set, so after exec a
    0555 directory is as read-only to it as to any user; /root/.pyenv (0700, root's) where the
    interpreter may live stays reachable, which switching to uid 65534 would not allow."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")


@pytest.fixture
def readonly_base(tmp_path):
    """A directory the training can read but not write (0555), with the script."""
    base = str(tmp_path)
    with open(os.path.join(base, "train.py"), "w") as f:
        f.write(TRAIN_RO)
    ro = os.path.join(base, "ro")
    os.mkdir(ro)
    os.chmod(ro, 0o555)
    probe = subprocess.run([PY, "-c", f"open({os.path.join(ro, 'probe')!r}, 'w')"],
                           preexec_fn=_without_dac_override, capture_output=True)
    if probe.returncode == 0:
        os.chmod(ro, 0o755)
        pytest.skip("a 0555 directory is writable here (root without dropped capabilities)")
    yield base, ro
    os.chmod(ro, 0o755)


@pytest.mark.parametrize("where", ["parent", "run_dir"])
def test_read_only_run_directory_keeps_the_training_and_says_so_once(readonly_base, where):
    base, ro = readonly_base
    if where == "parent":
        run = os.path.join(ro, "run")  # cannot be created
    else:
        run = os.path.join(ro, "run")
        os.chmod(ro, 0o755)
        os.mkdir(run)
        os.chmod(run, 0o555)  # exists, owned by root, not writable by the training
        os.chmod(ro, 0o555)
    p = subprocess.run([PY, os.path.join(base, "train.py"), run],
                       preexec_fn=_without_dac_override, cwd=base, env=_env(),
                       capture_output=True, text=True, timeout=300)
    os.chmod(ro, 0o755)
    if os.path.isdir(run):
        os.chmod(run, 0o755)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["steps"] == 80 and len(r["losses"]) == 80  # ran to its end
    assert all(l == l and l < 10 for l in r["losses"])  # normal results
    lines = [l for l in p.stderr.splitlines() if "trainscope" in l]
    said = [l for l in lines if "cannot write" in l]
    assert len(said) == 1, p.stderr  # one warning line
    assert len(lines) == 1, p.stderr  # and nothing else from trainscope
    assert "Traceback" not in p.stderr
    # The drops are counted: every step's record and every save_scalar value.
    assert r["errors"] == {"unwritable run directory": 1}, r
    ws = r["writer_stats"]
    # 80 StepRecords and the 80 values the scalars collection saves (every step)
    assert ws["records_written"] == 0 and ws["records_dropped"] == 80 + 80, ws
    assert "Permission denied" in ws["error"]
    assert not os.path.exists(os.path.join(run, "run.json"))


def test_trainscope_run_with_a_read_only_run_directory_still_runs_the_training(readonly_base,
                                                                               cli):
    base, ro = readonly_base
    p = subprocess.run([cli, "run", "--out", os.path.join(ro, "run"), "--", PY, "-c",
                        "import sys; print('trained'); sys.exit(3)"],
                       preexec_fn=_without_dac_override, cwd=base, env=_env(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr  # the training's own status
    assert p.stdout.strip() == "trained"
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "running the training unmonitored" in lines[0], p.stderr


# ---- an OOM-killer death -----------------------------------------------------------------------
LEAK = textwrap.dedent("""
    import time
    import torch
    import trainscope as ts
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.MSELoss()
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    kept = []
    with ts.Hook(system_monitor_interval_ms=0) as hook:  # `trainscope run` monitors
        hook.register_module(model)
        hook.register_loss(crit)
        for step in range(100000):
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            kept.append(torch.ones(2 * 1024 * 1024))  # 8 MiB a step, kept: a leak
            time.sleep(0.05)
""")

CGROUP_V1 = "/sys/fs/cgroup/memory"


@pytest.fixture
def memory_cgroup():
    """A fresh cgroup v1 memory cgroup limited to 640 MiB (root; skipped where impossible)."""
    if os.geteuid() != 0 or not os.path.isfile(os.path.join(CGROUP_V1, "cgroup.procs")):
        pytest.skip("needs root and a cgroup v1 memory hierarchy")
    path = os.path.join(CGROUP_V1, f"trainscope-oom-test-{os.getpid()}")
    try:
        os.mkdir(path)
    except OSError as e:
        pytest.skip(f"cannot create a memory cgroup: {e}")
    limit = str(640 * 1024 * 1024)
    try:
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(limit)
        sw = os.path.join(path, "memory.memsw.limit_in_bytes")
        if os.path.exists(sw):  # no swapping around the limit
            with open(sw, "w") as f:
                f.write(limit)
        yield path
    finally:
        # Its processes are gone once the test's run has returned; rmdir may race the reaping.
        for _ in range(100):
            try:
                os.rmdir(path)
                break
            except OSError:
                time.sleep(0.1)


def test_oom_killer_death_is_named_by_run_and_by_the_report(memory_cgroup, tmp_path, cli):
    script = tmp_path / "leak.py"
    script.write_text(LEAK)
    run = str(tmp_path / "run")
    procs = os.path.join(memory_cgroup, "cgroup.procs")
    # Only the training enters the cgroup (a shell that moves itself, then execs Python):
    # with `trainscope run` inside too, the kernel, finding the limit still exceeded while the
    # killed training's memory was being freed, once killed trainscope run as well.
    p = subprocess.run([cli, "run", "--out", run, "--interval-ms", "100", "--no-instrument",
                        "--", "sh", "-c", f'echo $$ > {procs} && exec "$0" "$1"', PY,
                        str(script)], env=_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 137, p.stderr  # the child's status: killed by SIGKILL
    assert "killed by the kernel's OOM killer" in p.stderr, p.stderr
    r = ts.open_run(run)
    exited = r.events("child_exited")
    assert len(exited) == 1 and exited[0]["oom_killed"] is True, exited
    assert exited[0]["ended_by"] == "oom_killer"
    assert exited[0]["oom_kill_after"] > exited[0]["oom_kill_before"]
    # The training recorded steps before it died (its crash journal keeps the last ones).
    assert len(r.steps()) > 5
    # The report: a critical finding with the memory curve before the kill.
    rep = subprocess.run([cli, "report", run, "--no-history", "--no-color"],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    assert "Killed by the OOM killer" in rep.stdout, rep.stdout
    assert "training processes' memory (RSS)" in rep.stdout, rep.stdout
    summary = json.loads(open(os.path.join(run, "report", "summary.json")).read())
    oom = [f for f in summary["findings"] if f["rule"] == "oom_killed"]
    assert len(oom) == 1 and oom[0]["severity"] == "critical", summary["findings"]
    # Its value is the training's peak memory (RSS, which also counts shared library pages the
    # cgroup was not charged for), its threshold the limit the sampler read from the cgroup.
    assert oom[0]["value"] > 300 * 2**20, oom[0]
    assert "before the kill, peak" in oom[0]["evidence"], oom[0]
    # What held it: the tree's processes at the last sample, the training named by its pid.
    started = r.events("child_started")[0]
    assert f"pid {started['pid']} (the training)" in oom[0]["evidence"], oom[0]
    assert "at the last sample (" in oom[0]["evidence"], oom[0]
    if oom[0]["threshold"] is not None:
        assert oom[0]["threshold"] == 640 * 2**20, oom[0]
        assert "limit 640 MiB" in oom[0]["evidence"], oom[0]

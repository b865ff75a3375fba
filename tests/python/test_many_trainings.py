"""Several trainings under one `trainscope run` (a driver that launches them as subprocesses):
two at the same time, then two one after the other. Each gets its own stream (worker-0, then
worker-0-t2, -t3, -t4), none is lost or mixed with another, and the run's summary names what
each did (docs/python.md, "Several trainings under one run")."""
import os
import subprocess
import sys
import textwrap

import trainscope as ts

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "plain_digits.py")


def test_concurrent_and_sequential_trainings_each_get_their_own_stream(cli, tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import subprocess, sys
        script = {SCRIPT!r}
        def start(steps):
            return subprocess.Popen([sys.executable, script, "--steps", str(steps)],
                                    stdout=subprocess.DEVNULL)
        a, b = start(30), start(40)           # at the same time
        assert a.wait() == 0 and b.wait() == 0
        for steps in (50, 60):                # one after the other
            assert start(steps).wait() == 0
        print("driver done")
    """))
    run = tmp_path / "run"
    p = subprocess.run([cli, "run", "--out", str(run), "--", sys.executable, str(driver)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "driver done" in p.stdout

    r = ts.open_run(str(run))
    workers = sorted(r.workers())
    assert workers == ["worker-0", "worker-0-t2", "worker-0-t3", "worker-0-t4"], workers
    steps = {w: len(r.step_records(worker=w)) for w in workers}
    # the two concurrent ones took worker-0 and -t2 in either order; the later ones in turn
    assert sorted([steps["worker-0"], steps["worker-0-t2"]]) == [30, 40], steps
    assert steps["worker-0-t3"] == 50 and steps["worker-0-t4"] == 60, steps
    for w in workers:  # each stream is one training: its losses, once per step
        s, _ = r.scalar("losses/loss", worker=w)
        assert len(s) == steps[w] and len(set(s)) == len(s), (w, s)
    assert not r.read_stats().get("corrupt_regions"), r.read_stats()

    # The summary names each training with its stream; nothing says LOCK.
    captured = [line for line in p.stderr.splitlines() if "capturing model" in line]
    assert len(captured) >= 4, p.stderr
    for w in ("worker-0-t2", "worker-0-t3", "worker-0-t4"):
        assert any(f"into stream {w}" in line for line in captured), (w, p.stderr)
    assert "LOCK" not in p.stderr, p.stderr

"""`trainscope run` on an interactive terminal: the training gets the terminal (input(), pdb,
breakpoint() read it), and a training stopped by a job-control signal is not left stopped.

Each test runs `trainscope run` as the session leader of a fresh pseudo-terminal (its
controlling terminal, trainscope in its foreground), as a shell would start it."""
import fcntl
import os
import select
import subprocess
import sys
import termios
import textwrap
import time

import pytest


def _start(cli, tmp_path, body, extra=()):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    master, slave = os.openpty()

    def controlling_tty():  # in the child, after setsid: the pty becomes its terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([cli, "run", "--out", str(tmp_path / "run"), "--quiet", *extra, "--",
                          sys.executable, str(script)],
                         stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                         preexec_fn=controlling_tty, close_fds=True)
    os.close(slave)
    return p, master


def _read_until(master, p, want, timeout_s=120.0):
    """What the terminal showed, once it holds `want` (bounded by polling)."""
    out = b""
    deadline = time.monotonic() + timeout_s
    while want.encode() not in out:
        if time.monotonic() > deadline:
            p.kill()
            pytest.fail(f"no {want!r} on the terminal; it showed:\n{out.decode(errors='replace')}")
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every process of the terminal is gone
                chunk = b""
            if not chunk and p.poll() is not None:
                pytest.fail(f"exited ({p.returncode}) before {want!r}:\n"
                            f"{out.decode(errors='replace')}")
            out += chunk
    return out.decode(errors="replace")


def _wait_exit(master, p, timeout_s=120.0):
    deadline = time.monotonic() + timeout_s
    out = b""
    while p.poll() is None:
        if time.monotonic() > deadline:
            p.kill()
            p.wait()
            pytest.fail("trainscope run did not finish (the training is stopped for good?):\n"
                        + out.decode(errors="replace"))
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                out += os.read(master, 4096)
            except OSError:
                pass
    os.close(master)
    return p.returncode, out.decode(errors="replace")


INPUT = """
    name = input("name? ")
    print("got", name, flush=True)
"""

PDB = """
    x = 41
    breakpoint()
    print("after", x + 1, flush=True)
"""


@pytest.mark.parametrize("extra", [(), ("--no-instrument",)], ids=["capture", "no-instrument"])
@pytest.mark.parametrize("what", ["input", "pdb"])
def test_a_script_reading_the_terminal_gets_it(cli, tmp_path, extra, what):
    p, master = _start(cli, tmp_path, INPUT if what == "input" else PDB, extra)
    if what == "input":
        _read_until(master, p, "name? ")
        os.write(master, b"hello\n")
        code, out = _wait_exit(master, p)
        assert code == 0 and "got hello" in out, out
    else:
        _read_until(master, p, "(Pdb)")
        os.write(master, b"p x\n")
        _read_until(master, p, "41")
        os.write(master, b"c\n")
        code, out = _wait_exit(master, p)
        assert code == 0 and "after 42" in out, out


def test_a_training_stopped_by_job_control_signals_goes_on(cli, tmp_path):
    """SIGTSTP (Ctrl-Z) and SIGTTIN stop the training; trainscope run notices (a shell's job
    would stop with it; here nothing above it can stop it: no job control, an orphaned
    process group) and continues it with the terminal instead of waiting forever."""
    p, master = _start(cli, tmp_path, """
        import os, signal
        os.kill(os.getpid(), signal.SIGTSTP)
        print("after tstp", flush=True)
        os.kill(os.getpid(), signal.SIGTTIN)
        print("after ttin", flush=True)
    """)
    code, out = _wait_exit(master, p)
    assert code == 0 and "after tstp" in out and "after ttin" in out, out

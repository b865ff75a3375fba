"""A run with thousands of scalar names (issue 29): `trainscope inspect` lists the first few in
the terminal with a count of the rest, and every one in `--json`. Nothing here is timed; the
time is bench/inspect_names.py's (docs/performance.md)."""
import json
import subprocess

from trainscope import _core
from conftest import cli_path

NAMES = 5000
TIMEOUT_S = 120  # a bound against a hang, not a measure: the old quadratic loop needed ~6 s


def write_named_run(d: str, names: int) -> list:
    _core.create_or_open_run(d, name="many-names")
    w = _core.Writer(d)
    all_names = [f"scalars/metric_{i:06d}" for i in range(names)]
    for n in all_names:
        w.add_scalar(n, 0, 0, 0, 1.0)
    w.add_step(0, 0, 0, 1000, 2000)
    assert w.close() is None
    return all_names


def test_inspect_caps_scalar_names_in_the_terminal_and_lists_all_in_json(tmp_path):
    d = str(tmp_path / "run")
    names = write_named_run(d, NAMES)
    out = subprocess.run([cli_path(), "inspect", d], capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"scalars: {NAMES}" in text
    assert names[0] in text and names[19] in text
    assert names[20] not in text and names[-1] not in text
    assert f"... and {NAMES - 20:,} more; --json lists all" in text
    assert max(len(line) for line in text.splitlines()) < 200  # not one line of every name

    js = subprocess.run([cli_path(), "inspect", d, "--json"], capture_output=True, text=True,
                        timeout=TIMEOUT_S)
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout)["scalars"] == names

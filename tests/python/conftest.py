"""Shared fixtures for the trainscope Python tests. Trainings are tiny (CPU, 1 thread)."""
import os
import pathlib
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
try:
    import trainscope  # noqa: F401  (installed: ./dev installs it into .venv)
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402

torch.set_num_threads(1)

# Runs join the history when they end: the tests' go to a history of their own, never the
# user's (~/.local/share/trainscope/history.db). Subprocesses inherit it.
if "TRAINSCOPE_HOME" not in os.environ:
    import tempfile
    os.environ["TRAINSCOPE_HOME"] = tempfile.mkdtemp(prefix="trainscope-test-home-")


@pytest.fixture
def run_dir(tmp_path):
    return str(tmp_path / "run")


@pytest.fixture
def tiny():
    """A tiny MLP, its optimizer, criterion and a list of batches (deterministic)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    crit = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 8, generator=g), torch.randint(0, 3, (8,), generator=g))
               for _ in range(40)]
    return model, opt, crit, batches


def train(hook, model, opt, crit, batches, steps=None, explicit_step=False):
    """A standard loop; returns the losses seen by the training."""
    losses = []
    for i, (x, y) in enumerate(batches[:steps] if steps else batches):
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if explicit_step:
            hook.step()
    return losses


def cli_path() -> str:
    """Path of the trainscope CLI binary (TRAINSCOPE_BIN), or skip the test."""
    path = os.environ.get("TRAINSCOPE_BIN")
    if not path or not os.path.exists(path):
        pytest.skip("TRAINSCOPE_BIN is not set to the trainscope CLI")
    return path


def live_writer_path() -> str:
    """Path of the live_writer test tool (built next to the CLI), or skip the test."""
    cli = pathlib.Path(cli_path()).resolve()
    for cand in [os.environ.get("TRAINSCOPE_LIVE_WRITER", ""),
                 cli.parent.parent.parent / "tests" / "tools" / "live_writer",
                 cli.parent / "tests" / "tools" / "live_writer"]:
        if cand and os.path.exists(cand):
            return str(cand)
    pytest.skip("live_writer test tool not built")


@pytest.fixture
def cli():
    """Path of the trainscope CLI binary (TRAINSCOPE_BIN), or skip."""
    return cli_path()


# ---- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), for tests that check checksums
# independently of the core (segment records, TensorBoard event files) -------------------------
_CRC32C_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

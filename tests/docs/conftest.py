"""Sybil over ../../README.md and ../../docs/*.md: every fenced block is one test
(tests/docs/docblocks.py says how each language runs and how a block is marked not runnable).

The fixtures supply what an example leaves out:
- `trainscope` and `python` on PATH (TRAINSCOPE_BIN points at the CLI; else build/'s);
- a finished run, made once per session by a real tiny training with ts.Hook (train.py --hook),
  copied as runs/exp1 into the folder of every block that reads a run;
- train.py, rules.json and typo.json (the configurations the docs show in comments) there; TRAINSCOPE_HOME in the session's temp dir (history);
- for Python blocks, the objects a snippet uses without making them (model, criterion, opt,
  loader, x, y, hook, ...: see Objects), and `ts`/`torch` for fragments: a block with import
  statements of its own must import what it uses.
"""
import ast
import contextlib
import dataclasses
import json
import os
import pathlib
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from typing import Dict, List, Optional

import pytest

Sybil = pytest.importorskip("sybil", reason="sybil (requirements/dev.txt) needs Python 3.11+").Sybil

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
try:
    import trainscope  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))

import docblocks  # noqa: E402
import train as train_script  # noqa: E402

PATTERNS = ["README.md", "docs/*.md"]
RUN = "runs/exp1"          # what the examples call their run (RUN in a synopsis or command)
COMMAND_TIMEOUT_S = 300


def evaluate(example):
    env: "DocsEnv" = example.namespace["_docs_env"]
    env.evaluate(example.parsed)


SYBIL = Sybil(parsers=[docblocks.DocBlockParser(evaluate)], path="../..", patterns=PATTERNS)
SYBIL.path = SYBIL.path.resolve()   # should_parse compares resolved paths


def documents() -> List[pathlib.Path]:
    paths = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    return [p for p in paths if SYBIL.should_parse(p)]


def examples():
    """(id, sybil Example) of every block of every document, in document order."""
    out = []
    for path in documents():
        for ex in SYBIL.parse(path):
            b = ex.parsed
            out.append((f"{path.relative_to(ROOT)}:{b.line}:{b.kind}", ex))
    return out


def pytest_generate_tests(metafunc):
    if "doc_example" in metafunc.fixturenames:
        found = examples()
        metafunc.parametrize("doc_example", [e for _, e in found], ids=[i for i, _ in found])


# ---- the objects a Python snippet may use without making them --------------------------------

class Objects:
    """Lazily made stand-ins for the user's own objects, one set per block. `flavour` picks
    what `model` is: a plain nn.Module, a LightningModule or a Hugging Face model."""

    def __init__(self, flavour: str):
        self.flavour = flavour
        self._made: Dict[str, object] = {}

    def get(self, name: str):
        if name not in self._made:
            self._made[name] = getattr(self, "make_" + name)()
        return self._made[name]

    def names(self):
        return {n[5:] for n in dir(self) if n.startswith("make_")}

    def make_model(self):
        import torch
        torch.manual_seed(0)
        if self.flavour == "lightning":
            return _lightning_module()
        if self.flavour == "transformers":
            import transformers
            config = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                             num_attention_heads=2, intermediate_size=32,
                                             max_position_embeddings=16, num_labels=2)
            return transformers.BertForSequenceClassification(config)
        return train_script.MLP()

    def make_criterion(self):
        import torch
        return torch.nn.CrossEntropyLoss()

    make_crit = make_criterion

    def make_opt(self):
        import torch
        return torch.optim.SGD(self.get("model").parameters(), lr=0.1)

    def make_optimizer(self):
        return self.get("opt")

    def make_scheduler(self):
        import torch
        return torch.optim.lr_scheduler.StepLR(self.get("opt"), step_size=10)

    def make_loader(self):
        import torch
        xs = torch.cat([x for x, _ in train_script.data()])
        ys = torch.cat([y for _, y in train_script.data()])
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys),
                                           batch_size=train_script.BATCH)

    make_train_loader = make_loader
    make_val_loader = make_loader

    def make_x(self):
        return train_script.data()[0][0]

    def make_y(self):
        return train_script.data()[0][1]

    def make_batch_for(self):
        batches = train_script.data()
        return lambda step: batches[step % len(batches)]

    def make_total_steps(self):
        return 12

    make_total = make_total_steps

    def make_step(self):
        return 10      # a step of the prepared run with raw gradients (save_interval 5)

    def make_out(self):
        return RUN

    def make_hook(self):
        import trainscope as ts
        # nothing registered: the snippet registers what it shows
        return ts.Hook(out_dir="runs/hook", save_interval=5, system_monitor_interval_ms=0)

    def make_ckpt(self):
        import trainscope as ts
        return ts.Checkpointer("runs/hook/checkpoints", self.get("model"), self.get("opt"),
                               hook=self.get("hook"), every_steps=5)

    def make_train(self):
        return _Tokens(32)

    def make_val(self):
        return _Tokens(16)


def _lightning_module():
    import lightning.pytorch as pl
    import torch

    class LitMLP(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = train_script.MLP()
            self.loss = torch.nn.CrossEntropyLoss()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, i):
            x, y = batch
            return self.loss(self(x), y)

        def validation_step(self, batch, i):
            x, y = batch
            self.log("val_loss", self.loss(self(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return LitMLP()


class _Tokens:
    """A made-up token classification data set for the tiny BERT (no download)."""

    def __init__(self, n):
        import torch
        g = torch.Generator().manual_seed(n)
        self.ids = torch.randint(1, 40, (n, 12), generator=g)
        self.labels = (self.ids == 7).any(1).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        import torch
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(12, dtype=torch.long),
                "labels": self.labels[i]}


class _Names(ast.NodeVisitor):
    """Names read before the block binds them, visited in evaluation order (the value of an
    assignment before its targets: `model = prepare(model)` reads the user's model)."""

    def __init__(self):
        self.bound, self.free, self.imports = set(), set(), False

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            if node.id not in self.bound:
                self.free.add(node.id)
        else:
            self.bound.add(node.id)

    def visit_Assign(self, node):
        self.visit(node.value)
        for t in node.targets:
            self.visit(t)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_AugAssign(self, node):
        self.visit(node.value)
        if isinstance(node.target, ast.Name) and node.target.id not in self.bound:
            self.free.add(node.target.id)
        self.visit(node.target)

    def visit_For(self, node):
        self.visit(node.iter)
        self.visit(node.target)
        for n in node.body + node.orelse:
            self.visit(n)

    def visit_withitem(self, node):
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self.visit(node.optional_vars)

    def _bind_def(self, node):
        self.bound.add(node.name)
        self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _bind_def

    def visit_arg(self, node):
        self.bound.add(node.arg)

    def _import(self, node):
        self.imports = True
        for a in node.names:
            self.bound.add((a.asname or a.name).split(".")[0])

    visit_Import = visit_ImportFrom = _import


def python_names(source: str):
    """(names the block reads before it binds them, whether it has import statements)."""
    v = _Names()
    v.visit(ast.parse(source))
    return v.free, v.imports


def flavour_of(source: str) -> str:
    if re.search(r"^\s*(import|from)\s+(lightning|pytorch_lightning)\b", source, re.M):
        return "lightning"
    if re.search(r"^\s*(import|from)\s+transformers\b", source, re.M):
        return "transformers"
    return "plain"


def session_chunks(source: str):
    """A `>>>` session as [(statement, expected output)]."""
    chunks, stmt, expected = [], None, []
    for line in source.splitlines():
        if line.startswith(">>> "):
            if stmt is not None:
                chunks.append((stmt, "\n".join(expected)))
            stmt, expected = line[4:], []
        elif line.startswith("... ") and stmt is not None and not expected:
            stmt += "\n" + line[4:]
        elif stmt is not None:
            expected.append(line)
    if stmt is not None:
        chunks.append((stmt, "\n".join(expected)))
    return chunks


def _norm(text: str) -> str:
    return " ".join(text.split())


# ---- the environment of one session --------------------------------------------------------

@dataclasses.dataclass
class DocsEnv:
    bin: str
    root: pathlib.Path              # the session's folder
    environ: Dict[str, str]
    prepared: pathlib.Path          # the finished run
    history_db: pathlib.Path        # a history with the prepared run in it
    counter: int = 0

    def workdir(self, block, with_run: bool) -> pathlib.Path:
        self.counter += 1
        d = self.root / f"block-{self.counter:03d}-{pathlib.Path(block.path).stem}-{block.line}"
        d.mkdir()
        shutil.copy(HERE / "train.py", d / "train.py")
        (d / "rules.json").write_text(json.dumps(
            {"rules": [{"name": "low_gpu_utilization", "params": {"patience": 200}}]}))
        (d / "typo.json").write_text(json.dumps(
            {"rules": [{"name": "overfit", "params": {"ratio": 2}}]}))
        if with_run:
            shutil.copytree(self.prepared, d / RUN)
        return d

    def evaluate(self, block):
        if block.kind == "error":
            pytest.fail(f"{block.where}: {block.reason}", pytrace=False)
        if block.kind == "skip":
            pytest.skip(f"{block.where}: {block.reason}")
        getattr(self, "run_" + block.kind)(block)

    # -- python
    def run_python(self, block):
        free, has_imports = python_names(block.source)
        makes_run = bool(re.search(r"ts\.Hook\(|TrainscopeCallback\(", block.source))
        cwd = self.workdir(block, with_run=not makes_run)
        objects = Objects(flavour_of(block.source))
        with _chdir(cwd):
            ns = {"__name__": "__docs__"}
            if not has_imports:       # a fragment of the user's script, which imports these
                import torch
                import trainscope as ts
                ns.update(ts=ts, torch=torch)
            for name in sorted(free & objects.names()):
                ns[name] = objects.get(name)
            code = compile("\n" * block.line + block.source, block.path, "exec")
            try:
                exec(code, ns)
            finally:
                _close_hooks(ns)

    def run_pysession(self, block):
        cwd = self.workdir(block, with_run=False)
        objects = Objects("plain")
        with _chdir(cwd):
            import torch
            import trainscope as ts
            ns = {"__name__": "__docs__", "ts": ts, "torch": torch}
            try:
                for stmt, expected in session_chunks(block.source):
                    for name in sorted(python_names(stmt)[0] & objects.names()):
                        ns.setdefault(name, objects.get(name))
                    try:
                        try:
                            code = compile(stmt, block.path, "eval")
                        except SyntaxError:
                            exec(compile(stmt, block.path, "exec"), ns)
                            actual = ""
                        else:
                            value = eval(code, ns)
                            actual = "" if value is None else repr(value)
                    except Exception as e:  # the session shows the exception's message
                        actual = f"{type(e).__name__}: {e}"
                    assert _norm(actual) == _norm(expected), (
                        f"{block.where}: >>> {stmt}\ndocumented: {expected}\nactual:     {actual}")
            finally:
                _close_hooks(ns)

    # -- shell
    def run_shell(self, block):
        cmds = docblocks.shell_commands(block.source, block.language)
        assert cmds, f"{block.where}: a shell block without a command"
        for argv, _ in cmds:
            if argv[0] != "trainscope":
                pytest.fail(f"{block.where}: {' '.join(argv)!r}: only trainscope commands run "
                            "here; mark the block <!-- docs-test: skip reason=\"...\" -->",
                            pytrace=False)
        makes_run = any(argv[1:2] == ["run"] for argv, _ in cmds)
        cwd = self.workdir(block, with_run=not makes_run)
        for argv, shown in cmds:
            argv = [self.bin] + [re.sub(r"\bRUN\b", RUN, a) for a in argv[1:]]
            if argv[1] == "serve":
                self.check_serve(block, argv, cwd)
                continue
            if argv[1] == "stop" and block.exit_code == 0:
                # the fixture's run has ended: `stop` must say there is no job (docs/cli.md: 6)
                r = subprocess.run(argv, cwd=cwd, env=self.environ, capture_output=True,
                                   text=True, timeout=COMMAND_TIMEOUT_S)
                assert r.returncode == 6 and "no running job" in r.stderr, (
                    f"{block.where}: {' '.join(argv[1:])} on an ended run exited "
                    f"{r.returncode}\n{r.stderr[-3000:]}")
                continue
            r = subprocess.run(argv, cwd=cwd, env=self.environ, capture_output=True, text=True,
                               timeout=COMMAND_TIMEOUT_S)
            assert r.returncode == block.exit_code, (
                f"{block.where}: {' '.join(argv[1:])} exited {r.returncode}, documented "
                f"{block.exit_code}\nstdout: {r.stdout[-3000:]}\nstderr: {r.stderr[-3000:]}")
            assert docblocks.output_matches(shown, r.stdout + r.stderr), (
                f"{block.where}: {' '.join(argv[1:])}: the documented output\n{shown}\n"
                f"is not what it printed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")

    def check_serve(self, block, argv, cwd):
        """A server runs until stopped: it must answer /api/runs with the run, then stop."""
        if "--port" in argv:   # never the documented fixed port: the machine is shared
            i = argv.index("--port")
            argv = argv[:i] + argv[i + 2:]
        port = _free_port()
        p = subprocess.Popen(argv + ["--port", str(port)], cwd=cwd, env=self.environ,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline, body, err = time.monotonic() + 60, None, None
            while time.monotonic() < deadline and p.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs",
                                                timeout=5) as r:
                        body = r.read().decode()
                        break
                except OSError as e:
                    err = e
                    time.sleep(0.2)
            assert body is not None, f"{block.where}: serve did not answer ({err}); " \
                                     f"exit {p.poll()}"
            assert "exp1" in body, f"{block.where}: /api/runs lacks the run: {body[:500]}"
        finally:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # -- data blocks
    def run_json(self, block):
        try:
            json.loads(block.source)
        except ValueError as e:
            pytest.fail(f"{block.where}: not JSON ({e}); mark a sketch with "
                        "<!-- docs-test: skip reason=\"...\" -->", pytrace=False)

    def run_yaml(self, block):
        import yaml
        yaml.safe_load(block.source)

    def run_config(self, block):
        cwd = self.workdir(block, with_run=True)
        f = cwd / f"doc-config.{block.language}"
        f.write_text(block.source)
        r = subprocess.run([self.bin, "watch", RUN, "--config", str(f)], cwd=cwd,
                           env=self.environ, capture_output=True, text=True,
                           timeout=COMMAND_TIMEOUT_S)
        assert r.returncode == block.exit_code, (
            f"{block.where}: watch --config exited {r.returncode}\n{r.stdout[-3000:]}\n"
            f"{r.stderr[-3000:]}")

    def run_sql(self, block):
        db = sqlite3.connect(":memory:")
        db.executescript(block.source)
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'"):
            documented = [r[1] for r in db.execute(f"PRAGMA table_info({name})")]
            real_db = sqlite3.connect(str(self.history_db))
            real = [r[1] for r in real_db.execute(f"PRAGMA table_info({name})")]
            assert documented == real, f"{block.where}: table {name}: documented columns " \
                                       f"{documented}, the history has {real}"

    def run_keys(self, block):
        with open(self.prepared / block.keys_of) as f:
            real = set(json.load(f))
        documented = set(docblocks.outline_keys(block.source, block.language))
        assert documented == real, (
            f"{block.where}: the outline of {block.keys_of} lists {sorted(documented)}; "
            f"undocumented: {sorted(real - documented)}, not in the file: "
            f"{sorted(documented - real)}")

    # -- synopsis
    def run_synopsis(self, block):
        lines = docblocks.synopsis_lines(block.source)
        assert lines, f"{block.where}: a synopsis without a `trainscope CMD` line"
        documented: Dict[str, set] = {}
        for line in lines:
            documented.setdefault(docblocks.synopsis_command(line), set()).update(
                docblocks.synopsis_flags(line))
        for cmd, flags in documented.items():   # and the other way: no flag left out
            r = subprocess.run([self.bin, "help", cmd], env=self.environ, capture_output=True,
                               text=True, timeout=60)
            left_out = sorted(set(docblocks.usage_flags(r.stdout + r.stderr)) - flags)
            assert not left_out, (f"{block.where}: `trainscope help {cmd}` has {left_out}, "
                                  f"which the synopsis leaves out")
        for line in lines:
            cmd = docblocks.synopsis_command(line)
            r = subprocess.run([self.bin, "help", cmd], env=self.environ, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 0, f"{block.where}: trainscope help {cmd}: {r.stderr}"
            text = r.stdout + r.stderr
            missing = [f for f in docblocks.synopsis_flags(line)
                       if not re.search(re.escape(f) + r"(?![\w-])", text)]
            assert not missing, (f"{block.where}: `{line}` names {missing}, which "
                                 f"`trainscope help {cmd}` does not know:\n{text}")


def _close_hooks(ns):
    import trainscope as ts
    for v in list(ns.values()):
        if isinstance(v, ts.Hook):
            with contextlib.suppress(Exception):
                v.close()


@contextlib.contextmanager
def _chdir(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli() -> Optional[str]:
    for cand in [os.environ.get("TRAINSCOPE_BIN", ""), str(ROOT / "build/tools/cli/trainscope")]:
        if cand and os.path.exists(cand):
            return os.path.abspath(cand)
    return None


@pytest.fixture(scope="session")
def docs_parts():
    """This module (for test_docs_meta.py, which cannot import it by name)."""
    return sys.modules[__name__]


@pytest.fixture(scope="session")
def docs_env(tmp_path_factory):
    cli = _cli()
    if cli is None:
        pytest.skip("TRAINSCOPE_BIN is not set to the trainscope CLI (and build/ has none)")
    root = tmp_path_factory.mktemp("docs")
    bindir = root / "bin"
    bindir.mkdir()
    os.symlink(cli, bindir / "trainscope")
    # a script, not a link: a venv's python finds its pyvenv.cfg by the path it is started as
    (bindir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bindir / "python").chmod(0o755)
    home = root / "home"
    home.mkdir()
    environ = dict(os.environ)
    environ.update(PATH=f"{bindir}{os.pathsep}{environ.get('PATH', '')}",
                   PYTHONPATH=str(ROOT / "python") + os.pathsep + environ.get("PYTHONPATH", ""),
                   TRAINSCOPE_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                   OMP_NUM_THREADS="1")
    # in-process blocks: the same history, and no Hugging Face hub (nothing is downloaded)
    saved = {k: os.environ.get(k) for k in ("TRAINSCOPE_HOME", "HF_HUB_OFFLINE",
                                            "TRANSFORMERS_OFFLINE")}
    os.environ.update(TRAINSCOPE_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    prepared_root = root / "prepared"
    prepared_root.mkdir()
    prepared = prepared_root / RUN
    # in this process: one import of torch less (each costs seconds on a busy machine)
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        train_script.main(["--hook", str(prepared)])
    history = root / "history.db"
    subprocess.run([cli, "report", str(prepared), "--history", str(history),
                    "--out", str(root / "prepared-report.html")],
                   env=environ, check=True, capture_output=True, timeout=COMMAND_TIMEOUT_S)
    yield DocsEnv(bin=cli, root=root, environ=environ, prepared=prepared, history_db=history)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v

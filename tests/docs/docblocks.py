"""The Sybil parser of trainscope's Markdown: every fenced block of README.md and docs/*.md
becomes one example, and each example either runs or carries a reason why it cannot.

A block is run according to its language:

  python              executed (a block opening with ``>>>`` is a session: each statement's
                      shown output or exception message is compared)
  sh, console, bash   every command runs (``trainscope ...`` only) in a fresh folder and must
                      exit 0, or the code of ``<!-- docs-test: exit=N -->``
  json, yaml          parsed; ``<!-- docs-test: config -->`` also runs it as
                      ``trainscope watch RUN --config FILE``
  sql                 executed by sqlite; a CREATE TABLE is compared with the real table

A comment right before a block (blank lines allowed between) says what else to do with it:

  <!-- docs-test: skip reason="needs a GPU" -->   not run; a skip without a reason fails
  <!-- docs-test: synopsis -->                    a usage synopsis: every --flag it names must
                                                  be in `trainscope help CMD`, and every flag
                                                  of that help's usage in the synopsis
  <!-- docs-test: config -->                      see json/yaml above
  <!-- docs-test: exit=76 -->                     the exit code every command must have
  <!-- docs-test: keys=report/summary.json -->    an outline of a JSON file: the words that
                                                  start its lines (in a json block: its
                                                  "key": lines) are the file's top-level
                                                  keys, all of them (in the finished run)

Any other block (no language, cpp, ...) must be marked, or it is a failing example.
"""
import dataclasses
import re
import shlex
from typing import Dict, Iterable, List, Optional, Tuple

from sybil import Document, Region
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

# a comment on a line of its own (one quoted in the text, `<!-- docs-test: ... -->`, is none)
DIRECTIVE = re.compile(r"^[ \t]*<!--\s*docs-test:(?P<args>.*?)-->", re.S | re.M)
KNOWN_KEYS = {"skip", "reason", "synopsis", "config", "exit", "keys"}
SHELL_LANGUAGES = {"sh", "console", "bash", "shell"}


class BlockError(Exception):
    """A block that is neither runnable nor properly marked (shown as a failing example)."""


@dataclasses.dataclass
class Block:
    path: str
    line: int                  # 1-based line of the opening fence
    language: str
    source: str
    kind: str                  # python, pysession, shell, json, yaml, sql, synopsis, config,
                               # skip, error
    reason: str = ""           # skip: why not run; error: what is wrong
    exit_code: int = 0
    keys_of: str = ""          # keys: the JSON file of the finished run the block outlines

    @property
    def runnable(self) -> bool:
        return self.kind not in ("skip", "error")

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def parse_directive(text: str) -> Dict[str, str]:
    """`skip reason="x y" exit=2` -> {"skip": "", "reason": "x y", "exit": "2"}."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise BlockError(f"docs-test comment {text.strip()!r} does not parse: {e}")
    out = {}
    for w in words:
        key, _, value = w.partition("=")
        if key not in KNOWN_KEYS:
            raise BlockError(f"docs-test comment: unknown key {key!r} (known: "
                             f"{', '.join(sorted(KNOWN_KEYS))})")
        out[key] = value
    return out


def classify(path: str, line: int, language: str, source: str,
             directive: Optional[str]) -> Block:
    b = Block(path, line, language, source, kind="error")
    try:
        d = parse_directive(directive) if directive is not None else {}
        if "exit" in d:
            if not re.fullmatch(r"\d+", d["exit"]):
                raise BlockError(f"docs-test comment: exit={d['exit']!r} is not a number")
            b.exit_code = int(d["exit"])
        if "skip" in d:
            if not d.get("reason", "").strip():
                raise BlockError("docs-test skip without a reason: write "
                                 "<!-- docs-test: skip reason=\"why it cannot run here\" -->")
            b.kind, b.reason = "skip", d["reason"].strip()
        elif "reason" in d:
            raise BlockError("docs-test comment: reason= without skip")
        elif "keys" in d:
            if not d["keys"]:
                raise BlockError("docs-test keys= needs the file of the run it outlines")
            b.kind, b.keys_of = "keys", d["keys"]
        elif "synopsis" in d:
            b.kind = "synopsis"
        elif "config" in d:
            if language not in ("json", "yaml"):
                raise BlockError("docs-test config is for json or yaml blocks")
            b.kind = "config"
        elif language == "python":
            b.kind = "pysession" if source.lstrip().startswith(">>>") else "python"
        elif language in SHELL_LANGUAGES:
            b.kind = "shell"
        elif language in ("json", "yaml", "sql"):
            b.kind = language
        else:
            raise BlockError(
                f"a {'`' + language + '` ' if language else 'plain '}block that is not run: "
                "give it a language that runs, or mark it with "
                "<!-- docs-test: skip reason=\"...\" --> right before it")
    except BlockError as e:
        b.kind, b.reason = "error", str(e)
    return b


class DocBlockParser:
    """A Sybil parser: one Region per fenced code block, whatever its language."""

    def __init__(self, evaluator):
        self.evaluator = evaluator
        self.lexer = RawFencedCodeBlockLexer(
            info_pattern=re.compile(r"(?P<language>[^\n]*?)[ \t]*$\n", re.MULTILINE),
            mapping={"language": "language", "source": "source"})

    def __call__(self, document: Document) -> Iterable[Region]:
        text = document.text
        regions = sorted(self.lexer(document), key=lambda r: r.start)
        used = set()
        previous_end = 0
        for region in regions:
            line = text.count("\n", 0, region.start) + 1
            # the directive: the last docs-test comment between the previous block and this
            # one, with only blank space (or the list item's indent) after it
            directive = None
            for m in DIRECTIVE.finditer(text, previous_end, region.start):
                if not text[m.end():region.start].strip():
                    directive = m.group("args")
                    used.add(m.start())
            language = region.lexemes["language"].strip().split(" ")[0].lower()
            block = classify(document.path, line, language, str(region.lexemes["source"]),
                             directive)
            previous_end = region.end
            yield Region(region.start, region.end, parsed=block, evaluator=self.evaluator)
        # a docs-test comment that marks no block is a mistake too (a block moved away)
        for m in DIRECTIVE.finditer(text):
            if m.start() not in used:
                line = text.count("\n", 0, m.start()) + 1
                b = Block(document.path, line, "", "", kind="error",
                          reason="a docs-test comment that is not right before a code block")
                yield Region(m.start(), m.end(), parsed=b, evaluator=self.evaluator)


# ---- helpers for the evaluators -----------------------------------------------------------

def shell_commands(source: str, language: str) -> List[Tuple[List[str], str]]:
    """The commands of a shell block with the output shown after each: continuation lines
    joined, comments dropped. In a block with `$ ` prompts (a console block) only the `$ `
    lines are commands and the lines after one are its documented output."""
    lines = source.splitlines()
    prompted = language == "console" or any(l.startswith("$ ") for l in lines)
    entries: List[List] = []   # [command line, output lines]
    cur = ""
    for l in lines:
        if prompted and not l.startswith("$ ") and not cur:
            if entries:
                entries[-1][1].append(l)
            continue
        if prompted and l.startswith("$ "):
            l = l[2:]
        if l.rstrip().endswith("\\"):
            cur += l.rstrip()[:-1] + " "
            continue
        entries.append([cur + l, []])
        cur = ""
    if cur:
        entries.append([cur, []])
    out = []
    for line, shown in entries:
        argv = shlex.split(line, comments=True)
        if argv:
            out.append((argv, "\n".join(shown)))
    return out


def output_matches(shown: str, actual: str) -> bool:
    """Every line of the documented output is in the actual output, whitespace-normalized
    (a wrapped line may be joined), `...` standing for anything."""
    norm = " ".join(actual.split())
    want = " ".join(shown.split())
    if not want:
        return True
    pattern = ".*?".join(re.escape(part) for part in want.split("..."))
    return re.search(pattern, norm) is not None


def synopsis_lines(source: str) -> List[str]:
    """`trainscope CMD ...` lines of a synopsis, continuation lines (indented) joined."""
    out: List[str] = []
    for l in source.splitlines():
        if l.startswith("trainscope "):
            out.append(l)
        elif l.strip() and out and l[:1].isspace():
            out[-1] += " " + l.strip()
    return out


def usage_flags(help_text: str) -> List[str]:
    """The flags of a `trainscope help CMD` usage: its first paragraph and `options:` lines."""
    usage = help_text.split("\n\n")[0].splitlines()
    usage += [l for l in help_text.splitlines() if l.startswith("options:")]
    return synopsis_flags("\n".join(usage).replace("\n", " "))


def outline_keys(source: str, language: str = "") -> List[str]:
    """The top-level keys of an outline: the first word of each line that starts a key (of
    an annotated JSON object: its `"key":` lines indented by two spaces)."""
    if language == "json":
        return re.findall(r'^  "([^"]+)":', source, re.M)
    return [m.group(1) for m in re.finditer(r"^([A-Za-z_][\w]*)(?:\[\])?\s", source, re.M)]


def synopsis_command(line: str) -> str:
    return line.split()[1]


def synopsis_flags(line: str) -> List[str]:
    # comments after two spaces and '#' are words, not flags
    line = re.split(r"\s#\s", line)[0]
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line)))

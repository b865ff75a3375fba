"""The documentation tests themselves: nothing slips past them, and their count in docs/impl.md
is the real one. (conftest.py's parts come as the docs_parts fixture: tests/python has a
conftest module too.)"""
import re

from sybil import Document

import docblocks

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


def blocks(parts):
    return [ex.parsed for _, ex in parts.examples()]


def test_every_fenced_block_is_an_example(docs_parts):
    """An independent count of the fences (open/close pairs) of every document equals the
    examples found: a block the parser missed would silently go untested."""
    for path in docs_parts.documents():
        fences = sum(1 for line in path.read_text().splitlines() if FENCE.match(line))
        assert fences % 2 == 0, f"{path}: an unclosed code fence"
        found = [ex.parsed for ex in docs_parts.SYBIL.parse(path)
                 if not ex.parsed.reason.startswith("a docs-test comment that is not")]
        assert len(found) == fences // 2, f"{path}: {fences // 2} blocks, {len(found)} examples"


def test_no_block_is_unmarked_or_badly_marked(docs_parts):
    bad = [f"{b.where}: {b.reason}" for b in blocks(docs_parts) if b.kind == "error"]
    assert not bad, "\n".join(bad)


def counts(parts):
    bs = blocks(parts)
    return (len(bs), sum(b.runnable for b in bs), sum(b.kind == "skip" for b in bs))


def test_impl_md_states_the_real_counts(docs_parts):
    text = (docs_parts.ROOT / "docs" / "impl.md").read_text()
    m = re.search(r"## Documentation tests\n(.*?)(\n## |\Z)", text, re.S)
    assert m, "docs/impl.md has no '## Documentation tests' section"
    section = m.group(1)
    got = re.search(r"\*\*(\d+)\*\* fenced blocks.*?\*\*(\d+)\*\* run.*?\*\*(\d+)\*\* are "
                    r"marked not runnable", section, re.S)
    assert got, "the section lacks '**T** fenced blocks ... **R** run ... **S** are marked " \
                "not runnable'"
    total, runnable, skipped = counts(docs_parts)
    stated = tuple(int(g) for g in got.groups())
    assert stated == (total, runnable, skipped), (
        f"docs/impl.md says {stated[0]} blocks, {stated[1]} run, {stated[2]} not runnable; "
        f"the documents have {total}, {runnable}, {skipped}: update the section")


# ---- the parser's rules, on made-up Markdown ------------------------------------------------

def parse(text):
    doc = Document(text, "made-up.md")
    return [r.parsed for r in docblocks.DocBlockParser(lambda ex: None)(doc)]


def test_a_skip_needs_a_reason():
    [b] = parse('<!-- docs-test: skip -->\n```sh\ntrainscope ls\n```\n')
    assert b.kind == "error" and "without a reason" in b.reason
    [b] = parse('<!-- docs-test: skip reason="  " -->\n```sh\ntrainscope ls\n```\n')
    assert b.kind == "error"
    [b] = parse('<!-- docs-test: skip reason="needs a GPU" -->\n\n```sh\nnvidia-smi\n```\n')
    assert (b.kind, b.reason, b.runnable) == ("skip", "needs a GPU", False)


def test_unmarked_blocks_that_cannot_run_fail():
    [b] = parse("```\nRUN/\n  run.json\n```\n")
    assert b.kind == "error" and "mark it" in b.reason
    [b] = parse("```cpp\nint x;\n```\n")
    assert b.kind == "error"


def test_bad_or_stray_comments_fail():
    [b] = parse('<!-- docs-test: skp reason="x" -->\n```sh\ntrainscope ls\n```\n')
    assert b.kind == "error" and "unknown key 'skp'" in b.reason
    [b] = parse('<!-- docs-test: exit=two -->\n```sh\ntrainscope ls\n```\n')
    assert b.kind == "error"
    [b] = parse('<!-- docs-test: config -->\n```python\nx = 1\n```\n')
    assert b.kind == "error"
    # a comment with text after it marks nothing (and says so)
    blocks_ = parse('<!-- docs-test: skip reason="x" -->\nsome text\n```sh\ntrainscope ls\n```\n')
    assert sorted(b.kind for b in blocks_) == ["error", "shell"]
    # a comment quoted inside a line of text is no directive
    [b] = parse('Write `<!-- docs-test: skip -->` before it.\n```sh\ntrainscope ls\n```\n')
    assert b.kind == "shell"


def test_kinds_and_list_indents():
    text = ('1. item\n   <!-- docs-test: exit=76 -->\n   ```sh\n   trainscope run -- x \\\n'
            '       --y\n   ```\n\n```python\n>>> 1 + 1\n2\n```\n\n```json\n{}\n```\n'
            '<!-- docs-test: synopsis -->\n```\ntrainscope ls [--json]\n```\n')
    a, b, c, d = parse(text)
    assert (a.kind, a.exit_code) == ("shell", 76)
    assert docblocks.shell_commands(a.source, a.language) == [
        (["trainscope", "run", "--", "x", "--y"], "")]
    assert (b.kind, c.kind, d.kind) == ("pysession", "json", "synopsis")


def test_console_output_is_compared():
    cmds = docblocks.shell_commands(
        "$ trainscope rules RUN   # comment\nline one\n  wrapped\n$ trainscope ls\n", "console")
    assert cmds == [(["trainscope", "rules", "RUN"], "line one\n  wrapped"),
                    (["trainscope", "ls"], "")]
    assert docblocks.output_matches("a b ... d", "x a  b\nc d y")
    assert not docblocks.output_matches("a b d e", "a b d")
    assert docblocks.output_matches("", "anything")


def test_synopsis_words():
    [line] = docblocks.synopsis_lines("trainscope watch RUN [--rules N]\n    [--no-stop]  # --x\n")
    assert docblocks.synopsis_command(line) == "watch"
    assert docblocks.synopsis_flags(line) == ["--no-stop", "--rules"]


def test_usage_flags():
    text = ("usage: trainscope ls [--name S]\n        [--json | --csv]\n"
            "options: --overwrite (x)\n\nmore --logdir text\noptions: --no-system\n")
    assert docblocks.usage_flags(text) == ["--csv", "--json", "--name", "--no-system",
                                           "--overwrite"]


def test_outline_keys():
    assert docblocks.outline_keys("schema_version   1\nfindings[]  {rule,\n     more}\n") == [
        "schema_version", "findings"]
    assert docblocks.outline_keys('{\n  "id": "x",   // c\n  "config": { "a": 1 }\n}', "json") == [
        "id", "config"]


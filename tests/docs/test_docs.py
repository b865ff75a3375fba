"""Every fenced block of README.md and docs/*.md, one test each (conftest.py, docblocks.py):
it runs, or it is skipped with the reason its docs-test comment gives."""


def test_block(doc_example, docs_env):
    doc_example.namespace["_docs_env"] = docs_env
    doc_example.evaluate()

"""README.md and docs/*.md as written: every ```python block and every `statekit ...` command of a ```bash
block runs, each document's in order in one fresh directory (a block reads what an earlier one wrote), a
python block in a fresh interpreter; every fence says its language; every relative link resolves.

Not run here: the two quick-start blocks of the README (``pip install`` into a new venv). CI runs the test
one as its own command (``test_quick_start_is_what_ci_runs`` checks it is the same line), and
``tests/spark/test_spark_cli.py::test_demo_end_to_end`` runs ``statekit demo`` on fewer clicks."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = ("python", "bash", "text")
STATEKIT = Path(sys.executable).parent / "statekit"  # the installed console script
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HISTORY = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b|this session|last round|\bissue \d+",
                     re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    """A fenced block of a document: its language, its text and the line of its opening fence."""

    doc: Path
    language: str
    code: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def is_quick_start(self) -> bool:
        return self.language == "bash" and "pip install" in self.code


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of ``doc``, in order."""
    found, language, start, body = [], None, 0, []
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        if line.startswith("```"):
            if language is None:
                language, start, body = line[3:].strip(), n, []
            else:
                found.append(Block(doc, language, "\n".join(body) + "\n", start))
                language = None
        elif language is not None:
            body.append(line)
    assert language is None, f"{doc.relative_to(ROOT)}: the block opened at line {start} is never closed"
    return found


def commands(block: Block) -> list[list[str]]:
    """The ``statekit`` commands of a bash block as argv lists; any other command is an error."""
    argvs = []
    for line in block.code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assert words[0] == "statekit", f"{block.where}: {line.strip()!r} is not a statekit command, which this test runs"
        argvs.append([str(STATEKIT), *words[1:]])
    return argvs


def runnable(doc: Path) -> list[Block]:
    return [b for b in blocks(doc) if b.language in ("python", "bash") and not b.is_quick_start]


def anchors(doc: Path) -> set[str]:
    """GitHub's anchors of the headings of ``doc`` (outside its fenced blocks)."""
    prose = re.sub(r"^```.*?^```$", "", doc.read_text(), flags=re.M | re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", prose, re.M)}


SLOW_EXAMPLES = {"README.md", "docs/memory.md", "docs/state-as-data.md"}
"""Docs whose examples start Spark applications one after another (20-45 s each): in the slow tier."""


@pytest.mark.lowest_pyspark
@pytest.mark.parametrize("doc", [pytest.param(d, marks=[pytest.mark.slow] if str(d.relative_to(ROOT)) in SLOW_EXAMPLES else [])
                                 for d in DOCS if runnable(d)], ids=lambda d: str(d.relative_to(ROOT)))
def test_examples_run(doc, tmp_path):
    for block in runnable(doc):
        if block.language == "python":
            runs = [[sys.executable, "-c", block.code]]
        else:
            runs = commands(block)
            assert runs, f"{block.where}: a bash block with no command"
        for argv in runs:
            r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, f"{block.where}: {shlex.join(argv[1:]) if argv[0] != sys.executable else 'python'} " \
                                      f"exited {r.returncode}\n{r.stderr[-3000:]}"


def test_the_slow_examples_are_docs_with_examples():
    """A doc renamed or emptied of examples leaves no stale name behind in the slow tier's list."""
    assert SLOW_EXAMPLES <= {str(d.relative_to(ROOT)) for d in DOCS if runnable(d)}


def test_every_fence_names_its_language():
    for doc in DOCS:
        for block in blocks(doc):
            assert block.language in LANGUAGES, \
                f"{block.where}: fence language {block.language!r}; use python or bash (run by this test) or text"


def test_quick_start_is_what_ci_runs():
    """The only blocks not run here are the README's quick start, whose test command is the one CI runs."""
    skipped = [b for doc in DOCS for b in blocks(doc) if b.is_quick_start]
    assert [(b.doc, b.code.count("\n")) for b in skipped] == [(README, 1), (README, 1)], \
        [b.where for b in skipped]
    demo, tests = (b.code.strip() for b in skipped)
    assert demo.endswith("&& .venv/bin/statekit demo")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci
    # the tests the default run leaves out (marked slow) run in CI right after it, in its venv
    assert '"-ra --strict-markers -m \\"not soak and not slow\\"' in (ROOT / "pyproject.toml").read_text()
    assert ci[ci.index(tests) + 1:].count(".venv/bin/python -m pytest -m slow") == 1


def test_relative_links_resolve():
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            assert file.exists(), f"{doc.relative_to(ROOT)}: link {target} points to a missing file"
            assert not anchor or anchor in anchors(file), \
                f"{doc.relative_to(ROOT)}: link {target}: no such heading in {path or doc.name}"


def test_readme_links_every_doc():
    text = README.read_text()
    for doc in DOCS[1:]:
        assert f"]({doc.relative_to(ROOT)})" in text, f"README.md does not link {doc.relative_to(ROOT)}"
    assert "](RELIABILITY.md)" in text


def test_no_commit_hashes_or_session_history():
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            m = HISTORY.search(line)
            assert m is None, f"{doc.relative_to(ROOT)}:{n}: {m.group(0)!r}: no commit hashes or session history in docs"


def test_readme_is_a_front_door():
    assert len(README.read_text().splitlines()) <= 250


def test_readme_activates_the_virtualenv_before_its_bare_commands():
    """The quick start installs into .venv without activating it; the README says to before the first example
    whose `statekit` and `python` would otherwise be other ones (or none)."""
    text = README.read_text()
    quick_start_end = max(text.index(b.code) + len(b.code) for b in blocks(README) if b.is_quick_start)
    first_example = min(text.index(b.code) for b in runnable(README))
    assert "source .venv/bin/activate" in text[quick_start_end:first_example]

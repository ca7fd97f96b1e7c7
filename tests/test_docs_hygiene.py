"""The docs state the current state only: no history in ``docs/``.

A page names no machine path (``/work/``, ``/home/``, ``/tmp/``), narrates no commit (a 7 to 40
digit hex word), cites no tracker entry (the word "issue" or a hash sign followed by a number)
and carries no date; history goes to ``CHANGELOG.md``. Every text file under ``docs/`` is read,
the notebook and the build hooks included. Also here, because it is cheap: the CLI reference's
generator renders every parser.
"""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TEXT_SUFFIXES = {".md", ".ipynb", ".py", ".yml", ".yaml", ".txt", ".csv", ".json"}

#: name -> pattern of a line that is history, not documentation
RULES = {
    "machine path": re.compile(r"(?<![\w.])/(?:work|home|tmp)/"),
    # a hex word of 7 to 40 characters with a digit and a letter: a commit; a digest cut short
    # (`87ff0c9e...`) or named as one (`sha256 ...`) is a fact of the file it names, not history
    "commit hash": re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-]|\.\.\.)"),
    "issue number": re.compile(r"(?i)\bissues? \d+|(?<![\w/&])#\d+(?![\w-])"),
    "date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
}
#: a line naming a digest is exempt from the commit rule (the hex there is a hash of data)
DIGEST = re.compile(r"(?i)sha256|sha-256|digest")


def findings(text: str) -> list[tuple[int, str, str]]:
    """(line number, rule, line) of every line of ``text`` that breaks a rule."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        for rule, pattern in RULES.items():
            if rule == "commit hash" and DIGEST.search(line):
                continue
            if pattern.search(line):
                out.append((number, rule, line.strip()[:160]))
    return out


def notebook_ids_removed(text: str) -> str:
    """A notebook's cell ids are random hex, not history: drop them before reading."""
    return re.sub(r'"id": "[0-9a-f-]+"', '"id": ""', text)


def test_no_history_in_docs():
    bad = []
    for path in sorted(DOCS.rglob("*")):
        if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
            text = path.read_text(encoding="utf-8", errors="replace")
            if path.suffix == ".ipynb":
                text = notebook_ids_removed(text)
            bad += [f"{path.relative_to(ROOT)}:{n}: {rule}: {line}" for n, rule, line in findings(text)]
    files = sorted({b.split(":", 1)[0] for b in bad})
    per_file = ", ".join(f"{f} ({sum(b.startswith(f + ':') for b in bad)})" for f in files)
    assert not bad, (f"{len(bad)} lines of history in docs/ (move them to CHANGELOG.md): {per_file}\n"
                     + "\n".join(bad[:60]))


def test_each_rule_catches_its_case():
    """Negative control: every rule fires on a planted line, and the facts that look alike pass."""
    planted = {
        "machine path": "the run folder /work/runs/demo3 holds it",
        "commit hash": "measured at commit 1f9dce7 on two cores",
        # built at run time, so that the test's own source cites no tracker entry
        "issue number": "closes {} {} and {}{}".format("issue", 27, "#", 31),
        "date": "Output (2026-12-01):",
    }
    for rule, line in planted.items():
        assert [r for _, r, _ in findings(line)] == [rule], rule
    for fine in ["weights sha256 `87ff0c9e...`", "seed 20260102", "see [the report](panel.md#4-the-report)",
                 "eps 1/4, `1e-6`, `0x10`", "head 3.11, rank 12", "the `## 2.` section", "`usr/bin/time`"]:
        assert findings(fine) == [], fine


def test_the_cli_reference_renders_every_parser():
    """The build hook (docs/_hooks/cli_reference.py) imports each command's parser builder and
    prints its help; a renamed builder or a parser that fails to build fails here, in the quick loop.
    It needs the docs extra (mkdocs) and the float tier's packages the CLIs import (no torch)."""
    for name in ("mkdocs", "scipy", "sklearn", "matplotlib", "distributed"):
        pytest.importorskip(name)
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "_hooks" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = module.render()
    for command, *_ in module.COMMANDS:
        assert f"usage: {command}" in page, command
    assert page.count("```text") == len(module.COMMANDS) + 1            # + the softrank dispatcher


def test_the_notebook_is_stored_without_outputs():
    """The docs build executes it; stored outputs would be stale numbers from another machine."""
    nb = json.loads((DOCS / "examples" / "quickstart.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and not any(c.get("outputs") or c.get("execution_count") for c in code)

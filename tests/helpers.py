"""Small helpers shared by several test files (the larger shared builders have modules of their own:
``tests/bracket_files.py``, ``tests/panel_helpers.py``, ``tests/report_panel.py``).

No test file imports another test file: what two of them share lives here, in those modules, or in
``tests/conftest.py`` fixtures (``tests/test_markers.py`` checks it)."""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The library's packages (what ``pip install`` ships).
PACKAGES = ("exact", "fileio", "numeric", "oracles", "proofs_checks", "softrank", "crosscheck")


def imports_of(path: Path) -> Iterator[str]:
    """Absolute module names imported anywhere in ``path`` (function-level imports included); ``from numeric
    import search`` also yields ``numeric.search`` (it may name a submodule)."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            if node.module in PACKAGES:
                yield from (f"{node.module}.{a.name}" for a in node.names)

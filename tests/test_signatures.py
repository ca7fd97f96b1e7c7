"""No library function takes more than six positional parameters: options, budgets and flags past the data
are keyword-only (after a bare ``*``), so a call names them. Read from the source with ``ast``; a leading
``self`` or ``cls`` is not counted."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import PACKAGES, ROOT

#: The most positional parameters a library function may take.
MAX_POSITIONAL = 6


def positional_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Positional-only and positional-or-keyword parameters of ``fn``, less a leading ``self``/``cls``."""
    a = fn.args
    params = a.posonlyargs + a.args
    return len(params) - (1 if params and params[0].arg in ("self", "cls") else 0)


def wide_functions(source: str, filename: str = "<source>") -> list[tuple[str, int, int]]:
    """``(name, line, positional parameters)`` of every function in ``source`` over ``MAX_POSITIONAL``."""
    return [(n.name, n.lineno, positional_count(n)) for n in ast.walk(ast.parse(source, filename=filename))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and positional_count(n) > MAX_POSITIONAL]


def _library_files() -> list[Path]:
    return sorted(f for pkg in PACKAGES for f in (ROOT / pkg).rglob("*.py"))


def test_no_library_function_takes_more_than_six_positional_parameters():
    files = _library_files()
    assert len(files) > 100            # the scan sees the library, not an empty tree
    wide = [f"{f.relative_to(ROOT)}:{line} {name} ({count} positional)"
            for f in files for name, line, count in wide_functions(f.read_text(), str(f))]
    assert wide == [], "make the options keyword-only (a bare *):\n" + "\n".join(wide)


def test_a_function_with_seven_positional_parameters_is_flagged():
    """The negative control: a planted source with seven positional parameters (nested, async and
    positional-only ones included) is flagged; six, a keyword-only tail or a method's ``self`` is not."""
    planted = (
        "def ok(a, b, c, d, e, f, *, g, h=1): pass\n"
        "def wide(a, b, c, d, e, f, g=None): pass\n"
        "class K:\n"
        "    def method(self, a, b, c, d, e, f): pass\n"
        "    def wide_method(self, a, b, c, d, e, f, g): pass\n"
        "def outer():\n"
        "    async def inner(a, b, /, c, d, e, f, g): pass\n"
    )
    assert wide_functions(planted) == [("wide", 2, 7), ("wide_method", 5, 7), ("inner", 7, 7)]

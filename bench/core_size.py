"""Size of the trusted core: lines of code, docstrings, comments and blanks per module of ``exact/``.

The style target is a core "near 1,500 lines, readable in one sitting"; this
counts what a reader has to read as code apart from the proofs and
explanations in docstrings.

    python -m bench.core_size [--json]
"""
from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def count(path: Path) -> dict:
    """Lines of ``path`` by kind: code, docstring, comment, blank (each line counted once)."""
    src = path.read_text()
    doc: set = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                doc.update(range(first.lineno, first.end_lineno + 1))
    out = {"lines": 0, "code": 0, "docstring": 0, "comment": 0, "blank": 0}
    for i, line in enumerate(src.splitlines(), 1):
        s = line.strip()
        kind = "blank" if not s else "docstring" if i in doc else "comment" if s.startswith("#") else "code"
        out[kind] += 1
        out["lines"] += 1
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = {f.name: count(f) for f in sorted((ROOT / "exact").glob("*.py"))}
    total = {k: sum(r[k] for r in rows.values()) for k in ("lines", "code", "docstring", "comment", "blank")}
    if args.json:
        print(json.dumps({"modules": rows, "total": total}))
        return 0
    print(f"{'module':24s} {'lines':>6s} {'code':>6s} {'doc':>6s} {'comment':>8s} {'blank':>6s}")
    for name, r in [*rows.items(), ("total", total)]:
        print(f"{name:24s} {r['lines']:6d} {r['code']:6d} {r['docstring']:6d} {r['comment']:8d} {r['blank']:6d}")
    return 0


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

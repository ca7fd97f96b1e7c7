"""Rebuild ``stdlib_docstrings.txt``, the panel's shipped text corpus.

The text is the documentation that every Python installation carries: the
docstrings of a fixed list of standard-library modules and of their public
classes and functions, in sorted order, with whitespace normalised. It was
generated once with CPython 3.11 and is shipped so that the token windows
(the panel's "sources") are identical on every machine, whatever Python the
user runs. The docstrings are part of CPython, distributed under the PSF
License Agreement, which permits redistribution with this notice.

    python -m numeric.heads.corpus.build_corpus > numeric/heads/corpus/stdlib_docstrings.txt

``--code`` writes the panel's second text domain, ``stdlib_code.txt``: the
source code of public functions of the same modules, in the same order,
without their docstrings and comments (``ast.unparse`` of the parsed source
with every docstring removed), at most ``CODE_PER_MODULE`` functions of
``CODE_MIN_LINES`` to ``CODE_MAX_LINES`` lines per module, functions separated
by a blank line. The two files share no text: one is prose about the library,
the other its code. Shipped for the same reason (CPython 3.11.7; another
Python gives other bytes, and the shipped file is what the panel reads):

    python -m numeric.heads.corpus.build_corpus --code > numeric/heads/corpus/stdlib_code.txt
"""
from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import textwrap

# A fixed roster of pure-Python stdlib modules with long, prose-like
# docstrings; the order here is the order in the corpus.
MODULES = (
    "argparse", "bisect", "calendar", "collections", "contextlib", "copy",
    "csv", "dataclasses", "datetime", "decimal", "difflib", "doctest",
    "enum", "fractions", "ftplib", "functools", "gettext", "heapq", "hmac",
    "imaplib", "inspect", "ipaddress", "json", "locale", "logging",
    "mailbox", "numbers", "optparse", "pathlib", "pickle", "pprint",
    "queue", "random", "sched", "shlex", "shutil", "smtplib", "statistics",
    "string", "subprocess", "tarfile", "tempfile", "textwrap", "threading",
    "timeit", "tokenize", "trace", "typing", "unittest", "uuid", "warnings",
    "weakref", "zipfile",
)
MIN_WORDS = 12  # skip one-line docstrings: they are mostly signatures
# The code domain: per module at most CODE_PER_MODULE public functions (sorted
# by name) whose code has CODE_MIN_LINES..CODE_MAX_LINES lines: every module
# contributes a little, none dominates (inspect alone has 64 public functions).
CODE_PER_MODULE = 8
CODE_MIN_LINES = 4
CODE_MAX_LINES = 40


def _clean(doc: str) -> str:
    doc = inspect.cleandoc(doc)
    return re.sub(r"\s+", " ", doc).strip()


def paragraphs():
    for name in MODULES:
        mod = importlib.import_module(name)
        seen = set()
        docs = [mod.__doc__ or ""]
        for attr in sorted(getattr(mod, "__all__", None) or dir(mod)):
            if attr.startswith("_"):
                continue
            obj = getattr(mod, attr, None)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if getattr(obj, "__module__", None) != mod.__name__:
                continue
            docs.append(obj.__doc__ or "")
        for doc in docs:
            text = _clean(doc)
            if len(text.split()) >= MIN_WORDS and text not in seen:
                seen.add(text)
                yield text


def _public(mod, kinds):
    """The module's public objects of ``kinds`` (predicates) defined in it, by sorted name."""
    for attr in sorted(getattr(mod, "__all__", None) or dir(mod)):
        if attr.startswith("_"):
            continue
        obj = getattr(mod, attr, None)
        if any(k(obj) for k in kinds) and getattr(obj, "__module__", None) == mod.__name__:
            yield obj


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` without the docstring of any function or class in it (an empty body gets ``pass``)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def code_units():
    """The code domain's functions, in corpus order (see the module docstring)."""
    for name in MODULES:
        mod = importlib.import_module(name)
        taken = 0
        for fn in _public(mod, (inspect.isfunction,)):
            if taken == CODE_PER_MODULE:
                break
            try:
                src = inspect.getsource(fn)
            except (OSError, TypeError):
                continue
            code = ast.unparse(_strip_docstrings(ast.parse(textwrap.dedent(src))))
            if CODE_MIN_LINES <= code.count("\n") + 1 <= CODE_MAX_LINES:
                taken += 1
                yield code


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--code"]:
        sys.stdout.write("\n\n".join(code_units()) + "\n")
        return 0
    if argv:
        print("usage: python -m numeric.heads.corpus.build_corpus [--code]", file=sys.stderr)
        return 2
    for p in paragraphs():
        print(p)
    return 0


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

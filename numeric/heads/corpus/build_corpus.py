"""Rebuild ``stdlib_docstrings.txt``, the panel's shipped text corpus.

The text is the documentation that every Python installation carries: the
docstrings of a fixed list of standard-library modules and of their public
classes and functions, in sorted order, with whitespace normalised. It was
generated once with CPython 3.11 and is shipped so that the token windows
(the panel's "sources") are identical on every machine, whatever Python the
user runs. The docstrings are part of CPython, distributed under the PSF
License Agreement, which permits redistribution with this notice.

    python -m numeric.heads.corpus.build_corpus > numeric/heads/corpus/stdlib_docstrings.txt
"""
from __future__ import annotations

import importlib
import inspect
import re

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


def main() -> int:
    for p in paragraphs():
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

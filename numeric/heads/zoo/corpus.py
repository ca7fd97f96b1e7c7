"""The decoders' training text: docstrings of the CPython standard library.

Every pure-Python module of the installed standard library (tests, IDLE,
lib2to3, Tk and the demos left out) is parsed with :mod:`ast`, never imported,
and the docstrings of its module, classes and functions are taken in sorted
file order and tree order, whitespace-normalised, one paragraph a line, short
ones and repeats dropped. Built once with CPython 3.11.7 (1.31 MB, 3,794 paragraphs) and shipped
gzipped, so training reads the same bytes on every machine; another Python
builds another text, which :func:`read_corpus` refuses by its hash. The
docstrings are part of CPython, distributed under the PSF License Agreement,
which permits redistribution with this notice.

    python -m numeric.heads.zoo.corpus --out numeric/heads/zoo/data/stdlib_text.txt.gz

Every ``HELDOUT_EVERY``-th paragraph is held out for evaluation.

>>> train, held = split_paragraphs("a\\nb\\nc\\n", every=2)
>>> train, held
('a\\nc\\n', 'b\\n')
"""
from __future__ import annotations

import ast
import gzip
import hashlib
import re
import sys
import sysconfig
import zlib
from pathlib import Path

from exact.errors import ExitCode, OneLineParser, UserInputError

__all__ = ["CORPUS_PATH", "CORPUS_SHA256", "HELDOUT_EVERY", "DataError", "build_text", "write_corpus",
           "read_corpus", "split_paragraphs", "text_sha256"]

CORPUS_PATH = Path(__file__).resolve().parent / "data" / "stdlib_text.txt.gz"
# sha256 of the uncompressed text built with CPython 3.11.7 (see main)
CORPUS_SHA256 = "40a0f85ee5d299c635821d4f44a5660b3d6aecbffeaa26c580e7fe7b782a62ae"
# directories of the standard library whose text is not documentation prose
SKIP_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "lib2to3", "turtledemo", "tkinter",
                       "ensurepip", "__pycache__"})
MIN_WORDS = 12      # skip one-line docstrings: they are mostly signatures (as build_corpus)
HELDOUT_EVERY = 20  # one paragraph in 20 (5 %) is held out


class DataError(UserInputError):
    """A training data file that is missing, unreadable or not the recorded one (exit 2)."""


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stdlib_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py")
                  if not set(p.relative_to(root).parts[:-1]) & SKIP_DIRS and not p.name.startswith("test"))


def _docstrings(path: Path):
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):  # a few stdlib files are templates or Latin-1
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield re.sub(r"\s+", " ", doc).strip()


def build_text(root: Path | None = None) -> str:
    """The corpus text from the standard library under ``root`` (default: this Python's)."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    seen, lines = set(), []
    for path in _stdlib_files(root):
        for doc in _docstrings(path):
            if len(doc.split()) >= MIN_WORDS and doc not in seen:
                seen.add(doc)
                lines.append(doc)
    return "\n".join(lines) + "\n"


def write_corpus(text: str, path: Path) -> None:
    """Gzip ``text`` reproducibly (no name, time stamp zero)."""
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write(text.encode("utf-8"))


def read_corpus(path: Path | str = CORPUS_PATH, sha256: str = CORPUS_SHA256) -> str:
    """The corpus text, refused unless it is readable and hashes to ``sha256``."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"corpus file {path} is missing (rebuild: python -m numeric.heads.zoo.corpus)")
    try:
        with gzip.open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise DataError(f"corpus file {path} is corrupted: {str(e).splitlines()[0]}") from None
    got = text_sha256(text)
    if got != sha256:
        raise DataError(f"corpus file {path} has sha256 {got[:16]}..., expected {sha256[:16]}... "
                        "(not the text the shipped models were trained on)")
    return text


def split_paragraphs(text: str, every: int = HELDOUT_EVERY) -> tuple[str, str]:
    """(training text, held-out text): paragraph ``i`` is held out when ``i % every == every - 1``."""
    lines = text.splitlines(keepends=True)
    held = [ln for i, ln in enumerate(lines) if i % every == every - 1]
    train = [ln for i, ln in enumerate(lines) if i % every != every - 1]
    return "".join(train), "".join(held)


def main(argv=None) -> int:
    p = OneLineParser(prog="python -m numeric.heads.zoo.corpus", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=CORPUS_PATH, help="gzip file to write")
    p.add_argument("--stdlib", type=Path, default=None, help="standard-library directory (default: this Python's)")
    args = p.parse_args(argv)
    text = build_text(args.stdlib)
    write_corpus(text, args.out)
    print(f"{args.out}: {len(text.encode())} bytes, {text.count(chr(10))} paragraphs, "
          f"sha256 {text_sha256(text)} (Python {sys.version.split()[0]})")
    return ExitCode.OK


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

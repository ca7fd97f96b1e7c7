"""Re-derive bracket files with the second checker: ``python -m crosscheck FILE [FILE ...]``.

The second checker shares no code with ``python -m exact verify``: its own
reader, Python integers and Fractions, its own norms, defects and slack
enclosures (docs/crosscheck.md). ``--compare EXACT_JSON`` reads the output of
``python -m exact verify --json`` on the same files ('-' for stdin) and
reports every disagreement between the two checkers.

Exit status: 0 every side of every cell verified (and, with --compare, no
disagreement); 1 a side not verified, or any disagreement; 2 a file refused
(unreadable, malformed, past a limit; one line on stderr each) or no cell
judged. A disagreement outranks a refused file: it exits 1. When the reader
of stdout closes it (``| head -1``) the run ends quietly with 141, the status
of a writer killed by SIGPIPE.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ._agree import Agreement, agreement, summary
from ._errors import EXIT_CLOSED_PIPE, EXIT_MALFORMED, EXIT_OK, EXIT_REFUTED, Malformed
from ._limits import MAX_WORK
from ._results import CellResult, SideResult
from ._verify import verify_file

__all__ = ["main", "run"]


def _clean(value: object) -> str:
    """One line of printable ASCII: everything else escaped."""
    return "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in str(value))


def _side(side: SideResult) -> str:
    margin = "-" if side.margin is None else f"{float(side.margin):+.3e}"
    out = f"{side.status.value} {side.kind} margin {margin}"
    return out if side.verified else out + f" ({side.reason})"


def _exact_by_file(source: str, files: list[str]) -> dict[str, Any]:
    """``python -m exact verify --json`` output, as ``{file: verdicts}`` for ``agreement``."""
    raw = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise ValueError("not the output of 'python -m exact verify --json'")
    out: dict[str, Any] = {f: [] for f in files}
    for cell in doc["cells"]:
        if isinstance(cell, dict) and cell.get("file") in out:
            out[cell["file"]].append(cell)
    for entry in doc.get("malformed") or []:
        if isinstance(entry, dict) and entry.get("file") in out:
            out[entry["file"]] = {"error": str(entry.get("error"))}
    return out


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error and exit ``EXIT_MALFORMED`` (the second checker's own:
    it shares no code with ``exact``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_MALFORMED, f"{self.prog}: error: {' '.join(message.split())}\n")


def build_parser(prog: str = "python -m crosscheck") -> argparse.ArgumentParser:
    """The command line's parser (also rendered into the CLI reference of the docs)."""
    parser = _Parser(prog=prog, description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--compare", metavar="EXACT_JSON",
                        help="output of 'python -m exact verify --json' on the same files ('-': stdin)")
    parser.add_argument("--max-work", type=int, default=MAX_WORK, metavar="UNITS",
                        help=f"work limit per file (default {MAX_WORK})")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m crosscheck") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.max_work < 1:
        parser.error("--max-work must be >= 1")
    exact = None
    if args.compare is not None:
        try:
            exact = _exact_by_file(args.compare, args.files)
        except (OSError, ValueError) as exc:
            print(f"{prog}: error: --compare: {_clean(str(exc)[:200])}", file=sys.stderr)
            return EXIT_MALFORMED

    cells: list[CellResult] = []
    errors: dict[str, str] = {}
    agreements: list[Agreement] = []
    for path in args.files:
        try:
            results = verify_file(path, args.max_work)
        except Malformed as exc:
            errors[path] = str(exc)
            results = None
        except MemoryError:
            errors[path] = "out of memory"
            results = None
        if results is not None:
            cells.extend(results)
        if exact is not None:
            agreements.append(agreement(path, exact[path], args.max_work, results=results, error=errors.get(path)))

    for path, error in errors.items():
        print(f"{prog}: {_clean(path)}: {_clean(error)}", file=sys.stderr)
    all_verified = bool(cells) and not errors and all(c.verified for c in cells)
    totals = summary(agreements) if exact is not None else None
    if args.json:
        doc = {"cells": [c.to_json() for c in cells], "all_verified": all_verified,
               "malformed": [{"file": p, "error": e} for p, e in errors.items()]}
        if totals is not None:
            doc["agreement"] = dict(totals, per_file=[a.to_json() for a in agreements])
        print(json.dumps(doc))
    else:
        _table(cells, len(errors), totals)
    if totals is not None and not totals["agree"]:
        return EXIT_REFUTED
    if errors or not cells:
        return EXIT_MALFORMED
    return EXIT_OK if all_verified else EXIT_REFUTED


def _table(cells: list[CellResult], refused: int, totals: dict[str, Any] | None) -> None:
    current = None
    for c in cells:
        if c.file != current:
            current = c.file
            print(_clean(current))
        slack = "" if c.slack is None else (
            f" slack {float(c.slack):+.3e} (bound {'-' if c.slack_bound is None else f'{float(c.slack_bound):+.3e}'})")
        print(_clean(f"  {ascii(c.id)}  eps={c.eps}{slack}  [{c.lower.rank}, {c.upper.rank}]  "
                     f"lower: {_side(c.lower)}  upper: {_side(c.upper)}"))
    if not cells:
        print(f"0 cells: nothing to verify ({refused} file(s) refused)")
    else:
        ok = sum(c.verified for c in cells)
        print(f"{ok}/{len(cells)} cells verified on both sides by the second checker"
              + (f"; {refused} file(s) refused" if refused else ""))
    if totals is not None:
        print(f"agreement with the exact tier: {totals['brackets']} brackets, exact verified "
              f"{totals['exact_verified']}, second checker verified {totals['crosscheck_verified']}, "
              f"{len(totals['disagreements'])} disagreement(s)")
        for line in totals["disagreements"]:
            print(_clean(f"  DISAGREE {line}"))


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of ``python -m crosscheck``: exit with ``main``'s status; a closed stdout ends quietly with
    ``EXIT_CLOSED_PIPE`` (this checker's own copy of ``exact.errors.run_command``, a test keeps them alike)."""
    try:
        try:
            code: object = main(argv)
        except SystemExit as exc:
            code = exc.code
        sys.stdout.flush()
    except BrokenPipeError:
        code = EXIT_CLOSED_PIPE
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, sys.stdout.fileno())
            finally:
                os.close(null)
        except (AttributeError, OSError, ValueError):
            pass
    raise SystemExit(code)

"""Re-verify bracket files exactly: ``python -m exact verify FILE [FILE ...]``.

Exit status: 0 when every claimed side of every cell is verified, 1 when any
side is refuted, 2 when any file is refused: unreadable, not a regular file,
malformed, without cells, beyond a resource limit (the work limit
``--max-work`` included) or out of memory. Each refused file gets one line on
stderr and contributes no cell; the other files are still judged. A run that
judges no cell at all ends its table with "nothing to verify" and exits 2.

Every string that comes from a file or the command line is printed escaped
(``ascii()``: control characters, non-ASCII and lone surrogates made
visible) and a cell id cut to ``ID_CHARS`` characters, so no file can forge
a line, nor pad an id until the terminal wraps it into one. ``--json``
prints one JSON object whose strings are exact (JSON escapes). A file named
twice (by any path to it) is judged once. A cell's convex cap (``exact.cap``),
where the file has one, is printed on a line of its own under the cell: a
diagnostic that never changes the exit status.

With ``--workers N`` a file's cells are dealt out to at most N processes
(never more than there are tasks, nor than the cores this process may run
on: a larger N is capped, with a note on stderr); each worker checks that the file's header
and cell count are those the parent counted, and every worker of a file
must have read the same bytes (SHA-256), else the file is refused: a file
replaced during the run is never judged in parts of two versions.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, cast

from flint import arb, fmpq

from .bracketfile import header_facts, read_bracket_file
from .errors import ExitCode, MalformedInput, OneLineParser
from .limits import MAX_TENSOR_BYTES, MAX_WORK
from .precision import arb_precision
from .verify import judge_file

__all__ = ["main"]

_OUT_OF_MEMORY = "out of memory"
_CHANGED = "the file changed while it was being verified"
#: Characters of a cell id shown in the table (escaped first; the JSON output keeps it whole).
ID_CHARS = 40
#: A worker's task: (path, cell indices or None, max work, max tensor bytes, (cells, header sha256) seen or None).
_Task = tuple[str, "list[int] | None", int, int, "tuple[int, str | None] | None"]
#: A worker's outcome: (path, reports as JSON dicts or None, error or None, the file's sha256 or None).
_Outcome = tuple[str, "list[dict[str, Any]] | None", "str | None", "str | None"]


def _approx(q: fmpq | None) -> str:
    """A short decimal image of an exact rational, for the human table only."""
    if q is None:
        return "-"
    try:
        return f"{float(q.p) / float(q.q):+.3e}"
    except OverflowError:                   # beyond float range: arb's decimal, never a truncated "p/q"
        with arb_precision(64):
            return arb(q).str(4, radius=False)


def _clean(text: str) -> str:
    """``text`` on one line of printable ASCII: every other character escaped."""
    return "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in str(text))


def _judge(task: _Task) -> _Outcome:
    """Worker: (path, indices, max_work, max_bytes, (cells, header sha256) the parent saw or None)
    -> (path, reports as JSON dicts, error, the file's sha256)."""
    path, indices, max_work, max_bytes, seen = task
    try:
        bf = read_bracket_file(path, max_bytes)
        if seen is not None and (len(bf.cells), bf.header_sha256) != seen:
            return path, None, _CHANGED, None
        reports, _ = judge_file(bf, indices, max_work)
        return path, [r.to_json() for r in reports], None, bf.sha256
    except MalformedInput as exc:
        return path, None, f"malformed: {exc}", None
    except MemoryError:
        return path, None, _OUT_OF_MEMORY, None


def _tasks(paths: list[str], workers: int, max_work: int, max_bytes: int) -> list[_Task]:
    """One task per file, or with workers its cells dealt out in up to ``workers`` chunks."""
    tasks: list[_Task] = []
    for p in paths:
        try:
            count, header = header_facts(p) if workers > 1 else (0, None)
        except (MalformedInput, MemoryError):
            count, header = 0, None          # judged (and refused) by the worker, with its message
        if count > 1:
            tasks.extend((p, list(range(i, count, workers)), max_work, max_bytes, (count, header))
                         for i in range(min(workers, count)))
        else:
            tasks.append((p, None, max_work, max_bytes, None))
    return tasks


def _run(tasks: list[_Task], workers: int) -> list[_Outcome]:
    if workers <= 1 or len(tasks) <= 1:
        return [_judge(t) for t in tasks]
    outcomes: list[_Outcome] = []
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
        futures = [pool.submit(_judge, t) for t in tasks]
        for task, future in zip(tasks, futures):
            try:
                outcomes.append(future.result())
            except Exception:                # a worker killed (by the kernel, out of memory)
                outcomes.append((task[0], None, f"{_OUT_OF_MEMORY} (a worker process died)", None))
    return outcomes


def _cores() -> int:
    """The cores this process may run on (its affinity where the system tells it), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _distinct(paths: list[str]) -> list[str]:
    """The paths, each file once (the first path that names it): files are told apart by device and
    inode, paths that cannot be read by their text (they are refused with their own message)."""
    seen: set[object] = set()
    out: list[str] = []
    for p in paths:
        try:
            info = os.stat(p)
            key: object = (info.st_dev, info.st_ino)
        except (OSError, ValueError):
            key = p
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def build_parser(prog: str = "python -m exact") -> argparse.ArgumentParser:
    """The command line's parser (also rendered into the CLI reference of the docs)."""
    parser = OneLineParser(prog=prog, description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="re-verify bracket files")
    verify.add_argument("files", nargs="+", metavar="FILE")
    verify.add_argument("--json", action="store_true", help="one JSON object on stdout")
    verify.add_argument("--workers", type=int, default=1, metavar="N", help="processes (default 1)")
    verify.add_argument("--max-work", type=int, default=MAX_WORK, metavar="UNITS",
                        help=f"work limit per file and worker (default {MAX_WORK}, see exact/limits.py)")
    verify.add_argument("--max-tensor-bytes", type=int, default=MAX_TENSOR_BYTES, metavar="BYTES",
                        help=f"bytes of the tensors a file's cells name, kept in memory (default {MAX_TENSOR_BYTES})")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m exact") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    if args.max_work < 1:
        parser.error("--max-work must be >= 1")
    if args.max_tensor_bytes < 0:
        parser.error("--max-tensor-bytes must be >= 0")

    cores = _cores()
    if args.workers > cores:              # more processes than cores only add memory (each holds its cells)
        print(f"{prog} verify: note: --workers {args.workers} capped at {cores}, the cores available", file=sys.stderr)
        args.workers = cores
    files = _distinct(args.files)
    cells: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    digests: dict[str, str | None] = {}
    for path, reports, error, digest in _run(_tasks(files, args.workers, args.max_work, args.max_tensor_bytes),
                                             args.workers):
        if error is None and digests.setdefault(path, digest) != digest:
            error = _CHANGED                                        # two workers read two versions
        if error is not None:
            errors.setdefault(path, error)
        else:
            cells.extend(dict(r, file=path) for r in cast("list[dict[str, Any]]", reports))   # no error: reports
    cells = [c for c in cells if c["file"] not in errors]          # a refused file contributes no cell
    order = {p: i for i, p in enumerate(files)}
    cells.sort(key=lambda c: (order[c["file"]], c["index"]))
    all_verified = bool(cells) and not errors and all(c["lower_verified"] and c["upper_verified"] for c in cells)

    for path, error in errors.items():
        print(f"{prog} verify: {_clean(path)}: {_clean(error)}", file=sys.stderr)
    if args.json:
        print(json.dumps({"cells": cells, "all_verified": all_verified,
                          "malformed": [{"file": p, "error": e} for p, e in errors.items()]}))
    else:
        _print_table(cells, len(errors))
    if errors or not cells:
        return ExitCode.MALFORMED
    return ExitCode.OK if all_verified else ExitCode.REFUTED


def _side(c: dict[str, Any], s: str) -> str:
    ok = "verified" if c[f"{s}_verified"] else "REFUTED"
    margin = c[f"{s}_margin"]
    text = f"{ok} {c[f'{s}_witness']} margin {_approx(fmpq(margin)) if margin else '-'}"
    if not c[f"{s}_verified"]:
        text += f" ({c[f'{s}_reason']}"
        if c[f"{s}_claimed"] or c[f"{s}_derived"]:
            text += f"; claimed {c[f'{s}_claimed']}, derived {c[f'{s}_derived']}"
        text += ")"
    return text


def _slack(c: dict[str, Any]) -> str:
    if c["slack"] is None:
        return ""
    bound = c["slack_bound"]
    proved = bound is not None and fmpq(bound) <= fmpq(c["slack"])
    shown = "no bound" if bound is None else f"bound {_approx(fmpq(bound))}"
    return f" slack {_approx(fmpq(c['slack']))} ({'proved' if proved else 'NOT proved'}: {shown})"


def cap_line(c: dict[str, Any]) -> str:
    """The convex cap of a cell's JSON (``exact.cap``): what it proves, or that it is not verified."""
    r0, L, U = c["convex_cap"], c["lower"], c["upper"]
    if not c["convex_cap_verified"]:
        return f"convex cap {r0} NOT verified ({c['convex_cap_reason']}): no conclusion"
    margin = _approx(fmpq(c["convex_cap_margin"])) if c["convex_cap_margin"] else "-"
    if r0 >= U:
        where = f"the cap is not below U = {U}: it rules out no convex certificate here"
    elif L > r0:
        where = f"L passes it by {L - r0}; U - cap = {U - r0}"
    else:
        where = f"L is {r0 - L} below it; U - cap = {U - r0}"
    return (f"convex cap {r0} (verified, margin {margin}): no convex certificate can prove r_eps > {r0}; "
            f"the lower families reached L = {L} ({where})")


def _short_id(text: str) -> str:
    """A cell id as ``ascii()`` shows it, cut to ``ID_CHARS`` characters (a cut one ends in "...")."""
    shown = ascii(text)
    return shown if len(shown) <= ID_CHARS else shown[:ID_CHARS - 3] + "..."


def _print_table(cells: list[dict[str, Any]], refused: int) -> None:
    # The margins and slack here are this checker's own canonical "p/q" output,
    # which may exceed the input limit MAX_NUMBER_CHARS (a margin's denominator
    # is a product of several inputs'): read them back with flint's parser.
    current = None
    for c in cells:
        if c["file"] != current:
            current = c["file"]
            print(_clean(current))
        eps = c["eps"] if len(c["eps"]) <= 24 else _approx(fmpq(c["eps"]))
        print(_clean(f"  {_short_id(c['id'])}  eps={eps}{_slack(c)}  [{c['lower']}, {c['upper']}]  "
                     f"lower: {_side(c, 'lower')}  upper: {_side(c, 'upper')}  "
                     f"target sha256 {c['target_sha256'][:16]}"))
        if c.get("convex_cap") is not None:
            print(_clean(f"    {cap_line(c)}"))
    if not cells:
        print(f"0 cells: nothing to verify ({refused} file(s) refused)")
        return
    ok = sum(c["lower_verified"] and c["upper_verified"] for c in cells)
    closed = sum(c["lower"] == c["upper"] and c["lower_verified"] and c["upper_verified"] for c in cells)
    print(f"{ok}/{len(cells)} cells verified on both sides, {closed} closed (L = U)"
          + (f"; {refused} file(s) refused" if refused else ""))

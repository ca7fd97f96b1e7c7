"""Re-verify bracket files exactly: ``python -m exact verify FILE [FILE ...]``.

Exit status: 0 when every claimed side of every cell is verified, 1 when any
side is refuted, 2 when a file is unreadable or malformed (a one-line message
per such file; the other files are still judged).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor

from flint import arb, fmpq

from .errors import MalformedInput
from .rational import format_rational
from .verify import verify_file

__all__ = ["main"]


def _approx(q) -> str:
    """A short decimal image of an exact rational, for the human table only."""
    if q is None:
        return "-"
    if abs(q.p) < 10**300 and q.q < 10**300:
        return f"{float(q.p) / float(q.q):+.3e}"
    return arb(q).str(4, radius=False)      # beyond float range: arb's decimal, never a truncated "p/q"


def _judge(task):
    """Worker: (path, indices) -> (path, reports as JSON dicts) or (path, error)."""
    path, indices = task
    try:
        return path, [r.to_json() for r in verify_file(path, indices)], None
    except MalformedInput as exc:
        return path, None, str(exc)
    except MemoryError:
        return path, None, "out of memory while reading the file"


def _tasks(paths, workers):
    if workers <= 1:
        return [(p, None) for p in paths]
    from .bracketfile import read_bracket_file
    tasks = []
    for p in paths:
        try:
            count = len(read_bracket_file(p).cells)
        except MalformedInput:
            tasks.append((p, None))
            continue
        chunks = [list(range(i, count, workers)) for i in range(min(workers, max(count, 1)))]
        tasks.extend((p, c) for c in chunks if c)
    return tasks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exact", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="re-verify bracket files")
    verify.add_argument("files", nargs="+", metavar="FILE")
    verify.add_argument("--json", action="store_true", help="one JSON object on stdout")
    verify.add_argument("--workers", type=int, default=1, metavar="N", help="processes (default 1)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be >= 1")

    tasks = _tasks(args.files, args.workers)
    if args.workers > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            outcomes = list(pool.map(_judge, tasks))
    else:
        outcomes = [_judge(t) for t in tasks]

    cells, errors = [], {}
    for path, reports, error in outcomes:
        if error is not None:
            errors[path] = error
        else:
            cells.extend(dict(r, file=path) for r in reports)
    order = {p: i for i, p in enumerate(args.files)}
    cells.sort(key=lambda c: (order[c["file"]], c["index"]))
    all_verified = not errors and all(c["lower_verified"] and c["upper_verified"] for c in cells)

    for path, error in errors.items():
        print(f"python -m exact verify: {os.fspath(path)}: malformed: {error}", file=sys.stderr)
    if args.json:
        print(json.dumps({"cells": cells, "all_verified": all_verified,
                          "malformed": [{"file": p, "error": e} for p, e in errors.items()]}))
    else:
        _print_table(cells)
    if errors:
        return 2
    return 0 if all_verified else 1


def _print_table(cells) -> None:
    # The margins and slack here are this checker's own canonical "p/q" output,
    # which may exceed the input limit MAX_NUMBER_CHARS (a margin's denominator
    # is a product of several inputs'): read them back with flint's parser.
    parse_rational = fmpq

    def side(c, s):
        ok = "verified" if c[f"{s}_verified"] else "REFUTED"
        margin = c[f"{s}_margin"]
        text = f"{ok} {c[f'{s}_witness']} margin {_approx(parse_rational(margin)) if margin else '-'}"
        if not c[f"{s}_verified"]:
            text += f" ({c[f'{s}_reason']}"
            if c[f"{s}_claimed"] or c[f"{s}_derived"]:
                text += f"; claimed {c[f'{s}_claimed']}, derived {c[f'{s}_derived']}"
            text += ")"
        return text

    current = None
    for c in cells:
        if c["file"] != current:
            current = c["file"]
            print(f"{current}")
        slack = f" slack<={_approx(parse_rational(c['slack']))}" if c["slack"] else ""
        eps = c["eps"] if len(c["eps"]) <= 24 else _approx(parse_rational(c["eps"]))
        print(f"  {c['id']}  eps={eps}{slack}  [{c['lower']}, {c['upper']}]  "
              f"lower: {side(c, 'lower')}  upper: {side(c, 'upper')}  target sha256 {c['target_sha256'][:16]}")
    ok = sum(c["lower_verified"] and c["upper_verified"] for c in cells)
    closed = sum(c["lower"] == c["upper"] and c["lower_verified"] and c["upper_verified"] for c in cells)
    print(f"{ok}/{len(cells)} cells verified on both sides, {closed} closed (L = U)")

"""Run the appendix constructions as exact regression checks.

Each check proves (or, where the paper gives only a heading, checks the
smallest honest instance of) one appendix statement with exact rationals,
sympy identities and arb intervals; no float comparison decides a pass.
Exit 0 only if every selected check passes, 1 if any fails, 2 on bad usage.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from exact.errors import ExitCode, OneLineParser
from fileio.safeio import SafeIOError, check_target

from . import all_checks
from ._core import run_check, thorough
from ._export import export_to

__all__ = ["main"]


def _fmt_numbers(numbers: dict, width: int = 90) -> str:
    parts = []
    for k, v in numbers.items():
        if isinstance(v, (dict, list)) and len(json.dumps(v)) > 40:
            continue
        parts.append(f"{k}={v if not isinstance(v, (dict, list)) else json.dumps(v)}")
    text = ", ".join(parts)
    return text if len(text) <= width else text[: width - 3] + "..."


def _print_table(rows) -> None:
    keys = list(rows[0].keys())
    widths = {k: max(len(k), *(len(str(r.get(k))) for r in rows)) for k in keys}
    print("    " + "  ".join(k.rjust(widths[k]) for k in keys))
    for r in rows:
        print("    " + "  ".join(str(r.get(k)).rjust(widths[k]) for k in keys))


def build_parser(prog: str = "python -m proofs_checks") -> argparse.ArgumentParser:
    """The command line's parser (also rendered into the CLI reference of the docs)."""
    parser = OneLineParser(prog=prog, description=__doc__)
    parser.add_argument("--json", action="store_true", help="one JSON array on stdout")
    parser.add_argument("--only", metavar="LABEL", action="append",
                        help="run only the check(s) with this paper label, e.g. G.1 (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("--export", metavar="DIR",
                        help="write every verified bracket file into DIR, named after its label (DIR/I.4.safetensors)")
    parser.add_argument("--thorough", action="store_true",
                        help="heavier variants (more betas for I.1, I.4, G.3, finer point sets for I.2, I.3); "
                             "not part of the 2-minute default run")
    return parser


def main(argv=None, prog: str = "python -m proofs_checks") -> int:
    args = build_parser(prog).parse_args(argv)

    entries = all_checks()
    if args.list:
        for e in entries:
            print(f"{e.label:7} {e.name}")
        return ExitCode.OK
    if args.only:
        # exact, case-sensitive ASCII match: no case folding (a dotless i must not select I.1)
        known = {e.label for e in entries}
        unknown = [w for w in args.only if w not in known]
        if unknown:
            print(f"{prog}: error: unknown label {', '.join(ascii(w) for w in unknown)}; "
                  f"labels: {', '.join(e.label for e in entries)}", file=sys.stderr)
            return ExitCode.MALFORMED
        entries = [e for e in entries if e.label in set(args.only)]
    if args.export is not None:
        out = Path(args.export)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            print(f"{prog}: error: cannot create {ascii(str(out))}: {exc.strerror}", file=sys.stderr)
            return ExitCode.MALFORMED
        try:     # a file the checks would write must not be a link, FIFO, device or directory (refused up front)
            for e in entries:
                check_target(out / f"{e.label}.safetensors", root=out)
        except SafeIOError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return ExitCode.MALFORMED
    with export_to(None if args.export is None else out.resolve()), thorough(args.thorough):
        results = [run_check(e) for e in entries]
    ok = all(r.passed for r in results)
    if args.json:
        json.dump([r.to_json() for r in results], sys.stdout, indent=1)
        print()
        return ExitCode.OK if ok else ExitCode.REFUTED
    print(f"{'label':7} {'check':44} {'result':6} {'time':>6}  summary / key numbers")
    for r in results:
        print(f"{r.label:7} {r.name[:44]:44} {'PASS' if r.passed else 'FAIL':6} {r.seconds:5.2f}s  {r.summary}")
        nums = _fmt_numbers(r.numbers)
        if nums:
            print(f"{'':67}{nums}")
        for f in r.failures[:5]:
            print(f"{'':67}failed: {f}")
    for r in results:
        if r.table:
            print(f"\n{r.label} {r.name}:")
            _print_table(r.table)
    passed = sum(r.passed for r in results)
    print(f"\n{passed}/{len(results)} checks passed" + ("" if ok else " - FAILURES above"))
    return ExitCode.OK if ok else ExitCode.REFUTED


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

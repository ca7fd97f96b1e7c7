"""``python -m bench``: run named benchmark suites, and regenerate ``docs/benchmarks.md`` from their results.

    python -m bench list
    python -m bench run [SUITE ...] [--size smoke|full|large] [--results DIR] [--force]
    python -m bench render [--check] [--results DIR] [--out FILE]

``run`` without a suite runs every suite. Each case writes its own result file (``bench/results/SUITE/CASE.json``)
and a rerun keeps the cases that have one, so an interrupted run resumes; ``--force`` measures them again.
Run it on a quiet machine, for example under ``nice`` in the background: the figures are CPU times of
one core, but a loaded machine still slows them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.runner import RESULTS, SIZES, load, run_suite, suite_names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the suites, their cases at each size")
    run = sub.add_parser("run", help="run suites (all when none is named)")
    run.add_argument("suites", nargs="*", metavar="SUITE")
    run.add_argument("--size", choices=SIZES, default="full")
    run.add_argument("--results", type=Path, default=RESULTS, help="results folder (default: bench/results)")
    run.add_argument("--force", action="store_true", help="measure cases that already have a result file again")
    ren = sub.add_parser("render", help="regenerate docs/benchmarks.md from the results")
    ren.add_argument("--results", type=Path, default=RESULTS)
    ren.add_argument("--out", type=Path, help="write here instead of docs/benchmarks.md")
    ren.add_argument("--check", action="store_true", help="exit 1 if the page differs from the rendering")
    args = ap.parse_args(argv)

    if args.cmd == "list":
        for name in suite_names():
            s = load(name)
            print(f"{name}: {s.title}\n  {s.command}")
            for size in SIZES:
                print(f"  {size}: {', '.join(c.name for c in s.cases(size)) or '-'}")
        return 0
    if args.cmd == "run":
        unknown = [n for n in args.suites if n not in suite_names()]
        if unknown:
            print(f"python -m bench: error: unknown suite(s) {', '.join(unknown)} "
                  f"(known: {', '.join(suite_names())})", file=sys.stderr)
            return 2
        for name in args.suites or suite_names():
            run_suite(load(name), args.size, args.results, args.force)
        return 0
    from bench.render import PAGE, render_page

    page = render_page(args.results)
    target = args.out or PAGE
    if args.check:
        same = target.is_file() and target.read_text() == page
        print(f"{target.name}: {'up to date' if same else 'differs from its results: run python -m bench render'}")
        return 0 if same else 1
    target.write_text(page)
    return 0

"""Before/after: the bracket quality of two code versions, side by side in one run.

Runs ``bench/quality.py`` of a git ref (extracted with ``git archive``) and of
the working tree at the same time, each pinned to its own core with
``taskset`` (so both see the same load), then re-verifies every bracket file
of both runs with the working tree's exact tier and prints, per case and
tolerance, the two verified brackets, and per group and tolerance the
median U/L of each side. Ranks come from the exact pass only: a cell counts
when both of its sides verify.

    python -m research.compare_versions --ref be29e31 --groups minilm --heads 8 --out /tmp/cmp

With ``--before-effort`` and ``--after-effort`` (and ``--ref HEAD``) it compares
two effort presets of the same code (thorough against default).

Also the determinism check: ``--ref HEAD`` on a clean tree runs the
same code twice side by side and must print identical brackets.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from bench.common import extract_ref, medians, verified_brackets


def start_quality(tree: Path, out: Path, core: int, groups: str, heads: int,
                  effort: str = "default") -> subprocess.Popen:
    """``bench/quality.py`` of ``tree`` on core ``core`` (one BLAS thread) at ``effort``, writing files under ``out``."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    cmd = ["taskset", "-c", str(core), sys.executable, "bench/quality.py", "--groups", groups,
           "--heads", str(heads), "--out", str(out), "--json", "--effort", effort]
    log = open(out.with_suffix(".log"), "w")
    return subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.compare_versions", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", required=True, help="git ref of the 'before' code")
    ap.add_argument("--groups", default="minilm")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--out", required=True, help="work directory (created)")
    ap.add_argument("--before-effort", default="default", help="effort preset of the 'before' run")
    ap.add_argument("--after-effort", default="default", help="effort preset of the 'after' run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    before_tree = extract_ref(args.ref, out / "before_tree")
    runs = {"before": (before_tree, out / "before", 0, args.before_effort),
            "after": (ROOT, out / "after", 1, args.after_effort)}
    procs, t0 = {}, time.perf_counter()
    for name, (tree, files, core, effort) in runs.items():
        files.mkdir(parents=True, exist_ok=True)
        procs[name] = start_quality(tree, files, core, args.groups, args.heads, effort)
    wall = {}
    for name, proc in procs.items():
        if proc.wait() != 0:
            print(f"{name}: bench/quality.py exited {proc.returncode} (see {runs[name][1]}.log)", file=sys.stderr)
            return 1
        wall[name] = time.perf_counter() - t0
    got = {name: verified_brackets(files) for name, (_, files, _, _) in runs.items()}
    keys = sorted(set(got["before"]) | set(got["after"]))
    table = [{"case": c, "eps": e, "before": got["before"].get((c, e)), "after": got["after"].get((c, e))}
             for c, e in keys]
    med = {name: medians(b) for name, b in got.items()}
    summary = [{"group": g, "eps": e, "before": med["before"].get((g, e)), "after": med["after"].get((g, e))}
               for g, e in sorted(set(med["before"]) | set(med["after"]))]
    both = [r for r in table if r["before"] and r["after"]]
    looser = [r for r in both if r["after"][0] < r["before"][0] or r["after"][1] > r["before"][1]]
    tighter = [r for r in both if r not in looser and r["after"] != r["before"]]
    result = {"looser": len(looser), "tighter": len(tighter), "compared": len(both),
              "ref": args.ref, "efforts": [args.before_effort, args.after_effort], "groups": args.groups, "heads": args.heads, "cells": table, "medians": summary,
              "wall_seconds": wall, "identical": got["before"] == got["after"]}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"before = {args.ref} ({args.before_effort}), after = working tree ({args.after_effort}); "
          f"wall s: before {wall['before']:.0f}, after {wall['after']:.0f}")
    print(f"{'case':<28} {'eps':>6} {'before':>12} {'after':>12}")
    for row in table:
        fmt = lambda b: f"[{b[0]}, {b[1]}]" if b else "unverified"
        print(f"{row['case']:<28} {row['eps']:>6} {fmt(row['before']):>12} {fmt(row['after']):>12}")
    print(f"\n{'group':<10} {'eps':>6} {'median U/L before':>18} {'after':>8} {'after/before':>13}")
    for s in summary:
        b, a = s["before"], s["after"]
        ratio = f"{a / b:.3f}" if a and b else "-"
        print(f"{s['group']:<10} {s['eps']:>6} {b if b is None else round(b, 3)!s:>18} "
              f"{a if a is None else round(a, 3)!s:>8} {ratio:>13}")
    print(f"\nidentical brackets: {result['identical']}; of {len(both)} cells verified on both sides, "
          f"{len(tighter)} tighter after (L up or U down, neither side worse), {len(looser)} looser after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

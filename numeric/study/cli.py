"""The held-out study of a panel directory (issue 15; protocol in docs/study.md).

Reads the panel's cells through the report's audit (every bracket file
re-verified by the exact tier, or read from the record of its exact pass:
same file bytes, same checker code, ``numeric.panel.vcache``; ``--reverify``
ignores the records), fits the calibrated ridge models with source
cross-fitting, and reports the gains of G and I over the baselines with 95%
source-cluster bootstrap intervals and the gauge audit. Recomputes nothing
the panel certified. Writes study.md, study.json, predictions.csv and
figures/gains.png to --out (default DIR/study, DIR the first directory).

  python -m numeric study runs/study
  python -m numeric study runs/study-minilm runs/study-zoo --out runs/study-all
  python -m numeric study runs/study --target l_over_n --replicates 2000 --seed 1 --json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from numeric.study.compare import compare
from numeric.study.data import StudyError
from numeric.study.fit import FOLDS
from numeric.study.gauge import gauge_audit
from numeric.study.load import TARGETS, load_study
from numeric.study.protocol import PRIMARY, comparisons, with_placebo
from numeric.study.write import write_outputs

__all__ = ["DEFAULT_REPLICATES", "DEFAULT_SEED", "main"]

PROG = "python -m numeric study"
#: Bootstrap resamples (the protocol's minimum).
DEFAULT_REPLICATES = 1000
#: The study's seed (bootstrap draws and the placebo permutation); recorded.
DEFAULT_SEED = 20260415
EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", nargs="+", help="panel output directory (several: their cells together, "
                   "e.g. one panel per model family)")
    p.add_argument("--target", default="u_over_n", choices=TARGETS, help="target (default u_over_n = U/n)")
    p.add_argument("--eps", default="1/4", help="tolerance the panel ran (default 1/4)")
    p.add_argument("--out", help="output directory (default DIR/study)")
    p.add_argument("--replicates", type=int, default=DEFAULT_REPLICATES,
                   help=f"bootstrap resamples (default {DEFAULT_REPLICATES})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed (default {DEFAULT_SEED})")
    p.add_argument("--folds", type=int, default=FOLDS, help=f"source folds (default {FOLDS})")
    p.add_argument("--workers", type=int, help="exact re-verification processes (default: one per core)")
    p.add_argument("--reverify", action="store_true",
                   help="re-verify every bracket file with the exact tier, ignoring the records of earlier "
                        "exact passes (DIR/verified: same file bytes, same checker code)")
    p.add_argument("--jobs", type=int, help="bootstrap processes (default: one per core; the answer does not "
                   "depend on it)")
    p.add_argument("--gbm", type=int, default=0, metavar="N",
                   help="robustness check: the primary comparison and B1 vs B1+I with a gradient-boosted model, "
                   "N bootstrap resamples (default 0: off)")
    p.add_argument("--json", action="store_true", help="print study.json's summary on stdout")
    return p


def _check(args) -> None:
    if args.replicates < 1:
        raise StudyError("--replicates must be >= 1")
    if args.jobs is not None and args.jobs < 1:
        raise StudyError("--jobs must be >= 1")
    if args.gbm < 0:
        raise StudyError("--gbm must be >= 0")
    if args.folds < 2:
        raise StudyError("--folds must be >= 2")
    if args.workers is not None and args.workers < 1:
        raise StudyError("--workers must be >= 1")


def run(args, command: str) -> dict:
    """Load, compare, audit, write; the JSON document."""
    _check(args)
    t0 = time.perf_counter()
    data = load_study(args.dir, eps=args.eps, target=args.target, workers=args.workers, reverify=args.reverify)
    data = with_placebo(data, args.seed)
    results = compare(data, comparisons(), replicates=args.replicates, seed=args.seed, folds=args.folds,
                      jobs=args.jobs or os.cpu_count() or 1)
    gauge = gauge_audit(data, folds=args.folds)
    gbm = None
    if args.gbm:
        from numeric.study.robust import gbm_check

        gbm = gbm_check(data, comparisons(), replicates=args.gbm, seed=args.seed, folds=args.folds)
    setup = {"panel": ", ".join(map(str, args.dir)), "target": args.target, "eps": args.eps, "cells": len(data),
             "sources": len(set(data.sources)), "heads": len(set(data.heads)),
             "families": sorted(set(data.families)), "folds": args.folds, "replicates": args.replicates,
             "seed": args.seed, "gbm_replicates": args.gbm, "code_version": _code_version(),
             "seconds": round(time.perf_counter() - t0, 1)}
    out = Path(args.out) if args.out else Path(args.dir[0]) / "study"
    return write_outputs(out, data, results, gauge, setup, command, gbm) | {"out": str(out)}


def _code_version() -> dict:
    from numeric.search.effort import code_version

    return code_version()


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    command = " ".join([PROG] + list(sys.argv[2:] if argv is None else argv))
    try:
        doc = run(args, command)
    except StudyError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    primary = next(c for c in doc["comparisons"] if c["name"] == PRIMARY)["estimates"]["aggregate"]
    if args.json:
        print(json.dumps({"out": doc["out"], "setup": doc["setup"], "primary": primary}))
    else:
        lo, hi = primary["rho_ci"]
        print(f"{doc['out']}/study.md: {doc['setup']['cells']} cells; {PRIMARY}: rho = {primary['rho']:+.4f} "
              f"[{lo:+.4f}, {hi:+.4f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

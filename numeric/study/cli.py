"""The held-out study of a panel directory (protocol in docs/study.md).

Reads the panel's cells through the report's audit (every bracket file
re-verified by the exact tier and every row bound to its head file; a panel
directory is untrusted input, docs/panel.md; ``--trust-records`` reads the
exact pass of a file from its record in DIR/verified instead, faster, but
anyone who can write DIR can forge a record), fits the calibrated ridge models with source
cross-fitting, and reports the gains of G and I over the baselines with
calibrated 95% intervals (cluster-robust on the paired held-out losses), the
placebos, the reading rule and the gauge audit. Recomputes nothing the panel
certified. Two other targets (``numeric.study.targets``, paper L.6): the
attention-SVD constructive budget, recomputed from the bound head files (a
panel table that disagrees exits 1), and the native-causal cells of the
decoders with their common-prefix predictors (skipped with a reason when
the panel has none). Writes study.md, study.json, predictions.csv and figures/*.png
to --out (default DIR/study, DIR the first directory), through fileio.safeio:
a link, a directory, a FIFO or a device at a target, or a link below --out
on the way (e.g. figures -> elsewhere), is refused before any work (one
line, exit 2).

--table FILE runs the statistics from a shipped cell table alone
(``numeric.study.table``: the format; ``DIR --write-table FILE`` writes one),
with a banner on every output that the brackets were not re-verified on this
machine; the other targets, which need the head files, do not run.

--calibrate [DIR] is the self-check: synthetic tables of the panel's shape (or
of --shape, or 4 families x 8 heads x 16 sources) with a known truth; prints
the false-positive rate, the power at the planted gain, the coverage, the
equivalence test's size, whether the reading rule flags head identity and
counts a within-head gain, leave one head out's coverage for a head-structured
block, and the source scan's caution threshold; exit 1 when a check fails.

  python -m numeric study runs/study
  python -m numeric study runs/study-minilm runs/study-zoo --out runs/study-all
  python -m numeric study runs/study --target l_over_n --replicates 2000 --seed 1 --json
  python -m numeric study runs/study --write-table study-table.csv
  python -m numeric study --table study-table.csv --out /tmp/st
  python -m numeric study --calibrate
  python -m numeric study --calibrate --shape encoder=24x16@text --rho 0.08,0.12
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from exact.errors import ExitCode, OneLineParser
from fileio.safeio import SafeIOError
from numeric.search.effort import CodeInfo, code_version
from numeric.study.calibrate import (FOUR_FAMILY, REDRAWN, SCENARIOS, calibrate, caution_threshold, panel_shape,
                                     parse_shape, report_lines, source_scan)
from numeric.study.caution import CALIBRATED_SOURCES, COVERAGE_FLOOR, GRID, SE_SD_FLOOR
from numeric.study.compare import PERMUTATIONS, calibration_caution, compare
from numeric.study.data import PanelDisagreement, StudyError
from numeric.study.fit import FOLDS
from numeric.study.gauge import gauge_audit
from numeric.study.load import TARGETS, load_study, target_values
from numeric.study.protocol import PRIMARY, comparisons, readings
from numeric.study.table import BANNER, read_table, write_table
from numeric.study.robust import gbm_check
from numeric.study.targets import other_targets
from numeric.study.transfer import transfer_rows, transfer_section
from numeric.study.write import check_outputs, write_outputs
from numeric.study.results import StudyResults, comparison_records

__all__ = ["DEFAULT_REPLICATES", "DEFAULT_SEED", "DEFAULT_CALIBRATIONS", "main"]

PROG = "python -m numeric study"
#: Resamples of the secondary percentile bootstrap (0: off by default: it is 1.4-1.8x wider than the
#: calibrated interval and has little power, docs/study.md).
DEFAULT_REPLICATES = 0
#: Replications per scenario of the self-check.
DEFAULT_CALIBRATIONS = 100
#: Replications per grid point of the self-check's source scan.
DEFAULT_SCAN = 40
#: Placebo permutations per replication of the self-check (the study itself: PERMUTATIONS).
CALIBRATION_PERMUTATIONS = 5
#: The study's seed (bootstrap draws, placebo permutations, calibration tables); recorded.
DEFAULT_SEED = 20260415


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", nargs="*", help="panel output directory (several: their cells together, "
                   "e.g. one panel per model family)")
    p.add_argument("--calibrate", action="store_true",
                   help="self-check on synthetic tables of DIR's shape (no DIR: --shape, or 4 families x 8 heads "
                        "x 16 sources)")
    p.add_argument("--shape", help="--calibrate without DIR: NAME=HEADSxSOURCES@POOL,... "
                   "(e.g. encoder=24x16@text)")
    p.add_argument("--calibrations", type=int, default=DEFAULT_CALIBRATIONS,
                   help=f"--calibrate: replications per scenario (default {DEFAULT_CALIBRATIONS}; the two "
                        "leave-one-head-out scenarios, which refit every head's deletion: 2/5 of it)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help=f"--calibrate: the scenarios to run, comma separated (default all: {','.join(SCENARIOS)})")
    p.add_argument("--scan", type=int, default=DEFAULT_SCAN,
                   help=f"--calibrate: replications per point of the source scan (default {DEFAULT_SCAN}; 0: off)")
    p.add_argument("--table", help="run the statistics from a shipped cell table (CSV, numeric.study.table) "
                   "instead of a panel directory; the brackets are not re-verified")
    p.add_argument("--write-table", dest="write_table", help="also write the study's cell table to this file")
    p.add_argument("--rho", default="0.08", help="--calibrate: planted relative gain(s), comma separated "
                   "(default 0.08)")
    p.add_argument("--permutations", type=int, help=f"placebo permutations (default {PERMUTATIONS}; "
                   f"{CALIBRATION_PERMUTATIONS} per replication under --calibrate)")
    p.add_argument("--target", default="u_over_n", choices=TARGETS, help="target (default u_over_n = U/n)")
    p.add_argument("--eps", default="1/4", help="tolerance the panel ran (default 1/4)")
    p.add_argument("--out", help="output directory (default DIR/study)")
    p.add_argument("--replicates", type=int, default=DEFAULT_REPLICATES,
                   help="resamples of the secondary, conservative percentile bootstrap "
                        f"(default {DEFAULT_REPLICATES}: off)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed (default {DEFAULT_SEED})")
    p.add_argument("--folds", type=int, default=FOLDS, help=f"source folds (default {FOLDS})")
    p.add_argument("--workers", type=int, help="exact re-verification processes (default: one per core)")
    p.add_argument("--trust-records", dest="reverify", action="store_false",
                   help="read the exact pass of a bracket file from its record in DIR/verified where one matches "
                        "(faster; anyone who can write DIR can forge a record). Default: re-verify every file")
    p.add_argument("--reverify", dest="legacy_reverify", action="store_true",
                   help=argparse.SUPPRESS)  # re-verifying is the default; the flag is kept for old scripts
    p.add_argument("--jobs", type=int, help="bootstrap processes (default: one per core; the answer does not "
                   "depend on it)")
    p.add_argument("--gbm", type=int, default=0, metavar="N",
                   help="robustness check: the primary comparison and B1 vs B1+I with a gradient-boosted model, "
                   "N bootstrap resamples (default 0: off)")
    p.add_argument("--json", action="store_true", help="print study.json's summary on stdout")
    return p


def _check(args) -> None:
    if args.replicates < 0:
        raise StudyError("--replicates must be >= 0")
    if args.permutations is not None and args.permutations < 1:
        raise StudyError("--permutations must be >= 1")
    if args.calibrations < 1:
        raise StudyError("--calibrations must be >= 1")
    if not args.dir and not args.calibrate and not args.table:
        raise StudyError("give a panel directory (or --table FILE, or --calibrate)")
    if args.table and (args.dir or args.calibrate or args.write_table):
        raise StudyError("--table runs alone (no panel directory, --calibrate or --write-table)")
    if args.scan < 0:
        raise StudyError("--scan must be >= 0")
    if args.table and not args.out:
        raise StudyError("--table needs --out")
    if args.shape and args.dir:
        raise StudyError("--shape is for --calibrate without a panel directory")
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
    out = Path(args.out) if args.out else Path(args.dir[0]) / "study"
    check_outputs(out)            # a link, a directory, a FIFO or a device at a target: refused before any work
    if not args.reverify:
        print(f"{PROG}: --trust-records: the exact pass of a bracket file is read from its record in DIR/verified "
              "where one matches, not re-run, and no second checker runs (anyone who can write DIR can forge "
              "one); study.md's first lines say so", file=sys.stderr)
    t0 = time.perf_counter()
    audited: list = []
    permutations = args.permutations or PERMUTATIONS
    targets = None
    if args.table:
        data, args.target = read_table(args.table)
    else:
        data = load_study(args.dir, eps=args.eps, target=args.target, workers=args.workers, reverify=args.reverify,
                          audited=audited)
        if args.write_table:
            write_table(args.write_table, data, args.target)
        # first: a table the recomputed targets contradict stops the study before the long part
        targets = other_targets(data, audited, eps=args.eps,
                                target_values=lambda rows: target_values(rows, args.target),
                                replicates=args.replicates, seed=args.seed, folds=args.folds,
                                jobs=args.jobs or os.cpu_count() or 1, permutations=permutations)
    results = compare(data, comparisons(), replicates=args.replicates, seed=args.seed, folds=args.folds,
                      jobs=args.jobs or os.cpu_count() or 1, permutations=permutations)
    gauge = gauge_audit(data, folds=args.folds)
    gbm = None
    if args.gbm:
        gbm = gbm_check(data, comparisons(), replicates=args.gbm, seed=args.seed, folds=args.folds)
    panel = f"table {args.table}" if args.table else ", ".join(map(str, args.dir))
    setup = {"panel": panel, "target": args.target, "eps": args.eps, "cells": len(data),
             "sources": len(set(data.sources)), "heads": len(set(data.heads)),
             "families": sorted(set(data.families)), "folds": args.folds, "replicates": args.replicates,
             "permutations": permutations, "seed": args.seed, "gbm_replicates": args.gbm,
             "code_version": _code_version(), "caution": calibration_caution(data),
             "trusted_records": not args.reverify,
             "seconds": round(time.perf_counter() - t0, 1), "banner": BANNER if args.table else None}
    verdicts = readings(results)
    transfer = transfer_section(transfer_rows(data, folds=args.folds))   # the domain-transfer rows (L.6)
    record = StudyResults(command, setup, verdicts, comparison_records(results), [asdict(g) for g in gauge],
                          gbm=comparison_records(gbm) if gbm is not None else None,
                          targets=None if targets is None else [
                              {k: v for k, v in t.items() if k != "results"}
                              | {"comparisons": comparison_records(t["results"])} for t in targets],
                          transfer=transfer)
    return write_outputs(out, data, record).to_dict() | {"out": str(out)}


def calibrate_main(args) -> int:
    """``--calibrate``: the self-check's report on stdout; 0 when every check passes, else 1."""
    _check(args)
    try:
        rhos = [float(x) for x in args.rho.split(",")]
    except ValueError:
        raise StudyError(f"bad --rho {args.rho!r} (comma-separated numbers)") from None
    if not all(0 < r < 1 for r in rhos):
        raise StudyError("--rho values must lie in (0, 1)")
    if args.dir:
        shape = panel_shape(load_study(args.dir, eps=args.eps, target=args.target, workers=args.workers,
                                       reverify=args.reverify))
    else:
        shape = parse_shape(args.shape) if args.shape else FOUR_FAMILY
    k = args.permutations or CALIBRATION_PERMUTATIONS
    print(f"self-check of the study's statistics on synthetic tables: {shape.describe()}; "
          f"{args.calibrations} replications per scenario, {k} placebo permutations, seed {args.seed}", flush=True)
    failed, ran, skipped = [], 0, {}
    chosen = args.scenarios.split(",")
    if not chosen or any(sc not in SCENARIOS for sc in chosen):
        raise StudyError(f"bad --scenarios {args.scenarios!r} (choose from {', '.join(SCENARIOS)})")
    for sc in (sc for sc in SCENARIOS if sc in chosen):
        for rho in (rhos if sc in ("gain", "within-head") else rhos[:1]):
            t0 = time.process_time()
            n = max(1, args.calibrations * 2 // 5) if sc in REDRAWN else args.calibrations
            res = calibrate(shape, sc, n, args.seed, rho=rho, permutations=k)
            lines, bad = report_lines({sc: res})
            failed += bad
            ran += sum(line.lstrip().startswith(("[ok]", "[FAIL]")) for line in lines)
            skipped.update(res.skipped)
            print("\n".join(lines) + f"\n  ({time.process_time() - t0:.0f} s CPU)", flush=True)
    if args.scan:
        t0 = time.process_time()
        pts = source_scan(shape, GRID, args.scan, args.seed)
        print(f"source scan (planted rho 0.08, primary row, {args.scan} replications a point): "
              + "; ".join(f"{p.sources} sources: coverage {p.coverage:.3f}, se/sd {p.se_sd:.2f}" for p in pts))
        got = caution_threshold(pts)
        print(f"  caution threshold at this shape (the fewest sources with coverage >= {COVERAGE_FLOOR} and se/sd >= "
              f"{SE_SD_FLOOR}): {got if got is not None else 'none in the grid'}; the study's tabulated threshold "
              f"{CALIBRATED_SOURCES}\n  ({time.process_time() - t0:.0f} s CPU)", flush=True)
    note = f" ({len(skipped)} rows skipped: the shape is too small for them)" if skipped else ""
    if not ran:
        print(f"no check ran{note}")
        return ExitCode.REFUTED
    print((f"{len(failed)} checks failed: {', '.join(failed)}" if failed else "every check passed") + note)
    return ExitCode.REFUTED if failed else ExitCode.OK


def _code_version() -> CodeInfo:
    return code_version()


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    command = " ".join([PROG] + list(sys.argv[2:] if argv is None else argv))
    try:
        if args.calibrate:
            return calibrate_main(args)
        doc = run(args, command)
    except PanelDisagreement as e:   # the panel disagrees with its exact pass or the study's recomputation
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return ExitCode.REFUTED
    except (StudyError, SafeIOError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return ExitCode.MALFORMED
    if doc["setup"].get("banner"):
        print(f"{PROG}: {doc['setup']['banner']}")
    for line in doc["setup"]["caution"]:
        print(f"{PROG}: caution: {line}", file=sys.stderr)
    row = next(c for c in doc["comparisons"] if c["name"] == PRIMARY)
    primary = row["estimates"].get("aggregate") or {"reason": row["reason"]}
    if args.json:
        print(json.dumps({"out": doc["out"], "setup": doc["setup"], "primary": primary, "reading": doc["reading"]}))
    elif "reason" in primary:
        print(f"{doc['out']}/study.md: {doc['setup']['cells']} cells; {PRIMARY}: {primary['reason']}")
    else:
        lo, hi = primary["rho_ci"]
        print(f"{doc['out']}/study.md: {doc['setup']['cells']} cells; {PRIMARY}: rho = {primary['rho']:+.4f} "
              f"[{lo:+.4f}, {hi:+.4f}]; G: {doc['reading']['G']['verdict']}; I: {doc['reading']['I']['verdict']}")
    return ExitCode.OK


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

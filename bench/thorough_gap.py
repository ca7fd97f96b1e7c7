"""Does one plain full-length anneal beat the thorough preset? The issue's control, cell by cell.

For every cell of the bracket files in ``DIR`` that the exact tier verifies (a thorough run of
``bench/effort_compare.py``, say), one rank below its verified U (when that is still at least
its L) is tried with single full-length trials of ``refine`` (``refine.FULL_ITERS`` steps, the
whole schedule, no early exit but the last-quarter rule) from the truncated SVD: with the Huber
smoothing and without it. A trial that reaches eps there is a rank the thorough search missed
and a plain anneal finds (a float result: it would still need the exact tier). Prints, per cell,
the verified bracket and the two trials' error / eps; exit status 1 when a trial beats thorough.

    python bench/thorough_gap.py --heads-npz HEADS.npz --dir RUN/after-thorough
"""
from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.compare_versions import verified_brackets
from numeric.heads.extract import softmax_rows
from numeric.search import refine as rf
from numeric.search import upper as up
from numeric.search.budget import Budget

#: The target of a trial, as the search sets it below the cell's eps (exact ties go to the exact tier).
TARGET = 1 - 1e-6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/thorough_gap.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads-npz", required=True, help="logits saved with np.savez (read without pickle)")
    ap.add_argument("--dir", required=True, help="bracket files named HEAD.safetensors")
    ap.add_argument("--iters", type=int, default=rf.FULL_ITERS)
    args = ap.parse_args(argv)
    brackets = verified_brackets(Path(args.dir))
    beaten, tried = [], 0
    with np.load(args.heads_npz, allow_pickle=False) as data:
        names = set(data.files)
        heads = sorted({h for h, _ in brackets if h in names})
        print(f"{'head':<14} {'eps':>5} {'[L, U]':>11} {'rank':>5} {'smoothed':>9} {'plain':>9}")
        for h in heads:
            A = softmax_rows(np.asarray(data[h], dtype=np.float64))
            svd, _ = up.svd_baseline(A)
            for (case, e), (lo, u) in sorted(brackets.items(), key=lambda kv: (kv[0][0], Fraction(kv[0][1]))):
                if case != h or u - 1 < max(lo, 1):
                    continue
                eps = float(Fraction(e)) * TARGET
                errs = [rf.refine(A, *up.svd_factors(*svd, u - 1), eps, iters=args.iters, budget=Budget(10**12),
                                  huber=hub)[2] / eps for hub in (True, False)]
                tried += 1
                flag = " beats thorough" if min(errs) <= 1 else ""
                if flag:
                    beaten.append((h, e, u - 1))
                print(f"{h:<14} {e:>5} {f'[{lo}, {u}]':>11} {u - 1:>5} {errs[0]:>9.4f} {errs[1]:>9.4f}{flag}",
                      flush=True)
    print(f"{tried} cells tried one rank below U; a plain full-length anneal reached eps at {len(beaten)}: {beaten}")
    return 1 if beaten else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Single full-length trials under the four objectives, from the truncated SVD: where the hot
temperature (``refine.Objective(hot=True)``: T0 = eps, the schedule before the absolute temperature) helps.

For each ``HEAD:EPS:RANKS`` cell, one trial of ``refine.FULL_ITERS`` steps at each rank from the
truncated SVD under each ``refine.Objective``: smoothed (the search's usual one), plain (no Huber
smoothing), hot-smoothed and hot-plain (``svd-hot``, a start of thorough's restarts), at the
search's own float target ``(eps - slack)(1 - UPPER_SAFETY)``. Prints error / target per trial and
the objective that ended lowest. Float results only: nothing here is a bracket.

    python -m research.hot_start --heads-npz HEADS.npz --cells q256_l2h0:1/10:127,128,129 demo0_l3h8:1/4:68,69
"""
from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from numeric.heads.extract import softmax_rows
from numeric.search import refine as rf
from numeric.search import upper as up
from numeric.search.budget import Budget
from numeric.search.driver import UPPER_SAFETY
from numeric.search.slack import target_slack

OBJECTIVES = {"smoothed": up.SMOOTHED, "plain": up.PLAIN, "hot-smoothed": rf.Objective(hot=True), "hot-plain": up.HOT}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.hot_start", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads-npz", required=True, help="logits saved with np.savez (read without pickle)")
    ap.add_argument("--cells", nargs="+", required=True, help="HEAD:EPS:RANK[,RANK...]")
    ap.add_argument("--iters", type=int, default=rf.FULL_ITERS)
    args = ap.parse_args(argv)
    wins = dict.fromkeys(OBJECTIVES, 0)
    print(f"{'head':<14} {'eps':>5} {'rank':>5} " + " ".join(f"{k:>12}" for k in OBJECTIVES) + "  lowest")
    with np.load(args.heads_npz, allow_pickle=False) as data:
        for cell in args.cells:
            head, e, ranks = cell.split(":")
            H = np.asarray(data[head], dtype=np.float64)
            A = softmax_rows(H)
            eps = (float(Fraction(e)) - target_slack(H, A)[1]) * (1 - UPPER_SAFETY)
            svd, _ = up.svd_baseline(A)
            for k in map(int, ranks.split(",")):
                errs = {name: rf.refine(A, *up.svd_factors(*svd, k), eps, iters=args.iters, budget=Budget(10**12),
                                        objective=o)[2] / eps for name, o in OBJECTIVES.items()}
                low = min(errs, key=errs.get)
                wins[low] += 1
                print(f"{head:<14} {e:>5} {k:>5} " + " ".join(f"{x:>12.4f}" for x in errs.values()) + f"  {low}",
                      flush=True)
    print("lowest: " + ", ".join(f"{k} {v}" for k, v in wins.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

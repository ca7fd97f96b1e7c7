"""Which start wins a narrowing trial: the compressed best or the truncated SVD?

Runs default's ``search_upper`` (640,000 units, no lower bound) on saved heads at eps 1/10, 1/4,
1/2 and, beside every narrowing trial from the compressed best, one trial of the same length from
the truncated SVD at the same rank (outside the search's budget: the search's path is unchanged).
Prints per trial the two starts' max row-l1 error and the two trials' final error (over eps),
then, over the trials whose two starts differ, how often the SVD trial ends lower and how often
the compressed start begins lower.

    python -m research.narrowing_starts --heads-npz HEADS.npz --heads demo1_l3h8,demo1_l1h3
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from numeric.heads.extract import softmax_rows
from numeric.search import refine as rf
from numeric.search import upper as up
from numeric.search.budget import Budget
from numeric.search.norms import row_l1_error


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.narrowing_starts", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads-npz", required=True, help="logits saved with np.savez (read without pickle)")
    ap.add_argument("--heads", required=True, help="comma-separated names in the npz")
    args = ap.parse_args(argv)
    real, seen, state = up._trial, [], {}

    def trial(A, eps, start, *, iters, budget, device, phase, kind, lr_scale=1.0, objective=up.SMOOTHED):
        res = real(A, eps, start, iters=iters, budget=budget, device=device, phase=phase, kind=kind,
                   lr_scale=lr_scale, objective=objective)
        if phase == "narrow" and kind == "compressed" and res is not None:
            k = start[1].shape[1]
            sv = up.svd_factors(*state["svd"], k)
            c0, s0 = row_l1_error(A, *start) / eps, row_l1_error(A, *sv) / eps
            s1 = rf.refine(A, *sv, eps, iters=iters, budget=Budget(10**12))[2] / eps
            print(f"  rank {k:4d}  start: compressed {c0:.3f} svd {s0:.3f}  end: compressed {res[2] / eps:.4f} "
                  f"svd {s1:.4f}", flush=True)
            if c0 != s0:
                seen.append((c0 < s0, s1 < res[2] / eps))
        return res

    up._trial = trial
    with np.load(args.heads_npz, allow_pickle=False) as data:
        for h in args.heads.split(","):
            A = softmax_rows(np.asarray(data[h], dtype=np.float64))
            state["svd"], errs = up.svd_baseline(A)
            for e in (0.1, 0.25, 0.5):
                print(f"{h} eps {e}", flush=True)
                up.search_upper(A, e * (1 - 1e-6), Budget(640000), svd=(state["svd"], errs))
    print(f"{len(seen)} trials with two different starts: the SVD trial ends lower in {sum(s for _, s in seen)}, "
          f"the compressed start begins lower in {sum(c for c, _ in seen)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

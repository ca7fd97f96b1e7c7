"""Continuations of thorough's closest miss at its first failing rank: which step and objective polish it.

Runs ``search_brackets`` at thorough effort on one saved head (logits read without pickle) and
one tolerance, with ``upper._restarts`` replaced by a probe: at the first failing rank r it takes
the closest miss the narrowing and boundary phases hand to the restarts, and runs full-length
``refine`` trials (``refine.FULL_ITERS`` steps, at the search's own target) from it at 1, 0.3
and 0.1 times the Adam step, each with the Huber smoothing and without it, and, as the control,
from the truncated SVD at 0.1 times the step. Prints error / target, the steps run and how each
trial ended. These are float results that explain ``upper.FINE_LR``. They are not brackets.

    python -m research.polish_probe --heads-npz HEADS.npz --head demo1_l3h8 --eps 1/10
"""
from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from numeric.heads.extract import softmax_rows
from numeric.runtime import trial_trace
from numeric.search import driver
from numeric.search import refine as rf
from numeric.search import upper as up
from numeric.search.budget import Budget
from numeric.search.starts import svd_factors


class _Probed(Exception):
    pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.polish_probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads-npz", required=True, help="logits saved with np.savez (read without pickle)")
    ap.add_argument("--head", required=True)
    ap.add_argument("--eps", default="1/10")
    args = ap.parse_args(argv)
    with np.load(args.heads_npz, allow_pickle=False) as data:
        if args.head not in data.files:
            raise SystemExit(f"error: no head {args.head!r} in {args.heads_npz}")
        H = np.asarray(data[args.head], dtype=np.float64)
    A = softmax_rows(H)

    def probe(A, eps, r, lower, found, svd, budget, iters, device, warm, tried, missed):
        if r not in missed:
            print(f"rank {r}: the earlier phases hand no miss to the restarts")
            raise _Probed
        P, Q, err = missed[r]
        print(f"first failing rank {r} (best {found[0].rank}), closest earlier miss {err / eps:.4f} eps")
        runs = [(f"miss, step x{lr:g}, {'smoothed' if hub else 'plain'}", (P, Q), lr, hub)
                for lr in (1.0, 0.3, up.FINE_LR) for hub in (True, False)]
        runs.append((f"truncated SVD, step x{up.FINE_LR:g}, plain", svd_factors(*svd, r), up.FINE_LR, False))
        for name, start, lr, hub in runs:
            with trial_trace() as trace:
                e = rf.refine(A, *start, eps, iters=iters, budget=Budget(10**12), lr_scale=lr,
                              objective=rf.Objective(huber=hub))[2]
            log = trace.refines[-1]
            print(f"  {name:<32} {e / eps:.4f}  {log.steps:>5} of {log.iters} steps, {log.reason}", flush=True)
        raise _Probed

    up._restarts = probe
    try:
        driver.search_brackets(A, [Fraction(args.eps)], logits=H, id_prefix=args.head, effort="thorough")
    except _Probed:
        return 0
    print("thorough ran no restarts here (the best rank is the lower bound, or the budget ran out)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

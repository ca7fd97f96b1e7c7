"""Does one plain full-length anneal beat the thorough preset? The issue's control, cell by cell.

For every cell of the bracket files in ``DIR`` that the exact tier verifies (a thorough run of
``bench/effort_compare.py``, say), one rank below its verified U (when that is still at least
its L) is tried with single full-length trials of ``refine`` (``refine.FULL_ITERS`` steps, the
whole schedule, no early exit but the last-quarter rule) from the truncated SVD: with the Huber
smoothing, without it, and without it from the hot temperature (``upper.HOT``), at the
search's own float target ``(eps - slack)(1 - UPPER_SAFETY)``
(the slack of the softmax from the logits, ``slack.target_slack``, as ``driver`` sets it). A
trial that reaches it is checked by the exact tier as the search's witnesses are (``check_upper``
at ``eps - slack`` on the exact matrix); one it verifies is a rank the thorough search missed and
a plain anneal finds. Prints, per cell, the verified bracket and the three trials' error / target
(``*``: reached the target, exact verification refused); exit status 1 when a trial beats thorough.

    python -m research.thorough_gap --heads-npz HEADS.npz --dir RUN/after-thorough
"""
from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from bench.common import verified_brackets
from exact.certificates import check_upper
from exact.matrix import ExactMatrix
from exact.rational import to_fmpq
from numeric.heads.extract import softmax_rows
from numeric.search import refine as rf
from numeric.search.across import exact_upper_witness
from numeric.search import upper as up
from numeric.search.budget import Budget
from numeric.search.driver import UPPER_SAFETY
from numeric.search.slack import target_slack


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.thorough_gap", description=__doc__,
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
        print(f"{'head':<14} {'eps':>5} {'[L, U]':>11} {'rank':>5} {'smoothed':>9} {'plain':>9} {'hot':>9}")
        for h in heads:
            H = np.asarray(data[h], dtype=np.float64)
            A = softmax_rows(H)
            slack_q, slack_f = target_slack(H, A)
            A_exact = ExactMatrix.from_float64(A)
            svd, _ = up.svd_baseline(A)
            for (case, e), (lo, u) in sorted(brackets.items(), key=lambda kv: (kv[0][0], Fraction(kv[0][1]))):
                if case != h or u - 1 < max(lo, 1):
                    continue
                eps = (float(Fraction(e)) - slack_f) * (1 - UPPER_SAFETY)
                trials = [rf.refine(A, *up.svd_factors(*svd, u - 1), eps, iters=args.iters, budget=Budget(10**12),
                                    objective=o) for o in (up.SMOOTHED, up.PLAIN, up.HOT)]
                tried += 1
                up_exact = to_fmpq(Fraction(e)) - slack_q
                verified = [t[2] <= eps and check_upper(A_exact, exact_upper_witness(t[0], t[1]), up_exact, u - 1).verified
                            for t in trials]
                marks = ["*" if t[2] <= eps and not v else "" for t, v in zip(trials, verified)]
                flag = " beats thorough" if any(verified) else ""
                if flag:
                    beaten.append((h, e, u - 1))
                cols = " ".join(f"{t[2] / eps:>8.4f}{m or ' '}" for t, m in zip(trials, marks))
                print(f"{h:<14} {e:>5} {f'[{lo}, {u}]':>11} {u - 1:>5} {cols}{flag}", flush=True)
    print(f"{tried} cells tried one rank below U; a plain full-length anneal reached eps at {len(beaten)}: {beaten}")
    return 1 if beaten else 0


if __name__ == "__main__":
    raise SystemExit(main())

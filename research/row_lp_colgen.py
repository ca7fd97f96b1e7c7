"""Row-side sets beyond 32 rows: does column generation make the decoder LP cheaper?

The row-side decoder LP (``numeric.search.lp.min_norm_row_decoder``: G of
least row-l1 norm with ``A[S, :] G = I_d``) has ``2 n d`` variables and its
HiGHS time grows about as ``n d^3``; that is why the LP extension of far rows
stops at 32 rows (``numeric.search.far_rows.LP_MAX_ROWS``). Column generation
would solve it on a subset J of G's rows (the columns of A) and add the rows
whose dual constraint the restricted optimum violates, hoping that the
optimal G lives on few rows.

Here, per MiniLM head of the quality heads (``research/heads.py``) and random row sets of size d,
the full LP and column generation side by side: objective, CPU seconds,
rounds and the size of J at the end. The dual of the LP is
``max tr(Y) s.t. sum_j max_l |(A_S^T Y)_jl| <= 1``, and with A entrywise
positive (a softmax) every row j outside J has ``(A_S^T Y)_j != 0``, so the
restricted optimum violates its dual constraint: column generation can only
end with every row.

    python -m research.row_lp_colgen [--heads 3] [--sizes 8,12,16,24]
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]

import numpy as np

import numeric.search.lp as lp


def colgen_decoder(AS: np.ndarray, iterations: int = 5000, tol: float = 1e-9):
    """The decoder LP by column generation: start on the ``max(3d, 16)`` columns of largest
    mass, add up to ``max(2d, 16)`` columns whose dual constraint is violated most, per round.
    Returns (G, objective, rounds, |J|)."""
    d, n = AS.shape
    add = max(2 * d, 16)
    J = list(np.argsort(-AS.max(axis=0), kind="stable")[:min(max(3 * d, 16), n)])
    rounds = 0
    while True:
        rounds += 1
        Js = np.array(sorted(J))
        try:
            G, v, Lam = lp.min_norm_row_decoder(AS[:, Js], iterations=iterations, duals=True)
        except lp.LPFailed:
            if len(J) >= n:
                raise
            J = list(range(n))
            continue
        score = np.abs(AS.T @ Lam).max(axis=1)          # the dual constraint of every row of G
        out = np.setdiff1d(np.arange(n), Js)
        if out.size == 0 or score[out].sum() <= tol * max(1.0, score[Js].sum()):
            break
        pick = out[np.argsort(-score[out], kind="stable")[:add]]
        pick = pick[score[pick] > 0]
        if pick.size == 0:
            break
        J += list(pick)
    Gf = np.zeros((n, d))
    Gf[Js] = G
    return Gf, v, rounds, len(Js)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--heads", type=int, default=3)
    p.add_argument("--sizes", default="8,12,16,24")
    args = p.parse_args(argv)
    from research.heads import minilm_cases

    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'head':<14}{'d':>4}{'full LP':>12}{'s':>7}{'column gen.':>14}{'s':>7}{'rounds':>8}{'|J|':>6}"
          f"{'ratio s':>9}")
    for name, A, _, _ in minilm_cases(args.heads):
        rng = np.random.default_rng(1)
        for d in sizes:
            S = rng.choice(A.shape[0], d, replace=False)
            t = time.process_time()
            _, v = lp.min_norm_row_decoder(A[S], iterations=5000)
            t_full = time.process_time() - t
            t = time.process_time()
            G, v_cg, rounds, nj = colgen_decoder(A[S])
            t_cg = time.process_time() - t
            assert np.abs(A[S] @ G - np.eye(d)).max() < 1e-5
            print(f"{name:<14}{d:>4}{v:>12.6f}{t_full:>7.2f}{v_cg:>14.6f}{t_cg:>7.2f}{rounds:>8}{nj:>6}"
                  f"{t_cg / t_full:>9.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Column-side K.3 with the LP-optimal map on singular subspaces (MATH.md section 2).

``lp_svd``: on ``W = span(V_d)`` (top-d right singular vectors) the map R of
least row-l1 norm with ``R A X = X`` (``lp.min_norm_left_inverse``, norm
``1/gamma(W)``) certifies ``r_eps(A) >= d`` when ``||R|| eps < 1 - eta``;
d grows from ``start`` while the row LPs of the budget last.
"""
from __future__ import annotations

import numpy as np

from numeric.search.budget import Budget
from numeric.search.candidate import SAFETY, LowerCandidate, certifies_subspace
from numeric.search.lp import LPFailed, min_norm_left_inverse
from numeric.search.norms import row_l1_norm

__all__ = ["lp_svd"]


def lp_svd(A: np.ndarray, eps: float, Vt: np.ndarray, start: int, budget: Budget,
           iterations: int | None = None) -> LowerCandidate | None:
    """K.3 with the LP-optimal R on ``W = span(V_d)`` (norm ``1/gamma(W)``), d from ``start`` up.

    One unit of ``budget`` per row LP; ``iterations``: HiGHS iterations per LP.
    """
    best = None
    for d in range(max(start, 1), Vt.shape[0] + 1):
        if budget.exhausted:
            break
        X = Vt[:d].T.copy()
        # gamma(W) <= ||A x|| / ||x|| for every x in W (K.3); W grows with d, so
        # once a basis vector fails no larger d can pass: skip the LPs
        ratio = np.abs(A @ X).max(axis=0) / np.abs(X).max(axis=0)
        if ratio.min() * (1 - SAFETY) <= eps:
            break
        try:
            R, _ = min_norm_left_inverse(A @ X, X, iterations=iterations, budget=budget)
        except LPFailed:
            break
        if certifies_subspace(A, X, R, eps):
            best = LowerCandidate(d, "reconstruction/lp-svd", "reconstruction",
                                  {"R": R, "X": X, "L": X.T.copy()}, norm=row_l1_norm(R))
        else:
            break
    return best

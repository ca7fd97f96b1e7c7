"""Exact per-row l1 refit of upper factors (K.1) on a fixed column space.

With Q fixed, the row-l1 error of ``A - P Q^T`` decouples over rows: row i
of P may be replaced by the best ``p`` for ``min_p ||a_i - Q p||_1``, an l1
regression, without changing any other row's error. The smooth-max descent
(``refine``) ends near the optimum of its surrogate, not at each row's l1
optimum, so a trial that misses eps by a little can be rescued by refitting
the rows over eps (the reference search's "exact per-row l1 refit
of P on span(Q) by LP").

The LP is solved in its dual form, ``max a . y`` subject to ``Q^T y = 0`` and
``-1 <= y <= 1`` (n boxed variables, k equality rows, small for HiGHS's
dual simplex); by LP duality its optimum is the l1 distance from a to
span(Q), and ``p`` is minus the duals of the equality rows.

Everything here is float: the exact tier re-checks the refitted factors.

>>> Q = np.array([[1.0], [1.0], [1.0]]); a = np.array([1.0, 2.0, 10.0])
>>> p, d = l1_row_fit(a, Q); round(float(p[0]), 9), round(d, 9)    # the median minimises l1
(2.0, 9.0)
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from numeric.search.budget import Budget
from numeric.search.lp import LPFailed, solve_lp

__all__ = ["l1_row_fit", "refit_work", "refit_rows"]

#: HiGHS iterations per row LP (dual simplex: about k + a few hundred on MiniLM rows).
REFIT_ITERATIONS = 20000
#: Upper-search work units (``refine.step_work``'s, 1.3 ms = 80 units) per rank unit of
#: a row LP over 256 columns: one core took about 0.6 ms per unit of rank (MiniLM heads,
#: ranks 3 to 95, 2 to 66 ms a row), so a refit costs what its seconds of Adam would.
REFIT_UNITS_PER_RANK = 40


def refit_work(n: int, k: int) -> int:
    """Upper-search work units of one row LP over ``n`` columns at rank ``k``.

    >>> refit_work(256, 50), refit_work(128, 10)
    (2000, 200)
    """
    return max(1, int(np.ceil(REFIT_UNITS_PER_RANK * k * n / 256)))


def l1_row_fit(a: np.ndarray, Q: np.ndarray, iterations: int = REFIT_ITERATIONS) -> tuple[np.ndarray, float]:
    """``(p, d)``: a minimiser of ``||a - Q p||_1`` and the LP's optimum d (``LPFailed`` if HiGHS fails)."""
    n, k = Q.shape
    _, v, duals = solve_lp(-np.asarray(a, dtype=np.float64), A_eq=sp.csr_matrix(Q.T), b_eq=np.zeros(k),
                           lb=-np.ones(n), ub=np.ones(n), iterations=iterations, row_duals=True)
    return -duals, -v


def refit_rows(A: np.ndarray, P: np.ndarray, Q: np.ndarray, target: float, budget: Budget,
               max_rows: int) -> tuple[np.ndarray, float]:
    """``(P', error)``: P with each row whose l1 error exceeds ``target`` replaced by its l1 fit on
    span(Q) when that is better, worst rows first, at most ``max_rows`` rows and while ``budget``
    affords a row LP (``refit_work``). ``error`` is the float max row-l1 error of ``A - P' Q^T``."""
    err = np.abs(A - P @ Q.T).sum(axis=1)
    over = np.argsort(-err)[: int(np.count_nonzero(err > target))]
    if over.size > max_rows:
        return P, float(err.max())
    P2 = P.copy()
    cost = refit_work(A.shape[1], Q.shape[1])
    for i in over:
        if not budget.take(cost):
            break
        try:
            p, _ = l1_row_fit(A[i], Q)
        except LPFailed:
            continue
        e = float(np.abs(A[i] - Q @ p).sum())
        if np.isfinite(e) and e < err[i]:
            P2[i], err[i] = p, e
        if err[i] > target:
            break   # this row cannot reach the target at this Q: the trial fails whatever the rest do
    return P2, float(err.max())

"""Growing a certified row set one row at a time (row-side K.3, MATH.md section 2).

The span-aware growth suits small tolerances (the rows must only be
independent in l1). Every row is screened at once by the norm of the map
obtained by appending it (``append_bounds``); the best screened rows are
tried in turn, and when the appended map misses, the map of the enlarged
set is re-optimised:

- ``rows_greedy``: by the descent (``row_map.descend_row_map``), any size;
- ``rows_lp_append``: by the LP-optimal map (``lp.min_norm_row_decoder``),
  mid-sized sets only (the LP grows as ``n d^2``).

Both spend counted budgets (descent steps or LP work units, candidate rows).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from numeric.search.budget import Budget
from numeric.search.candidate import SAFETY, LowerCandidate, certifies_rows, row_witness
from numeric.search.lp import LPFailed, decoder_work, min_norm_row_decoder
from numeric.search.row_map import descend_row_map

__all__ = ["GREEDY_TRIES", "LP_APPEND_MAX_ROWS", "append_bounds", "rows_greedy", "rows_lp_append"]

#: Screened candidates tried per growth step before the growth stops.
GREEDY_TRIES = 3
#: The LP growth runs below this set size (one LP at 24 rows takes about 2 s at n = 256).
LP_APPEND_MAX_ROWS = 24
#: Floor of the squared residual norm in ``append_bounds`` (a row in the span of S gets an infinite bound).
TINY = 1e-300


def append_bounds(A: np.ndarray, S: list[int], GS: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every row i, a map for ``S + [i]`` built from ``GS`` and its row-l1 norm (row-side K.3).

    If ``A[S] GS = I`` and g satisfies ``A[S] g = 0``, ``A[i] g = 1``, then
    ``G' = [GS - g c, g]`` with ``c = A[i] GS`` satisfies ``A[S + [i]] G' = I``
    and ``||G'|| <= max_j (||GS_j||_1 + |g_j| (1 + ||c||_1))``. g is the
    least-squares choice (the part of ``A[i]`` orthogonal to the rows of
    ``A[S]``, scaled). Returns (bound per row, g per row, c per row), rows of
    S with bound inf. One vectorised pass: the greedy's screening step.

    >>> bound, g, c = append_bounds(np.eye(2), [], np.zeros((2, 0))); bound.tolist()
    [1.0, 1.0]
    """
    m, n = A.shape
    if S:
        Qb, _ = np.linalg.qr(A[S].T)
        H = A - (A @ Qb) @ Qb.T
    else:
        H = A.copy()
    hs = (H * H).sum(axis=1)
    hs[S] = np.inf
    g = H / np.maximum(hs, TINY)[:, None]
    C = A @ GS if GS.shape[1] else np.zeros((m, 0))
    r = np.abs(GS).sum(axis=1) if GS.shape[1] else np.zeros(n)
    bound = (r[None, :] + np.abs(g) * (1.0 + np.abs(C).sum(axis=1))[:, None]).max(axis=1)
    bound[S] = np.inf
    bound[~np.isfinite(bound)] = np.inf
    return bound, g, C


def _grow_rows(A: np.ndarray, eps: float, S: list[int], GS: np.ndarray, *, max_rows: int,
               improve: Callable[[list[int], np.ndarray], np.ndarray | None],
               family: str, work: Budget, rows: Budget | None = None) -> LowerCandidate | None:
    """Grow a certified row set one row at a time, the rows of least ``append_bounds`` first.

    Each candidate first gets the appended map; if that misses,
    ``improve(rows, G)`` proposes a better map for the enlarged set (or None),
    spending ``work``. Stops when none of the ``GREEDY_TRIES`` best candidates
    certifies, at ``max_rows`` rows, or when ``work`` or ``rows`` (one unit per
    candidate tried) is spent; returns a witness only if a row was added.
    """
    S = list(S)
    G = np.asarray(GS, dtype=np.float64).reshape(A.shape[1], len(S))
    d0 = len(S)

    def spent() -> bool:
        return work.exhausted or (rows is not None and rows.exhausted)

    while len(S) < min(max_rows, *A.shape) and not spent():
        bound, g, C = append_bounds(A, S, G)
        grown = False
        for i in np.argsort(bound, kind="stable")[:GREEDY_TRIES]:
            if not np.isfinite(bound[i]) or spent():
                break
            if rows is not None:
                rows.spend()
            trial = S + [int(i)]
            Ga = np.hstack([G - np.outer(g[i], C[i]), g[i][:, None]])
            Gn = Ga if certifies_rows(A, trial, Ga, eps) else improve(trial, Ga)
            if Gn is not None and certifies_rows(A, trial, Gn, eps):
                S, G, grown = trial, Gn, True
                break
        if not grown:
            break
    return row_witness(A, S, G, family) if len(S) > d0 else None


def rows_greedy(A: np.ndarray, eps: float, S: list[int], GS: np.ndarray, steps: Budget,
                rows: Budget | None = None) -> LowerCandidate | None:
    """Grow a certified row set one row at a time, the row of least ``append_bounds`` first.

    Each step appends the screened map; when its bound misses ``1/eps``, the
    descent re-optimises the whole map for the enlarged set (``steps``: Adam
    steps, ``rows``: candidate rows tried). Starts from a certified (S, GS),
    possibly empty; returns a witness only if it certified more rows than S.
    """
    target = (1 - SAFETY) / eps

    def descend(trial: list[int], G: np.ndarray) -> np.ndarray | None:
        return descend_row_map(A[trial], G, target, steps)[0]

    return _grow_rows(A, eps, S, GS, max_rows=min(A.shape), improve=descend, family="row_reconstruction/greedy",
                      work=steps, rows=rows)


def rows_lp_append(A: np.ndarray, eps: float, S: list[int], GS: np.ndarray, solves: Budget,
                   iterations: int | None = None) -> LowerCandidate | None:
    """Grow a mid-sized certified row set with LP-optimal maps (``min_norm_row_decoder``).

    The rows screened best by ``append_bounds`` are tried in turn; the LP
    gives the least norm ``1/gamma_row`` of the enlarged set, so it certifies
    rows that the descent (within a few per cent of the optimum) just misses.
    Only up to ``LP_APPEND_MAX_ROWS - 1`` rows; ``solves`` counts LP work units
    (``lp.decoder_work`` per solve);
    returns a witness only if a row was added.
    """
    def lp(trial: list[int], G: np.ndarray) -> np.ndarray | None:
        if not solves.take(decoder_work(A.shape[1], len(trial))):
            return None
        try:
            return min_norm_row_decoder(A[trial], iterations=iterations)[0]
        except LPFailed:
            return None

    return _grow_rows(A, eps, S, GS, max_rows=LP_APPEND_MAX_ROWS - 1, improve=lp,
                      family="row_reconstruction/greedy-lp", work=solves)

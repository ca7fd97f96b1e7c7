"""Backward elimination of row sets with the LP-optimal map (row-side K.3, MATH.md section 2).

The forward searches (``far_rows``, ``row_growth``, ``swap``) grow a certified
row set one row or one doubling at a time and stop at the first rows that fail;
on diffuse heads at small tolerances a plain row-side LP does better by going
the other way: start from a pool larger than the best set, solve the decoder LP
(``lp.min_norm_row_decoder``, whose optimum is ``1/gamma_row`` of the pool's
selection, a lower bound on it in general), and while the pool does not certify
(``||G|| eps >= 1 - SAFETY``) drop the rows that the LP's duals name: row s of the
dual matrix ``Lam`` of the equalities ``A[S] G = I`` is large when row s takes
part in the near-dependency that limits ``gamma_row``.

Two passes, the plain strong one first: the plain row-side LP itself (the 48 farthest-first rows, a
tenth of the pool dropped per solve: a thorough search is never below it where its budget affords it),
then a cheaper guided pass from the best set found. How many rows a guided step drops: on
diffuse rows ``gamma_row`` of d rows falls about as ``1 / sqrt(d)``
(docs/explanation/search-lessons.md), so a pool of d rows
with norm v would certify near ``d' = d (target / (v eps))^2`` rows; a step drops
half of ``d - d'`` (at least one), so a pool converges in a few solves without
overshooting. The pool is the strongest certified set so far followed by the
next far rows (``far_rows.far_order``), at ``POOL_FACTOR`` times its size
(``POOL_EXTRA`` rows at least, ``POOL_MAX`` at most); the result counts only
when it is larger than that set. The budget is LP work units (``lp.decoder_work``
per solve), never seconds.
"""
from __future__ import annotations

import math

import numpy as np

from numeric.search.budget import Budget, stop_requested
from numeric.search.candidate import SAFETY, LowerCandidate, certifies_rows, row_witness
from numeric.search.lp import LPFailed, decoder_work, min_norm_row_decoder

__all__ = ["PLAIN_DROP", "PLAIN_POOL", "POOL_EXTRA", "POOL_FACTOR", "POOL_MAX", "backward_pool", "rows_backward"]

#: The pool is the best certified set plus far rows, this many times its size ...
POOL_FACTOR = 1.5
#: ... but at least this many rows more ...
POOL_EXTRA = 8
#: ... and at most this many rows (one decoder LP of 64 rows over 256 columns is about 64,000 work units).
POOL_MAX = 64
#: The plain pass: the farthest-first rows it starts from, and the fraction of them a solve drops (a tenth).
PLAIN_POOL, PLAIN_DROP = 48, 10


def backward_pool(best: list[int], order: list[int], m: int) -> list[int]:
    """The starting pool: the rows of ``best`` followed by the next rows of ``order`` not in it.

    >>> backward_pool([5, 2], [2, 7, 5, 1, 0, 3, 4, 6, 8, 9, 10, 11], 12)
    [5, 2, 7, 1, 0, 3, 4, 6, 8, 9]
    """
    size = min(m, POOL_MAX, max(len(best) + POOL_EXTRA, math.ceil(POOL_FACTOR * len(best))))
    have = set(best)
    return list(best) + [i for i in order if i not in have][: size - len(best)]


def _drop_count(d: int, norm: float, eps: float) -> int:
    """Rows to drop from a pool of ``d`` rows whose LP norm is ``norm`` (module docstring).

    >>> _drop_count(40, 20.0, 0.1), _drop_count(40, 10.2, 0.1), _drop_count(3, 1e9, 0.1)
    (15, 1, 1)
    """
    keep = d * ((1 - SAFETY) / (norm * eps)) ** 2
    return max(1, min(d - 1, math.floor((d - keep) / 2)))


def _eliminate(A: np.ndarray, eps: float, pool: list[int], floor: int, budget: Budget, *, iterations: int | None,
               plain: bool) -> LowerCandidate | None:
    """Drop rows from ``pool`` by the LP's duals until it certifies (a witness of more than ``floor`` rows) or
    shrinks to ``floor`` rows (None). ``plain``: a tenth of the rows per solve, else ``_drop_count``'s."""
    n = A.shape[1]
    while len(pool) > floor and not stop_requested():
        if not budget.take(decoder_work(n, len(pool))):
            return None
        try:
            GS, v, Lam = min_norm_row_decoder(A[pool], iterations=iterations, duals=True)
        except LPFailed:
            return None
        if certifies_rows(A, pool, GS, eps):
            return row_witness(A, pool, GS, "row_reconstruction/backward-lp")
        k = max(1, len(pool) // PLAIN_DROP) if plain else _drop_count(len(pool), float(v), eps)
        weight = np.abs(Lam).sum(axis=1)
        drop = set(np.argsort(-weight, kind="stable")[:k].tolist())
        pool = [s for i, s in enumerate(pool) if i not in drop]
    return None


def rows_backward(A: np.ndarray, eps: float, best: list[int], order: list[int], budget: Budget,
                  iterations: int | None = None) -> LowerCandidate | None:
    """A certified row set larger than ``best`` by backward elimination, or None.

    Two passes, the plain one first: the plain row-side LP (the ``PLAIN_POOL`` farthest-first rows, a
    ``1 / PLAIN_DROP`` of them dropped per solve), then the pool of ``backward_pool`` (the best set and far
    rows, ``_drop_count`` rows per solve) above what the first pass reached; the larger witness is returned.
    Relies on row-side K.3 (MATH.md): ``A[S] G = I`` and ``||G|| eps < 1 - eta`` give
    ``r_eps(A) >= |S|``; the float check here (``certifies_rows``) is a screen, the exact tier decides.
    ``budget``: LP work units (``lp.decoder_work`` per solve); ``iterations``: HiGHS iterations per solve.
    """
    m = A.shape[0]
    first = _eliminate(A, eps, list(order[:min(m, PLAIN_POOL)]), len(best), budget, iterations=iterations, plain=True)
    floor = first.rank if first is not None else len(best)
    second = _eliminate(A, eps, backward_pool(best, order, m), floor, budget, iterations=iterations, plain=False)
    return second if second is not None else first

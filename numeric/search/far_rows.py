"""Row-side K.3 on far-apart rows (MATH.md section 2).

Rows S are taken in farthest-first l1 order (``far_order``), which suits
large tolerances (the rows must be nearly disjoint); three maps G with
``A[S] G = I`` certify ``r_eps(A) >= |S|`` when ``||G|| eps < 1 - eta``:

- ``far_rows``: the Voronoi map (``row_map.voronoi_map``);
- ``far_rows_lp``: the same rows extended, with the LP-optimal G
  (``lp.min_norm_row_decoder``, norm ``1/gamma_row``);
- ``far_rows_descent``: extended further with descent-found maps
  (``row_map.descend_row_map``).

The extensions spend counted budgets (LP work units, ``lp.decoder_work`` per solve; descent steps).
"""
from __future__ import annotations

import numpy as np

from numeric.search.budget import Budget, stop_requested
from numeric.search.candidate import SAFETY, LowerCandidate, certifies_rows, row_witness
from numeric.search.lp import LPFailed, decoder_work, min_norm_row_decoder
from numeric.search.row_map import descend_row_map, initial_row_map, voronoi_map

__all__ = ["LP_MAX_ROWS", "far_order", "far_rows", "far_rows_lp", "far_rows_descent"]

#: The LP extension of far rows stops at this many rows: the decoder LP has
#: ``2 n d`` variables, and at d ~ 30 one solve takes several seconds (HiGHS IPM,
#: n = 256); larger sets are left to the descent and the greedy.
LP_MAX_ROWS = 32
#: The extensions give up after this many failed rows in a row.
MISSES = 3
#: The descent extension starts with steps of a quarter of the certified set, and divides
#: a failed step by the same factor (measured on MiniLM heads: larger steps rarely certify).
DESCENT_STEP_DIVISOR = 4


def far_order(M: np.ndarray) -> list[int]:
    """Rows of M in farthest-first order under the l1 distance (start: the most peaked row).

    >>> far_order(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]))
    [0, 2, 1]
    """
    m = M.shape[0]
    first = int(np.argmax(M.max(axis=1)))
    order = [first]
    taken = np.zeros(m, dtype=bool)
    taken[first] = True
    mind = np.abs(M - M[first]).sum(axis=1)
    mind[taken] = -1.0
    for _ in range(m - 1):
        if stop_requested():   # Ctrl-C: the rest in index order (O(m^2 n) work is not budgeted)
            order.extend(np.flatnonzero(~taken).tolist())
            break
        j = int(np.argmax(mind))
        order.append(j)
        taken[j] = True
        mind = np.minimum(mind, np.abs(M - M[j]).sum(axis=1))
        mind[taken] = -1.0
    return order


def far_rows(A: np.ndarray, eps: float, order: list[int]) -> tuple[LowerCandidate | None, list[int]]:
    """Row-side witness on far-apart rows with the Voronoi map (greedy over ``order``)."""
    S: list[int] = []
    for i in order:
        if stop_requested():
            break
        _, nrm = voronoi_map(A, S + [i])
        if nrm * eps < 1 - SAFETY:
            S.append(i)
    if not S:
        return None, S
    GS, _ = voronoi_map(A, S)
    assert GS is not None          # S was grown one row at a time, each with a finite map
    return row_witness(A, S, GS, "row_reconstruction/far-rows"), S


def far_rows_lp(A: np.ndarray, eps: float, S: list[int], order: list[int], budget: Budget,
                iterations: int | None = None) -> LowerCandidate | None:
    """Extend S with the next far rows as long as the LP-optimal G certifies (doubling steps).

    ``budget``: LP work units (``lp.decoder_work`` per solve); ``iterations``: HiGHS
    iterations per solve.
    """
    rest = [i for i in order if i not in set(S)]
    best = None
    base = list(S)
    step = 1
    misses = 0
    while rest and not budget.exhausted and misses < MISSES:
        trial = base + rest[:min(step, LP_MAX_ROWS - len(base))]
        if len(trial) == len(base):
            break
        if not budget.take(decoder_work(A.shape[1], len(trial))):
            break
        try:
            GS, v = min_norm_row_decoder(A[trial], iterations=iterations)
        except LPFailed:
            break
        # the LP norm is a float; re-measure the row-l1 norm of the map we export
        if certifies_rows(A, trial, GS, eps):
            best = row_witness(A, trial, GS, "row_reconstruction/far-rows-lp")
            base, rest = trial, rest[len(trial) - len(base):]
            step *= 2
            misses = 0
        elif step > 1:
            step = 1
        else:
            rest = rest[1:]   # skip this row, try the next
            misses += 1
    return best


def far_rows_descent(A: np.ndarray, eps: float, S: list[int], order: list[int], GS: np.ndarray | None,
                     budget: Budget) -> LowerCandidate | None:
    """Extend S along ``order`` (doubling steps, skipping rows that fail) with descent-found maps G.

    ``GS``: the certified map of S (or None); one unit of ``budget`` per Adam step.
    """
    target = (1 - SAFETY) / eps
    Sset = set(S)
    rest = [i for i in order if i not in Sset]
    best = None
    base = list(S)
    prev = (base, GS) if GS is not None and len(base) else None
    step = max(1, len(base) // DESCENT_STEP_DIVISOR)
    misses = 0
    while rest and not budget.exhausted and misses < MISSES:
        trial = base + rest[:step]
        G0 = initial_row_map(A, trial, prev)
        if G0 is None:
            rest = rest[1:]
            misses += 1
            continue
        G, v = descend_row_map(A[trial], G0, target, budget)
        if certifies_rows(A, trial, G, eps):
            best = row_witness(A, trial, G, "row_reconstruction/far-rows-descent")
            base, rest = trial, rest[step:]
            prev = (base, G)
            step *= 2
            misses = 0
        elif step > 1:
            step = max(1, step // DESCENT_STEP_DIVISOR)
        else:
            rest = rest[1:]
            misses += 1
    return best

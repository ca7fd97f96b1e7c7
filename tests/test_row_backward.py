"""Backward elimination of row sets (``numeric.search.row_backward``): it drops the rows the LP's duals name,
its witnesses verify exactly, it spends only its budget, and thorough runs it where default does not."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from flint import fmpq

from exact.certificates import RowReconstructionWitness, check_lower
from exact.matrix import ExactMatrix
from numeric.search.budget import Budget
from numeric.search.effort import PRESETS
from numeric.search.far_rows import far_order
from numeric.search.lp import decoder_work
from numeric.search.row_backward import backward_pool, rows_backward


def _verified(A, c, eps: Fraction) -> bool:
    w = RowReconstructionWitness(*(ExactMatrix.from_float64(c.tensors[t]) for t in ("G", "Z", "M")))
    return check_lower(ExactMatrix.from_float64(A), w, fmpq(eps.numerator, eps.denominator), c.rank).verified


def _near_identity(n: int = 12) -> np.ndarray:
    """0.9 I + 0.1/n, with row 1 moved next to row 0: rows 0 and 1 form the near-dependency."""
    A = 0.9 * np.eye(n) + 0.1 / n
    A[1] = 0.95 * A[0] + 0.05 * A[1]
    return A


def test_the_pool_drops_a_row_of_the_near_dependency_and_verifies_exactly():
    A = _near_identity()
    eps = Fraction(3, 10)
    c = rows_backward(A, float(eps), [], far_order(A), Budget(10**6))
    assert c is not None and c.family == "row_reconstruction/backward-lp"
    S = sorted(int(i) for i in np.argmax(c.tensors["Z"], axis=0))
    assert not {0, 1} <= set(S)                 # the pair that limits gamma_row is broken up
    assert c.rank == len(S) >= 8 and _verified(A, c, eps)


def test_a_pool_is_the_best_set_then_far_rows():
    order = far_order(_near_identity(20))
    pool = backward_pool([3, 4], order, 20)
    assert pool[:2] == [3, 4] and len(pool) == 10 and len(set(pool)) == 10
    assert len(backward_pool(list(range(60)), list(range(100)), 100)) == 64     # capped at POOL_MAX


def test_nothing_larger_than_the_best_set_gives_none():
    """Negative control: when the best set already holds every row, there is nothing to eliminate."""
    A = _near_identity(6)
    assert rows_backward(A, 0.3, list(range(6)), far_order(A), Budget(10**6)) is None


def test_the_budget_is_work_units_and_a_spent_budget_stops_it():
    A = _near_identity()
    pool = backward_pool([], far_order(A), A.shape[0])
    too_small = Budget(decoder_work(A.shape[1], len(pool)) - 1)
    assert rows_backward(A, 0.3, [], far_order(A), too_small) is None
    b = Budget(10**6)
    rows_backward(A, 0.3, [], far_order(A), b)
    assert 0 < b.used <= 10**6


def test_thorough_runs_it_and_default_does_not():
    assert PRESETS["thorough"].backward_work > 0
    assert PRESETS["default"].backward_work == 0 and PRESETS["quick"].backward_work == 0

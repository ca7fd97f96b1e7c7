"""``exact.norms._signed_sum`` scales each float block by the exponent of its largest entry in magnitude,
negative entries included (two mutation-run survivors).

The mutation run (``bench/mutation.py --only norms.py``) showed that the scaling could be chosen from the
positive entries alone (``block[block > 0]`` or ``block[block >= 0]`` for ``block[block != 0]``) without a
failing test: a row with a tiny positive entry and a large negative one is then scaled up past the float
range, and the exact conversion of the infinite result gives a wrong norm. Here such rows go through the
float path of ``residual_row_l1`` (a product term, so the target block itself is signed) and the norm must
equal the one computed with Fractions.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from exact.matrix import ExactMatrix
from exact.norms import residual_row_l1


def _fraction_norm(C: np.ndarray, P: np.ndarray, Q: np.ndarray) -> Fraction:
    rows = []
    for i in range(C.shape[0]):
        row = [Fraction(C[i, j]) - sum((Fraction(P[i, t]) * Fraction(Q[t, j]) for t in range(P.shape[1])),
                                        Fraction(0)) for j in range(C.shape[1])]
        rows.append(sum(map(abs, row), Fraction(0)))
    return max(rows)


@pytest.mark.parametrize("C", [
    [[1e-300, -1e10]],                                   # one row: no float filter, the pieces path at once
    [[1e-300, -1e10], [2e-300, -3e12]],                  # rows beside each other, all of them near the maximum
    [[-1e300, 1e-10, -2.5]],                             # the large entry negative, the positive one small
])
def test_signed_blocks_are_scaled_by_their_largest_magnitude(C):
    C = np.array(C)
    P = np.ones((C.shape[0], 1))
    Q = np.zeros((1, C.shape[1]))                        # C - P Q = C, through the product route
    got = residual_row_l1(ExactMatrix.from_float64(C), [ExactMatrix.from_float64(P), ExactMatrix.from_float64(Q)])
    want = _fraction_norm(C, P, Q)
    assert Fraction(int(got.p), int(got.q)) == want


def test_the_fraction_reference_can_fail():
    """Negative control: the reference norm sees a changed entry."""
    C = np.array([[1e-300, -1e10]])
    P, Q = np.ones((1, 1)), np.zeros((1, 2))
    got = residual_row_l1(ExactMatrix.from_float64(C), [ExactMatrix.from_float64(P), ExactMatrix.from_float64(Q)])
    assert Fraction(int(got.p), int(got.q)) != _fraction_norm(np.array([[1e-300, -2e10]]), P, Q)

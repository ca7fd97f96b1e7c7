"""``exact.matrix.check_float64_matrix`` refuses every dtype but float64 (a mutation-run survivor).

The mutation run (``bench/mutation.py --only matrix.py``) showed that the
dtype test could become ``a.dtype < np.float64`` (numpy orders dtypes by safe
casting) without a failing test: complex and extended-precision arrays would
then pass as float64. Every other dtype, wider or narrower, is refused.
"""
from __future__ import annotations

import numpy as np
import pytest

from exact.errors import MalformedInput
from exact.matrix import check_float64_matrix


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.longdouble, np.complex128, np.complex64,
                                   np.int64, np.int8, np.uint64, np.bool_, object, ">f8"])
def test_only_float64_is_accepted(dtype):
    a = np.ones((2, 2), dtype=dtype)
    with pytest.raises(MalformedInput, match="dtype"):
        check_float64_matrix(a)


def test_float64_is_accepted():
    a = np.ones((2, 2))
    assert check_float64_matrix(a) is a


@pytest.mark.parametrize("shape", [(), (3,), (2, 2, 2), (1, 1, 1, 1)])
def test_only_two_dimensional_arrays_are_accepted(shape):
    """Arrays of 0, 1, 3 or 4 dimensions are refused with a one-line MalformedInput, never unpacked."""
    with pytest.raises(MalformedInput, match=f"{len(shape)}-D array"):
        check_float64_matrix(np.zeros(shape))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
def test_empty_shapes_are_refused_where_not_allowed(shape):
    """A side of length 0 is allowed for factors (rank 0) and refused for targets (``allow_empty=False``)."""
    assert check_float64_matrix(np.zeros(shape)).shape == shape
    with pytest.raises(MalformedInput, match="empty shape"):
        check_float64_matrix(np.zeros(shape), allow_empty=False)
    assert check_float64_matrix(np.zeros((1, 1)), allow_empty=False).shape == (1, 1)


def test_size_limits_at_the_limit_and_past_it(monkeypatch):
    """``check_float64_matrix`` accepts a side of exactly MAX_MATRIX_SIDE and exactly MAX_MATRIX_ENTRIES
    entries, and refuses one more of either (limits patched small, as in test_exact_cli)."""
    import exact.matrix
    from exact.errors import LimitExceeded
    monkeypatch.setattr(exact.matrix, "MAX_MATRIX_SIDE", 6)
    monkeypatch.setattr(exact.matrix, "MAX_MATRIX_ENTRIES", 12)
    for ok in [(1, 6), (6, 1), (2, 6), (3, 4), (4, 3)]:
        assert check_float64_matrix(np.zeros(ok)).shape == ok
    for bad in [(1, 7), (7, 1), (13, 1), (1, 13), (5, 3), (3, 5)]:
        with pytest.raises(LimitExceeded):
            check_float64_matrix(np.zeros(bad))


def test_an_exact_matrix_has_a_positive_denominator():
    """``ExactMatrix(num, den)`` refuses den = 0 and den < 0 (the class keeps ``den > 0``)."""
    from flint import fmpz_mat

    from exact.matrix import ExactMatrix
    assert ExactMatrix(fmpz_mat(1, 1, [3]), 1).den == 1
    for den in (0, -1, -7):
        with pytest.raises(ValueError, match="den must be positive"):
            ExactMatrix(fmpz_mat(1, 1, [3]), den)


@pytest.mark.parametrize("rows", [[[1, 2], [1, 2, 3]], [[1, 2, 3], [1, 2]], [[1], []], [], [[]]])
def test_ragged_or_empty_rows_are_refused(rows):
    """``ExactMatrix.from_rationals`` refuses rows of unequal length, longer or shorter than the first."""
    from exact.matrix import ExactMatrix
    assert ExactMatrix.from_rationals([[1, "1/2"], [3, 4]]).shape == (2, 2)
    with pytest.raises(MalformedInput, match="non-empty and of equal length"):
        ExactMatrix.from_rationals(rows)


def test_entries_inside_the_shape_only():
    """``ExactMatrix.entry(i, j)``: every index inside the shape, exactly; any outside (negative
    included: no wrap-around) is an IndexError."""
    from flint import fmpq

    from exact.matrix import ExactMatrix
    M = ExactMatrix.from_rationals([[1, 2, 3], [4, 5, "1/6"]])
    assert [[M.entry(i, j) for j in range(3)] for i in range(2)] == [[1, 2, 3], [4, 5, fmpq(1, 6)]]
    for i, j in [(-1, 0), (0, -1), (2, 0), (0, 3), (2, 3), (-1, -1)]:
        with pytest.raises(IndexError):
            M.entry(i, j)


def test_matrices_of_other_shapes_are_unequal_and_do_not_combine():
    """``==`` between shapes 2 x 3 and 3 x 2 is False (either order), never an error; ``-``, ``+`` and ``@``
    with shapes that do not fit raise ValueError (either order)."""
    from exact.matrix import ExactMatrix
    A = ExactMatrix.from_rationals([[1, 2, 3], [4, 5, 6]])
    B = A.T
    assert not (A == B) and not (B == A) and A == ExactMatrix.from_rationals([[1, 2, 3], [4, 5, 6]])
    for f in (lambda: A - B, lambda: B - A, lambda: A + B, lambda: B + A, lambda: A @ A, lambda: B @ B):
        with pytest.raises(ValueError):
            f()


def test_rows_and_floats_of_an_exact_matrix_without_floats():
    """``rows`` and ``to_float64`` of a matrix that has no float array (a rational one, or a product) take the
    integer route; of a float-backed one, its floats (two mutation-run survivors: ``self.floats is not None``
    turned into ``is None`` sent each kind down the other route unseen)."""
    from fractions import Fraction

    from exact.matrix import ExactMatrix

    R = ExactMatrix.from_rationals([[1, "1/2"], ["-3/4", 2], [0, "1/3"]])
    assert R.floats is None
    assert R.rows([2, 0]).to_fractions() == [[0, Fraction(1, 3)], [1, Fraction(1, 2)]]
    assert np.array_equal(R.to_float64(), np.array([[1.0, 0.5], [-0.75, 2.0], [0.0, 1 / 3]]))
    F = ExactMatrix.from_float64(np.array([[0.5, -0.25], [3.0, 1e-300]]))
    picked = F.rows([1])
    assert picked.floats is not None and np.array_equal(picked.floats, np.array([[3.0, 1e-300]]))
    assert F.to_float64() is F.floats                    # the floats themselves, no conversion

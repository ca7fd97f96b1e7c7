"""Exact matrix norms (MATH.md section 1).

``||M||_row1 = max_i sum_j |M_ij|``: the infinity->infinity operator norm,
and the worst output error over value matrices with entries in [-1, 1].

>>> from exact.matrix import ExactMatrix
>>> M = ExactMatrix.from_rationals([[1, "-1/2"], ["1/4", 0]])
>>> row_l1_norm(M)
3/2
>>> row_l1_norm(M.T)     # the 1->1 norm of M
5/4
>>> frobenius_sq(M)
21/16
"""
from __future__ import annotations

from flint import fmpq, fmpz

from .matrix import ExactMatrix

__all__ = ["row_l1_norm", "row_l1_sums", "frobenius_sq", "diagonal"]


def row_l1_sums(M: ExactMatrix) -> list[fmpq]:
    """``sum_j |M_ij|`` for every row i, exactly."""
    n = M.ncols
    flat = M.num.entries()
    return [fmpq(sum(map(abs, flat[i * n:(i + 1) * n]), fmpz(0)), M.den) for i in range(M.nrows)]


def row_l1_norm(M: ExactMatrix) -> fmpq:
    """``||M||_row1``, exactly."""
    n = M.ncols
    if M.nrows == 0:
        return fmpq(0)
    flat = M.num.entries()
    best = max(sum(map(abs, flat[i * n:(i + 1) * n]), fmpz(0)) for i in range(M.nrows))
    return fmpq(best, M.den)


def frobenius_sq(M: ExactMatrix) -> fmpq:
    """``||M||_F^2 = sum_ij M_ij^2``, exactly."""
    return fmpq(sum((x * x for x in M.num.entries()), fmpz(0)), M.den * M.den)


def diagonal(M: ExactMatrix) -> list[fmpq]:
    """The diagonal of a square matrix."""
    if M.nrows != M.ncols:
        raise ValueError(f"diagonal of a non-square matrix {M.shape}")
    return [fmpq(M.num[i, i], M.den) for i in range(M.nrows)]

"""Exact matrix norms (MATH.md section 1).

``||M||_row1 = max_i sum_j |M_ij|``: the infinity->infinity operator norm,
and the worst output error over value matrices with entries in [-1, 1].

``residual_row_l1(C, [F1, ..., Fr])`` is ``||C - F1 ... Fr||_row1`` exactly
(``r = 0``: the norm of C). When every operand holds float64 values, a float
evaluation with a proved error bound (``exact.floats.row_bounds``) encloses
each row's l1 sum in ``[lo_i, hi_i]``; only the rows with
``hi_i >= max_k lo_k`` can hold the maximum, and only those are computed
exactly: from float products that are exact by construction
(``exact.floats.exact_pieces``) when there are a few, else with FLINT in
blocks of rows. The floats only choose rows; the norm is always exact.

>>> from exact.matrix import ExactMatrix
>>> M = ExactMatrix.from_rationals([[1, "-1/2"], ["1/4", 0]])
>>> row_l1_norm(M)
3/2
>>> row_l1_norm(M.T)     # the 1->1 norm of M
5/4
>>> frobenius_sq(M)
21/16
>>> import numpy as np
>>> A = np.array([[0.75, 0.25], [0.25, 0.75]]); P = np.ones((2, 1)); Q = np.full((1, 2), 0.5)
>>> residual_row_l1(ExactMatrix.from_float64(A), [ExactMatrix.from_float64(P), ExactMatrix.from_float64(Q)])
1/2
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import numpy as np
from flint import fmpq, fmpz, fmpz_mat

from .floats import exact_pieces, right_first, row_bounds
from .limits import charge
from .matrix import ExactMatrix, _words

__all__ = ["row_l1_norm", "residual_row_l1", "frobenius_sq", "diagonal"]

#: Rows computed exactly at a time by FLINT: bounds the memory of a large residual.
ROW_BLOCK = 256
#: Up to this many chosen rows of a product go through exact float pieces; more go to FLINT.
FEW_ROWS = 8


def _floats(M: ExactMatrix) -> np.ndarray:
    """The floats of a matrix read from float64 (the callers checked that it has them)."""
    return cast(np.ndarray, M.floats)


def _exact_row_l1(M: ExactMatrix) -> fmpq:
    """``||M||_row1`` from the integer entries."""
    m, n = M.shape
    charge(m * n * _words(M.bits), "an exact row-l1 norm")
    flat = M.num.entries()
    best = max(sum(map(abs, flat[i * n:(i + 1) * n]), fmpz(0)) for i in range(m))
    return fmpq(best, M.den)


def _signed_sum(blocks: list[np.ndarray], signs: list[int]) -> ExactMatrix:
    """``sum_t signs[t] blocks[t]`` exactly, for float blocks of one shape (r x n): one conversion of
    the blocks side by side (or stacked, whichever makes the +-1 coefficient matrix smaller), one product.

    Each block is first scaled by a power of two to a maximum near 1 (exact: every entry
    stays a normal float), so that the integers of the conversion stay short.
    """
    (r, n), q = blocks[0].shape, len(blocks)
    scaled, exps = [], []
    for block in blocks:
        nonzero = np.abs(block[block != 0])
        e = 0 if nonzero.size == 0 else int(np.frexp(nonzero.max())[1])
        if nonzero.size and np.frexp(nonzero.min())[1] - e < -1021:
            e = 0                                   # a huge spread: leave the block as it is
        scaled.append(np.ldexp(block, -e))
        exps.append(e)
    low, side = min(exps), n <= r                     # side by side: coefficients (n q) x n, else r x (r q)
    w = n if side else r
    coeff = [0] * (w * w * q)
    for t, (sign, e) in enumerate(zip(signs, exps)):
        for i in range(w):
            coeff[(t * w + i) * w + i if side else i * w * q + t * w + i] = sign * 2 ** (e - low)
    K = ExactMatrix(fmpz_mat(w * q, w, coeff) if side else fmpz_mat(w, w * q, coeff), 1,
                    max(abs(c) for c in coeff).bit_length())
    stacked = ExactMatrix._of_floats(np.concatenate(scaled, axis=1 if side else 0))
    return (stacked @ K if side else K @ stacked).scale(fmpq(2) ** low)


def _pieces_l1(C: np.ndarray, factors: list[np.ndarray], rows: np.ndarray) -> fmpq | None:
    """The largest l1 sum of the rows ``rows`` of ``C - F1 ... Fr``, from exact float pieces."""
    if not factors:                                   # the row sums of |C|: |C| times a column of ones
        best, step = fmpq(0), max(1, 2**20 // max(C.shape[1], 1))
        for start in range(0, len(rows), step):
            pieces = exact_pieces([np.abs(C[rows[start:start + step]])], np.ones((C.shape[1], 1)))
            if pieces is None:
                return None
            if pieces:                                # none: the rows are zero
                best = max(best, _exact_row_l1(_signed_sum(pieces, [1] * len(pieces))))
        return best
    pieces = [factors[0][rows]]
    for F in factors[1:]:
        pieces = exact_pieces(pieces, F)
        if pieces is None:
            return None
    return _exact_row_l1(_signed_sum([C[rows]] + pieces, [1] + [-1] * len(pieces)))


def residual_row_l1(C: ExactMatrix, factors: Iterable[ExactMatrix] = ()) -> fmpq:
    """``||C - F1 F2 ... Fr||_row1``, exactly."""
    if 0 in C.shape:                             # no rows, or rows of no entries (a rank-0 witness)
        return fmpq(0)
    factors = list(factors)
    floats = C.floats is not None and all(F.floats is not None for F in factors)
    bounds = None
    if floats and C.nrows > 1:
        charge(C.nrows * C.ncols, "the float filter")
        bounds = row_bounds(_floats(C), [_floats(F) for F in factors])
    if bounds is None:
        chosen = np.arange(C.nrows)
    else:
        lo, hi = bounds
        chosen = np.flatnonzero(hi >= lo.max())
    if floats and (len(chosen) <= FEW_ROWS or not factors):
        norm = _pieces_l1(_floats(C), [_floats(F) for F in factors], chosen)
        if norm is not None:
            return norm
    whole = bounds is None and len(chosen) <= ROW_BLOCK
    tail = None                                  # F2 ... Fr, when cheaper than carrying the rows along
    if len(factors) > 1 and right_first([(len(chosen), factors[0].ncols)] + [F.shape for F in factors[1:]]):
        for F in reversed(factors[1:]):
            tail = F if tail is None else F @ tail
    best = fmpq(0)
    for start in range(0, max(len(chosen), 1), ROW_BLOCK):
        block = chosen[start:start + ROW_BLOCK]
        part = C if whole else C.rows(block)
        if factors:
            product = factors[0] if whole else factors[0].rows(block)
            for F in [tail] if tail is not None else factors[1:]:
                product = product @ F
            part = part - product
        best = max(best, _exact_row_l1(part))
    return best


def row_l1_norm(M: ExactMatrix) -> fmpq:
    """``||M||_row1``, exactly."""
    return residual_row_l1(M)


def frobenius_sq(M: ExactMatrix) -> fmpq:
    """``||M||_F^2 = sum_ij M_ij^2``, exactly."""
    charge(M.nrows * M.ncols * _words(2 * M.bits), "an exact Frobenius norm")
    return fmpq(sum((x * x for x in M.num.entries()), fmpz(0)), M.den * M.den)


def diagonal(M: ExactMatrix) -> list[fmpq]:
    """The diagonal of a square matrix."""
    if M.nrows != M.ncols:
        raise ValueError(f"diagonal of a non-square matrix {M.shape}")
    return [fmpq(M.num[i, i], M.den) for i in range(M.nrows)]

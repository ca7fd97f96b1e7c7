"""Float64 arithmetic with proved bounds: the fast path of ``exact.norms`` and ``exact.slack``.

Nothing here decides a verdict alone. ``row_bounds`` encloses the exact row
l1 sums of a residual ``C - F1 ... Fr`` of float64 matrices, so that only
the rows that can hold the maximum are computed exactly; ``exact_pieces``
computes those rows' products exactly, as float matrices whose exact sum is
the product. The facts used (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., 2.2, 3.1, 3.5; u = 2^-53, ``g_n = (n + 2) 2^-52``):

* IEEE 754 binary64, round to nearest, gradual underflow (tested when this
  module is imported; ``FAST`` is False and nothing here is used otherwise);
  a float matrix product is a conventional one (each entry a sum of
  products in some order, with or without fused multiply-add; no
  Strassen-like scheme), as numpy's BLAS computes it.
* ``|fl(F G) - F G| <= g_k |F||G| + k 2^-1022`` entrywise (inner dimension
  k; ``k 2^-1074`` covers underflow, the code uses the normal 2^-1022 for
  speed). A sum of n non-negative floats in any order is within a factor
  ``1 +- g_n`` of the exact sum; ``fl(a +- b) = (a +- b)(1 + d)``, ``|d| <= u``.
* ``up(x) = x + (|x| 2^-52 + 2^-1022)`` in round to nearest is at least the
  float after x (the gap added is at least x's ulp; rounding is monotone),
  so it bounds every real that rounds to x; ``down`` likewise from below.
* ExtractScalar (Rump, Ogita, Oishi, SIAM J. Sci. Comput. 31, 2008): for
  ``sigma = 2^s`` and ``|p| <= sigma / 2``, ``q = fl(fl(sigma + p) - sigma)``
  is p rounded to the grid ``u sigma`` (so ``|q| <= |p| + u sigma``) and
  ``p - q`` is a float, with ``|p - q| <= u sigma``.
* Exact products: if every entry of X (row i) is a multiple of ``u s_i`` of at
  most ``2^(52 - tau) + 1`` steps, every entry of Y (column j) likewise on
  ``u t_j``, and ``k (2^(52 - tau) + 1)^2 <= 2^53`` (``_tau``), then every
  partial sum of ``(X Y)_ij`` is a multiple of ``u^2 s_i t_j`` of at most 2^53
  steps: a float, so ``fl(X Y) = X Y`` exactly, whatever the order, provided
  the steps lie in [2^-1006, 2^794] (grids in [2^-450, 2^450]).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .limits import charge

__all__ = ["FAST", "up", "down", "row_bounds", "exact_pieces", "pairwise_row_sums", "right_first"]


def _ieee_round_to_nearest_with_subnormals() -> bool:
    """Round to nearest (ties, both signs) and gradual underflow; subnormals are scaled back to normal
    floats before they are compared, since denormals-are-zero also zeroes the operands of a comparison."""
    one = np.ones(1)
    return bool((one + 2.0**-54 == 1.0)[0] and (one + 3 * 2.0**-54 == 1.0 + 2.0**-52)[0]
                and (-one - 3 * 2.0**-54 == -1.0 - 2.0**-52)[0]
                and (np.full(1, 2.0**-1074) * 2 * 2.0**1000 == 2.0**-73)[0]
                and (np.full(1, 2.0**-1022) / 4 * 2.0**1000 == 2.0**-24)[0])


#: The arithmetic these bounds assume is present.
FAST = _ieee_round_to_nearest_with_subnormals()
#: Absolute terms use 2^-1022, the smallest normal float: more than the underflow errors
#: (2^-1075 each) and any ulp below it, and normal, so the arithmetic stays fast.
TINY = 2.0**-1022
#: Grids of exact splits stay in this range (so products neither underflow nor overflow).
_GRID_MIN, _GRID_MAX = 2.0**-450, 2.0**450
#: An operand needing more slices than this (a huge exponent spread) goes to FLINT instead.
MAX_SLICES = 6
#: A value of the filter: ``(hi, lo, error bound)``, hi exact, lo and the bound None when zero.
_Value = tuple[Any, Any, Any]


def up(x: Any) -> Any:
    """At least the float after x."""
    return x + (np.abs(x) * 2.0**-52 + TINY)


def down(x: Any) -> Any:
    """At most the float before x."""
    return x - (np.abs(x) * 2.0**-52 + TINY)


def g(n: int) -> float:
    """``(n + 2) 2^-52``: bounds gamma_n, and gamma_n / (1 - gamma_n) for n u <= 1/4."""
    return (n + 2) * 2.0**-52


def _sum_up(M: np.ndarray) -> Any:
    """Upper bounds of the row sums of a non-negative matrix."""
    return up(M.sum(axis=1) * (1 + g(M.shape[1])))


def _mv_up(M: np.ndarray, x: np.ndarray) -> Any:
    """An upper bound of ``M x`` for non-negative M and x."""
    return up(up(up(M @ x) * (1 + g(M.shape[1]))) + M.shape[1] * TINY)


def pairwise_row_sums(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Row sums by a fixed pairwise tree of depth L: for non-negative x each is within ``(1 +- u)^L``."""
    depth = 0
    while x.shape[1] > 1:
        if x.shape[1] % 2:
            x = np.concatenate([x, np.zeros((x.shape[0], 1))], axis=1)
        x = x[:, 0::2] + x[:, 1::2]
        depth += 1
    return x[:, 0], depth


# ------------------------------------------------------------------ exact splits
def _tau(k: int) -> int:
    """Bits cut from the top of a split's grid so that products with inner dimension k are exact."""
    tau = 0
    while k * (2 ** (52 - tau) + 1) ** 2 > 2**53:
        tau += 1
    return tau


def _split(M: np.ndarray, axis: int, tau: int,
           sigma: Any = None) -> tuple[np.ndarray, np.ndarray, Any] | None:
    """One ExtractScalar step per row (axis 1) or column (axis 0): ``(M1, M - M1, sigma)``.

    ``sigma = 2^(e + 1 + tau)`` with ``max |M| < 2^e`` unless given; None when a grid of a
    non-zero row or column leaves [2^-450, 2^450].
    """
    if sigma is None:
        with np.errstate(over="ignore"):
            sigma = np.ldexp(1.0, np.frexp(np.abs(M).max(axis=axis, keepdims=True))[1] + 1 + tau)
    active = M.any(axis=axis, keepdims=True)
    if not (((sigma >= _GRID_MIN) & (sigma <= _GRID_MAX)) | ~active).all():
        return None
    M1 = (M + sigma) - sigma
    return M1, M - M1, sigma


def _slices(M: np.ndarray, axis: int, tau: int) -> list[np.ndarray] | None:
    """Floats whose exact sum is M, each fit for an exact product (None past MAX_SLICES)."""
    out: list[np.ndarray] = []
    rest: np.ndarray = M
    sigma: Any = None
    while rest.any():
        step = None if len(out) == MAX_SLICES else _split(rest, axis, tau, sigma)
        if step is None:
            return None
        part, rest, sigma = step
        out.append(part)
        sigma = sigma * 2.0**(tau + 1 - 53)          # |rest| <= u sigma = new sigma 2^(-1 - tau)
    return out


def exact_pieces(left: list[np.ndarray], right: np.ndarray, max_pieces: int = 256) -> list[np.ndarray] | None:
    """Floats whose exact sum is ``(sum of left) right``: products of slices, each exact.

    None when an operand needs too many slices or the pieces would exceed ``max_pieces``.
    """
    tau = _tau(right.shape[0])
    columns: Any = _slices(right, 0, tau)          # None: too many slices (then no piece is made)
    out: list[np.ndarray] = []
    for V in left:
        rows = None if columns is None else _slices(V, 1, tau)
        if rows is None or len(out) + len(rows) * len(columns) > max_pieces:
            return None
        charge(len(rows) * len(columns) * V.shape[0] * right.size, "an exact float64 product")
        out += [X @ Y for X in rows for Y in columns]
    return out


# ------------------------------------------------------------------ the filter
def _product(X: _Value, Y: _Value) -> _Value | None:
    """``(Xh + Xl + dX)(Yh + Yl + dY)`` as ``(T, rest, beta)``: T exact, beta bounding the row sums of
    ``|product - T - rest|`` (lo parts and error bounds may be None: zero).

    The error: ``g_k`` times the row sums of ``|A||B|`` over the products computed in float,
    ``2^-52`` times those of the rounded sums, ``|X| dY + max(|Y| 1 + dY) dX``, and underflow.
    """
    (Xh, Xl, bX), (Yh, Yl, bY) = X, Y
    (m, k), n = Xh.shape, Yh.shape[1]
    tau = _tau(k)
    sx, sy = _split(Xh, 1, tau), _split(Yh, 0, tau)
    if sx is None or sy is None:
        return None
    pairs = [(sx[0], sy[1]), (sx[1], sy[0]), (sx[1], sy[1]), (Xh, Yl), (Xl, Yh), (Xl, Yl)]
    pairs = [(A, B) for A, B in pairs if A is not None and B is not None]
    charge((len(pairs) + 1) * m * k * n, "a float64 product of the filter")
    rest, err, rounding = None, np.zeros(m), np.zeros(m)
    for A, B in pairs:
        err = up(err + _mv_up(np.abs(A), _sum_up(np.abs(B))))
        if rest is None:
            rest = A @ B
        else:
            rest = rest + A @ B                                # one more rounding, of the new sum
            rounding = up(rounding + _sum_up(np.abs(rest)))
    err = up(up(g(k) * err) + up(rounding * 2.0**-52))
    absX = np.abs(Xh) if Xl is None else up(np.abs(Xh) + np.abs(Xl))
    if bY is not None:
        err = up(err + _mv_up(absX, bY))
    if bX is not None:
        ymax = _sum_up(np.abs(Yh) if Yl is None else up(np.abs(Yh) + np.abs(Yl))).max()
        err = up(err + up(bX * up(ymax + (0.0 if bY is None else bY.max()))))
    return sx[0] @ sy[0], rest, up(err + len(pairs) * k * (n + 1) * TINY)


def row_bounds(C: np.ndarray, factors: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(lo, hi)``: float bounds of the exact row l1 sums of ``C - F1 ... Fr`` (None: no bound).

    The chain is multiplied in the cheaper order; each value is kept as
    ``hi + lo`` (hi exact) with a bound on the row sums of its error; then
    ``D = fl(fl(C - hi) - lo)`` adds ``2^-52`` times the row sums of each result.
    """
    if not FAST or any(0 in F.shape for F in factors):
        return None
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if factors:
            value = _chain(factors)
            if value is None:
                return None
            hi, lo, beta = value
            first = C - hi
            D = first if lo is None else first - lo
            rounding = up(_sum_up(np.abs(first)) + _sum_up(np.abs(D)))
            beta = up((0.0 if beta is None else beta) + up(rounding * 2.0**-52))
        else:
            D, beta = C, 0.0
        S = np.abs(D).sum(axis=1)
        gn = g(C.shape[1])
        hi_sum = up(up(S * (1 + gn)) + beta)
        lo_sum = down(down(S * (1 - gn)) - beta)
    if not (np.isfinite(hi_sum).all() and np.isfinite(lo_sum).all()):
        return None
    return lo_sum, hi_sum


def right_first(shapes: list[tuple[int, int]]) -> bool:
    """Whether ``F1 ... Fr`` (these shapes) is cheaper multiplied from the right than from the left."""
    widths = [m for m, _ in shapes] + [shapes[-1][1]]
    from_right = sum(widths[j] * widths[j + 1] * widths[-1] for j in range(len(shapes) - 1))
    from_left = sum(widths[0] * widths[j] * widths[j + 1] for j in range(1, len(shapes)))
    return from_right <= from_left


def _chain(factors: list[np.ndarray]) -> _Value | None:
    """``F1 ... Fr`` as a filter value, multiplied in the cheaper order."""
    if right_first([F.shape for F in factors]):
        value: _Value | None = (factors[-1], None, None)
        for F in reversed(factors[:-1]):
            value = None if value is None else _product((F, None, None), value)
    else:
        value = (factors[0], None, None)
        for F in factors[1:]:
            value = None if value is None else _product(value, (F, None, None))
    return value

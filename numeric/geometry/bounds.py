"""Rigorous bounds of the geometry descriptors (the ``*_cert`` columns).

These are descriptor bounds, not rank certificates: ranks only ever come from
the exact tier. The arithmetic is the exact tier's own: a float64 array enters
as an :class:`exact.matrix.ExactMatrix` (integers over one power-of-two
denominator, FLINT ``fmpz_mat``), rationals are ``fmpq``, and square roots and
``tanh`` are arb balls at ``ARB_PREC`` bits, each precision set by
:func:`exact.precision.arb_precision` (one lock for FLINT's process-wide
precision). A float column is the ball (or
rational) rounded outward: ``float_down`` and ``float_up`` round the ball's
lower or upper endpoint, so they never cross the exact value; a ball that is
not finite rounds to an infinite bound (never a false one).

- ``q`` (MATH.md section 3): the exact mean of ``D_jj' = max_i (M_ij - M_ij')``
  around a closed walk is a lower bound (the potentials cancel), the exact
  ``max_i osc_j(M_ij - b_j)`` for any float ``b`` an upper one;
- ``tau = 2 tanh(q/4)`` (the paper's (7)) is increasing in q: arb ``tanh`` at
  the endpoints of the q bracket;
- ``kappa`` from below: the double difference at a float argmax, exactly (J.1);
- ``kappa`` from above: subadditivity, ``kappa(C) <= R(X) R(Y) +
  kappa(X0 D Y0^T) + kappa(C - X0 Y0^T)`` (:func:`kappa_upper`, :func:`tail_upper`).

>>> M = exact_image(np.array([[0.0, 1.0], [1.0, 0.0]]))
>>> cycle_mean(M, [0, 1]), osc_upper(M, np.zeros(2))
(1, 1)
>>> float_down(fmpq(1, 3)) == 1 / 3 < float_up(fmpq(1, 3))  # the float 1/3 is below 1/3
True
"""
from __future__ import annotations

import math

import numpy as np
from flint import arb, fmpq, fmpz, fmpz_mat

from exact.matrix import ExactMatrix
from exact.precision import arb_precision

__all__ = [
    "ARB_PREC", "exact_image", "double_centre", "cycle_mean", "osc_upper", "double_difference_exact",
    "tau_enclosure", "tail_upper", "kappa_upper", "float_down", "float_up",
]

# Working precision of the arb balls (square roots, tanh): their width, about
# 2^-128 relative, is 2^-75 below a float64 ulp, so the float rounded outward
# from a ball is, but for a 2^-75 window, the one rounded from the exact value.
ARB_PREC = 128

# float64: 53-bit significands; normal numbers from 2^-1022 (below it the grid
# is the subnormal one, where a 53-bit rounding is not a float64).
_FLOAT_BITS = 53
_MIN_NORMAL = 2.0**-1022
_MIN_EXP = -1022                          # |x| < 2^-1022: subnormal range
_MAX_EXP = 1024                           # |x| >= 2^1024: overflow
_MAX_FLOAT = math.nextafter(math.inf, 0.0)

# Guard bits when a rational enters arb for the outward rounding to float64: a
# float f != p/q lies at least |p/q| 2^-(bits(p) + bits(q) + 54) from it, so a
# ball this much tighter contains no float but p/q itself: the outward
# rounding of the ball is that of the exact rational.
_RATIONAL_GUARD = 56


def exact_image(a) -> ExactMatrix:
    """The exact value of a float64 array (a 1-D array as one row).

    >>> exact_image(np.array([0.5, 0.25])).entry(0, 1)
    1/4
    """
    a = np.asarray(a, dtype=np.float64)
    return ExactMatrix.from_float64(a[None, :] if a.ndim == 1 else a, "geometry input")


def _ones(m: int, n: int) -> ExactMatrix:
    return ExactMatrix(fmpz_mat(m, n, [1] * (m * n)), 1)


def double_centre(H: ExactMatrix) -> ExactMatrix:
    """``C = P_m H P_n`` exactly: ``m n C = m n H - m (row sums) - n (column sums) + total``.

    >>> double_centre(exact_image(np.array([[1.0, 0.0], [0.0, 0.0]]))).entry(0, 0)
    1/4
    """
    m, n = H.shape
    rows = H @ _ones(n, 1)                       # [m, 1] row sums
    cols = _ones(1, m) @ H                       # [1, n] column sums
    total = (_ones(1, m) @ rows).entry(0, 0)
    spread = (rows @ _ones(1, n)).scale(fmpq(1, n)) + (_ones(m, 1) @ cols).scale(fmpq(1, m))
    return H - spread + _ones(m, n).scale(total / (m * n))


def _entries(E: ExactMatrix) -> np.ndarray:
    """Numerators as a numpy object array of ``fmpz``, for row and column
    reductions (max, min, sums of squares), which FLINT's matrices lack."""
    return np.array(E.num.entries(), dtype=object).reshape(E.shape)


def _minus_row(E: ExactMatrix, v: np.ndarray) -> ExactMatrix:
    """``E - 1 v`` exactly, the float row ``v`` subtracted from every row."""
    return E - _ones(E.nrows, 1) @ exact_image(v)


def cycle_mean(M: ExactMatrix, cycle) -> fmpq:
    """Exact mean of ``D`` around the closed walk ``cycle``: a lower bound on q(M)."""
    L = len(cycle)
    steps = fmpz_mat(M.ncols, L)                 # column s: e_{j_s} - e_{j_(s+1)}
    for s in range(L):
        steps[cycle[s], s] += 1
        steps[cycle[(s + 1) % L], s] -= 1
    diffs = _entries(ExactMatrix(M.num * steps, M.den))  # [row, step] M_ij - M_ij'
    return fmpq(sum(diffs.max(axis=0), fmpz(0)), M.den * L)


def osc_upper(M: ExactMatrix, b: np.ndarray) -> fmpq:
    """``max_i osc_j(M_ij - b_j)`` exactly: an upper bound on q(M) for any b."""
    diff = _minus_row(M, b)
    num = _entries(diff)
    return fmpq((num.max(axis=1) - num.min(axis=1)).max(), diff.den)


def double_difference_exact(M: ExactMatrix, idx) -> fmpq:
    """``|M_ij - M_ij' - M_i'j + M_i'j'|`` exactly at ``idx = (i, i', j, j')``."""
    i, ip, j, jp = idx
    return abs(M.entry(i, j) - M.entry(i, jp) - M.entry(ip, j) + M.entry(ip, jp))


def tau_enclosure(q_lo: fmpq, q_hi: fmpq) -> tuple[arb, arb]:
    """Balls around ``2 tanh(q_lo/4)`` and ``2 tanh(q_hi/4)`` (the paper's (7)).

    tanh is increasing, so every q in ``[q_lo, q_hi]`` has ``tau(q)`` between
    the first ball's lower and the second ball's upper endpoint.

    >>> lo, hi = tau_enclosure(fmpq(0), fmpq(0))
    >>> lo.is_zero() and hi.is_zero()
    True
    """
    with arb_precision(ARB_PREC):
        return 2 * (arb(q_lo) / 4).tanh(), 2 * (arb(q_hi) / 4).tanh()


def _sqrt(q: fmpq) -> arb:
    with arb_precision(ARB_PREC):
        return arb(q).sqrt()


def _sq_sums(E: ExactMatrix) -> tuple[fmpq, fmpq]:
    """``max_i sum_j E_ij^2`` and ``max_j sum_i E_ij^2`` exactly (largest squared
    row and column norms)."""
    num = _entries(E)
    if num.size == 0:
        return fmpq(0), fmpq(0)
    sq = num * num
    return fmpq(sq.sum(axis=1).max(), E.den**2), fmpq(sq.sum(axis=0).max(), E.den**2)


def _rowsq_max(E: ExactMatrix) -> fmpq:
    """``max_i sum_j E_ij^2`` exactly."""
    return _sq_sums(E)[0]


def tail_upper(E: ExactMatrix) -> arb:
    """A ball whose upper endpoint bounds ``kappa(E)`` for an exact matrix E.

    Factor ``E = E I_n^T``: the rows of I_n lie on the sphere of radius
    ``sqrt((n-1)/n)`` about ``1/n``, and the rows of E in the ball of radius
    ``max_i |E_i|`` about 0 (or the same with columns).
    """
    m, n = E.shape
    rows, cols = _sq_sums(E)
    return _sqrt(min(rows * fmpq(n - 1, n), cols * fmpq(m - 1, m)))


def kappa_upper(X0: np.ndarray, Y0: np.ndarray, kb, tail: arb) -> arb:
    """A ball whose upper endpoint bounds ``kappa(T)`` given ``kappa(T - X0 Y0^T) <= tail``.

    ``kb``: the :class:`numeric.geometry.gauge.KappaBracket` of ``X0 Y0^T``.
    ``kappa`` is subadditive (stack the factors of two summands, rescaled so
    that ``R(X)^2 <= a^2 R1^2 + b^2 R2^2`` and ``R(Y)^2 <= R1'^2/a^2 + R2'^2/b^2``;
    Cauchy-Schwarz gives ``R1 R1' + R2 R2'``). With the gauge factors taken
    exactly, ``X = X0 Wh`` and ``Y = Y0 Wih`` (m x r x r products, cheap), the
    rounding defect is ``X0 Y0^T - X Y^T = X0 D Y0^T`` with
    ``D = I - Wh Wih`` exact, and ``kappa(X0 D Y0^T) <= max|x0_i D| max|y0_j|``
    (radii about 0). Radii of X, Y are bounded from the float centres exactly.
    """
    r = X0.shape[1]
    if r == 0:
        return tail
    X0x, Y0x = exact_image(X0), exact_image(Y0)
    Wh, Wih = exact_image(kb.Wh), exact_image(kb.Wih)
    rx2 = _rowsq_max(_minus_row(X0x @ Wh, kb.cx))
    ry2 = _rowsq_max(_minus_row(Y0x @ Wih, kb.cy))
    D = ExactMatrix.identity(r) - Wh @ Wih
    defect = _sqrt(_rowsq_max(X0x @ D) * _rowsq_max(Y0x))
    with arb_precision(ARB_PREC):
        return _sqrt(rx2 * ry2) + defect + tail


def _ball(x) -> arb:
    """An arb ball for an fmpq (tight enough for an exact outward rounding) or an arb."""
    if isinstance(x, arb):
        return x
    x = fmpq(x)
    with arb_precision(x.p.bit_length() + x.q.bit_length() + _RATIONAL_GUARD):
        return arb(x)


def _to_float(end: arb, up: bool) -> float:
    """An exact endpoint with at most 53 significant bits as a float64, rounded
    ``up`` or down where it leaves the normal range (overflow, subnormals)."""
    if not end.is_finite():
        return math.inf if up else -math.inf
    man, exp = (int(v) for v in end.man_exp())
    if man == 0:
        return 0.0
    top = abs(man).bit_length() + exp           # 2^(top-1) <= |end| < 2^top
    if top > _MAX_EXP:                          # beyond the largest float64
        outward = (man > 0) == up               # rounding away from zero
        big = math.inf if outward else _MAX_FLOAT
        return big if man > 0 else -big
    if top <= _MIN_EXP:                         # below the normal range: 0 or 2^-1022
        outward = (man > 0) == up
        tiny = _MIN_NORMAL if outward else 0.0
        return tiny if man > 0 else -tiny
    return math.ldexp(float(man), exp)          # exact: |man| < 2^53, result normal


def float_down(x) -> float:
    """A float64 not above the rational or arb ball ``x``: the largest one for a
    rational in the normal range.

    >>> float_down(fmpq(1, 10)) == math.nextafter(0.1, 0.0)  # 0.1 is above 1/10
    True
    """
    with arb_precision(_FLOAT_BITS):
        return _to_float(_ball(x).lower(), up=False)


def float_up(x) -> float:
    """A float64 not below the rational or arb ball ``x``: the smallest one for a
    rational in the normal range.

    >>> float_up(fmpq(1, 10)) == 0.1, float_up(fmpq(1, 2)) == 0.5
    (True, True)
    """
    with arb_precision(_FLOAT_BITS):
        return _to_float(_ball(x).upper(), up=True)

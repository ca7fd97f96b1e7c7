"""Exact row-l1 norms of residuals, computed exactly only for the rows that can hold the maximum.

``residual_norm(C, X, Y)`` is ``||X Y - C||_row1`` (Y or C may be None),
exactly. First every row is bounded with small integers: X is truncated row
by row to B-bit integers (``X_i = (Xt_i + dX_i) 2^(u_i)``, ``|dX| < 1``), Y as
a whole (``Y = (Yt + dY) 2^v``), C row by row at the unit ``2^(u_i + v)`` of
the product (``|dC| < 1``), and ``D = Ct - Xt Yt`` is an exact int64 product
(``2B + bits(k) <= 61``, so nothing overflows). Then, in units of
``2^(u_i + v)``, row i of ``X Y - C`` is ``-(D_i + dC_i - Xt_i dY - dX_i Yt -
dX_i dY)``, whose l1 sum differs from ``S_i = sum_j |D_ij|`` by less than
``E_i = n (1 + k + ||Xt_i||_1) + sum |Yt|``. A row can hold the maximum only
if ``S_i + E_i >= max_l (S_l - E_l)``: those rows (usually one or a few) are
computed exactly, in Python integers (``crosscheck._dyadic``), and the norm is
their largest l1 sum. When more than a few rows survive (a residual that
cancels, as ``Z^T A G - Z^T`` does), the survivors are bounded again with
2B-bit truncations split into B-bit limbs (``_refine``). The truncations and the int64 products are exact
integer arithmetic; nothing is rounded, and the filter only chooses rows.

>>> from crosscheck._dyadic import Dyadic, FloatMatrix
>>> import numpy as np
>>> A = FloatMatrix(np.array([[0.75, 0.25], [0.25, 0.75]]))
>>> residual_norm(A, FloatMatrix(np.ones((2, 1))), FloatMatrix(np.array([[0.5, 0.5]])))
Fraction(1, 2)
>>> residual_norm(None, A, None)
Fraction(1, 1)
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ._dyadic import Dyadic, FloatMatrix, _product
from ._limits import Meter

__all__ = ["residual_norm", "residual_norm_bound", "candidates"]

#: |D| < 2^62 is summed as two int64 parts split at this bit.
_SPLIT = 21
#: More surviving rows than this go through the two-limb bounds (``_refine``).
_FEW = 4


def _bits(k: int) -> int:
    """Bits per truncated entry so that ``k (2^B)^2 <= 2^61``."""
    return (61 - max(k, 1).bit_length()) // 2


def _exponents(a: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """``e`` with ``|x| < 2^e`` per entry (frexp's exponent; zeros get the smallest, so they never set a scale)."""
    e = np.frexp(a)[1].astype(np.int64)
    return np.where(a != 0, e, -1100)


def _truncate(M: Dyadic, bits: int, per_row: bool) -> tuple[npt.NDArray[np.int64], list[int]]:
    """``(T, units)``: int64 T with ``|T| < 2^bits`` and ``M_i = (T_i + d_i) 2^units[i]``, ``|d| < 1``
    (units per row, or one for all rows repeated)."""
    m, n = M.shape
    if isinstance(M, FloatMatrix):
        a, step = M.array, max(1, FloatMatrix.BLOCK // max(n, 1))
        top = np.concatenate([_exponents(a[i:i + step]).max(axis=1) for i in range(0, m, step)]) \
            if n else np.zeros(m, dtype=np.int64)                  # |x| < 2^top, per row
        top = top.astype(np.int64) if per_row else np.full(m, top.max() if top.size else 0, dtype=np.int64)
        units = top - bits
        T = np.empty((m, n), dtype=np.int64)
        with np.errstate(under="ignore"):
            for i in range(0, m, step):
                # exact: a power-of-two scaling (a result below 1 may underflow, and then truncates to 0)
                T[i:i + step] = np.trunc(np.ldexp(a[i:i + step], -units[i:i + step, None]))
        return T, [int(u) for u in units]
    rows = [M.row(i) for i in range(m)]
    tops = [max(map(abs, r), default=0).bit_length() for r in rows]
    if not per_row:
        tops = [max(tops, default=0)] * m
    ints: list[list[int]] = []
    row_units: list[int] = []
    for r, row_top in zip(rows, tops):
        down = max(row_top - bits, 0)
        ints.append([v >> down for v in r])                         # floor: 0 <= v - (v >> d) 2^d < 2^d
        row_units.append(down - M.shift)
    return np.array(ints, dtype=np.int64).reshape(m, n), row_units


def _at_units(C: Dyadic, units: list[int]) -> tuple[npt.NDArray[np.int64], list[bool]]:
    """``(Ct, ok)``: C row i truncated at ``2^units[i]`` (``|Ct| < 2^61``), ``ok[i]`` False where it does not fit."""
    m, n = C.shape
    Ct = np.zeros((m, n), dtype=np.int64)
    ok = [True] * m
    if isinstance(C, FloatMatrix):
        top = _exponents(C.array).max(axis=1) if n else np.zeros(m, dtype=np.int64)
        for i in range(m):
            if top[i] - units[i] > 61:
                ok[i] = False
                continue
            with np.errstate(under="ignore"):
                Ct[i] = np.trunc(np.ldexp(C.array[i], -units[i]))
        return Ct, ok
    for i in range(m):
        r, down = C.row(i), units[i] + C.shift                       # entry v / 2^shift at unit 2^units[i]
        vals = [v >> down for v in r] if down >= 0 else [v << -down for v in r]
        if max(map(abs, vals), default=0) >= 2**61:
            ok[i] = False
            continue
        Ct[i] = vals
    return Ct, ok


def _abs_row_sums(D: npt.NDArray[np.int64]) -> list[int]:
    """Exact ``sum_j |D_ij|`` for int64 ``|D| < 2^62`` (two int64 sums that cannot overflow), in row blocks."""
    out: list[int] = []
    step = max(1, FloatMatrix.BLOCK // max(D.shape[1], 1))
    for i in range(0, D.shape[0], step):
        a = np.abs(D[i:i + step])
        high = (a >> _SPLIT).sum(axis=1)
        low = (a & ((1 << _SPLIT) - 1)).sum(axis=1)
        out += [(int(h) << _SPLIT) + int(lo) for h, lo in zip(high.tolist(), low.tolist())]
    return out


def _scaled(x: int, e: int) -> Fraction:
    return Fraction(x << e) if e >= 0 else Fraction(x, 1 << -e)


def candidates(C: Dyadic | None, X: Dyadic, Y: Dyadic | None, meter: Meter | None = None) -> list[int]:
    """The rows of ``X Y - C`` (of X alone when Y and C are None) that can hold the largest l1 sum."""
    return _bounds(C, X, Y, meter)[0]


def _bounds(C: Dyadic | None, X: Dyadic, Y: Dyadic | None,
            meter: Meter | None = None) -> tuple[list[int], Fraction | None]:
    """``(rows, top)``: the rows that can hold the largest l1 sum, and a proved upper bound on it (None: none)."""
    m = X.shape[0]
    if m <= 1:
        return list(range(m)), None
    if Y is None:
        if C is not None:
            raise ValueError("a residual needs a product")
        n = X.shape[1]
        T, units = _truncate(X, 62 - max(n, 1).bit_length(), per_row=True)
        if meter is not None:
            meter.charge(X.shape[0] * n, "the integer filter")
        S = _abs_row_sums(T)
        E: list[int | None] = [n] * m
    else:
        k, n = Y.shape
        bits = _bits(k)
        Xt, ux = _truncate(X, bits, per_row=True)
        Yt, uy = _truncate(Y, bits, per_row=False)
        v = uy[0] if uy else 0
        units = [u + v for u in ux]
        if meter is not None:
            meter.charge(m * k * n + m * n, "the integer filter (an int64 product)")
        P = Xt @ Yt
        if C is None:
            D, ok = -P, [True] * m
        else:
            Ct, ok = _at_units(C, units)
            D = Ct - P
        S = _abs_row_sums(D)
        x_norms = np.abs(Xt).sum(axis=1).tolist()
        y_total = int(np.abs(Yt).sum(dtype=np.int64)) if Yt.size else 0
        E = [n * (1 + k + int(x)) + y_total if good else None for x, good in zip(x_norms, ok)]
    rows, top = _survivors(S, E, units, range(m))
    if Y is not None and len(rows) > _FEW:
        rows, top = _refine(C, X, Y, rows, bits, meter)
    return rows, top


def _survivors(S: Sequence[int], E: Sequence[int | None], units: Sequence[int],
               index: Iterable[int]) -> tuple[list[int], Fraction | None]:
    """The rows whose upper bound reaches the largest lower bound (rows without a bound always survive)."""
    lows = [_scaled(s - e, u) for s, e, u in zip(S, E, units) if e is not None]
    floor = max(lows, default=None)
    rows = [i for i, s, e, u in zip(index, S, E, units) if e is None or floor is None or _scaled(s + e, u) >= floor]
    top = None if any(e is None for e in E) else max(_scaled(s + e, u) for s, e, u in zip(S, E, units) if e is not None)
    return rows, top


def _refine(C: Dyadic | None, X: Dyadic, Y: Dyadic, rows: list[int], bits: int,
            meter: Meter | None = None) -> tuple[list[int], Fraction | None]:
    """The same bounds for ``rows`` with 2B-bit truncations, each product split into B-bit limbs
    (``Xt = Xh 2^B + Xl``: four int64 products), summed exactly in Python integers. A residual that
    cancels (``Z^T A G ~ Z^T``) is far below the one-limb error; here the error is ``2^-B`` smaller."""
    k, n = Y.shape
    Xt, ux = _truncate(X, 2 * bits, per_row=True)
    Xt, ux = Xt[rows], [ux[i] for i in rows]
    Yt, uy = _truncate(Y, 2 * bits, per_row=False)
    v = uy[0] if uy else 0
    if meter is not None:
        meter.charge(4 * len(rows) * k * n + 8 * len(rows) * n, "the integer filter (two limbs)")
    mask = (1 << bits) - 1
    Xh, Xl, Yh, Yl = Xt >> bits, Xt & mask, Yt >> bits, Yt & mask      # Xt = Xh 2^B + Xl exactly
    high, middle, low = (Xh @ Yh).tolist(), (Xh @ Yl + Xl @ Yh).tolist(), (Xl @ Yl).tolist()
    y_total = sum(_abs_row_sums(Yt))                                 # |Yt| < 2^52: exact int64 sums
    x_norms = _abs_row_sums(Xt)
    S: list[int] = []
    E: list[int | None] = []
    units: list[int] = []
    for r, i in enumerate(rows):
        unit = ux[r] + v
        if C is None:
            c_row = [0] * n
        else:
            down = unit + C.shift                                         # C / 2^shift at unit 2^unit
            c_row = [c >> down for c in C.row(i)] if down >= 0 else [c << -down for c in C.row(i)]
        S.append(sum(abs(c - ((h << (2 * bits)) + (mid << bits) + lo))
                     for c, h, mid, lo in zip(c_row, high[r], middle[r], low[r])))
        E.append(n * (1 + k + x_norms[r]) + y_total)
        units.append(unit)
    return _survivors(S, E, units, rows)


def _trivial(C: Dyadic | None, X: Dyadic, Y: Dyadic | None, meter: Meter | None) -> Fraction | None:
    """The norm when there is nothing to filter, else None."""
    if X.shape[0] == 0 or (Y is not None and Y.shape[1] == 0) or (Y is None and X.shape[1] == 0):
        return Fraction(0)
    if Y is not None and Y.shape[0] == 0:                           # k = 0: X Y = 0, the norm of C
        return Fraction(0) if C is None else residual_norm(None, C, None, meter)
    return None


def residual_norm(C: Dyadic | None, X: Dyadic, Y: Dyadic | None, meter: Meter | None = None,
                  rows: list[int] | None = None) -> Fraction:
    """``||X Y - C||_row1`` exactly (``||X||_row1`` when Y and C are None); ``rows``: the candidates, if known."""
    done = _trivial(C, X, Y, meter)
    if done is not None:
        return done
    if rows is None:
        rows = candidates(C, X, Y, meter)
    if Y is None:                                                   # rows read once, not kept (a large target)
        read = (lambda i: X.row(i, keep=False)) if isinstance(X, FloatMatrix) else X.row
        return Fraction(max(sum(map(abs, read(i))) for i in rows), 1 << X.shift)
    exact = _product(X, Y, C, meter, only=rows)
    return Fraction(max(sum(map(abs, r)) for r in exact.rows), 1 << exact.shift)


def residual_norm_bound(C: Dyadic | None, X: Dyadic, Y: Dyadic | None,
                        meter: Meter | None = None) -> tuple[Fraction, bool]:
    """``(value, exact)``: ``||X Y - C||_row1`` itself (exact True) when a few rows can hold it, else a proved
    upper bound on it (exact False) from the row bounds, without computing every row exactly."""
    done = _trivial(C, X, Y, meter)
    if done is not None:
        return done, True
    rows, top = _bounds(C, X, Y, meter)
    if len(rows) > _FEW and top is not None:
        return top, False
    return residual_norm(C, X, Y, meter, rows), True

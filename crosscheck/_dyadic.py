"""Exact matrices over a power-of-two denominator, in Python integers only.

Every float64 is ``p / 2^j`` (``float.as_integer_ratio``), so a tensor is an
integer matrix over one power of two: ``Dyadic(rows, shift)`` is the matrix
``rows / 2^shift``, and sums and products of such matrices stay in that form.

Products are done row by row on *packed* integers (Kronecker substitution):
each row of the right factor becomes one big integer with one slot of W bits
per column, ``sum_j y_j 2^(W j)``, so that a row of the product
``sum_t x_t * packed_t`` is a handful of big-integer multiplications done by
CPython's own integer code. The packed integer is exact whatever the signs;
W is chosen from an exact bound on every entry of the result
(``|(X Y)_ij| <= max_i sum_t |x_it| * max |y|``), so that each slot's
value, with a bias of ``2^(W-1)`` added, lies in ``[0, 2^W)`` and is read
back without carries. Nothing is rounded anywhere.

>>> A = Dyadic([[3, 1], [1, 3]], 2)                  # [[3/4, 1/4], [1/4, 3/4]]
>>> P = Dyadic([[1], [1]], 0); Qt = Dyadic([[1, 1]], 1)
>>> residual(A, [P, Qt]).norm()                      # ||A - P Q^T||_row1 with Q = [1/2, 1/2]^T
Fraction(1, 2)
>>> residual(None, [A, A]).rows                      # A A = [[10, 6], [6, 10]] / 16
[[10, 6], [6, 10]]
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache, reduce
from itertools import compress, repeat
from math import frexp, ldexp
from operator import lshift, mul, or_
from typing import Any

import numpy as np
import numpy.typing as npt

from ._limits import Meter

__all__ = ["Dyadic", "FloatMatrix", "residual", "words", "integers"]


def integers(values: Any) -> tuple[list[int], int]:
    """``(ints, shift)`` with ``values[j] == ints[j] / 2^shift`` exactly and shift as small as possible.

    Each finite float is ``m 2^(e - 53)`` with an integer m of at most 53 bits (``math.frexp``), so
    ``ldexp(x, 53 - min e)`` is an integer-valued float, exact while it stays below 2^1024; the
    common trailing zero bits are then shifted out. Beyond that range (a spread of more than about
    970 binades) every float enters through ``as_integer_ratio``.

    >>> integers([0.5, -0.75, 3.0])
    ([2, -3, 12], 2)
    >>> integers([5e-324, 1.0])[1]
    1074
    >>> integers([2.0**60, -3 * 2.0**70])
    ([1152921504606846976, -3541774862152233910272], 0)
    """
    exponents = [e for f, e in map(frexp, values) if f]
    if not exponents:
        return [0] * len(values), 0
    low, high = min(exponents), max(exponents)
    if high - low + 53 <= 1023:
        shift = max(53 - low, 0)                          # every |x| >= 2^(low - 1): integers when low > 53
        ints = list(map(int, map(ldexp, values, repeat(shift))))
    else:
        ratios = [x.as_integer_ratio() for x in values]
        shift = max(q.bit_length() - 1 for _, q in ratios)
        ints = [p << (shift + 1 - q.bit_length()) for p, q in ratios]
    common = reduce(or_, ints, 0)
    zeros = min((common & -common).bit_length() - 1, shift)
    if zeros > 0:
        ints = [v >> zeros for v in ints]
        shift -= zeros
    return ints, shift


def words(bits: int) -> int:
    """64-bit words of an integer of ``bits`` bits (at least 1)."""
    return max(1, -(-bits // 64))


class Dyadic:
    """The exact matrix ``rows / 2^shift`` (rows: lists of Python ints)."""

    __slots__ = ("_rows", "shift", "shape", "_abs")

    _rows: list[list[int]] | None       # None only in a FloatMatrix whose rows are not made yet
    shape: tuple[int, int]
    _abs: int | None

    def __init__(self, rows: Any, shift: int, ncols: int | None = None):
        self._rows = [list(r) for r in rows]
        self.shift = int(shift)
        self.shape = (len(self._rows), ncols if ncols is not None else (len(self._rows[0]) if self._rows else 0))
        self._abs = None

    @property
    def rows(self) -> list[list[int]]:
        assert self._rows is not None            # made in __init__ (a FloatMatrix overrides this)
        return self._rows

    def row(self, i: int) -> list[int]:
        return self.rows[i]

    @classmethod
    def of_floats(cls, values: Any, shape: tuple[int, int]) -> "Dyadic":
        """The exact value of row-major float64 ``values`` of ``shape`` (finite; checked by the reader)."""
        m, n = shape
        ints, shift = integers(values)
        return cls([ints[i * n:(i + 1) * n] for i in range(m)], shift, n)

    @classmethod
    def identity(cls, n: int) -> "Dyadic":
        return cls([[int(i == j) for j in range(n)] for i in range(n)], 0, n)

    @property
    def T(self) -> "Dyadic":
        m, n = self.shape
        return Dyadic([list(c) for c in zip(*self.rows)] if m else [[] for _ in range(n)], self.shift, m)

    def max_abs(self) -> int:
        if self._abs is None:
            self._abs = max((max(map(abs, r), default=0) for r in self.rows), default=0)
        return self._abs

    def bits(self) -> int:
        return self.max_abs().bit_length()

    def nonzeros(self) -> int:
        return sum(len(r) - r.count(0) for r in self.rows)

    def row_sums(self) -> list[int]:
        """``sum_j |rows[i][j]|`` per row (integers, over ``2^shift``)."""
        return [sum(map(abs, r)) for r in self.rows]

    def norm(self) -> Fraction:
        """``||M||_row1 = max_i sum_j |M_ij|`` (MATH.md section 1), exactly; 0 for an empty matrix."""
        return Fraction(max(self.row_sums(), default=0), 1 << self.shift)

    def frobenius_sq(self) -> Fraction:
        return Fraction(sum(x * x for r in self.rows for x in r), 1 << (2 * self.shift))


@lru_cache(maxsize=64)
def _bias(slots: int, width: int) -> int:
    """``sum_j 2^(8 width - 1) 2^(8 width j)`` for ``slots`` slots of ``width`` bytes."""
    return int.from_bytes((1 << (8 * width - 1)).to_bytes(width, "little") * slots, "little")


def _pack(values: list[int], width: int) -> int:
    half = 1 << (8 * width - 1)
    return int.from_bytes(b"".join((v + half).to_bytes(width, "little") for v in values), "little") \
        - _bias(len(values), width)


def _unpack(packed: int, slots: int, width: int) -> list[int]:
    half = 1 << (8 * width - 1)
    raw = memoryview((packed + _bias(slots, width)).to_bytes(slots * width, "little"))
    return [int.from_bytes(raw[k:k + width], "little") - half for k in range(0, slots * width, width)]


def _product(X: Dyadic, Y: Dyadic, C: Dyadic | None, meter: Meter | None, only: Any = None) -> Dyadic:
    """``X Y - C`` exactly (C may be None), over ``2^max(X.shift + Y.shift, C.shift)``; with ``only``
    (row indices) just those rows, in that order. Rows of Y that no used entry of X meets are not read."""
    (m, k), (k2, n) = X.shape, Y.shape
    if k != k2 or (C is not None and C.shape != (m, n)):
        raise ValueError(f"shapes {X.shape} x {Y.shape} - {None if C is None else C.shape} do not fit")
    shift = X.shift + Y.shift if C is None else max(X.shift + Y.shift, C.shift)
    up_xy = shift - X.shift - Y.shift
    up_c = 0 if C is None else shift - C.shift
    index = range(m) if only is None else list(only)
    xs = [X.row(i) for i in index]
    bound = (max((sum(map(abs, x)) for x in xs), default=0) * Y.max_abs() << up_xy) \
        + (0 if C is None else C.max_abs() << up_c)
    bound = max(bound, Y.max_abs())                       # the slots also hold Y's own entries when packed
    width = (bound.bit_length() + 8) // 8                 # bytes per slot: bound < 2^(8 width - 1)
    if meter is not None:
        nonzeros = sum(len(x) - x.count(0) for x in xs)
        meter.charge((nonzeros * words(X.max_abs().bit_length()) + len(xs)) * words(8 * width * n),
                     f"an exact {len(xs)} x {k} x {n} product")
    if n == 0:
        return Dyadic([[] for _ in xs], shift, 0)
    used = [any(x[t] for x in xs) for t in range(k)]
    packed = [_pack(Y.row(t), width) if used[t] else 0 for t in range(k)]
    rows = []
    for i, x in zip(index, xs):
        acc = sum(map(mul, compress(x, x), compress(packed, x))) << up_xy
        if C is not None:
            acc -= _pack(C.row(i), width) << up_c
        rows.append(_unpack(acc, n, width))
    return Dyadic(rows, shift, n)


def _cheaper_from_right(shapes: list[tuple[int, int]]) -> bool:
    """Whether ``F1 F2 F3`` is cheaper as ``F1 (F2 F3)`` (counting multiply-adds)."""
    (a, b), (_, c), (_, d) = shapes
    return b * c * d + a * b * d < a * b * c + a * c * d


def residual(C: Dyadic | None, factors: list[Dyadic], meter: Meter | None = None) -> Dyadic:
    """``F1 F2 ... Fr - C`` exactly (C None: the product); the chain in the cheaper order for r = 3."""
    factors = list(factors)
    if len(factors) == 1:
        F = factors[0]
        if C is None:
            return F
        return _product(F, Dyadic.identity(F.shape[1]), C, meter)
    if len(factors) == 3 and _cheaper_from_right([F.shape for F in factors]):
        factors = [factors[0], _product(factors[1], factors[2], None, meter)]
    while len(factors) > 2:
        factors = [_product(factors[0], factors[1], None, meter)] + factors[2:]
    return _product(factors[0], factors[1], C, meter)


class FloatMatrix(Dyadic):
    """A float64 tensor as an exact ``Dyadic`` whose integer rows are made when first read.

    The common shift is found for the whole tensor at once, in blocks: every nonzero float is
    ``m 2^e`` with m odd (``_decompose``); the shift is the largest ``-e`` (at least 0), so row i is
    ``[m_j << (e_j + shift)]``, exact, made when first read. ``array`` keeps the floats for the integer
    filter (``crosscheck._rows``).
    """

    __slots__ = ("array", "_cache")

    #: Entries decomposed at a time (bounds the temporaries of a large tensor).
    BLOCK = 2**20

    def __init__(self, array: Any):

        a = np.asarray(array, dtype=np.float64)
        m, n = a.shape
        step = max(1, self.BLOCK // max(n, 1))
        low: int | None = None
        for i in range(0, m, step):
            mant, expo = _decompose(a[i:i + step])
            if mant.any():
                block = int(expo[mant != 0].min())
                low = block if low is None else min(low, block)
        self._rows, self.shape, self._abs = None, (m, n), None
        self.shift = max(0, -low) if low is not None else 0
        self.array: npt.NDArray[np.float64] = a
        self._cache: dict[int, list[int]] = {}

    @property
    def rows(self) -> list[list[int]]:
        if self._rows is None:
            self._rows = [self.row(i) for i in range(self.shape[0])]
        return self._rows

    def row(self, i: int, keep: bool = True) -> list[int]:
        """Row i as Python integers over ``2^shift`` (kept for the next read unless ``keep`` is false)."""
        if self._rows is not None:
            return self._rows[i]
        if i in self._cache:
            return self._cache[i]
        mant, expo = _decompose(self.array[i:i + 1])
        lift = (expo + self.shift) * (mant != 0)                      # >= 0 for every nonzero entry
        ints = list(map(lshift, mant[0].tolist(), lift[0].tolist()))
        if keep:
            self._cache[i] = ints
        return ints

    def max_abs(self) -> int:
        if self._abs is None:
            top = float(abs(self.array).max()) if self.array.size else 0.0
            self._abs = int(Fraction(top) * (1 << self.shift))
        return self._abs

    @property
    def T(self) -> "FloatMatrix":
        return FloatMatrix(self.array.T)


def _decompose(a: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(m, e)`` int64 arrays with ``a = m 2^e`` exactly and m odd (or 0): numpy's frexp gives
    ``a = f 2^E``, ``0.5 <= |f| < 1``, so ``f 2^53`` is an integer of at most 53 bits; its trailing zero
    bits move into the exponent."""

    frac, expo = np.frexp(a)
    mant = (frac * 2.0**53).astype(np.int64)                        # exact: f has at most 53 bits
    expo = expo.astype(np.int64) - 53
    nonzero = mant != 0
    tz = np.zeros(a.shape, dtype=np.int64)
    lowest = (mant & -mant)[nonzero]                                 # the lowest set bit, a power of two
    tz[nonzero] = np.frexp(lowest.astype(np.float64))[1] - 1          # exact: a power of two below 2^53
    return mant >> tz, expo + tz

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
from operator import mul, or_

from ._limits import Meter

__all__ = ["Dyadic", "residual", "words", "integers"]


def integers(values) -> tuple:
    """``(ints, shift)`` with ``values[j] == ints[j] / 2^shift`` exactly and shift as small as possible.

    Each finite float is ``m 2^(e - 53)`` with an integer m of at most 53 bits (``math.frexp``), so
    ``ldexp(x, 53 - min e)`` is an integer-valued float, exact while it stays below 2^1024; the
    common trailing zero bits are then shifted out. Beyond that range (a spread of more than about
    970 binades) every float enters through ``as_integer_ratio``.

    >>> integers([0.5, -0.75, 3.0])
    ([2, -3, 12], 2)
    >>> integers([5e-324, 1.0])[1]
    1074
    """
    exponents = [e for f, e in map(frexp, values) if f]
    if not exponents:
        return [0] * len(values), 0
    low, high = min(exponents), max(exponents)
    if high - low + 53 <= 1023:
        shift = 53 - low
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

    __slots__ = ("rows", "shift", "shape")

    def __init__(self, rows, shift: int, ncols: int | None = None):
        self.rows = [list(r) for r in rows]
        self.shift = int(shift)
        self.shape = (len(self.rows), ncols if ncols is not None else (len(self.rows[0]) if self.rows else 0))

    @classmethod
    def of_floats(cls, values, shape) -> "Dyadic":
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
        return max((max(map(abs, r), default=0) for r in self.rows), default=0)

    def bits(self) -> int:
        return self.max_abs().bit_length()

    def nonzeros(self) -> int:
        return sum(len(r) - r.count(0) for r in self.rows)

    def row_sums(self) -> list:
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


def _pack(values, width: int) -> int:
    half = 1 << (8 * width - 1)
    return int.from_bytes(b"".join((v + half).to_bytes(width, "little") for v in values), "little") \
        - _bias(len(values), width)


def _unpack(packed: int, slots: int, width: int) -> list:
    half = 1 << (8 * width - 1)
    raw = memoryview((packed + _bias(slots, width)).to_bytes(slots * width, "little"))
    return [int.from_bytes(raw[k:k + width], "little") - half for k in range(0, slots * width, width)]


def _product(X: Dyadic, Y: Dyadic, C: Dyadic | None, meter: Meter | None) -> Dyadic:
    """``X Y - C`` exactly (C may be None), over ``2^max(X.shift + Y.shift, C.shift)``."""
    (m, k), (k2, n) = X.shape, Y.shape
    if k != k2 or (C is not None and C.shape != (m, n)):
        raise ValueError(f"shapes {X.shape} x {Y.shape} - {None if C is None else C.shape} do not fit")
    shift = X.shift + Y.shift if C is None else max(X.shift + Y.shift, C.shift)
    up_xy = shift - X.shift - Y.shift
    up_c = 0 if C is None else shift - C.shift
    bound = (max(X.row_sums(), default=0) * Y.max_abs() << up_xy) + (0 if C is None else C.max_abs() << up_c)
    bound = max(bound, Y.max_abs())                       # the slots also hold Y's own entries when packed
    width = (bound.bit_length() + 8) // 8                 # bytes per slot: bound < 2^(8 width - 1)
    if meter is not None:
        meter.charge((X.nonzeros() * words(X.bits()) + m) * words(8 * width * n), f"an exact {m} x {k} x {n} product")
    if n == 0:
        return Dyadic([[] for _ in range(m)], shift, 0)
    packed = [_pack(r, width) for r in Y.rows]
    rows = []
    for i, x in enumerate(X.rows):
        acc = sum(map(mul, compress(x, x), compress(packed, x))) << up_xy
        if C is not None:
            acc -= _pack(C.rows[i], width) << up_c
        rows.append(_unpack(acc, n, width))
    return Dyadic(rows, shift, n)


def _cheaper_from_right(shapes) -> bool:
    """Whether ``F1 F2 F3`` is cheaper as ``F1 (F2 F3)`` (counting multiply-adds)."""
    (a, b), (_, c), (_, d) = shapes
    return b * c * d + a * b * d < a * b * c + a * c * d


def residual(C: Dyadic | None, factors: list, meter: Meter | None = None) -> Dyadic:
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

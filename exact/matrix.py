"""Exact rational matrices: an integer matrix over one common denominator.

``ExactMatrix(num, den)`` is the matrix ``num / den`` with ``num`` an
``fmpz_mat`` and ``den`` a positive ``fmpz``. A float64 array enters exactly:
every float is ``M * 2^e`` with an integer mantissa, so one power-of-two
scaling turns the whole array into integers (MATH.md, "Exactness"). Each
operation counts its work (``exact.limits.charge``) before doing it.

>>> A = ExactMatrix.from_rationals([[1, "1/2"], [0, "3/4"]])
>>> (A @ ExactMatrix.identity(2)) == A
True
>>> (A - A).is_zero()
True
>>> ExactMatrix.from_float64(np.array([[0.5, 0.25]])).entry(0, 1)
1/4
"""
from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any, cast

import numpy as np
from flint import fmpq, fmpq_mat, fmpz, fmpz_mat

from .errors import LimitExceeded, MalformedInput
from .limits import MAX_MATRIX_ENTRIES, MAX_MATRIX_SIDE, charge
from .rational import to_fmpq

__all__ = ["ExactMatrix", "check_float64_matrix"]


def check_float64_matrix(a: object, what: str = "matrix", allow_empty: bool = True) -> np.ndarray:
    """Refuse anything but a finite 2-D float64 array within the size limits.

    A side of length 0 is allowed (a rank-0 factor P of shape m x 0) unless
    ``allow_empty`` is false (targets).
    """
    if not isinstance(a, np.ndarray):
        raise MalformedInput(f"{what}: expected a numpy array, got {type(a).__name__}")
    if a.dtype != np.float64:
        raise MalformedInput(f"{what}: dtype {a.dtype}, expected float64")
    if a.ndim != 2:
        raise MalformedInput(f"{what}: {a.ndim}-D array, expected 2-D")
    m, n = a.shape
    if not allow_empty and (m == 0 or n == 0):
        raise MalformedInput(f"{what}: empty shape {a.shape}")
    if max(m, n) > MAX_MATRIX_SIDE or m * n > MAX_MATRIX_ENTRIES:
        raise LimitExceeded(f"{what}: shape {a.shape} beyond the limits "
                            f"(side {MAX_MATRIX_SIDE}, entries {MAX_MATRIX_ENTRIES})")
    if not np.isfinite(a).all():
        raise MalformedInput(f"{what}: contains NaN or Inf")
    return a


#: Bits per limb when an integer matrix is assembled from int64 pieces.
_LIMB = 62


def _dyadic_limbs(a: np.ndarray) -> tuple[list[np.ndarray], int]:
    """Limb matrices ``N_c`` (int64, |entries| < 2^62) and a shift ``s`` with
    ``a == sum_c N_c 2^(62 c) / 2^s`` exactly.

    Every float is ``mant * 2^e`` with ``|mant| < 2^53`` (``np.frexp``); with
    ``s = -min e`` each entry is the integer ``mant << (e + s)``, cut here into
    62-bit limbs with integer shifts only, so that FLINT receives machine
    integers.
    """
    mant, expo = np.frexp(a)                       # a = mant * 2**expo, 0.5 <= |mant| < 1
    ints = (mant * 2.0**53).astype(np.int64)       # exact: mant has at most 53 bits
    expo = expo.astype(np.int64) - 53
    nonzero = ints != 0
    if not nonzero.any():
        return [np.zeros(a.shape, dtype=np.int64)], 0
    shift = max(0, -int(expo[nonzero].min()))
    lift = np.where(nonzero, expo + shift, 0)      # entry = ints << lift, lift >= 0
    magnitude = np.abs(ints).astype(np.uint64)
    top = int((lift + 53).max())
    limbs = []
    for c in range((top + _LIMB - 1) // _LIMB):
        rel = lift - _LIMB * c                     # bits of this limb: value >> (62 c)
        up = np.clip(rel, 0, 63).astype(np.uint64)
        down = np.clip(-rel, 0, 63).astype(np.uint64)
        part = np.where(rel >= 0, magnitude << up, magnitude >> down)
        part &= np.uint64(2**_LIMB - 1)
        part[(rel >= _LIMB) | (rel <= -53)] = 0
        limbs.append(np.where(ints < 0, -part.astype(np.int64), part.astype(np.int64)))
    return limbs, shift


def _words(bits: int) -> int:
    """64-bit words per entry of ``bits`` bits (at least 1)."""
    return max(1, -(-bits // 64))


class ExactMatrix:
    """The rational matrix ``num / den`` (``den`` > 0).

    A matrix read from float64 keeps the array in ``floats`` (its exact
    values) and builds ``num``/``den`` only when exact arithmetic first needs
    them, so a check that the float filter of ``exact.norms`` decides never
    pays for the conversion. ``bits`` bounds the bit length of the entries of
    ``num``; the work of each exact operation is counted from it.
    """

    __slots__ = ("_num", "_den", "_bits", "_shape", "floats")

    _num: fmpz_mat | None          # None until a matrix read from floats is converted
    _den: fmpz | None
    _bits: int | None
    _shape: tuple[int, int]
    floats: np.ndarray | None

    def __init__(self, num: fmpz_mat, den: int | fmpz, bits: int | None = None):
        if not isinstance(num, fmpz_mat):
            raise TypeError("num must be an fmpz_mat")
        den = fmpz(den)
        if den <= 0:
            raise ValueError("den must be positive")
        if bits is None:
            bits = max((abs(x).bit_length() for x in num.entries()), default=0)
        self._num, self._den, self._bits = num, den, bits
        self._shape, self.floats = (num.nrows(), num.ncols()), None

    # construction -----------------------------------------------------------
    @classmethod
    def from_float64(cls, a: object, what: str = "matrix") -> "ExactMatrix":
        """The exact value of a finite 2-D float64 array (converted when first needed)."""
        return cls._of_floats(check_float64_matrix(a, what))

    @classmethod
    def _of_floats(cls, a: np.ndarray) -> "ExactMatrix":
        obj = cls.__new__(cls)
        obj._num = obj._den = obj._bits = None
        obj._shape, obj.floats = (a.shape[0], a.shape[1]), a
        return obj

    def _convert(self) -> None:
        limbs, shift = _dyadic_limbs(cast(np.ndarray, self.floats))   # set when _num is None
        m, n = self._shape
        charge(m * n * len(limbs), f"converting a {m} x {n} tensor to {len(limbs)}-word integers")
        num = fmpz_mat(m, n, limbs[0].ravel().tolist())
        for c, limb in enumerate(limbs[1:], start=1):
            if limb.any():
                num += fmpz_mat(m, n, limb.ravel().tolist()) * (fmpz(2) ** (_LIMB * c))
        self._num, self._den, self._bits = num, fmpz(2) ** shift, _LIMB * len(limbs)

    @property
    def num(self) -> fmpz_mat:
        if self._num is None:
            self._convert()
        return cast(fmpz_mat, self._num)

    @property
    def den(self) -> fmpz:
        if self._den is None:
            self._convert()
        return cast(fmpz, self._den)

    @property
    def bits(self) -> int:
        if self._bits is None:
            self._convert()
        return cast(int, self._bits)

    @classmethod
    def from_fmpq_mat(cls, m: fmpq_mat) -> "ExactMatrix":
        den = fmpz(1)
        entries = m.entries()
        for q in entries:
            den = den.lcm(q.q)
        ints = [int(q.p * (den // q.q)) for q in entries]
        return cls(fmpz_mat(m.nrows(), m.ncols(), ints), den)

    @classmethod
    def from_rationals(cls, rows: Any) -> "ExactMatrix":
        """From a list of rows of ints, Fractions, fmpq or rational strings."""
        rows = [list(r) for r in rows]
        if not rows or not rows[0] or any(len(r) != len(rows[0]) for r in rows):
            raise MalformedInput("rows must be non-empty and of equal length")
        return cls.from_fmpq_mat(fmpq_mat(len(rows), len(rows[0]), [to_fmpq(x) for r in rows for x in r]))

    @classmethod
    def identity(cls, n: int) -> "ExactMatrix":
        m = fmpz_mat(n, n)
        for i in range(n):
            m[i, i] = 1
        return cls(m, fmpz(1), 1)

    @classmethod
    def zeros(cls, m: int, n: int) -> "ExactMatrix":
        return cls(fmpz_mat(m, n), fmpz(1), 0)

    # shape and entries ------------------------------------------------------
    @property
    def nrows(self) -> int:
        return self._shape[0]

    @property
    def ncols(self) -> int:
        return self._shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    def entry(self, i: int, j: int) -> fmpq:
        if not (0 <= i < self.nrows and 0 <= j < self.ncols):
            raise IndexError(f"entry ({i}, {j}) outside shape {self.shape}")
        value: fmpq = fmpq(self.num[i, j], self.den)
        return value

    def rows(self, index: Iterable[int]) -> "ExactMatrix":
        """The rows ``index`` (a sequence of ints), exactly."""
        index = [int(i) for i in index]
        if self.floats is not None:
            return ExactMatrix._of_floats(self.floats[index])
        n = self.ncols
        charge(len(index) * n * _words(self.bits), "selecting rows")
        entries = [self.num[i, j] for i in index for j in range(n)]
        return ExactMatrix(fmpz_mat(len(index), n, entries), self.den, self.bits)

    def to_fmpq_mat(self) -> fmpq_mat:
        return fmpq_mat(self.num) / self.den

    def to_fractions(self) -> list[list[Fraction]]:
        d = int(self.den)
        n = self.ncols
        flat = [Fraction(int(x), d) for x in self.num.entries()]
        return [flat[i * n:(i + 1) * n] for i in range(self.nrows)]

    def to_float64(self) -> np.ndarray:
        """A float64 approximation, for hints and printing only."""
        if self.floats is not None:
            return self.floats
        d = int(self.den)
        flat = [int(x) / d for x in self.num.entries()]
        return np.array(flat, dtype=np.float64).reshape(self.shape)

    def is_zero(self) -> bool:
        return self.num.is_zero()

    # arithmetic -------------------------------------------------------------
    @property
    def T(self) -> "ExactMatrix":
        if self._num is None:
            return ExactMatrix._of_floats(cast(np.ndarray, self.floats).T)   # set when _num is None
        out = ExactMatrix(self.num.transpose(), self.den, self.bits)
        out.floats = None if self.floats is None else self.floats.T
        return out

    def __matmul__(self, other: "ExactMatrix") -> "ExactMatrix":
        if self.ncols != other.nrows:
            raise ValueError(f"shapes {self.shape} and {other.shape} do not multiply")
        (m, k), n = self.shape, other.ncols
        bits = self.bits + other.bits + k.bit_length()
        charge(m * k * n * _words(bits), f"an exact {m} x {k} x {n} product of {bits}-bit integers")
        return ExactMatrix(self.num * other.num, self.den * other.den, bits)

    def _common(self, other: "ExactMatrix") -> tuple[fmpz_mat, fmpz_mat, fmpz, int]:
        if self.shape != other.shape:
            raise ValueError(f"shapes {self.shape} and {other.shape} differ")
        den = self.den.lcm(other.den)
        sa, sb = den // self.den, den // other.den
        bits = max(self.bits + sa.bit_length(), other.bits + sb.bit_length()) + 1
        charge(self.nrows * self.ncols * _words(bits), "an exact sum")
        return self.num * sa, other.num * sb, den, bits

    def __sub__(self, other: "ExactMatrix") -> "ExactMatrix":
        a, b, den, bits = self._common(other)
        return ExactMatrix(a - b, den, bits)

    def __add__(self, other: "ExactMatrix") -> "ExactMatrix":
        a, b, den, bits = self._common(other)
        return ExactMatrix(a + b, den, bits)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExactMatrix) or self.shape != other.shape:
            return False
        return (self - other).is_zero()

    __hash__ = None   # type: ignore[assignment]  # unhashable: a mutable-looking value type, compared exactly

    def scale(self, q: object) -> "ExactMatrix":
        q = to_fmpq(q)
        return ExactMatrix(self.num * q.p, self.den * q.q, self.bits + q.p.bit_length())

    def __repr__(self) -> str:
        return f"ExactMatrix({self.nrows}x{self.ncols})"

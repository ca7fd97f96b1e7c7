"""The target slack (K.5, Lemma 11 = G.2): a proved bound on ``||softmax_row(H) - A0||_row1``.

The exponentials are the only transcendental numbers the second checker
meets. mpmath documents as correctly rounded only its basic operations
(addition, subtraction, multiplication, division, square roots and
conversions; docs/technical.rst, "Correctness guarantees"); its ``exp`` is
"fully accurate" on "a heuristic error analysis". Its interval context
``iv`` rounds those basic operations outward, so they enclose; ``iv.exp``
does not always: ``iv.exp(-2^-170)`` at 272 bits is the single point
``1 - 2^-170``, below the true value (tests/test_crosscheck_known.py). So
every exponential here comes from Taylor's theorem evaluated with
``iv``'s basic operations only (``_exp_neg``): for ``0 <= y <= 2^-8``,
``exp(-y) = S_K(y) + R`` with ``|R| <= y^(K+1) / (K+1)!``, and
``exp(-x) = exp(-x / 2^k)^(2^k)`` (squaring a positive interval encloses).
A private ``MPIntervalContext`` keeps the precision out of mpmath's
global state.

Per row, with ``t_j = max(h) - h_j >= 0`` exact, three passes, each row
taking the first whose bound is at most the claimed slack:

* vector pass (``_vector_rows``): the fast pass below in int64 arrays for
  the whole matrix, in units of ``2^-56``, every product rounded outward by
  an exact split multiplication (``_mul_down``, ``_mul_up``);
* fast pass, in exact integer fixed point (units of ``2^-80``, rounded
  outward): ``t = i + f1/2^8 + f2/2^16 + r``, ``0 <= r < 2^-16``; ``exp(-t)``
  is the product of three table entries (``exp(-i)``, ``exp(-f1/2^8)``,
  ``exp(-f2/2^16)``: powers of three enclosures from ``_exp_neg``, made
  once per process) and ``exp(-r)``, which lies between the alternating Taylor sums
  ``S_3(r) <= exp(-r) <= S_4(r)`` (terms decreasing for ``r < 1``);
  ``t >= 60`` gives ``0 <= exp(-t) <= exp(-60)``;
* fallback: ``_exp_neg`` per entry, in units of ``2^-192``.

With ``e_j in [lo_j, hi_j]`` and ``Z = sum e_j in [Zlo, Zhi]`` (``Zlo >= 1``,
the row maximum has ``t = 0``), ``|e_j / Z - a_j| <= max(hi_j/Zlo - a_j,
a_j - lo_j/Zhi, 0)``, and ``a_j - lo_j/Zhi <= (a_j Zhi - lo_j)/Zlo`` when
positive, so the row's distance is at most
``sum_j max(hi_j - a_j Zlo, a_j Zhi - lo_j, 0) / Zlo``, an exact rational.

>>> bound = SlackBound([[0.0, 0.0]], [[0.5, 0.5]], None)
>>> bound.proves(Fraction(0))                     # softmax(0, 0) = (1/2, 1/2) exactly
True
>>> import math; H = [[0.0, -1.0]]; e = math.exp(-1) / (1 + math.exp(-1))
>>> SlackBound(H, [[1 - e, e]], None).proves(Fraction(1, 10**12))
True
>>> SlackBound(H, [[0.5, 0.5]], None).proves(Fraction(1, 10))      # the true distance is 0.46
False
"""
from __future__ import annotations

from fractions import Fraction
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
from mpmath.ctx_iv import MPIntervalContext

from ._dyadic import integers
from ._limits import Meter

__all__ = ["SlackBound", "FAST_BITS", "SLOW_BITS"]

#: Fixed-point bits of the fast pass and of the fallback.
FAST_BITS = 80
SLOW_BITS = 192
#: exp(-t) for t >= _TOP is bounded by exp(-_TOP) (< 2^-86, below the fast pass's unit);
#: the fallback's cut is _SLOW_TOP (exp(-140) < 2^-201).
_TOP, _SLOW_TOP = 60, 140
#: At most this many Taylor terms in ``_exp_neg`` (on [0, 2^-8] the remainder after 24 is below 2^-270);
#: it stops as soon as the remainder bound is below 2^-prec.
_TERMS = 24
#: Work units charged per entry, at the packed products' rate of about 4 to 6 ns per unit (measured on
#: the project machine under load, bench/suites/crosscheck.py): fast pass about 3.4 us, fallback about 450 us.
FAST_UNITS, SLOW_UNITS = 640, 2**17
#: Work units per entry of the vector pass (about 0.4 us: the exact t in Python, the rest in int64 arrays).
VEC_UNITS = 80


def _context(bits: int) -> MPIntervalContext:
    ctx = MPIntervalContext()
    ctx.prec = bits + 48
    return ctx


def _exp_neg(ctx: MPIntervalContext, x: Any) -> Any:
    """An interval containing ``exp(-x)`` for every x in the non-negative interval ``x``, from Taylor's
    theorem with ``ctx``'s basic operations only (no ``ctx.exp``)."""
    y, squarings, small = x, 0, ctx.ldexp(ctx.mpf(1), -8)
    while y.b > small:                                   # exact comparison of two points
        y, squarings = ctx.ldexp(y, -1), squarings + 1
    term = total = ctx.mpf(1)
    tiny, k = ctx.ldexp(ctx.mpf(1), -ctx.prec), 0
    while True:
        rest = (term * y / (k + 1)).b                    # >= y^(k+1) / (k+1)! >= |exp(-y) - S_k(y)|
        if rest < tiny or k == _TERMS:
            break
        k += 1
        term = term * y / k                              # y^k / k!
        total = total - term if k % 2 else total + term
    value = ctx.mpf([(total - rest).a, (total + rest).b])
    for _ in range(squarings):
        value = value * value                            # exp(-2y) = exp(-y)^2, a positive interval
    return value


def _fixed(ctx: MPIntervalContext, x: Any, bits: int) -> tuple[int, int]:
    """``(floor(lo 2^bits), ceil(hi 2^bits))`` of a non-negative interval x, as ints (checked exactly)."""
    lo, hi = ctx.ldexp(x.a, bits), ctx.ldexp(x.b, bits)    # exact scalings of the endpoints
    a = int(lo)
    b = int(hi)
    if not (a <= lo < a + 1):                             # exact comparisons of points
        raise ArithmeticError("fixed-point conversion out of range")
    if hi != b:
        b += 1
    if not (b - 1 < hi <= b):
        raise ArithmeticError("fixed-point conversion out of range")
    return a, b


def _powers(ctx: MPIntervalContext, base: Any, count: int) -> list[Any]:
    """Enclosures of ``base^0 ... base^(count - 1)`` by repeated interval multiplication."""
    out, value = [], ctx.mpf(1)
    for _ in range(count):
        out.append(value)
        value = value * base
    return out


@lru_cache(maxsize=1)
def _tables() -> tuple[list[tuple[int, int]], ...]:
    """Enclosures in units of 2^-FAST_BITS of exp(-i) (i <= _TOP), exp(-f/2^8) and exp(-f/2^16) (f < 256),
    as powers of ``_exp_neg`` at 1, 2^-8 and 2^-16."""
    ctx = _context(FAST_BITS)
    return tuple([_fixed(ctx, v, FAST_BITS) for v in _powers(ctx, _exp_neg(ctx, ctx.ldexp(ctx.mpf(1), -e)), count)]
                 for e, count in ((0, _TOP + 1), (8, 256), (16, 256)))


def _up(v: int, bits: int) -> int:
    """``ceil(v / 2^bits)``."""
    return -((-v) >> bits)


def _fast_entries(t: list[int], s: int) -> tuple[list[int], list[int]]:
    """``([lo_j], [hi_j])`` with ``lo_j <= 2^P exp(-t_j / 2^s) <= hi_j`` (P = FAST_BITS)."""
    P = FAST_BITS
    one = 1 << P
    whole, first, second = _tables()
    top_hi = whole[_TOP][1]
    los, his = [], []
    for tn in t:
        if tn == 0:
            los.append(one)
            his.append(one)
            continue
        u = tn >> (s - 16) if s >= 16 else tn << (16 - s)        # floor(t 2^16)
        i = u >> 16
        if i >= _TOP:
            los.append(0)
            his.append(top_hi)
            continue
        if s > 16:
            rn = tn - (u << (s - 16))                                # r = rn / 2^s, 0 <= r < 2^-16
            x = rn >> (s - P) if s >= P else rn << (P - s)          # floor(r 2^P)
            x_hi = x + (1 if s > P and rn & ((1 << (s - P)) - 1) else 0)
        else:
            x = x_hi = 0
        # exp(-r) >= S_3(x_hi) and <= S_4(x), outward rounded (r in [x, x_hi] / 2^P)
        sq = x_hi * x_hi
        p_lo = one - x_hi + (sq >> (P + 1)) - (-(-(sq * x_hi) // (6 << (2 * P))))
        sq = x * x
        p_hi = one - x - ((-sq) >> (P + 1)) - ((sq * x) // (6 << (2 * P))) + (sq * sq >> (3 * P)) // 24 + 1
        (w_lo, w_hi), (a_lo, a_hi), (b_lo, b_hi) = whole[i], first[(u >> 8) & 255], second[u & 255]
        lo = (((w_lo * a_lo >> P) * b_lo >> P) * p_lo) >> P               # floors
        hi = _up(_up(_up(w_hi * a_hi, P) * b_hi, P) * p_hi, P)             # ceilings
        los.append(max(lo, 0))
        his.append(hi)
    return los, his


def _slow_entries(t: list[int], s: int) -> tuple[list[int], list[int]]:
    """As ``_fast_entries``, ``_exp_neg`` per entry, in units of ``2^-SLOW_BITS``."""
    ctx = _context(SLOW_BITS)
    cut = _fixed(ctx, _exp_neg(ctx, ctx.mpf(_SLOW_TOP)), SLOW_BITS)[1]
    los, his = [], []
    for tn in t:
        if tn >> s >= _SLOW_TOP:
            los.append(0)
            his.append(cut)
            continue
        lo, hi = _fixed(ctx, _exp_neg(ctx, ctx.ldexp(ctx.mpf(tn), -s)), SLOW_BITS)
        los.append(lo)
        his.append(hi)
    return los, his


def _row_distance(los: list[int], his: list[int], a: list[int], sa: int, bits: int) -> Fraction:
    """An upper bound on ``sum_j |e_j / Z - a_j|`` (e_j in [lo_j, hi_j] 2^-bits, a_j = a[j] / 2^sa)."""
    z_lo, z_hi = sum(los), sum(his)
    total = 0
    for lo, hi, an in zip(los, his, a):
        up = (hi << sa) - an * z_lo
        down = an * z_hi - (lo << sa)
        total += max(up, down, 0)
    return Fraction(total, z_lo << sa)


# ------------------------------------------------------------------ the vector pass (int64, units of 2^-56)
#: Fixed-point bits of the vector pass: every value in [0, 1] is an int64 below 2^56 + 2.
VEC_BITS = 56
_HALF = 28                                     # products split at 2^28: every partial product fits in int64


def _mul_down(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64] | np.int64) -> npt.NDArray[np.int64]:
    """``floor(a b / 2^56)`` for int64 arrays ``0 <= a, b <= 2^56 + 2``, exactly (no partial sum reaches 2^63)."""
    mask = (1 << _HALF) - 1
    a1, a0, b1, b0 = a >> _HALF, a & mask, b >> _HALF, b & mask
    out: npt.NDArray[np.int64] = a1 * b1 + ((a1 * b0 + a0 * b1 + ((a0 * b0) >> _HALF)) >> _HALF)
    return out


def _mul_up(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64] | np.int64) -> npt.NDArray[np.int64]:
    """At least ``ceil(a b / 2^56)``."""
    return _mul_down(a, b) + 1


@lru_cache(maxsize=1)
def _vector_tables() -> tuple[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]], ...]:
    """The three tables of ``_tables`` at VEC_BITS, as int64 arrays (lo, hi)."""

    ctx = _context(VEC_BITS)
    out = []
    for e, count in ((0, _TOP + 1), (8, 256), (16, 256)):
        pairs = [_fixed(ctx, v, VEC_BITS) for v in _powers(ctx, _exp_neg(ctx, ctx.ldexp(ctx.mpf(1), -e)), count)]
        out.append((np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64)))
    return tuple(out)


def _vector_rows(H: Sequence[Sequence[float]], A0: Sequence[Sequence[float]],
                 block: int = 2**18) -> list[Fraction | None]:
    """``_vector_block`` over blocks of rows of about ``block`` entries (bounded temporaries)."""
    step = max(1, block // max(len(H[0]), 1))
    out: list[Fraction | None] = []
    for i in range(0, len(H), step):
        out += _vector_block(H[i:i + step], A0[i:i + step])
    return out


def _vector_block(H: Sequence[Sequence[float]], A0: Sequence[Sequence[float]]) -> list[Fraction | None]:
    """Per row, a proved upper bound on ``sum_j |softmax(h)_j - a_j|`` (a Fraction), or None where this pass
    does not apply (an entry of A0 outside [0, 1]).

    ``U = floor(t 2^56)`` is exact (Python integers), capped at 60 (exp(-t) <= exp(-60) beyond); then, all in
    int64 arrays: ``exp(-t)`` from the tables and ``S_3 <= exp(-r) <= S_4`` with ``r`` in ``[x, x + 1] 2^-56``
    (x the low 40 bits of U), every product rounded outward (``_mul_down``, ``_mul_up``); ``Z`` between the
    row sums; ``e/Z`` between ``q_lo`` and ``q_hi`` through ``floor(2^112 / Zhi)`` and ``ceil(2^112 / Zlo)``;
    ``a`` between ``floor(a 2^56)`` and that plus one; and ``|e/Z - a| <= max(q_hi - a_lo, a_hi - q_lo, 0)``.
    """

    P = VEC_BITS
    one, cap = 1 << P, _TOP << P
    rows, cols = len(H), len(H[0])
    U = np.empty((rows, cols), dtype=np.int64)
    for i, h in enumerate(H):
        ints, s = integers(h)
        top = max(ints)
        U[i] = [min((top - v) >> (s - P), cap) for v in ints] if s >= P else \
            [min((top - v) << (P - s), cap) for v in ints]
    (w_lo, w_hi), (f_lo, f_hi), (g_lo, g_hi) = _vector_tables()
    whole = U >> P
    dead = whole >= _TOP
    whole = np.minimum(whole, _TOP)
    first, second, x = (U >> 48) & 255, (U >> 40) & 255, U & ((1 << 40) - 1)
    x_hi = x + 1
    # exp(-r) >= S_3(x_hi), exp(-r) <= S_4(x) (units of 2^-56; x < 2^40, so x^4 / 24 < 2^-8 units)
    sq_down, sq_up = _mul_down(x_hi, x_hi), _mul_up(x_hi, x_hi)
    p_lo = one - x_hi + (sq_down >> 1) - (_mul_up(sq_up, x_hi) + 5) // 6
    p_hi = one - x + ((_mul_up(x, x) + 1) >> 1) - _mul_down(_mul_down(x, x), x) // 6 + 1
    lo = _mul_down(_mul_down(_mul_down(w_lo[whole], f_lo[first]), g_lo[second]), p_lo)
    hi = _mul_up(_mul_up(_mul_up(w_hi[whole], f_hi[first]), g_hi[second]), p_hi)
    lo[dead], hi[dead] = 0, w_hi[_TOP]
    lo = np.maximum(lo, 0)
    a = np.asarray(A0, dtype=np.float64)
    usable = np.asarray(((a >= 0) & (a <= 1)).all(axis=1))
    with np.errstate(under="ignore"):
        a_lo = np.floor(np.ldexp(np.clip(a, 0, 1), P)).astype(np.int64)   # exact: a power-of-two scaling
    a_hi = a_lo + 1
    out: list[Fraction | None] = []
    for i in range(rows):
        if not usable[i]:
            out.append(None)
            continue
        z_lo, z_hi = sum(lo[i].tolist()), sum(hi[i].tolist())
        r_lo, r_hi = (1 << (2 * P)) // z_hi, -((-(1 << (2 * P))) // z_lo)         # <= 2^56: Z >= 1
        q_lo, q_hi = _mul_down(lo[i], np.int64(r_lo)), _mul_up(hi[i], np.int64(r_hi))
        dev = np.maximum(np.maximum(q_hi - a_lo[i], a_hi[i] - q_lo), 0)
        out.append(Fraction(sum(dev.tolist()), one))
    return out


class SlackBound:
    """The slack of one (logits, matrix) pair, row by row, as tight as the claimed slack needs.

    ``H`` and ``A0`` are sequences of rows of floats (one shape, checked by the caller).
    """

    def __init__(self, H: Sequence[Sequence[float]], A0: Sequence[Sequence[float]], meter: Meter | None):
        self.H, self.A0, self.meter = H, A0, meter
        self.vector: list[Fraction | None] | None = None
        self.fast: dict[int, Fraction] = {}
        self.slow: dict[int, Fraction] = {}

    def _prepare(self, i: int) -> tuple[list[int], int, list[int], int]:
        h, sh = integers(self.H[i])
        top = max(h)
        a, sa = integers(self.A0[i])
        return [top - x for x in h], sh, a, sa

    def _vector(self) -> list[Fraction | None]:
        if self.vector is None:
            if self.meter is not None:
                self.meter.charge(VEC_UNITS * len(self.H) * len(self.H[0]), "the softmax slack (vector pass)")
            self.vector = _vector_rows(self.H, self.A0)
        return self.vector

    def _fast(self, i: int) -> Fraction:
        if i not in self.fast:
            if self.meter is not None:
                self.meter.charge(FAST_UNITS * len(self.H[i]), "the softmax slack (fast pass)")
            t, sh, a, sa = self._prepare(i)
            self.fast[i] = _row_distance(*_fast_entries(t, sh), a, sa, FAST_BITS)
        return self.fast[i]

    def _slow(self, i: int) -> Fraction:
        if i not in self.slow:
            if self.meter is not None:
                self.meter.charge(SLOW_UNITS * len(self.H[i]), "the softmax slack (per-entry enclosures)")
            t, sh, a, sa = self._prepare(i)
            self.slow[i] = _row_distance(*_slow_entries(t, sh), a, sa, SLOW_BITS)
        return self.slow[i]

    def _row(self, i: int, first: Fraction | None, slack: Fraction) -> Fraction:
        """The first of the three bounds of row i (vector, fast, per entry) that is at most ``slack``, else the last."""
        if first is not None and first <= slack:
            return first
        bound = self._fast(i)
        return bound if bound <= slack else self._slow(i)

    def bound(self, slack: Fraction) -> Fraction:
        """A proved bound on the distance, ``<= slack`` whenever some pass proves every row."""
        return max(self._row(i, b, slack) for i, b in enumerate(self._vector()))

    def proves(self, slack: Fraction) -> bool:
        return self.bound(slack) <= slack

"""Target slack (K.5, Lemma 11 = G.2).

If ``||A - A0||_row1 <= alpha`` then
``r_{eps+alpha}(A0) <= r_eps(A) <= r_{eps-alpha}(A0)``: a lower certificate
for A0 at ``eps + alpha`` and an upper one at ``eps - alpha`` bracket A at
eps. When A is the exact softmax of stored logits (transcendental), alpha
must be proved: a rigorous upper bound on ``||softmax_row(H) - A0||_row1``.

Two bounds, each proved. ``softmax_slack_bound`` encloses every entry with
arb balls at 64 bits: about 2^-60 above the true distance. ``SlackProof``
first bounds every row in vectorised float64 (``_float_row_bounds``, a few
ulps looser) and falls back to arb only for the rows whose float bound
exceeds the claimed slack; a verdict never depends on which bound decided.

>>> import numpy as np
>>> H = np.zeros((2, 2)); A0 = np.full((2, 2), 0.5)
>>> softmax_slack_bound(H, A0) == 0
True
>>> SlackProof(H, A0).bound_for(fmpq(1, 10**12)) <= fmpq(1, 10**12)
True
"""
from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np
from flint import arb, ctx, fmpq, fmpz

from .limits import charge
from .matrix import check_float64_matrix
from .floats import FAST, TINY, pairwise_row_sums

__all__ = ["softmax_slack_bound", "SlackProof", "ARB_PRECISION"]

#: Working precision of the enclosures, in bits: 64 bits leaves the bound
#: about 2^-60 above the true distance, far below any float64 rounding.
ARB_PRECISION = 64


def _arb_upper_to_fmpq(x: arb) -> fmpq | None:
    """The exact rational value of the upper endpoint of an arb ball (None if not finite)."""
    if not x.is_finite():
        return None
    mantissa, exponent = x.upper().man_exp()
    exponent = int(exponent)
    if exponent >= 0:
        return fmpq(mantissa * fmpz(2) ** exponent)
    return fmpq(mantissa, fmpz(2) ** (-exponent))


def _arb_rows(H, A0) -> fmpq | None:
    """Per row: enclose ``e_j = exp(h_j)`` (arb exponents do not overflow), ``Z = sum_j e_j`` and
    ``sum_j |e_j - a_j Z| / Z``; the largest upper endpoint, or None when one is not finite."""
    charge(8 * H.size, "arb enclosures of the softmax")
    old = ctx.prec
    ctx.prec = ARB_PRECISION
    try:
        worst = arb(0)
        for hrow, arow in zip(H.tolist(), A0.tolist()):
            exps = [arb(h).exp() for h in hrow]           # a float enters arb exactly; no overflow in arb
            Z = sum(exps, arb(0))
            dev = sum([abs(e - Z * a) for e, a in zip(exps, arow)], arb(0)) / Z
            worst = worst.max(dev)                       # encloses the larger of the two
        return _arb_upper_to_fmpq(worst)
    finally:
        ctx.prec = old


def _validated(logits, matrix):
    H = check_float64_matrix(logits, "logits", allow_empty=False)
    A0 = check_float64_matrix(matrix, "matrix", allow_empty=False)
    if H.shape != A0.shape:
        raise ValueError(f"logits {H.shape} and matrix {A0.shape} differ in shape")
    return H, A0


def softmax_slack_bound(logits, matrix) -> fmpq | None:
    """A rigorous upper bound on ``||softmax_row(logits) - matrix||_row1`` (arb, tight).

    Returns None when an enclosure is not finite (the caller refuses).
    """
    return _arb_rows(*_validated(logits, matrix))


# ------------------------------------------------------------------ float64 bound
# exp(t), t <= 0: t = k ln2 + r, |r| <= 0.35, exp(r) by Horner on Taylor's
# polynomial of degree _DEGREE. ln2 = _LN2_HI + _LN2_LO + d, |d| <= _LN2_ERR
# (checked with arb below; the float bound is off otherwise); _LN2_HI has 32
# bits, so k _LN2_HI is exact for |k| < 2^21.
_DEGREE = 13
_LN2_HI = math.ldexp(math.floor(math.ldexp(math.frexp(math.log(2))[0], 32)), math.frexp(math.log(2))[1] - 32)
ctx.prec, _old_prec = 256, ctx.prec
_LN2_LO = float(arb(2).log() - arb(fmpq(*_LN2_HI.as_integer_ratio())))
_LN2_ERR = 2.0**-80
ctx.prec = _old_prec


def _ln2_split_ok(hi: float, lo: float) -> bool:
    """Whether ``|ln 2 - hi - lo| < _LN2_ERR``, proved with arb at 256 bits."""
    old = ctx.prec
    ctx.prec = 256
    try:
        return bool(abs(arb(2).log() - fmpq(*hi.as_integer_ratio()) - fmpq(*lo.as_integer_ratio())) < _LN2_ERR)
    finally:
        ctx.prec = old


_LN2_OK = _ln2_split_ok(_LN2_HI, _LN2_LO)
_COEFFS = [float(Fraction(1, math.factorial(j))) for j in range(_DEGREE + 1)]
#: |Horner(r) - exp(r)| <= _REL_P exp(r) for |r| <= 0.35: rounding (Higham 5.1, gamma_{2N}, and the
#: coefficients' own rounding) and truncation, both times e^{2|r|} <= 2.03 (relative to e^r >= e^-|r|).
#: Doubled, so that the float rounding of the constant itself is covered.
_REL_P = 2 * float(Fraction(203, 100) * (Fraction(2 * _DEGREE + 3, 2**53)
                                          + Fraction(35, 100) ** (_DEGREE + 1) / math.factorial(_DEGREE + 1)))
#: Logits further below their row's maximum are clamped to it: their exp is below the clamped
#: value's enclosure (exp(t) < 2^-1074 even within a relative 2^-52 of t), and at least 0.
_DEAD = -745.5


def _pow2(k: np.ndarray) -> np.ndarray:
    """``2.0 ** k`` for integral float k in [-1022, 1023], from the bits."""
    return ((k.astype(np.int64) + 1023) << 52).view(np.float64)


def _float_row_bounds(H: np.ndarray, A0: np.ndarray) -> np.ndarray:
    """Per row, a float64 upper bound on ``sum_j |softmax(h)_j - a_j|`` (NaN where none was proved).

    ``t = fl(h - max h)`` is within ``2^-52 |t|`` of the exact difference; with
    ``k = rint(t / ln2)``, ``r1 = fl(t - k hi)`` and ``r = fl(r1 - fl(k lo))``, the exact
    ``t - k ln2`` is within ``2^-52 (|t| + |r1| + |k lo| + |r|) + |k| _LN2_ERR <= 2^-52 (|t| + 1)``
    of r (``|r1|, |r| <= 0.36``, ``|k lo| <= 2^-21``). So ``e_j = exp(t_j) = 2^k p (1 +- delta)``
    with p the Horner value and ``delta = 2 _REL_P + 3 2^-52 (|t| + 1)``. Every quantity
    below is a float formula that exceeds what it must bound by at least ``2^-50``
    relative (and the smallest normal float absolute), which covers its own two or
    three roundings: the factor ``(|t| + 5) 2^-50`` for delta, ``g + 2^-50`` for the
    pairwise sums (depth L, ``g = (L + 2) 2^-52``), ``1 +- 2^-50`` for the quotients.
    The terms ``max(s_hi - a, a - s_lo) >= |e_j / Z - a_j|`` are non-negative, so their
    rounding (relative u each) goes into the last factor.
    """
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        lo, hi, bad = _exp_enclosure(H)
        s_lo, s_hi, g, ok = _quotient_enclosure(lo, hi)
        dev, _ = pairwise_row_sums(np.maximum(s_hi - A0, A0 - s_lo))
        dev = dev * (1 + g + 2.0**-50)
    dev[bad | ~np.isfinite(dev) | ~ok] = np.nan
    return dev


def _exp_enclosure(H: np.ndarray):
    """``(lo, hi, bad)``: ``lo <= exp(h_j - max h) <= hi`` entrywise, in rows not ``bad`` (the steps of
    ``_float_row_bounds``'s docstring up to ``2^k p (1 +- delta)``)."""
    t = H - H.max(axis=1, keepdims=True)
    live = t >= _DEAD
    t = np.maximum(t, _DEAD)          # exp of the clamped t bounds a dead entry from above
    k = np.rint(t * (1 / math.log(2)))
    r = (t - k * _LN2_HI) - k * _LN2_LO
    p = np.full_like(r, _COEFFS[_DEGREE])
    for c in reversed(_COEFFS[:_DEGREE]):
        p = p * r + c
    delta = (np.abs(t) + 5.0) * 2.0**-50 + 2 * _REL_P
    k1 = np.maximum(k, -1000.0)                         # 2^k = 2^k1 2^(k - k1), both normal
    v = p * _pow2(k1) * _pow2(k - k1)                   # 2^k p; only the second product may round
    lo = np.maximum(v * (1 - delta) - TINY, 0.0) * live
    hi = v * (1 + delta) + TINY
    bad = (np.abs(r) > 0.35).any(axis=1) | ~np.isfinite(hi).all(axis=1)
    return lo, hi, bad


def _quotient_enclosure(lo: np.ndarray, hi: np.ndarray):
    """``(s_lo, s_hi, g, ok)``: with ``Z`` between the row sums of lo and of hi, every ``e / Z`` with
    ``lo <= e <= hi`` lies in ``[s_lo, s_hi]`` (rows where ``ok``). The row sums, pairwise of depth L,
    are widened by ``g = (L + 2) 2^-52 + 2^-50`` and the quotients by ``2^-50`` relative."""
    zlo, depth = pairwise_row_sums(lo)
    zhi, _ = pairwise_row_sums(hi)
    g = (depth + 2) * 2.0**-52 + 2.0**-50
    zlo, zhi = zlo * (1 - g), zhi * (1 + g)
    s_lo = lo / zhi[:, None] * (1 - 2.0**-50) - TINY      # e_j / Z lies in [s_lo, s_hi]
    s_hi = hi / zlo[:, None] * (1 + 2.0**-50) + TINY
    return s_lo, s_hi, g, zlo > 0


class SlackProof:
    """The slack of one (logits, matrix) pair, proved as cheaply as a claimed slack allows.

    ``bound_for(slack)`` returns a proved upper bound on the distance: the float
    bound of every row where it is at most ``slack``, the arb bound of the
    other rows (each computed once). It is ``<= slack`` whenever the arb bound
    of every row is, so it proves at least what ``softmax_slack_bound`` proves.
    """

    #: rows per block of the float bound (memory stays bounded on large targets)
    BLOCK_ENTRIES = 2**20

    def __init__(self, logits, matrix):
        self.H, self.A0 = _validated(logits, matrix)
        m, n = self.H.shape
        charge(40 * m * n, "the float64 softmax bound")
        step = max(1, self.BLOCK_ENTRIES // n)
        if FAST and _LN2_OK:
            self.fast = np.concatenate([_float_row_bounds(self.H[i:i + step], self.A0[i:i + step])
                                        for i in range(0, m, step)])
        else:
            self.fast = np.full(m, np.nan)
        self.arb = {}

    def _arb_row(self, i: int) -> fmpq | None:
        if i not in self.arb:
            self.arb[i] = _arb_rows(self.H[i:i + 1], self.A0[i:i + 1])
        return self.arb[i]

    def bound_for(self, slack: fmpq) -> fmpq | None:
        """A proved bound on the distance, ``<= slack`` when one is found (None: not finite)."""
        try:
            below = float(Fraction(int(slack.p), int(slack.q)))
        except OverflowError:
            below = sys.float_info.max
        if fmpq(*below.as_integer_ratio()) > slack:
            below = math.nextafter(below, -math.inf)
        ok = self.fast <= below                           # NaN rows are never ok
        bound = fmpq(*float(self.fast[ok].max()).as_integer_ratio()) if ok.any() else fmpq(0)
        for i in np.flatnonzero(~ok):
            row = self._arb_row(int(i))
            if row is None:
                return None
            bound = max(bound, row)
        return bound

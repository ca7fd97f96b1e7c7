"""Target slack (K.5, Lemma 11 = G.2).

If ``||A - A0||_row1 <= alpha`` then
``r_{eps+alpha}(A0) <= r_eps(A) <= r_{eps-alpha}(A0)``: a lower certificate
for A0 at ``eps + alpha`` and an upper one at ``eps - alpha`` bracket A at
eps. When A is the exact softmax of stored logits (transcendental), alpha
must be proved: a rigorous upper bound on ``||softmax_row(H) - A0||_row1``.

Two bounds, each proved. ``softmax_slack_bound`` encloses every entry with
arb balls at 64 bits (of ``exp(h - max h)``: no exponential overflows):
about 2^-60 above the true distance; a row left undecided at 64 bits is
enclosed again at ``PRECISE_BITS``. ``SoftmaxSlacks``
first bounds every row in vectorised float64 (``_float_row_bounds``, a few
ulps looser) and falls back to arb only for the rows whose float bound
exceeds the claimed slack; a verdict never depends on which bound decided.
It serves every matrix paired with one logits tensor: the enclosures of
``exp(h)`` and ``Z`` (float per block, arb per row) are made once per row
and only the deviation sum is made per matrix. An arb deviation sum stops
as soon as it exceeds the slack (the slack is then refused). All of it is
charged at its measured cost (``bench/suites/exact_work.py``).

>>> import numpy as np
>>> H = np.zeros((2, 2)); A0 = np.full((2, 2), 0.5)
>>> softmax_slack_bound(H, A0) == 0
True
>>> SlackProof(H, A0).bound_for(fmpq(1, 10**12)) <= fmpq(1, 10**12)
True
"""
from __future__ import annotations

import functools
import math
import sys
from collections.abc import Collection, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, fmpq, fmpz

from .limits import charge
from .precision import arb_precision
from .matrix import check_float64_matrix
from .floats import FAST, TINY, pairwise_row_sums

__all__ = ["softmax_slack_bound", "SoftmaxSlacks", "SlackProof", "ARB_PRECISION", "arb_precision"]

#: Working precision of the enclosures, in bits: 64 bits leaves the bound
#: about 2^-60 above the true distance, far below any float64 rounding.
ARB_PRECISION = 64
#: A row that 64 bits leave undecided (its enclosure straddles the slack) is enclosed again at this
#: precision, charged ``PRECISE_BITS / ARB_PRECISION`` times the units: a slack claimed a relative 1e-16
#: above the true distance is then decided, as the second checker (192 bits) decides it.
PRECISE_BITS = 256
#: Work units per entry, measured against FLINT's products (``bench/suites/exact_work.py``):
#: the float enclosure of exp(h) and Z (once per logits tensor), the float deviation sum (per matrix),
#: an arb exp and its term of Z (once per logits row), and an arb deviation term (per matrix and row).
FLOAT_EXP_UNITS, FLOAT_DEV_UNITS, ARB_EXP_UNITS, ARB_DEV_UNITS = 40, 8, 512, 256
#: Entries of an arb deviation sum between two comparisons with the slack.
ARB_CHUNK = 64
#: One row of the arb pass: ``(True, s)`` (the distance is above the stop s, an fmpq) or ``(False, the
#: upper endpoint of the distance)`` (an fmpq, None where not finite).
_ArbRow = tuple[bool, Any]


def _arb_upper_to_fmpq(x: arb) -> fmpq | None:
    """The exact rational value of the upper endpoint of an arb ball (None if not finite)."""
    if not x.is_finite():
        return None
    exponent: int | fmpz
    mantissa, exponent = x.upper().man_exp()
    exponent = int(exponent)
    if exponent >= 0:
        return fmpq(mantissa * fmpz(2) ** exponent)
    return fmpq(mantissa, fmpz(2) ** (-exponent))


def _arb_row(hrow: list[float], arows: dict[Any, list[float]],
             stops: Mapping[Any, fmpq | None], bits: int = ARB_PRECISION) -> dict[Any, _ArbRow]:
    """One row: enclose ``e_j = exp(h_j - max h)`` (softmax is unchanged by the shift, and no exponential
    overflows: logits of 1e50 have a finite enclosure) and ``Z = sum_j e_j`` once, then for each matrix
    row ``arows[k]`` the sum ``sum_j |e_j - a_j Z|``, ARB_CHUNK terms at a time, at ``bits`` of precision.
    Returns k -> ``(False, upper endpoint of the sum / Z)`` (None: not finite), or ``(True, s)`` once
    the sum exceeds ``s Z`` for ``s = stops[k]`` (not None): the row's distance is then above s."""
    scale = max(1, bits // ARB_PRECISION)
    charge(scale * ARB_EXP_UNITS * len(hrow), "arb enclosures of exp(h) and Z")
    out = {}
    top = arb(max(hrow))                                  # a float enters arb exactly
    with arb_precision(2 * bits):                         # h - max h at twice the bits: exp widens it |t| times
        shifted = [arb(h) - top for h in hrow]
    with arb_precision(bits):
        exps = [t.exp() for t in shifted]
        Z = sum(exps, arb(0))
        for k, arow in arows.items():
            limit, dev = None if stops[k] is None else Z * arb(stops[k]), arb(0)
            for j in range(0, len(hrow), ARB_CHUNK):
                charge(scale * ARB_DEV_UNITS * len(arow[j:j + ARB_CHUNK]), "arb deviation sums")
                dev = sum([abs(e - Z * a) for e, a in zip(exps[j:j + ARB_CHUNK], arow[j:j + ARB_CHUNK])], dev)
                if limit is not None and dev > limit:
                    out[k] = (True, stops[k])
                    break
            else:
                out[k] = (False, _arb_upper_to_fmpq(dev / Z))
    return out


def _validated(H: np.ndarray, matrix: object) -> np.ndarray:
    """``matrix`` as a checked float64 array of the shape of the (checked) logits ``H``."""
    A0 = check_float64_matrix(matrix, "matrix", allow_empty=False)
    if H.shape != A0.shape:
        raise ValueError(f"logits {H.shape} and matrix {A0.shape} differ in shape")
    return A0


def softmax_slack_bound(logits: object, matrix: object) -> fmpq | None:
    """A rigorous upper bound on ``||softmax_row(logits) - matrix||_row1`` (arb, tight).

    Returns None when an enclosure is not finite (the caller refuses).
    """
    H = check_float64_matrix(logits, "logits", allow_empty=False)
    A0 = _validated(H, matrix)
    worst = fmpq(0)
    for hrow, arow in zip(H.tolist(), A0.tolist()):
        _, row = _arb_row(hrow, {0: arow}, {0: None})[0]
        if row is None:
            return None
        worst = max(worst, row)
    return worst


# ------------------------------------------------------------------ float64 bound
# exp(t), t <= 0: t = k ln2 + r, |r| <= 0.35, exp(r) by Horner on Taylor's
# polynomial of degree _DEGREE. ln2 = _LN2_HI + _LN2_LO + d, |d| <= _LN2_ERR
# (checked with arb at first use, ``_ln2_ok``; the float bound is off otherwise);
# _LN2_HI has 32 bits, so k _LN2_HI is exact for |k| < 2^21.
_DEGREE = 13
_LN2_HI, _LN2_LO = float.fromhex("0x1.62e42fee00000p-1"), float.fromhex("0x1.a39ef35793c76p-33")
_LN2_ERR = 2.0**-80


def _ln2_split_ok(hi: float, lo: float) -> bool:
    """Whether ``hi`` has at most 32 significant bits (hi in [1/2, 1)) and ``|ln 2 - hi - lo| < _LN2_ERR``,
    proved with arb at 256 bits."""
    with arb_precision(256):
        return (hi * 2**32).is_integer() and bool(
            abs(arb(2).log() - fmpq(*hi.as_integer_ratio()) - fmpq(*lo.as_integer_ratio())) < _LN2_ERR)


@functools.cache
def _ln2_ok() -> bool:
    """The split of ln 2 that the float bound uses, checked once, at its first use."""
    return _ln2_split_ok(_LN2_HI, _LN2_LO)


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
    return _float_deviation(_float_enclosure(H), A0)


def _float_enclosure(H: np.ndarray) -> tuple[Any, Any, Any, Any]:
    """``(s_lo, s_hi, factor, bad)``: the quotient enclosures of ``_float_row_bounds``, the factor
    ``1 + g + 2^-50`` of its last step and the rows where no bound was proved; one per logits tensor."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        lo, hi, bad = _exp_enclosure(H)
        s_lo, s_hi, g, ok = _quotient_enclosure(lo, hi)
    return s_lo, s_hi, 1 + g + 2.0**-50, bad | ~ok


def _float_deviation(enclosure: tuple[Any, Any, Any, Any], A0: np.ndarray) -> np.ndarray:
    """The last step of ``_float_row_bounds`` for one matrix A0: its sum, times the factor (NaN where none)."""
    s_lo, s_hi, factor, bad = enclosure
    dev: np.ndarray
    with np.errstate(over="ignore", invalid="ignore"):
        dev, _ = pairwise_row_sums(np.maximum(s_hi - A0, A0 - s_lo))
        dev = dev * factor
    dev[bad | ~np.isfinite(dev)] = np.nan
    return dev


def _exp_enclosure(H: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _quotient_enclosure(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
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


def _below(slack: fmpq) -> float:
    """The largest float at or below ``slack`` (the largest float for a slack beyond float range)."""
    try:
        below = float(Fraction(int(slack.p), int(slack.q)))
    except OverflowError:
        below = sys.float_info.max
    if fmpq(*below.as_integer_ratio()) > slack:
        below = math.nextafter(below, -math.inf)
    return below


class SoftmaxSlacks:
    """The slacks of one logits tensor against the matrices paired with it, proved as cheaply as the
    claimed slacks allow.

    ``matrices``: name -> float64 array of the logits' shape; ``fasts[k]`` holds the float bound of each
    row of matrix k, from one float enclosure of ``exp(h)`` and ``Z`` per block of rows. ``bound(k, slack)``
    is the float bound of every row where it is at most ``slack``, and the arb bound of the other rows;
    None when no bound is proved (a row's distance above ``slack``, or an enclosure not finite). It is
    ``<= slack`` whenever the arb bound of every row is, so it proves what ``softmax_slack_bound`` proves.
    ``plan`` (name -> claimed slacks) shares the arb pass: a row computed for one matrix serves, from the
    same ``exp(h)`` and ``Z``, every planned matrix that needs it at its smallest slack and has no row
    above its largest slack yet; each deviation sum stops above the largest slack claimed for its matrix.
    """

    #: rows per block of the float bound (memory stays bounded on large targets)
    BLOCK_ENTRIES = 2**20

    rows: dict[tuple[Any, int], _ArbRow]
    refused: set[Any]

    def __init__(self, logits: object, matrices: dict[Any, object],
                 plan: Mapping[Any, Collection[fmpq]] | None = None):
        self.H = check_float64_matrix(logits, "logits", allow_empty=False)
        self.A0 = {k: _validated(self.H, A) for k, A in matrices.items()}
        m, n = self.H.shape
        charge((FLOAT_EXP_UNITS + FLOAT_DEV_UNITS * len(self.A0)) * m * n, "the float64 softmax bounds")
        self.fasts = {k: np.full(m, np.nan) for k in self.A0}
        if FAST and _ln2_ok():
            step = max(1, self.BLOCK_ENTRIES // n)
            for i in range(0, m, step):
                enclosure = _float_enclosure(self.H[i:i + step])
                for k, A0 in self.A0.items():
                    self.fasts[k][i:i + step] = _float_deviation(enclosure, A0[i:i + step])
        self.plan = {k: (max(s), ~(self.fasts[k] <= _below(min(s)))) for k, s in (plan or {}).items()}
        self.rows, self.refused = {}, set()    # (k, i) -> (above, value) of _arb_row; the ks with a row above

    def bound(self, k: Any, slack: fmpq) -> fmpq | None:
        """A proved bound on the distance of matrix k, ``<= slack`` when one is found (None: none proved)."""
        ok = self.fasts[k] <= _below(slack)                # NaN rows are never ok
        bound = fmpq(*float(self.fasts[k][ok].max()).as_integer_ratio()) if ok.any() else fmpq(0)
        for i in np.flatnonzero(~ok):
            above, value = self._row(k, int(i), slack)
            # undecided at 64 bits (the ball straddles the slack): once more, finer
            if not above and (value is None or value > slack):
                above, value = _arb_row(self.H[i].tolist(), {k: self.A0[k][i].tolist()}, {k: slack}, PRECISE_BITS)[k]
            if above or value is None:
                return None
            bound = max(bound, value)
        return bound

    def _row(self, k: Any, i: int, slack: fmpq) -> _ArbRow:
        """Row i of matrix k by arb, with the planned matrices that need row i too (``plan``)."""
        done = self.rows.get((k, i))
        if done is None or (done[0] and done[1] < slack):
            stops = {k: max(slack, self.plan.get(k, (slack,))[0])}
            for j, (top, need) in self.plan.items():
                if j not in stops and j not in self.refused and (j, i) not in self.rows and need[i]:
                    stops[j] = top
            for j, result in _arb_row(self.H[i].tolist(), {j: self.A0[j][i].tolist() for j in stops}, stops).items():
                self.rows[j, i] = result
                if result[0] and j in self.plan:
                    self.refused.add(j)
        return self.rows[k, i]


class SlackProof(SoftmaxSlacks):
    """One (logits, matrix) pair: ``fast``, its float row bounds; ``bound_for(slack)``; ``arb``, the rows
    that arb proved."""

    def __init__(self, logits: object, matrix: object):
        super().__init__(logits, {0: matrix})
        self.fast = self.fasts[0]

    def bound_for(self, slack: fmpq) -> fmpq | None:
        return self.bound(0, slack)

    @property
    def arb(self) -> dict[int, _ArbRow]:
        return {i: result for (_, i), result in self.rows.items()}

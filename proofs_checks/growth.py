"""The hard core's growth law as an exact statement for every beta (I.4, G.3).

Completing the square, ``2 X Y - Y^2 = X^2 - (Y - X)^2``: row k of the
one-dimensional hard core (``hardcore.py``, c = 4 keys per cell, K = 4 M keys)
is the discrete Gaussian ``w(d) = exp(-s d^2)`` on the odd offsets
``d = Y - X_k`` inside the key window, with

    s = s(beta, M) = beta / (8 c^2 M^2) = beta / (128 M^2),

and its own cell is the offsets ``I = {-3, -1, 1, 3}``. The keys of the cells
tile the window, so the row sums of the channel are 1 and, with the decoder
``D = I``, ``||D A X - I||_row1 = 2 (1 - p_min^r)`` exactly, ``p_min`` the least
own-cell mass of a one-dimensional row (an r-dimensional row is a product).

Lemma (monotone in s). For any set O of odd offsets containing I,
``p(s) = sum_I e^{-s d^2} / sum_O e^{-s d^2}`` is nondecreasing in s:
``1/p - 1 = sum_{d in O \\ I} 1 / sum_{d' in I} e^{s (d^2 - d'^2)}`` and every
exponent ``d^2 - d'^2 >= 25 - 9 > 0``. The code checks the hypothesis
``max_I d^2 < min_{odd d not in I} d^2`` exactly.

Lemma (rounding). The stored logits are the exact ones rounded to the nearest
multiple of ``2^-30`` (error at most ``2^-31`` per entry, checked exactly on
every sampled instance), so each weight moves by a factor in
``[e^-rho, e^rho]``, ``rho = 2^-31``, and each own-cell mass by a factor in
``[e^-2rho, e^2rho]``; in r dimensions ``e^{+-2 r rho}``.

Law. With rationals ``s_lo < s_hi`` (a float search *chooses* them around the
threshold; arb *decides*):

* (certified) ``p_inf(s_hi)^r e^{-2 r rho} >= 1 - delta``, where
  ``p_inf(s) = g(s) / G(s)`` is the own-cell mass on the infinite odd lattice
  (a lower bound for every row of every M, since the window is a subset of it);
  ``G`` is bounded above by a finite sum plus a geometric tail. By the first
  lemma, every (beta, M) with ``s(beta, M) >= s_hi`` has ``||DAX - I|| <= 2 delta``.
* (refuted) ``(g(s_lo) / W(s_lo, 4 M0 - 5))^r e^{2 r rho} < 1 - delta``, where
  ``W(s, T)`` sums the odd offsets ``|d| <= T``: the middle row's window contains
  them for every ``M >= M0`` (its centre is within c of the box centre). By the
  first lemma (on that finite window), every (beta, M) with ``M >= M0`` and
  ``s(beta, M) <= s_lo`` has ``||DAX - I|| > 2 delta``.

Hence for **every** beta: ``M_lo(beta) = floor(sqrt(beta / (128 s_hi)))`` is
certified, and the largest certified M is at most
``max(M0 - 1, M_hi(beta))``, ``M_hi(beta) = floor(sqrt(beta / (128 s_lo)))``;
for ``beta >= beta0 = 128 s_lo (M0 - 1)^2`` the largest certified M lies in
``[M_lo(beta), M_hi(beta)]`` and the proved rank ``M^r`` is
``Theta(beta^(r/2))`` with the explicit constants ``(128 s_hi)^(-r/2)`` and
``(128 s_lo)^(-r/2)``. Where ``M_lo = M_hi`` the largest M is known in closed
form. A recurrence ``M(4 beta) = 2 M(beta)`` is *not* a consequence (it
holds where ``frac(sqrt(beta / (128 s*)))`` is below 1/2 and fails elsewhere).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from flint import arb, fmpq

from ._core import arb_precision

__all__ = ["GrowthLaw", "prove_law", "m_bounds", "p_inf_lower", "p_mid_upper", "IN_OFFSETS",
           "ROUND_RHO", "SCALE"]

#: The own cell's offsets (c = 4 keys per cell: d = 2 i + 1 - c).
IN_OFFSETS = (-3, -1, 1, 3)
#: s = beta / (SCALE M^2), SCALE = 8 c^2 with c = 4.
SCALE = 128
#: Largest rounding error of a stored logit: half of the 2^-30 grid.
ROUND_RHO = fmpq(1, 2 ** 31)
#: Relative half-width of the threshold bracket [s_lo, s_hi] chosen around the float threshold.
REL = fmpq(1, 2 ** 20)


def _g(s: arb) -> arb:
    return sum(((-s * d * d).exp() for d in IN_OFFSETS), arb(0))


def window_sum(s: arb, T: int) -> arb:
    """``W(s, T) = sum_{odd |d| <= T} e^{-s d^2}``."""
    return 2 * sum(((-s * d * d).exp() for d in range(1, T + 1, 2)), arb(0))


def lattice_upper(s: arb, T: int) -> arb:
    """An upper bound on ``G(s) = sum_{odd d in Z} e^{-s d^2}``: ``W(s, T)`` plus the tail
    ``2 sum_{m >= 0} e^{-s (T2 + 2m)^2} <= 2 e^{-s T2^2} / (1 - e^{-4 s T2})``, ``T2 = T + 2``
    (``(T2 + 2m)^2 >= T2^2 + 4 T2 m``)."""
    T2 = T + 2
    return window_sum(s, T) + 2 * (-s * T2 * T2).exp() / (1 - (-4 * s * T2).exp())


def _terms(s: fmpq) -> int:
    """An odd cut-off with ``s T^2 >= 200`` (the tail is then below e^-200)."""
    T = math.isqrt(int((fmpq(200) / s).floor()) + 1) + 1
    return T if T % 2 else T + 1


def p_inf_lower(s: fmpq, prec: int = 192) -> arb:
    """arb lower bound on the own-cell mass on the infinite odd lattice, ``g(s) / G(s)``."""
    with arb_precision(prec):
        a = arb(s)
        return _g(a) / lattice_upper(a, _terms(s))


def p_mid_upper(s: fmpq, M0: int, prec: int = 192) -> arb:
    """arb upper bound on the middle row's own-cell mass for every M >= M0: ``g / W(s, 4 M0 - 5)``."""
    with arb_precision(prec):
        a = arb(s)
        return _g(a) / window_sum(a, 4 * M0 - 5)


def _p_float(s: float) -> float:
    """Float own-cell mass on the infinite lattice (a search hint only)."""
    T = int(40 / math.sqrt(s)) + 3
    tot = 2 * sum(math.exp(-s * d * d) for d in range(1, T, 2))
    return sum(math.exp(-s * d * d) for d in IN_OFFSETS) / tot


def float_threshold(r: int, delta: fmpq) -> float:
    """Float bisection for s* with ``p_inf(s*)^r = 1 - delta`` (chooses, never decides)."""
    target = float(1 - delta)
    lo, hi = 1e-4, 10.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if _p_float(mid) ** r < target:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


@dataclass(frozen=True)
class GrowthLaw:
    """The proved law for dimension r and leakage budget delta (see the module docstring)."""

    r: int
    delta: fmpq
    s_lo: fmpq
    s_hi: fmpq
    M0: int

    @property
    def beta0(self) -> fmpq:
        return SCALE * self.s_lo * (self.M0 - 1) ** 2


def _isqrt_floor(q: fmpq) -> int:
    """``floor(sqrt(q))`` for a rational q >= 0 (= isqrt(floor(q)))."""
    return math.isqrt(int(q.floor()))


def m_bounds(law: GrowthLaw, beta) -> tuple[int, int]:
    """``(M_lo, M_hi)``: M_lo certified; no M > max(M0 - 1, M_hi) certified."""
    beta = fmpq(beta)
    return _isqrt_floor(beta / (SCALE * law.s_hi)), _isqrt_floor(beta / (SCALE * law.s_lo))


def prove_law(r: int, delta: fmpq, rel: fmpq = REL, max_m0: int = 64):
    """Choose ``s_lo < s_hi`` and M0, then prove the two arb inequalities of the law.

    Returns ``(law, facts)``; ``facts`` is a list of ``(ok, what)`` the caller records.
    """
    s_star = float_threshold(r, delta)
    sf = fmpq(*s_star.as_integer_ratio())
    s_lo, s_hi = sf * (1 - rel), sf * (1 + rel)
    facts = []
    # the monotonicity lemma's hypothesis: every inner offset is closer than every outer one
    outer_min = min(d * d for d in range(-99, 100, 2) if d not in IN_OFFSETS)
    facts.append((max(d * d for d in IN_OFFSETS) < outer_min,
                  f"monotonicity hypothesis: max inner d^2 < min outer d^2 = {outer_min}"))
    facts.append((all(d % 2 == 1 or d % 2 == -1 for d in IN_OFFSETS) and len(IN_OFFSETS) == 4,
                  "own cell: the four odd offsets -3, -1, 1, 3"))
    one_minus = arb(1 - delta)
    with arb_precision(192):
        rho2 = (arb(2 * r) * arb(ROUND_RHO)).exp()
        cert = p_inf_lower(s_hi) ** r / rho2
        facts.append((cert >= one_minus,
                      f"r={r}: p_inf(s_hi)^r e^(-2 r rho) = {cert} not certainly >= 1 - delta"))
        M0 = None
        for m in range(2, max_m0 + 1):
            if (p_mid_upper(s_lo, m) ** r) * rho2 < one_minus:
                M0 = m
                break
    facts.append((M0 is not None, f"r={r}: no M0 <= {max_m0} refutes s <= s_lo"))
    facts.append((s_lo < s_hi, "s_lo < s_hi"))
    return GrowthLaw(r, delta, s_lo, s_hi, M0 or max_m0 + 1), facts


def round_error_ok(core) -> bool:
    """Every stored logit of the one-dimensional core is within ``2^-31`` of the exact
    ``beta (2 X Y - Y^2) / (8 K^2)`` (the rounding lemma's hypothesis, exactly)."""
    K, c, M = core.K, core.c, core.M
    den = core.beta / (8 * K * K)
    for k in range(M):
        X = c * (2 * k + 1 - M)
        for Y, v in zip(range(-(K - 1), K, 2), core.h[k]):
            e = v - den * (2 * X * Y - Y * Y)
            if (e if e >= 0 else -e) > ROUND_RHO:
                return False
    return True

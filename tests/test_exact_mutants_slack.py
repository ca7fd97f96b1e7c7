"""The float softmax bound's enclosures, probed one side at a time (mutation-run survivors; K.5).

``exact.slack._float_row_bounds`` encloses each ``e_j / Z`` in ``[s_lo, s_hi]``
and returns ``sum_j max(s_hi - a_j, a_j - s_lo)``. With ``A0 = 0`` that sum is
the sum of the upper ends, with ``A0 = 1`` it is ``n`` minus the sum of the
lower ends: each side of every enclosure is seen. The proof (docstring of
``_float_row_bounds``) allows the Horner value its whole error
``delta = 2 _REL_P + 3 2^-52 (|t| + 1)``: whatever value in that range it
had, the enclosure must hold. So each side must lie beyond the worst case of
that range (computed here with mpmath at 60 digits from the exact softmax),
and within 2^-44 of it (tightness). A margin dropped or turned around, the
mutation run's survivors (``bench/mutation.py --only slack.py``), moves a
side past one of the two limits.
"""
from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from flint import fmpq

from exact import slack

ROWS = [[0.0, -1.0, -2.5, -0.25, -4.0, -3.0],
        [1.5, -30.0, -300.0, -700.0, 0.5, 1.0],              # |t| large: the t-dependent part of delta
        [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]]


def _worst_case(hrow):
    """(the largest upper sum, the smallest lower sum) that the proof's delta allows, at 60 digits."""
    with mpmath.workdps(60):
        top = max(hrow)
        e = [mpmath.exp(mpmath.mpf(h) - mpmath.mpf(top)) for h in hrow]
        delta = [2 * mpmath.mpf(slack._REL_P) + 3 * mpmath.mpf(2) ** -52 * (abs(mpmath.mpf(h - top)) + 1)
                 for h in hrow]
        z_low = mpmath.fsum(x * (1 - d) / (1 + d) for x, d in zip(e, delta))     # v = e / (1 + d), hi = e
        z_high = mpmath.fsum(x * (1 + d) / (1 - d) for x, d in zip(e, delta))
        return mpmath.fsum(e) / z_low, mpmath.fsum(e) / z_high


@pytest.mark.parametrize("seed", range(3))
def test_each_side_of_the_float_enclosure_covers_the_proved_error(seed):
    rng = np.random.default_rng(seed)
    H = np.array(ROWS + rng.normal(scale=3.0, size=(3, 6)).tolist())
    n = H.shape[1]
    dev_upper = slack._float_row_bounds(H, np.zeros_like(H))      # sum of s_hi (A0 = 0)
    dev_lower = slack._float_row_bounds(H, np.ones_like(H))       # n - sum of s_lo (A0 = 1)
    with mpmath.workdps(60):
        for i, hrow in enumerate(H.tolist()):
            upper, lower = _worst_case(hrow)
            assert upper <= mpmath.mpf(dev_upper[i]) <= upper + mpmath.mpf(2) ** -44, (i, dev_upper[i])
            assert n - lower <= mpmath.mpf(dev_lower[i]) <= n - lower + mpmath.mpf(2) ** -44, (i, dev_lower[i])


def _nudged_softmax(seed: int, shape):
    """Random logits and their float softmax moved one ulp up entrywise (a small, nonzero slack)."""
    H = np.random.default_rng(seed).normal(scale=3.0, size=shape)
    A0 = np.exp(H - H.max(axis=1, keepdims=True))
    return H, np.nextafter(A0 / A0.sum(axis=1, keepdims=True), 1.0)


def test_a_slack_a_fraction_of_an_ulp_below_the_float_bound_is_proved():
    """``bound_for(slack)`` returns a bound ``<= slack`` whenever the arb bound of every row is: with a slack
    just below a row's float bound (closer to it than half an ulp, so that the slack rounds to that very
    float), the row goes to arb instead of passing on a float bound above the slack."""
    H, A0 = _nudged_softmax(3, (3, 5))
    proof = slack.SlackProof(H, A0)
    top = fmpq(*float(proof.fast.max()).as_integer_ratio())
    claimed = top * (1 - fmpq(1, 2**60))
    assert fmpq(*float(Fraction(int(claimed.p), int(claimed.q))).as_integer_ratio()) == top
    assert slack.softmax_slack_bound(H, A0) <= claimed
    bound = proof.bound_for(claimed)
    assert bound is not None and bound <= claimed


def test_masked_logits_keep_a_finite_float_bound():
    """Attention masks put logits like -1e9 (dead: exp below 2^-1074) beside live ones: the float bound of
    such rows stays finite (no arb fallback) and above the true distance."""
    H = np.array([[0.0, -1e9, 1.5, -1e9], [-1e9, 2.0, -1e9, -1e9], [0.5, -800.0, -700.0, 0.0]])
    A0 = np.exp(H - H.max(axis=1, keepdims=True))
    A0 = A0 / A0.sum(axis=1, keepdims=True)
    dev = slack._float_row_bounds(H, A0)
    assert np.isfinite(dev).all()
    with mpmath.workdps(60):
        for i, (hrow, arow) in enumerate(zip(H.tolist(), A0.tolist())):
            top = max(hrow)
            e = [mpmath.exp(mpmath.mpf(h) - mpmath.mpf(top)) for h in hrow]
            true = mpmath.fsum(abs(x / mpmath.fsum(e) - mpmath.mpf(a)) for x, a in zip(e, arow))
            assert true <= mpmath.mpf(dev[i]) <= true + mpmath.mpf(2) ** -40


@pytest.mark.parametrize("above", [0, 1])
def test_a_slack_at_or_just_above_the_float_bound_needs_no_arb(above):
    """``numeric.search.slack`` writes the float bound itself (rounded up): ``bound_for`` then proves it
    from the float bounds alone, with no arb enclosure, whether the slack is that float exactly or a
    rational just above it (which rounds down to it)."""
    H, A0 = _nudged_softmax(5, (4, 6))
    proof = slack.SlackProof(H, A0)
    top = fmpq(*float(proof.fast.max()).as_integer_ratio())
    claimed = top * (1 + fmpq(above, 2**60))
    assert proof.bound_for(claimed) == top and not proof.arb


U = Fraction(1, 2**53)


def _dyadic(rng, rows, n):
    """Positive floats of 12 significant bits: every row sum of them is exact in float64."""
    return rng.integers(1, 2**12, size=(rows, n)).astype(np.float64) * 2.0**-12


@pytest.mark.parametrize("n", [1, 4, 6, 16])
def test_quotient_enclosure_is_its_documented_formula(n):
    """``_quotient_enclosure``: ``g = (L + 2) 2^-52 + 2^-50`` for pairwise sums of depth L, and
    ``s_lo = lo / (Z_hi (1 + g)) (1 - 2^-50) - TINY``, ``s_hi = hi / (Z_lo (1 - g)) (1 + 2^-50) + TINY``
    up to their own three roundings (3 u relative), with Z the exact row sums (exact here: 12-bit
    entries). Each margin is 4 ulps or more, so a margin dropped, doubled or turned around lands
    outside; a value test of soundness alone could not see it (the other margins cover it)."""
    rng = np.random.default_rng(n)
    lo = _dyadic(rng, 5, n)
    hi = lo + _dyadic(rng, 5, n) * 2.0**-8
    s_lo, s_hi, g, ok = slack._quotient_enclosure(lo, hi)
    depth = max(n - 1, 0).bit_length()
    gd = Fraction(depth + 2, 2**52) + Fraction(1, 2**50)
    assert Fraction(g) == gd and ok.all()
    M = Fraction(1, 2**50)
    tiny = Fraction(slack.TINY)
    for i in range(5):
        zlo = sum(map(Fraction, lo[i])) * (1 - gd)
        zhi = sum(map(Fraction, hi[i])) * (1 + gd)
        for j in range(n):
            want_lo = Fraction(lo[i, j]) / zhi * (1 - M)
            want_hi = Fraction(hi[i, j]) / zlo * (1 + M)
            assert want_lo * (1 - 3 * U) - tiny <= Fraction(s_lo[i, j]) <= want_lo * (1 + 3 * U)
            assert want_hi * (1 - 3 * U) <= Fraction(s_hi[i, j]) <= want_hi * (1 + 3 * U) + tiny


@pytest.mark.parametrize("seed", range(3))
def test_deviation_sum_is_widened_by_g_and_one_margin(seed):
    """The last step of ``_float_row_bounds``: ``sum_j max(s_hi - a_j, a_j - s_lo) (1 + g + 2^-50)``,
    within its roundings (``L + 3`` u relative for a pairwise sum of depth L, the differences and the
    product), against the exact sum of the exact terms from the same enclosures."""
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(4, 8)) * 3
    A0 = rng.dirichlet(np.ones(8), size=4)
    lo, hi, bad = slack._exp_enclosure(H)
    s_lo, s_hi, g, _ = slack._quotient_enclosure(lo, hi)
    dev = slack._float_row_bounds(H, A0)
    factor = 1 + Fraction(g) + Fraction(1, 2**50)
    tol = (3 + 3) * U                                   # depth 3, one difference, one product
    for i in range(4):
        exact = sum(max(Fraction(s_hi[i, j]) - Fraction(A0[i, j]), Fraction(A0[i, j]) - Fraction(s_lo[i, j]))
                    for j in range(8)) * factor
        assert exact * (1 - tol) <= Fraction(dev[i]) <= exact * (1 + tol), i


def test_horner_error_constant_is_its_documented_formula():
    """``_REL_P``: twice ``2.03 (gamma rounding (2N + 3) 2^-53 + truncation 0.35^(N+1) / (N+1)!)``, to
    within its one rounding; and 2.03 does bound ``e^{2 * 0.35}`` (arb)."""
    import math

    from flint import arb
    N = slack._DEGREE
    formula = 2 * Fraction(203, 100) * (Fraction(2 * N + 3, 2**53)
                                        + Fraction(35, 100) ** (N + 1) / math.factorial(N + 1))
    assert formula * (1 - U) <= Fraction(slack._REL_P) <= formula * (1 + U)
    assert arb(fmpq(7, 10)).exp() < fmpq(203, 100)


def test_a_row_left_undecided_at_64_bits_is_decided_at_256():
    """A slack a relative 1e-16 above the true distance (margin about 2^-63 here): the 64-bit ball straddles
    it, the 256-bit one lies below it, so ``bound_for`` proves it; 1e-16 below the distance, the finer ball
    lies above it and the slack is refused. A retry skipped, or done only where 64 bits already proved the
    row, refuses the first."""
    H = np.random.default_rng(5).normal(size=(4, 4)) * 2
    A0 = np.exp(H - H.max(axis=1, keepdims=True))
    A0 = A0 / A0.sum(axis=1, keepdims=True)
    A0[0, 0] += 1e-3
    with mpmath.workprec(400):
        def row(h, a):
            e = [mpmath.exp(mpmath.mpf(x) - mpmath.mpf(max(h))) for x in h]
            return mpmath.fsum(abs(x / mpmath.fsum(e) - mpmath.mpf(y)) for x, y in zip(e, a))
        d = max(row(h, a) for h, a in zip(H.tolist(), A0.tolist()))
        above = fmpq(*map(int, Fraction(mpmath.nstr(d * (1 + mpmath.mpf(10) ** -16), 100)).as_integer_ratio()))
        below = fmpq(*map(int, Fraction(mpmath.nstr(d * (1 - mpmath.mpf(10) ** -16), 100)).as_integer_ratio()))
    assert not slack.softmax_slack_bound(H, A0) <= above          # 64 bits alone cannot decide it
    bound = slack.SlackProof(H, A0).bound_for(above)
    assert bound is not None and bound <= above
    refused = slack.SlackProof(H, A0).bound_for(below)
    assert refused is None or refused > below


def test_logits_of_1e50_have_a_finite_arb_enclosure():
    """exp(1e50) alone has no finite enclosure; exp(h - max h) has: the row's softmax is exactly 1/3."""
    H, A0 = np.full((1, 3), 1e50), np.full((1, 3), 1 / 3)
    true = 3 * (Fraction(1, 3) - Fraction(1 / 3))
    bound = slack.softmax_slack_bound(H, A0)
    assert bound is not None and true <= Fraction(int(bound.p), int(bound.q)) <= true * (1 + Fraction(1, 2**58))

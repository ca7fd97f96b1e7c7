"""The float64 fast paths of the exact tier (``exact.floats``, ``exact.slack``) against exact arithmetic.

Nothing in ``exact.floats`` may decide a verdict wrongly: its row bounds must
enclose the exact row l1 sums, its exact pieces must sum exactly to the
product, and a check on float-backed matrices (filter and pieces on) must
give the same verdict and the same exact margin as the Fraction-only checker
and as FLINT alone (filter off). The float softmax bound must lie above the
true distance (60-digit mpmath). Matrices mix magnitudes from subnormal to
2^900, exact zeros, ties between rows and residuals that cancel to the last
bit: the cases where a rounding argument would break first.
"""
from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from flint import fmpq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exact.norms
from exact import floats
from exact.certificates import (ReconstructionWitness, RowReconstructionWitness, TrivialLower, UpperFactors,
                                check_lower, check_upper)
from exact.matrix import ExactMatrix
from exact.norms import residual_row_l1
from exact.slack import SlackProof, _float_row_bounds, softmax_slack_bound
from tests import independent_checker as ind
from tests.strategies import factor_cases, reconstruction_cases, row_reconstruction_cases, to_float_rows

SETTINGS = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

#: Exponents of the entries: subnormal, tiny, ordinary, huge.
EXPONENTS = [-1074, -1060, -1000, -600, -300, -60, -20, -1, 0, 1, 3, 20, 60, 300, 600, 900]


def test_the_machine_has_the_arithmetic_the_bounds_assume():
    assert floats.FAST                       # otherwise the fast paths are off and these tests test FLINT only


def _in_environment(mode: str, probe):
    """``probe()`` under another IEEE rounding mode or with flush-to-zero / denormals-are-zero set in MXCSR
    (glibc on x86-64: ``fenv_t`` ends with the MXCSR word), the environment restored afterwards."""
    import ctypes
    import platform
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the floating-point environment is set through glibc's x86-64 fenv_t")
    libm = ctypes.CDLL("libm.so.6")
    saved = ctypes.create_string_buffer(64)
    libm.fegetenv(saved)
    try:
        if mode in ("ftz", "daz"):
            env = ctypes.create_string_buffer(saved.raw, 64)
            mxcsr = int.from_bytes(env.raw[28:32], "little") | (0x8000 if mode == "ftz" else 0x0040)
            ctypes.memmove(ctypes.addressof(env) + 28, mxcsr.to_bytes(4, "little"), 4)
            libm.fesetenv(env)
        else:
            libm.fesetround({"down": 0x400, "up": 0x800, "zero": 0xC00}[mode])
        return probe()
    finally:
        libm.fesetenv(saved)


@pytest.mark.parametrize("mode", ["down", "up", "zero", "ftz", "daz"])
def test_the_arithmetic_probe_refuses_every_other_environment(mode):
    """``FAST`` is the probe's verdict; under a directed rounding mode, or with subnormals flushed, it is false
    (and the fast paths would be off), and only then."""
    one, sub = np.ones(1), np.full(1, 2.0**-1074)
    effect = {"down": lambda: one + 3 * 2.0**-54 == 1.0, "up": lambda: one + 2.0**-54 > 1.0,
              "zero": lambda: -one - 3 * 2.0**-54 == -1.0, "ftz": lambda: np.full(1, 2.0**-1022) / 4 == 0.0,
              "daz": lambda: sub * 2 == 0.0}[mode]
    assert not effect()[0] and _in_environment(mode, effect)[0]        # the environment took effect
    assert not _in_environment(mode, floats._ieee_round_to_nearest_with_subnormals)
    assert floats._ieee_round_to_nearest_with_subnormals()


@st.composite
def wild_matrices(draw, m, n):
    """Entries k 2^e: k a 1..53-bit integer (sign, zero) and e from EXPONENTS, per row scale and per entry."""
    row_scale = [draw(st.sampled_from(EXPONENTS)) for _ in range(m)]
    rows = []
    for i in range(m):
        row = []
        for _ in range(n):
            kind = draw(st.sampled_from(["zero", "short", "long", "long"]))
            if kind == "zero":
                row.append(0.0)
                continue
            k = draw(st.integers(1, 15) if kind == "short" else st.integers(1, 2**53 - 1))
            e = row_scale[i] + draw(st.sampled_from([0, 0, -5, -40, -200]))
            row.append(float(np.ldexp(float(k) * draw(st.sampled_from([1, -1])), max(e - 52, -1074))))
        rows.append(row)
    return np.array(rows, dtype=np.float64)


@st.composite
def residual_cases(draw):
    """(C, factors): a chain of 0 to 3 float factors and a C that is often their rounded product."""
    r = draw(st.integers(0, 3))
    dims = [draw(st.integers(1, 5)) for _ in range(r + 1)] if r else [draw(st.integers(1, 5))] * 2
    factors = [draw(wild_matrices(dims[j], dims[j + 1])) for j in range(r)]
    m, n = (dims[0], dims[-1]) if r else (draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    C = draw(wild_matrices(m, n))
    if r and draw(st.booleans()):
        with np.errstate(all="ignore"):
            P = factors[0]
            for F in factors[1:]:
                P = P @ F
        if np.isfinite(P).all():
            C = P.copy()                                      # the residual cancels to rounding level
            if draw(st.booleans()):
                C[0] = np.nextafter(C[0], np.inf)
            if m > 1 and draw(st.booleans()):
                C[1] = C[0] if draw(st.booleans()) else C[1]  # tied rows
    return C, factors


def _exact(M) -> ExactMatrix:
    """The same values as an ExactMatrix without floats (FLINT only, no filter)."""
    return ExactMatrix(ExactMatrix.from_float64(np.ascontiguousarray(M)).num,
                       ExactMatrix.from_float64(np.ascontiguousarray(M)).den)


def _exact_rows(C, factors) -> list[Fraction]:
    P = None
    for F in reversed(factors):
        P = _exact(F) if P is None else _exact(F) @ P
    D = _exact(C) if P is None else _exact(C) - P
    return [sum((abs(x) for x in row), Fraction(0)) for row in D.to_fractions()]


@pytest.mark.parametrize("seed", range(4))
def test_row_bounds_are_tight_on_ordinary_matrices(seed):
    """The filter is only useful when tight: on ordinary residuals (entries near 1, one or two factors) every
    row's enclosure is a few ulps wide, ``hi - lo <= 2^-40 max(hi)``, and ``up``/``down`` move by about an ulp.
    (A looser filter would stay sound but pick every row, making exact cost as much as FLINT alone.)"""
    rng = np.random.default_rng(seed)
    m, k, n = 24, 6, 20
    P, Q, R = rng.normal(size=(m, k)), rng.normal(size=(k, n)), rng.normal(size=(n, n))
    C = P @ Q + rng.normal(scale=1e-3, size=(m, n))
    for factors in ([P, Q], [P, Q, R], []):
        lo, hi = floats.row_bounds(C if len(factors) != 3 else C @ R, factors)
        assert (lo <= hi).all() and (hi - lo).max() <= 2.0**-40 * hi.max(), factors
    x = rng.normal(size=50)
    assert (floats.up(x) > x).all() and (floats.up(x) - x <= 2.0**-50 * np.abs(x) + 2.0**-1000).all()
    assert (floats.down(x) < x).all() and (x - floats.down(x) <= 2.0**-50 * np.abs(x) + 2.0**-1000).all()
    assert floats.g(10) == 12 * 2.0**-52


@pytest.mark.parametrize("e", [600, 470, -600, -470])
def test_exact_pieces_refuse_grids_out_of_range(e):
    """Entries near 2^600 (products overflow) or 2^-600 (products underflow): the splits' grids leave
    [2^-450, 2^450], so ``exact_pieces`` gives up (None) and FLINT computes the product; it never returns
    pieces that are not finite or do not sum exactly to the product."""
    a, b = np.array([[2.0**e, 2.0**e]]), np.array([[2.0**e], [2.0**e]])
    pieces = floats.exact_pieces([a], b)
    assert pieces is None or (all(np.isfinite(p).all() for p in pieces)
                              and sum(Fraction(p[0, 0]) for p in pieces) == 2 * Fraction(2) ** (2 * e))


@settings(max_examples=300, **SETTINGS)
@given(residual_cases())
def test_row_bounds_enclose_the_exact_row_sums(case):
    C, factors = case
    bounds = floats.row_bounds(C, factors)
    if bounds is None:
        return
    for lo, hi, exact_sum in zip(*bounds, _exact_rows(C, factors)):
        assert Fraction(lo) <= exact_sum <= Fraction(hi), (lo, float(exact_sum), hi)


@settings(max_examples=300, **SETTINGS)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5), st.data())
def test_exact_pieces_sum_to_the_product(m, k, n, data):
    left = [data.draw(wild_matrices(m, k)) for _ in range(data.draw(st.integers(1, 2)))]
    right = data.draw(wild_matrices(k, n))
    pieces = floats.exact_pieces(left, right)
    if pieces is None:
        return
    total = sum((np.array([[Fraction(x) for x in row] for row in P], dtype=object) for P in pieces),
                np.zeros((m, n), dtype=object) + Fraction(0))
    expected = sum(ind.matmul(ind.fractions_of(V.tolist()), ind.fractions_of(right.tolist())) and
                   np.array(ind.matmul(ind.fractions_of(V.tolist()), ind.fractions_of(right.tolist())), dtype=object)
                   for V in left)
    assert (total == expected).all()


@settings(max_examples=300, **SETTINGS)
@given(residual_cases())
def test_residual_norm_is_the_same_with_and_without_floats(case):
    C, factors = case
    fast = residual_row_l1(ExactMatrix.from_float64(C), [ExactMatrix.from_float64(F) for F in factors])
    assert Fraction(int(fast.p), int(fast.q)) == max(_exact_rows(C, factors))


# ------------------------------------------------------ the checks on float-backed matrices
def _F(rows, scale=0) -> ExactMatrix:
    return ExactMatrix.from_float64(np.ldexp(to_float_rows(rows), scale))


def _frac_scaled(rows, scale):
    return [[x * Fraction(2) ** scale for x in row] for row in rows]


def _agree(verdict, judgement):
    assert verdict.verified == judgement.verified, (verdict, judgement)
    margin = None if verdict.margin is None else Fraction(int(verdict.margin.p), int(verdict.margin.q))
    assert margin == judgement.margin, (verdict, judgement)


SCALES = st.sampled_from([0, 0, -40, 40, -300, 300])


@settings(max_examples=300, **SETTINGS)
@given(factor_cases(), SCALES, SCALES)
def test_float_backed_factors_agree(case, sa, sp):
    A, P, Q, eps, rank = case
    verdict = check_upper(_F(A, sa), UpperFactors(_F(P, sp), _F(Q, sa - sp)), fmpq(eps.numerator, eps.denominator),
                          rank)
    _agree(verdict, ind.check_factors(_frac_scaled(A, sa), _frac_scaled(P, sp), _frac_scaled(Q, sa - sp), eps, rank))


@settings(max_examples=300, **SETTINGS)
@given(reconstruction_cases(), SCALES)
def test_float_backed_reconstruction_agrees(case, s):
    A, R, X, L, eps, rank = case
    verdict = check_lower(_F(A, s), ReconstructionWitness(_F(R, -s), _F(X), _F(L)),
                          fmpq(eps.numerator, eps.denominator), rank)
    _agree(verdict, ind.check_reconstruction(_frac_scaled(A, s), _frac_scaled(R, -s), X, L, eps, rank))


@settings(max_examples=300, **SETTINGS)
@given(row_reconstruction_cases(), SCALES)
def test_float_backed_row_reconstruction_agrees(case, s):
    A, G, Z, M, eps, rank = case
    verdict = check_lower(_F(A, s), RowReconstructionWitness(_F(G, -s), _F(Z), _F(M)),
                          fmpq(eps.numerator, eps.denominator), rank)
    _agree(verdict, ind.check_row_reconstruction(_frac_scaled(A, s), _frac_scaled(G, -s), Z, M, eps, rank))


@settings(max_examples=200, **SETTINGS)
@given(st.integers(1, 6), st.integers(1, 6), st.data())
def test_float_backed_trivial_lower_agrees(m, n, data):
    A = data.draw(wild_matrices(m, n))
    eps = Fraction(data.draw(st.sampled_from([0.0, 1e-300, 0.5, 1.0, 2.0**600])))
    verdict = check_lower(ExactMatrix.from_float64(A), TrivialLower(), fmpq(eps.numerator, eps.denominator), 1)
    _agree(verdict, ind.check_trivial_lower(ind.fractions_of(A.tolist()), eps, 1))


def test_filter_off_gives_the_same_norms(monkeypatch):
    """With the float filter and pieces off (as on a machine without the assumed arithmetic), FLINT
    alone computes the same exact norms."""
    rng = np.random.default_rng(2)
    A, P, Q = rng.random((20, 20)), rng.random((20, 3)), rng.random((3, 20))
    on = residual_row_l1(ExactMatrix.from_float64(A), [ExactMatrix.from_float64(P), ExactMatrix.from_float64(Q)])
    monkeypatch.setattr(exact.norms, "row_bounds", lambda C, factors: None)
    monkeypatch.setattr(exact.norms, "exact_pieces", lambda left, right: None)
    off = residual_row_l1(ExactMatrix.from_float64(A), [ExactMatrix.from_float64(P), ExactMatrix.from_float64(Q)])
    assert on == off


# ------------------------------------------------------ the float64 softmax bound
def _true_distances(H, A0, dps=60):
    with mpmath.workdps(dps):
        out = []
        for hrow, arow in zip(H.tolist(), A0.tolist()):
            e = [mpmath.exp(mpmath.mpf(h)) for h in hrow]
            Z = mpmath.fsum(e)
            out.append(mpmath.fsum(abs(x / Z - mpmath.mpf(a)) for x, a in zip(e, arow)))
        return out


def _softmax64(H):
    Z = np.exp(H - H.max(axis=1, keepdims=True))
    return Z / Z.sum(axis=1, keepdims=True)


@settings(max_examples=200, **SETTINGS)
@given(st.integers(1, 5), st.integers(1, 7), st.integers(0, 2**32 - 1),
       st.sampled_from([1e-3, 1.0, 30.0, 300.0, 745.0, 1e5, 1e300]), st.sampled_from(["softmax", "nudged", "uniform",
                                                                                       "edge"]))
def test_float_softmax_bound_is_above_the_true_distance(m, n, seed, scale, kind):
    rng = np.random.default_rng(seed)
    H = rng.normal(scale=scale, size=(m, n))
    if kind == "edge":                       # logits right at the dead-entry threshold, and the float range's ends
        H[:, 0] = H.max(axis=1) - 745.5 + rng.normal(scale=1e-3, size=m)
        H[0, -1] = -1.7e308
    with np.errstate(all="ignore"):
        A0 = {"softmax": lambda: _softmax64(H), "nudged": lambda: np.nextafter(_softmax64(H), 1.0),
              "uniform": lambda: np.full((m, n), 1.0 / n), "edge": lambda: _softmax64(H)}[kind]()
    A0 = np.nan_to_num(A0)
    bounds = _float_row_bounds(H, A0)
    for bound, true in zip(bounds, _true_distances(H, A0)):
        if np.isnan(bound):
            continue
        with mpmath.workdps(60):
            assert mpmath.mpf(float(bound)) >= true
            assert mpmath.mpf(float(bound)) <= true + mpmath.mpf(2) ** -40      # and a useful bound


def test_float_softmax_bound_at_distance_zero():
    """Equal logits and A0 exactly uniform: the true distance is 0, and the float bound of every row lies
    in [0, 1e-13] (its error terms may not go negative where |t| is small)."""
    for n in (1, 4, 8, 64):
        dev = _float_row_bounds(np.zeros((3, n)), np.full((3, n), 1.0 / n))
        assert np.isfinite(dev).all() and (dev >= 0).all() and (dev <= 1e-13).all(), (n, dev)


def test_slack_proof_uses_arb_only_where_the_float_bound_falls_short():
    rng = np.random.default_rng(5)
    H = rng.normal(size=(6, 8))
    A0 = np.nextafter(_softmax64(H), 1.0)
    proof = SlackProof(H, A0)
    generous = proof.bound_for(fmpq(1, 2**40))
    assert generous <= fmpq(1, 2**40) and proof.arb == {}               # float bound only
    tight = softmax_slack_bound(H, A0)
    assert proof.bound_for(tight) <= tight and len(proof.arb) == 6      # every row by arb
    with mpmath.workdps(60):
        true = max(_true_distances(H, A0))
        assert mpmath.mpf(int(generous.p)) / int(generous.q) >= true

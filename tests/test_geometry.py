"""Intrinsic descriptors on constructions with known kappa and q.

Known values (MATH.md sections 3-5):
- H.2, A = [[4/5, 1/5], [1/5, 4/5]]: C = (ln 2) [[1, -1], [-1, 1]], so
  q(C) = ln 4, tau(0) = 2 tanh(ln 4 / 4) = 2/3 and kappa(C) = ln 2.
- two-bit A(3/4, 3/4) = K(3/4) (x) K(3/4): C is a sum of two H.2-type terms
  with ratio 7 per bit, so kappa(C) = ln 7, q(C) = 2 ln 7, tau(0) = 3/2.
- G.1 finite grid: kappa(C) = beta r (N-1)^2 / 2 exactly, and T = C has tau 0.
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from numeric.geometry import (
    canonical_interaction,
    cell_descriptors,
    double_difference,
    kappa_factors,
    meb_radius,
    residual_q,
    visible_interaction,
)
from numeric.geometry.bounds import double_centre, exact_image
from numeric.geometry.interaction import CANON_BITS

REL = 1e-9
# absolute floor for descriptors whose true value is 0 (a residual of T = C,
# a relative gap): rounding leaves them at 1e-15, where relative error is moot.
ABS_FLOOR = 1e-12


def _frac(x) -> Fraction:
    """An fmpq as a Fraction (the tests' independent exact arithmetic)."""
    return Fraction(int(x.p), int(x.q))


def _close(a, b, rel=REL):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + ABS_FLOOR


def _check_cert(d, col, truth, tol=1e-12):
    """The rigorous bounds enclose the known value (up to the rounding of the
    float logits that stand for the transcendental truth)."""
    lo, hi = d[f"{col}_lower_cert"], d[f"{col}_upper_cert"]
    assert lo <= hi
    assert lo <= truth * (1 + tol) + tol and truth * (1 - tol) - tol <= hi


def test_h2_known_values():
    A = np.array([[0.8, 0.2], [0.2, 0.8]])
    d = cell_descriptors(np.log(A), A)
    assert _close(d["q_residual"], math.log(4.0), 1e-12)
    assert _close(d["tau0"], 2.0 / 3.0, 1e-12)
    assert _close(d["kappa_lower"], math.log(2.0), 1e-12)
    assert _close(d["kappa_upper"], math.log(2.0), 1e-12)
    _check_cert(d, "q_residual", math.log(4.0))
    _check_cert(d, "tau0", 2.0 / 3.0)
    assert d["kappa_lower_cert"] <= math.log(2.0) * (1 + 1e-12) <= d["kappa_upper_cert"] * (1 + 2e-12)
    # H.2: the separately best residual is at T = C (tau 0) and the smallest
    # size at T = 0 (kappa 0); the same-T pairs are (kappa(C), 0) and (0, 2/3).
    assert d["svd_r1_tau"] == 0.0 and d["svd_r1_kappa"] == d["kappa_upper"]


def test_twobit_known_values():
    K = np.array([[7.0, 1.0], [1.0, 7.0]]) / 8.0  # K(3/4) = (3/4) I + (1/4) J / 2
    A = np.kron(K, K)
    assert np.allclose(A * 64, [[49, 7, 7, 1], [7, 49, 1, 7], [7, 1, 49, 7], [1, 7, 7, 49]])
    d = cell_descriptors(np.log(A), A)
    assert _close(d["kappa_lower"], math.log(7.0), 1e-12)
    assert _close(d["kappa_upper"], math.log(7.0), 1e-9)
    assert _close(d["q_residual"], 2 * math.log(7.0), 1e-12)
    assert _close(d["tau0"], 1.5, 1e-12)
    _check_cert(d, "tau0", 1.5)
    assert d["c_rank"] == 2


@pytest.mark.parametrize("N,r,beta", [(4, 2, 0.7), (3, 3, 0.3), (6, 1, 1.25)])
def test_finite_grid_kappa_exact(N, r, beta):
    pts = np.array(list(itertools.product(range(N), repeat=r)), dtype=float)
    H = -beta * ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
    d = cell_descriptors(H, None)
    truth = beta * r * (N - 1) ** 2 / 2
    assert d["c_rank"] == r
    assert _close(d["kappa_lower"], truth, 1e-12)
    assert _close(d["kappa_upper"], truth, 1e-9)
    assert d["kappa_lower_cert"] <= truth * (1 + 1e-12)
    assert d["kappa_upper_cert"] >= truth * (1 - 1e-12)
    assert d["kappa_upper_cert"] <= truth * (1 + 1e-9)
    # the J.2 member with r retained directions is C itself: zero residual
    for rr in (1, 2, 4):
        if rr >= r:
            assert d[f"svd_r{rr}_tau"] == 0.0
            assert _close(d[f"svd_r{rr}_kappa"], truth, 1e-9)


def _q_lp(M):
    """q(M) by its defining LP (scipy HiGHS): min t, l_i <= M_ij - b_j <= u_i, u_i - l_i <= t."""
    from scipy.optimize import linprog

    m, n = M.shape
    nv = n + 2 * m + 1  # b, u, l, t
    A, ub = [], []
    for i in range(m):
        for j in range(n):
            row = np.zeros(nv)
            row[j] = -1.0
            row[n + i] = -1.0  # M_ij - b_j <= u_i  ->  -b_j - u_i <= -M_ij
            A.append(row)
            ub.append(-M[i, j])
            row = np.zeros(nv)
            row[j] = 1.0
            row[n + m + i] = 1.0  # l_i <= M_ij - b_j  ->  b_j + l_i <= M_ij
            A.append(row)
            ub.append(M[i, j])
        row = np.zeros(nv)
        row[n + i], row[n + m + i], row[-1] = 1.0, -1.0, -1.0
        A.append(row)
        ub.append(0.0)
    c = np.zeros(nv)
    c[-1] = 1.0
    res = linprog(c, A_ub=np.array(A), b_ub=np.array(ub), bounds=[(None, None)] * nv, method="highs")
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("seed", range(12))
def test_q_matches_lp_and_exact_bounds_enclose(seed):
    rng = np.random.default_rng(seed)
    m, n = rng.integers(2, 8, size=2)
    M = rng.standard_normal((m, n)) * rng.uniform(0.1, 5)
    lp = _q_lp(M)
    res = residual_q(M, exact=exact_image(M))
    lower, upper = _frac(res.lower), _frac(res.upper)
    assert abs(res.value - lp) <= 1e-9 * max(1.0, lp)
    assert lower <= Fraction(lp) + Fraction(1, 10**9)
    assert Fraction(lp) - Fraction(1, 10**9) <= upper
    assert upper - lower <= Fraction(1, 10**9) * max(1, int(lp) + 1)
    # q is invariant under row and column shifts
    shifted = M + rng.standard_normal((m, 1)) + rng.standard_normal((1, n))
    assert abs(residual_q(shifted).value - res.value) <= 1e-9 * max(1.0, lp)


@pytest.mark.parametrize("seed", range(6))
def test_double_difference_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    M = rng.standard_normal((5, 6))
    best = max(
        abs(M[i, j] - M[i, jp] - M[ip, j] + M[ip, jp])
        for i in range(5) for ip in range(5) for j in range(6) for jp in range(6)
    )
    v, (i, ip, j, jp) = double_difference(M)
    assert abs(v - best) <= 1e-12 * best
    assert abs(abs(M[i, j] - M[i, jp] - M[ip, j] + M[ip, jp]) - v) <= 1e-12 * best


def test_meb_known():
    # an obtuse triangle: the ball is on its longest side
    r, c = meb_radius(np.array([[0.0, 0.0], [4.0, 0.0], [2.0, 1.0]]))
    assert abs(r - 2.0) < 1e-12 and np.allclose(c, [2.0, 0.0])
    # regular simplex corners e_1..e_n: radius sqrt((n-1)/n)
    r, c = meb_radius(np.eye(7))
    assert abs(r - math.sqrt(6 / 7)) < 1e-12


@pytest.mark.parametrize("seed", range(5))
def test_kappa_bracket_consistent(seed):
    rng = np.random.default_rng(200 + seed)
    m, n, r = 12, 10, 3
    X0 = rng.standard_normal((m, r)) @ rng.standard_normal((r, r))
    Y0 = rng.standard_normal((n, r))
    kb = kappa_factors(X0, Y0)
    T = X0 @ Y0.T
    assert np.allclose(kb.X @ kb.Y.T, T, atol=1e-10 * np.abs(T).max())
    assert kb.dd <= kb.upper * (1 + 1e-12)
    assert kb.dual <= kb.upper * (1 + 1e-12)
    assert kb.upper <= kb.balanced * (1 + 1e-12)
    # the radius product of the returned factors is what is claimed
    rx = meb_radius(kb.X)[0]
    ry = meb_radius(kb.Y)[0]
    assert abs(rx * ry - kb.upper) <= 1e-8 * kb.upper


# Diagnostics of the computation rather than descriptors of the cell: the wall
# time, and the distance of C to the canonical grid's rounding boundaries
# (continuous in C, compared in absolute terms below).
_NOT_DESCRIPTORS = ("geometry_seconds", "canon_margin")


def _dense_gauge(rng, d, cond):
    """A dense random gauge with condition number ``cond`` (orthogonal x
    geometric spectrum x orthogonal), so that every entry of Q G and K G^-T
    is rounded."""
    q1, _ = np.linalg.qr(rng.standard_normal((d, d)))
    q2, _ = np.linalg.qr(rng.standard_normal((d, d)))
    G = q1 @ np.diag(np.geomspace(1.0, cond, d) / math.sqrt(cond)) @ q2
    assert abs(np.linalg.cond(G) - cond) <= 1e-9 * cond
    return G


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("cond", [4, 16])
def test_gauge_invariance_dense_gauge(seed, cond):
    """Reproducible descriptors: under a dense gauge of condition 4 or 16 (the logits
    recomputed in float64, so they differ by rounding) every intrinsic
    descriptor -- the optimised size brackets included -- agrees to 1e-9."""
    rng = np.random.default_rng(7 + 10 * seed)
    m, n, d, scale = 24, 20, 5, 0.8
    Q = rng.standard_normal((m, d)) * rng.uniform(0.3, 3.0, d)
    K = rng.standard_normal((n, d))
    G = _dense_gauge(rng, d, cond)
    H = scale * Q @ K.T
    Hg = scale * (Q @ G) @ (K @ np.linalg.inv(G).T).T
    assert 0 < np.abs(H - Hg).max() < 1e-12
    ranks = (1, 2, 4, 8)
    a = cell_descriptors(H, None, ranks=ranks)
    b = cell_descriptors(Hg, None, ranks=ranks)
    assert a.keys() == b.keys()
    for k in a:
        if k not in _NOT_DESCRIPTORS:
            assert _close(a[k], b[k], REL), (k, a[k], b[k])
    assert abs(a["canon_margin"] - b["canon_margin"]) <= 1e-13
    # the mechanism: C moved by less than the canonical grid's margin, so the
    # size problems saw bit-identical inputs and returned bit-identical values
    # (the *_cert columns also charge the exact C - X0 Y0^T, so they move by
    # rounding, and kappa_lower is the exact double difference of C)
    C, Cg = visible_interaction(H), visible_interaction(Hg)
    assert np.abs(C - Cg).max() < a["canon_margin"] * np.abs(C).max()
    assert a["kappa_resolved"] == 0 and a["kappa_gap"] > 1e-4  # a genuinely unconverged problem
    sizes = [k for k in a if (k in ("kappa_upper", "kappa_dual", "kappa_balanced", "kappa_steps")
                              or k.startswith("svd_r") and k.endswith(("_kappa", "_shape")))]
    assert len(sizes) == 4 + 2 * len(ranks)
    for k in sizes:
        assert a[k] == b[k], k


def test_canonical_interaction_grid_and_margin():
    """C_round = g round(C / g) exactly; a perturbation below the margin leaves
    it bit-identical, one across a boundary does not."""
    rng = np.random.default_rng(4)
    C = visible_interaction(rng.standard_normal((9, 7)))
    Cr, g, margin = canonical_interaction(C)
    amax = np.abs(C).max()
    assert g == 2.0 ** (math.frexp(amax)[1] + 6 - CANON_BITS)  # 63 entries: ceil(log2) = 6
    assert np.abs(Cr - C).max() <= g / 2
    assert all(Fraction(x) / Fraction(g) == int(Fraction(x) / Fraction(g)) for x in Cr.ravel())
    assert 0 < margin <= 0.5 * g / amax
    for _ in range(5):
        P = rng.uniform(-1, 1, C.shape) * 0.99 * margin * amax
        assert np.array_equal(canonical_interaction(C + P)[0], Cr)
    # move the entry nearest a boundary just across it
    t = C / g
    i = np.unravel_index(int(np.argmin(0.5 - np.abs(t - np.round(t)))), C.shape)
    C2 = C.copy()
    C2[i] += np.sign(t[i] - np.round(t[i])) * 1.01 * margin * amax
    assert not np.array_equal(canonical_interaction(C2)[0], Cr)
    assert canonical_interaction(np.zeros((2, 3)))[1] == 0.0


@pytest.mark.parametrize("bits", [8, 14])
def test_coarse_canonical_grid_keeps_certificates_sound(monkeypatch, bits):
    """Mutation: with a very coarse canonical grid the float size moves, but the
    rigorous upper bound pays for the rounding through the exact tail and
    still encloses the known kappa of a G.1 grid (and the size stays bracketed
    by the exact double difference)."""
    import numeric.geometry.interaction as interaction

    monkeypatch.setattr(interaction, "CANON_BITS", bits)
    N, r, beta = 4, 2, 0.7
    pts = np.array(list(itertools.product(range(N), repeat=r)), dtype=float)
    H = -beta * ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
    truth = beta * r * (N - 1) ** 2 / 2
    d = cell_descriptors(H, None, ranks=(1, 2))
    assert d["canon_grid"] == 2.0 ** (3 + 8 - bits)
    assert d["kappa_upper_cert"] >= truth * (1 - 1e-12)
    assert d["kappa_lower_cert"] <= truth * (1 + 1e-12)
    assert d["svd_r2_kappa_cert"] >= truth * (1 - 1e-12)
    assert d["svd_r1_kappa_cert"] >= d["svd_r1_kappa"] * (1 - 1e-12)


@pytest.mark.parametrize("ratio_exp", [1, 2])
def test_gauge_invariance_diagonal_dyadic_gauges(ratio_exp):
    """The L.7 audit gauges (condition ratios 4 and 16) are powers of two: the
    gauged logits are bit-identical and so is every intrinsic descriptor."""
    rng = np.random.default_rng(11)
    Q, K = rng.standard_normal((16, 6)), rng.standard_normal((18, 6))
    g = np.where(np.arange(6) % 2 == 0, 2.0**-ratio_exp, 2.0**ratio_exp)
    H = 0.5 * Q @ K.T
    Hg = 0.5 * (Q * g) @ (K / g).T
    assert np.array_equal(H, Hg)
    a = cell_descriptors(H, None, ranks=(1, 2, 4))
    b = cell_descriptors(Hg, None, ranks=(1, 2, 4))
    for k in a:
        if k != "geometry_seconds":
            assert a[k] == b[k], k


def test_gauge_invariance_every_descriptor_when_converged():
    """On a grid head (G.1 interaction written through dense native factors) the
    size optimisation closes its gap, so every descriptor agrees to 1e-9."""
    N, r, beta = 4, 2, 0.6
    pts = np.array(list(itertools.product(range(N), repeat=r)), dtype=float)
    rng = np.random.default_rng(2)
    G = rng.standard_normal((r, r)) + 3 * np.eye(r)
    H = 2 * beta * pts @ pts.T
    Hg = 2 * beta * (pts @ G) @ (pts @ np.linalg.inv(G).T).T
    assert 0 < np.abs(H - Hg).max() < 1e-12
    a = cell_descriptors(H, None, ranks=(1, 2, 4))
    b = cell_descriptors(Hg, None, ranks=(1, 2, 4))
    assert a["kappa_gap"] < 1e-9
    assert a["kappa_resolved"] == b["kappa_resolved"] == 1  # solved, then re-solved on C itself
    for k in a:
        if k not in ("geometry_seconds", "kappa_steps", "canon_margin"):
            assert _close(a[k], b[k], REL), (k, a[k], b[k])


def test_visible_interaction_is_double_centred_and_exact():
    rng = np.random.default_rng(3)
    H = rng.standard_normal((5, 4))
    C = visible_interaction(H)
    assert np.allclose(C.sum(0), 0) and np.allclose(C.sum(1), 0)
    Cx = double_centre(exact_image(H))
    Hf = [[Fraction(x) for x in row] for row in H.tolist()]
    rm = [sum(r) / 4 for r in Hf]
    cm = [sum(Hf[i][j] for i in range(5)) / 5 for j in range(4)]
    gm = sum(rm) / 5
    want = [Hf[i][j] - rm[i] - cm[j] + gm for i in range(5) for j in range(4)]
    assert [x for row in Cx.to_fractions() for x in row] == want


@pytest.mark.parametrize(
    "bad",
    [np.array([[0.0, np.nan]]), np.zeros((2, 2, 2)), np.zeros((2, 2), dtype=np.float32), np.array([[0.0, -np.inf]])],
)
def test_bad_input_raises(bad):
    with pytest.raises(ValueError):
        cell_descriptors(bad, None)


def test_matrix_only_path_and_mismatch():
    rng = np.random.default_rng(5)
    H = rng.standard_normal((6, 6))
    A = np.exp(H) / np.exp(H).sum(1, keepdims=True)
    a = cell_descriptors(H, A, ranks=(1,))
    b = cell_descriptors(None, A, ranks=(1,))
    assert a["softmax_mismatch"] < 1e-14
    assert abs(a["q_residual"] - b["q_residual"]) < 1e-9
    with pytest.raises(ValueError):
        cell_descriptors(None, np.array([[1.0, 0.0], [0.5, 0.5]]))


# ---------------------------------------------------------------------------
# enclosure properties against independent exact computations (hypothesis)

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from flint import arb, fmpq

from numeric.geometry.bounds import float_down, float_up, kappa_upper, tau_enclosure
from tests.strategies import dyadics, matrices, to_float_rows


# mpmath at 60 digits is the tests' independent oracle for tanh; its value is
# within 1e-50 of the truth, far inside the slack below.
_MP_DPS = 60
_MP_SLACK = 1e-40


def _mp(x):
    import mpmath

    x = Fraction(x)
    with mpmath.workdps(_MP_DPS):
        return mpmath.mpf(x.numerator) / x.denominator


def _mp_tau(q: Fraction):
    import mpmath

    with mpmath.workdps(_MP_DPS):
        return 2 * mpmath.tanh(_mp(q) / 4)


def _exact_q(M):
    """q by brute force in Fractions: the best mean of a simple cycle of D."""
    n = len(M[0])
    D = [[max(row[j] - row[jp] for row in M) for jp in range(n)] for j in range(n)]
    best = Fraction(0)  # self-loops
    for k in range(2, n + 1):
        for cyc in itertools.permutations(range(n), k):
            if cyc[0] != min(cyc):
                continue
            w = sum(D[cyc[s]][cyc[(s + 1) % k]] for s in range(k))
            best = max(best, w / k)
    return best


def _exact_centre(H):
    m, n = len(H), len(H[0])
    rm = [sum(r) / n for r in H]
    cm = [sum(H[i][j] for i in range(m)) / m for j in range(n)]
    gm = sum(rm) / m
    return [[H[i][j] - rm[i] - cm[j] + gm for j in range(n)] for i in range(m)]


@st.composite
def _small_logits(draw):
    m = draw(st.integers(1, 4))
    n = draw(st.integers(1, 4))
    return draw(matrices(m, n, dyadics()))


@settings(max_examples=150, deadline=None)
@given(_small_logits())
def test_exact_q_and_size_bounds_enclose_brute_force(H):
    C = _exact_centre(H)
    truth_q = _exact_q(C)
    m, n = len(H), len(H[0])
    truth_dd = max(
        (abs(C[i][j] - C[i][jp] - C[ip][j] + C[ip][jp])
         for i in range(m) for ip in range(m) for j in range(n) for jp in range(n)),
        default=Fraction(0),
    )
    d = cell_descriptors(to_float_rows(H), None, ranks=(1, 2))
    assert d["q_residual_lower_cert"] <= truth_q <= d["q_residual_upper_cert"]
    assert abs(d["q_residual"] - float(truth_q)) <= 1e-12 * max(1.0, float(truth_q))
    truth_tau = _mp_tau(truth_q)
    assert _mp(d["tau0_lower_cert"]) <= truth_tau + _MP_SLACK and truth_tau - _MP_SLACK <= _mp(d["tau0_upper_cert"])
    # the exact double difference is found, and kappa's rigorous bounds are ordered
    assert d["kappa_lower_cert"] <= truth_dd / 4
    assert abs(d["kappa_lower"] - float(truth_dd) / 4) <= 1e-12 * max(1.0, float(truth_dd))
    assert Fraction(d["kappa_upper_cert"]) >= truth_dd / 4
    assert d["kappa_upper_cert"] >= d["kappa_dual"] * (1 - 1e-12)


def _arb_ends(x) -> tuple[Fraction, Fraction]:
    """The exact endpoints of an arb ball, read off its midpoint and radius."""
    def exact(v):
        man, ex = (int(t) for t in v.man_exp())
        return Fraction(man) * Fraction(2) ** ex
    mid, rad = exact(x.mid()), exact(x.rad())
    return mid - rad, mid + rad


@settings(max_examples=60, deadline=None)
@given(st.fractions(min_value=0, max_value=40, max_denominator=1000))
def test_tau_enclosure_encloses_mpmath(q):
    """The arb balls of ``2 tanh(q/4)`` contain a 60-digit mpmath value and are
    narrow (the rigorous tau columns are their outward roundings)."""
    lo, hi = tau_enclosure(fmpq(q.numerator, q.denominator), fmpq(q.numerator, q.denominator))
    truth = _mp_tau(q)
    for ball in (lo, hi):
        a, b = _arb_ends(ball)
        assert _mp(a) <= truth <= _mp(b)
        assert b - a < Fraction(1, 10**30)
    assert _mp(float_down(lo)) <= truth <= _mp(float_up(hi))


def test_kappa_certificate_survives_a_wrong_gauge_inverse():
    """Mutation: the certificate charges the defect D = I - Wh Wih exactly, so a
    corrupted inverse gauge loosens the bound but never makes it unsound."""
    rng = np.random.default_rng(9)
    X0, Y0 = rng.standard_normal((9, 3)), rng.standard_normal((8, 3))
    kb = kappa_factors(X0, Y0)
    good = float_up(kappa_upper(X0, Y0, kb, arb(0)))
    assert good <= kb.upper * (1 + 1e-9)
    for scale in (1e-8, 1e-3, 0.5):
        bad = replace(kb, Wih=kb.Wih + scale * rng.standard_normal(kb.Wih.shape))
        cert = float_up(kappa_upper(X0, Y0, bad, arb(0)))
        assert cert >= kb.dual * (1 - 1e-12) and cert >= kb.dd


# ---------------------------------------------------------------------------
# directed rounding of exact values to float64


def _nearest_float(x: Fraction) -> float:
    return x.numerator / x.denominator  # Python's int division rounds correctly


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**120), 2**120), st.integers(1, 2**90), st.integers(-60, 60))
def test_float_rounding_is_directed_and_tight(p, q, shift):
    """float_down/float_up enclose the exact rational and are the adjacent floats
    (checked in Fractions, independently of arb)."""
    x = Fraction(p, q) * Fraction(2) ** shift
    lo, hi = float_down(fmpq(x.numerator, x.denominator)), float_up(fmpq(x.numerator, x.denominator))
    assert Fraction(lo) <= x <= Fraction(hi)
    f = _nearest_float(x)
    if Fraction(f) == x:
        assert lo == hi == f
    else:
        assert math.nextafter(lo, math.inf) == hi and lo in (f, math.nextafter(f, -math.inf))


@pytest.mark.parametrize("x", [Fraction(1, 3 * 2**1060), Fraction(-1, 3 * 2**1060), Fraction(3 * 2**1100),
                               Fraction(-(3 * 2**1100)), Fraction(2**1024 - 1)])
def test_float_rounding_outside_the_normal_range_stays_directed(x):
    """Below 2^-1022 and beyond the largest float the rounding is conservative
    (0, +-2^-1022, the largest float or an infinity), never on the wrong side."""
    q = fmpq(x.numerator, x.denominator)
    lo, hi = float_down(q), float_up(q)
    assert lo <= hi
    assert lo == -math.inf or Fraction(lo) <= x
    assert hi == math.inf or x <= Fraction(hi)


# ---------------------------------------------------------------------------
# BLAS state is scoped


def test_one_blas_thread_restores_the_previous_limit():
    """one_blas_thread limits BLAS inside the block only; cell_descriptors leaves
    the process's BLAS setting as it found it."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from numeric.geometry import one_blas_thread

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    if not blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can control")
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        ctx = one_blas_thread()  # creating the context changes nothing
        assert blas_threads() == before
        with ctx:
            assert set(blas_threads()) == {1}
        assert blas_threads() == before
        cell_descriptors(np.array([[0.0, 1.0], [1.0, 0.5]]), None, ranks=(1,))
        assert blas_threads() == before


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2**100), st.integers(1, 2**100))
def test_float_rounding_of_balls_is_outward(p, q):
    """For an arb ball (a square root here) float_down / float_up bound the
    ball's exact endpoints, and no float lies strictly between (tightness)."""
    from exact.precision import arb_precision

    with arb_precision(128):
        ball = arb(fmpq(p, q)).sqrt()
    a, b = _arb_ends(ball)
    lo, hi = float_down(ball), float_up(ball)
    assert Fraction(lo) <= a and b <= Fraction(hi)
    assert Fraction(math.nextafter(lo, math.inf)) > a and Fraction(math.nextafter(hi, -math.inf)) < b

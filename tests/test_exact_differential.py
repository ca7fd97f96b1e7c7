"""Differential tests: ``exact.certificates`` against the Fraction-only checker.

Two checkers that share no code (``tests/independent_checker.py`` imports
neither flint nor ``exact``) must agree on every verdict and every exact
margin, for every certificate kind of MATH.md section 2, on thousands of
small matrices. The Frobenius tail (K.2) uses a float eigenbasis as a hint in
``exact/``, so there the independent side is a rigorous enclosure of the
singular energy: whenever ``exact`` verifies, the claim must be true, and
``exact``'s bound on the top-k energy must be an upper bound.
"""
from __future__ import annotations

from fractions import Fraction

from flint import fmpq
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from exact.certificates import (FrobeniusTail, OddMapWitness, ReconstructionWitness, RowReconstructionWitness,
                                TrivialLower, TrivialUpper, UpperFactors, check_lower, check_upper)
from exact.frobenius import top_energy_upper_bound
from exact.matrix import ExactMatrix
from tests import independent_checker as ind
from tests.strategies import (dyadics, epsilons, factor_cases, frobenius_cases, matrices, odd_map_cases,
                              reconstruction_cases,
                              row_reconstruction_cases, shapes, small_rationals)

#: Examples per property; together about 2,700 cases, about half a minute on one core.
N_FACTORS = 500
N_RECON = 500
N_ROW = 450
N_TRIVIAL = 400
N_FROB = 250
N_ARITH = 200
N_ODD = 300

SETTINGS = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def E(rows) -> ExactMatrix:
    return ExactMatrix.from_rationals(rows)


def q(x: Fraction) -> fmpq:
    return fmpq(x.numerator, x.denominator)


def frac(x) -> Fraction | None:
    return None if x is None else Fraction(int(x.p), int(x.q))


def agree(verdict, judgement):
    assert verdict.verified == judgement.verified, (verdict, judgement)
    assert frac(verdict.margin) == judgement.margin, (verdict, judgement)


# ------------------------------------------------------------- arithmetic
@settings(max_examples=N_ARITH, **SETTINGS)
@given(st.data())
def test_exact_arithmetic_matches_fractions(data):
    m, n = data.draw(shapes())
    k = data.draw(st.integers(1, 5))
    A = data.draw(matrices(m, n, small_rationals()))
    B = data.draw(matrices(n, k, small_rationals()))
    C = data.draw(matrices(m, n, small_rationals()))
    from exact.norms import frobenius_sq, row_l1_norm
    assert (E(A) @ E(B)).to_fractions() == ind.matmul(A, B)
    assert (E(A) - E(C)).to_fractions() == ind.sub(A, C)
    assert E(A).T.to_fractions() == ind.transpose(A)
    assert frac(row_l1_norm(E(A))) == ind.row_l1(A)
    assert frac(frobenius_sq(E(A))) == ind.frobenius_sq(A)


@settings(max_examples=N_ARITH, **SETTINGS)
@given(st.data())
def test_float64_conversion_is_exact(data):
    """``ExactMatrix.from_float64`` (62-bit limbs) equals ``as_integer_ratio`` entry by entry,
    subnormals, extremes, signed zeros and mixed magnitudes included."""
    import numpy as np
    m, n = data.draw(shapes(4))
    floats = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                       st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308,
                                        1.7976931348623157e308, -1.7976931348623157e308, 1.0, 0.1]),
                       st.floats(-4, 4, allow_nan=False))
    rows = data.draw(st.lists(st.lists(floats, min_size=n, max_size=n), min_size=m, max_size=m))
    a = np.array(rows, dtype=np.float64)
    got = ExactMatrix.from_float64(a).to_fractions()
    assert got == [[Fraction(*x.as_integer_ratio()) for x in row] for row in rows]


# ------------------------------------------------------------- upper side
@settings(max_examples=N_FACTORS, **SETTINGS)
@given(factor_cases())
def test_factors_agree(case):
    A, P, Q, eps, rank = case
    agree(check_upper(E(A), UpperFactors(E(P), E(Q)), q(eps), rank), ind.check_factors(A, P, Q, eps, rank))


@settings(max_examples=N_TRIVIAL // 4, **SETTINGS)
@given(st.data())
def test_zero_width_factors_prove_rank_zero_only_when_eps_covers_the_norm(data):
    """P (m x 0), Q (n x 0): B = 0, so rank 0 is proved iff eps >= ||A||_row1."""
    m, n = data.draw(shapes())
    A = data.draw(matrices(m, n))
    eps = data.draw(epsilons())
    P, Q = ExactMatrix.zeros(m, 0), ExactMatrix.zeros(n, 0)
    verdict = check_upper(E(A), UpperFactors(P, Q), q(eps), 0)
    agree(verdict, ind.check_factors(A, [[]] * m, [[]] * n, eps, 0))
    assert verdict.verified == (eps >= ind.row_l1(A))
    assert not check_upper(E(A), UpperFactors(P, Q), q(eps), 1).verified


@settings(max_examples=N_TRIVIAL, **SETTINGS)
@given(st.data())
def test_trivial_sides_agree(data):
    m, n = data.draw(shapes())
    A = data.draw(matrices(m, n, data.draw(st.sampled_from([dyadics(), small_rationals()]))))
    eps = data.draw(epsilons())
    rank = data.draw(st.integers(0, min(m, n) + 1))
    exact_upper = check_upper(E(A), TrivialUpper(), q(eps), rank)
    indep_upper = ind.check_trivial_upper(A, eps, rank)
    assert exact_upper.verified == indep_upper.verified
    agree(check_lower(E(A), TrivialLower(), q(eps), rank), ind.check_trivial_lower(A, eps, rank))


# ------------------------------------------------------------- lower side
@settings(max_examples=N_RECON, **SETTINGS)
@given(reconstruction_cases())
def test_reconstruction_agrees(case):
    A, R, X, L, eps, rank = case
    agree(check_lower(E(A), ReconstructionWitness(E(R), E(X), E(L)), q(eps), rank),
          ind.check_reconstruction(A, R, X, L, eps, rank))


@settings(max_examples=N_RECON // 3, **SETTINGS)
@given(reconstruction_cases(elements=small_rationals()))
def test_reconstruction_agrees_on_non_dyadic_targets(case):
    A, R, X, L, eps, rank = case
    agree(check_lower(E(A), ReconstructionWitness(E(R), E(X), E(L)), q(eps), rank),
          ind.check_reconstruction(A, R, X, L, eps, rank))


@settings(max_examples=N_ROW, **SETTINGS)
@given(row_reconstruction_cases())
def test_row_reconstruction_agrees(case):
    A, G, Z, M, eps, rank = case
    agree(check_lower(E(A), RowReconstructionWitness(E(G), E(Z), E(M)), q(eps), rank),
          ind.check_row_reconstruction(A, G, Z, M, eps, rank))


@settings(max_examples=N_ROW // 3, **SETTINGS)
@given(row_reconstruction_cases(), st.data())
def test_swapped_witness_shapes_are_refuted_by_both(case, data):
    """A column-side witness handed the row-side matrices (and vice versa) only passes when shapes allow it:
    for a non-square A both checkers refuse it."""
    A, G, Z, M, eps, rank = case
    verdict = check_lower(E(A), ReconstructionWitness(E(G), E(Z), E(M)), q(eps), rank)
    agree(verdict, ind.check_reconstruction(A, G, Z, M, eps, rank))
    A2, R, X, L, eps2, rank2 = data.draw(reconstruction_cases())
    swapped = check_lower(E(A2), RowReconstructionWitness(E(R), E(X), E(L)), q(eps2), rank2)
    agree(swapped, ind.check_row_reconstruction(A2, R, X, L, eps2, rank2))
    for mat, v in ((A, verdict), (A2, swapped)):
        if len(mat) != len(mat[0]):                      # refused on the shapes (or the rank, checked first)
            assert not v.verified and ("shape mismatch" in v.reason or "exceeds min(m, n)" in v.reason), v


@settings(max_examples=N_FROB, **SETTINGS)
@given(frobenius_cases())
def test_frobenius_sound_against_rigorous_enclosure(case):
    A, k, eps = case
    surely_true, surely_false = ind.frobenius_judgement(A, k, eps)
    verdict = check_lower(E(A), FrobeniusTail(k), q(eps), k + 1)
    lo, hi = ind.top_energy_enclosure(A, k)
    bound = top_energy_upper_bound(E(A), k)
    if bound is not None:
        assert frac(bound) >= lo, "exact's top-k energy bound is below the true energy"
    if verdict.verified:
        assert not surely_false, "exact verified a false Frobenius claim"
        # its margin is a lower bound on the true gap F_k^2 - m eps^2 <= ||A||_F^2 - lo - m eps^2
        assert frac(verdict.margin) <= ind.frobenius_sq(A) - lo - len(A) * eps * eps
    if surely_true:
        # completeness on easy cases: a true gap well above float rounding is found
        gap = ind.frobenius_sq(A) - hi - len(A) * eps * eps
        if gap > Fraction(1, 10**6) * (1 + ind.frobenius_sq(A)):
            assert verdict.verified, (verdict, float(gap))
    assert not check_lower(E(A), FrobeniusTail(k), q(eps), k).verified        # rank must be k + 1
    assert not check_lower(E(A), FrobeniusTail(k), q(eps), k + 2).verified


def _odd_map_verdict(A, labels, points, eps, rank):
    X = E(points) if points and points[0] else ExactMatrix.zeros(len(points), len(A[0]))
    return check_lower(E(A), OddMapWitness(tuple(labels), X), q(eps), rank)


@settings(max_examples=N_ODD, **SETTINGS)
@given(odd_map_cases())
def test_odd_map_agrees(case):
    """MATH.md section 2: both checkers build the subdivided cross-polytope their own way."""
    A, labels, points, eps, rank = case
    agree(_odd_map_verdict(*case), ind.check_odd_map(A, labels, points, eps, rank))


def test_odd_map_agrees_on_the_known_answers_and_their_mutants():
    from exact.bracketfile import read_bracket_file
    from exact.oddmap import labels_of
    from pathlib import Path
    bf = read_bracket_file(Path(__file__).with_name("data") / "oddmap.safetensors")
    for cell in bf.cells:
        A = ind.fractions_of(bf.tensors[cell.target.matrix].tolist())
        labels = list(labels_of(bf.tensors[cell.lower.fields["labels"]]))
        points = ind.fractions_of(bf.tensors[cell.lower.fields["points"]].tolist())
        eps = frac(cell.eps)
        V = len(labels)
        variants = [(labels, points, eps, 3), (labels, points, eps, 4), (labels, points, Fraction(1), 3)]
        for k in range(0, V // 2, 3):
            i, s = labels[k]
            flipped = labels[:k] + [(i, -s)] + labels[k + 1:]
            variants.append((flipped, points, eps, 3))
            both = list(flipped)
            both[V - 1 - k] = (i, s)
            variants.append((both, points, eps, 3))
            moved = [(((i + 1) % len(A), s) if v in (k, V - 1 - k) else lab) for v, lab in enumerate(labels)]
            moved[V - 1 - k] = (moved[k][0], -s)
            variants.append((moved, points, eps, 3))
        for lab, pts, e, r in variants:
            judgement = ind.check_odd_map(A, lab, pts, e, r)
            verdict = _odd_map_verdict(A, lab, pts, e, r) if len(pts) else None
            if verdict is not None:
                agree(verdict, judgement)
        assert ind.check_odd_map(A, labels, points, eps, 3).verified


# ------------------------------------------------- the strategies reach both outcomes
def test_strategies_produce_verified_and_refuted_cases():
    """The differential properties are not vacuous: each strategy yields valid certificates too."""
    cfg = settings(max_examples=1000, database=None, deadline=None, phases=[Phase.generate],   # no shrinking
                   derandomize=True)   # the same examples every run: a rare case is found or not, never by luck
    find(factor_cases(), lambda c: ind.check_factors(*c).verified, settings=cfg)
    find(factor_cases(), lambda c: ind.check_factors(*c).stage == "final" and not ind.check_factors(*c).verified,
         settings=cfg)
    find(reconstruction_cases(), lambda c: ind.check_reconstruction(*c).verified and c[5] >= 2, settings=cfg)
    find(reconstruction_cases(), lambda c: ind.check_reconstruction(*c).stage == "eta", settings=cfg)
    find(row_reconstruction_cases(), lambda c: ind.check_row_reconstruction(*c).verified and c[5] >= 2,
         settings=cfg)
    find(row_reconstruction_cases(), lambda c: ind.check_row_reconstruction(*c).stage == "final"
         and not ind.check_row_reconstruction(*c).verified, settings=cfg)
    find(frobenius_cases(), lambda c: c[1] >= 1 and ind.frobenius_judgement(*c)[0], settings=cfg)
    find(odd_map_cases(), lambda c: ind.check_odd_map(*c).verified and c[4] >= 2, settings=cfg)
    find(odd_map_cases(), lambda c: ind.check_odd_map(*c).stage == "final" and not ind.check_odd_map(*c).verified,
         settings=cfg)

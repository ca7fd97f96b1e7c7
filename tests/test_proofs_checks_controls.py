"""Negative controls for proofs_checks: every construction, perturbed, must make the
check it names fail, and every control here calls that check (its registered entry or
its parametrised body). A check that cannot fail proves nothing. Consistency tests
(a positive instance, a helper agreeing with a direct computation) live in
tests/test_proofs_checks.py."""
from __future__ import annotations

import functools

import pytest
import sympy as sp
from flint import fmpq, fmpq_mat

from proofs_checks import growth, hardcore, identities
from proofs_checks._residual import residual


@pytest.fixture(autouse=True)
def _export_to_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFS_CHECKS_OUT", str(tmp_path))


# ---------------------------------------------------------------- I.4

@pytest.mark.parametrize("lam", [fmpq(9, 8), fmpq(1, 2)])
def test_i4_fails_with_a_bad_decoder(lam):
    # 9/8 I: not contractive (row-l1 norm above 1); 1/2 I: contractive but D A X is far from I
    _, _, rec, _ = hardcore.i4_run({1: (2 ** 8, 2 ** 10)}, lam=lam, name="I4bad")
    assert any("contractive" in f or "DAX" in f for f in rec.failures), rec.failures


def test_i4_fails_without_the_quadratic_key_column(monkeypatch):
    # every M drops to 1 and every [1, 1] still verifies: the exact growth law must fail
    monkeypatch.setattr(hardcore, "QUADRATIC", False)
    _, _, rec, _ = hardcore.i4_run({1: (2 ** 8, 2 ** 10)}, name="I4noquad")
    assert any("outside the law" in f for f in rec.failures), rec.failures


def test_i4_fails_when_the_law_misstates_beta(monkeypatch):
    # s = beta / (32 M^2): the law's beta is off by a factor of 4
    monkeypatch.setattr(growth, "SCALE", 32)
    _, _, rec, _ = hardcore.i4_run({1: (2 ** 8, 2 ** 10)}, name="I4scale")
    assert any("outside the law" in f for f in rec.failures), rec.failures


def test_i4_fails_when_the_search_overreaches(monkeypatch):
    # three messages too many per side: arb refuses the channel bound and the exact tier the
    # witness (one too many still proves r_eps >= M + 1: the check keeps 1/32 in hand)
    largest = hardcore.largest_m
    monkeypatch.setattr(hardcore, "largest_m", lambda *a, **k: largest(*a, **k) + 3)
    _, _, rec, _ = hardcore.i4_run({1: (2 ** 8,)}, name="I4over")
    assert any("not certainly <= 2 delta" in f for f in rec.failures), rec.failures
    assert any("exact tier did not verify" in f for f in rec.failures), rec.failures


@pytest.mark.parametrize("factor, failure", [(1 - 2 ** -10, "p_inf(s_hi)"), (1 + 2 ** -10, "no M0")])
def test_i4_law_fails_when_the_float_threshold_is_off(monkeypatch, factor, failure):
    # the float bisection only chooses s*: moved below the threshold, arb refuses the
    # certified side at s_hi; moved above it, arb refuses the refuted side at s_lo
    bisect = growth.float_threshold
    monkeypatch.setattr(growth, "float_threshold", lambda r, delta: bisect(r, delta) * factor)
    _, _, rec, _ = hardcore.i4_run({1: (2 ** 8,)}, name="I4thr")
    assert any(failure in f for f in rec.failures), rec.failures


# ---------------------------------------------------------------- G.3

def test_g3_fails_when_the_appended_columns_are_too_large():
    _, _, rec, _ = hardcore.g3_run(betas=(2 ** 8,), scale_bits=1, name="G3big")
    assert any("alpha" in f for f in rec.failures), rec.failures


def test_g3_fails_when_the_gap_closes():
    # appended columns of scale 4 outweigh the linear one: the top visible-key direction is
    # no longer e1, and the exact gap test fails
    _, _, rec, _ = hardcore.g3_run(betas=(2 ** 8,), scale_bits=-2, name="G3gap")
    assert any("strict gap" in f for f in rec.failures), rec.failures


def test_g3_fails_when_alpha_is_below_the_perturbation():
    # alpha = 1/64 is below ||A_pert - A_core|| (about 0.047) and below q(C - T_W) (about 3/32)
    _, _, rec, _ = hardcore.g3_run(betas=(2 ** 8, 2 ** 10), alpha=fmpq(1, 64), name="G3smallalpha")
    assert any("A_pert - A_core" in f for f in rec.failures) and any("residual" in f for f in rec.failures)


def test_g3_fails_when_the_rounding_is_coarse(monkeypatch):
    # logits rounded to 2^-4: the rounding lemma's hypothesis (2^-31) fails on the stored core
    monkeypatch.setattr(hardcore, "GRID_BITS", 4)
    _, _, rec, _ = hardcore.g3_run(betas=(2 ** 8,), name="G3coarse")
    assert any("2^-31" in f for f in rec.failures), rec.failures


def test_g3_fails_at_r2_with_a_large_stencil():
    _, _, rec, _ = hardcore.g3_run(instances=((2, 4, (2 ** 8,)),), scale_bits=1, name="G3r2big")
    assert any("alpha" in f for f in rec.failures), rec.failures


# ---------------------------------------------------------------- G.1-all

def test_all_n_step_fails_at_small_beta():
    _, _, rec, _ = identities.all_n_run(beta=1)
    assert any("not certainly <" in f for f in rec.failures), rec.failures


# ---------------------------------------------------------------- A.1, A.2, A.3, D.3, F.2

def test_a1_fails_for_nonnegative_values(monkeypatch):
    monkeypatch.setattr(identities, "SIGN_VALUES", (0, 1))
    assert any("sign-value error" in f for f in _fails("A.1"))


def test_a2_containment_fails_for_a_perturbed_c(monkeypatch):
    monkeypatch.setattr(identities, "A2_C_OFFSET", fmpq(1, 2 ** 90))
    assert any("does not contain C" in f for f in _fails("A.2"))


def test_a3_fails_for_a_non_row_column_term(monkeypatch):
    # a term that is not a row or column term, added after C is fixed: the minimal dimension
    # the search finds is no longer rank C
    def extra(m, n):
        E = fmpq_mat(m, n)
        E[0, 0] = fmpq(1)
        return E
    monkeypatch.setattr(identities, "A3_EXTRA", extra)
    assert any("!= rank C" in f for f in _fails("A.3"))


def test_a3_fails_when_the_search_misses_the_best_shift(monkeypatch):
    monkeypatch.setattr(identities, "A3_ANCHORS", False)
    assert any("above the lower bound" in f for f in _fails("A.3"))


def test_d3_fails_for_a_non_shift(monkeypatch):
    monkeypatch.setattr(identities, "D3_ROW_SHIFT", lambda a1, a2: sp.Matrix([[a1, 0], [0, a2]]))
    assert "row shift: A unchanged" in _fails("D.3")


def test_f2_fails_with_a_wrong_beta(monkeypatch):
    monkeypatch.setattr(identities, "F2_BETA_ERROR", fmpq(1))
    assert any("T_W = (P Q P_W)" in f for f in _fails("F.2"))


def test_f2_fails_with_a_wrong_native_subspace(monkeypatch):
    monkeypatch.setattr(identities, "F2_NATIVE_W",
                        lambda PW, k: fmpq_mat(k, k, [int(i == j) for i in range(k) for j in range(k)]) - PW)
    assert any("native residual" in f for f in _fails("F.2"))


def test_h4_search_fails_without_3x3(monkeypatch):
    from proofs_checks import examples
    monkeypatch.setattr(examples, "H4_SHAPES", ((2, 2), (2, 3), (3, 2)))
    assert any("exhaustive search" in f for f in _fails("H.4"))


# ---------------------------------------------------------------- the earlier checks, perturbed

from proofs_checks import all_checks, examples, geometry, grid, hilbert, laws, soundness
from proofs_checks._core import run_check

_ENTRIES = {e.label: e for e in all_checks()}


def _fails(label: str) -> list:
    r = run_check(_ENTRIES[label])
    assert not r.passed, f"{label} passed although its construction was perturbed"
    return list(r.failures)


@pytest.mark.parametrize("label", ["G.1", "H.1", "I.2"])
def test_grid_checks_fail_at_beta_one(monkeypatch, label):
    monkeypatch.setattr(grid, "BETA", 1)
    monkeypatch.setattr(grid, "GRIDS", {1: (2, 8), 2: (3,)})
    monkeypatch.setattr(grid, "H1_SIZES", (2, 8))
    monkeypatch.setattr(grid, "BALL_RADII", (1, 3))
    monkeypatch.setattr(grid, "I2_FINE", {})
    assert any("Neumann" in f or "not <" in f or "verify" in f for f in _fails(label))


def test_i3_fails_when_the_float_search_overreaches(monkeypatch):
    # a negative margin lets the float search pick subsets the exact tier must refuse
    monkeypatch.setattr(laws, "FLOAT_MARGIN", -0.4)
    monkeypatch.setattr(grid, "I3_BETAS", (16,))
    assert any("not verified" in f or "verify" in f for f in _fails("I.3"))


def test_i2_fine_discs_fail_when_the_float_search_overreaches(monkeypatch):
    monkeypatch.setattr(laws, "FLOAT_MARGIN", -0.3)
    monkeypatch.setattr(grid, "BALL_RADII", (1,))
    monkeypatch.setattr(grid, "I2_FINE", {16: (12,)})
    assert any("not verified" in f for f in _fails("I.2"))


def test_i1_fails_when_the_float_search_overreaches(monkeypatch):
    monkeypatch.setattr(laws, "FLOAT_MARGIN", -0.3)
    monkeypatch.setattr(soundness, "SPHERE_BETAS", (64,))
    monkeypatch.setattr(soundness, "SPHERE_FINE", {64: (128,)})
    assert _fails("I.1")


def test_h2_fails_at_its_threshold(monkeypatch):
    monkeypatch.setattr(examples, "H2_EPS", fmpq(3, 5))    # the rank-one B = J/2 has error 3/5
    assert _fails("H.2")


def test_h3_fails_for_a_matrix_with_another_c(monkeypatch):
    monkeypatch.setattr(examples, "H3_MATRIX", [["63/65", "2/65"], ["4/5", "1/5"]])
    assert any("same C" in f for f in _fails("H.3"))


def test_g2_fails_when_alpha_is_misstated(monkeypatch):
    monkeypatch.setattr(examples, "_two_state", lambda a: [[1 - 2 * a, 2 * a], [2 * a, 1 - 2 * a]])
    assert _fails("G.2")


def test_hilbert_fails_with_a_smaller_right_side(monkeypatch):
    monkeypatch.setattr(hilbert, "RHS_DIV", fmpq(41, 10))
    assert any("near-equality" in f for f in _fails("(7)"))


def test_e2_fails_for_an_asymmetric_point_set(monkeypatch):
    monkeypatch.setattr(geometry, "_cross", lambda a, b: sp.Matrix([[a, 0], [0, 0], [0, b], [0, -b]]))
    assert _fails("E.2")


def test_e3_fails_without_the_gauge(monkeypatch):
    monkeypatch.setattr(geometry, "E3_CASES", lambda: (("query", sp.diag(2, 1), sp.eye(2), sp.eye(2)),))
    assert any("retained interactions differ" in f for f in _fails("E.3"))


def test_e4_fails_when_the_kernel_moves(monkeypatch):
    monkeypatch.setattr(geometry, "E4_K", [[1, 0, 1], [-1, 0, 0], [0, 1, 0], [0, -1, 0]])
    assert _fails("E.4")


def test_f1_fails_with_a_wrong_change_of_basis(monkeypatch):
    monkeypatch.setattr(geometry, "gauge_construction",
                        functools.partial(geometry.gauge_construction, perturb=True))
    assert any("invertible T" in f for f in _fails("F.1"))


def test_d1_fails_with_a_broken_compression(monkeypatch):
    monkeypatch.setattr(geometry, "compress_factorisation", lambda X, Y: (X, Y * 0))
    assert any("reproduce F" in f for f in _fails("D.1"))


def test_j1_fails_when_2_beta_is_not_a_square(monkeypatch):
    monkeypatch.setattr(geometry, "J1_BETA", 3)
    assert _fails("J.1")


def test_j2_fails_with_a_wrong_allowance(monkeypatch):
    monkeypatch.setattr(geometry, "J2_TANH_DIV", 40)
    assert any("not certainly <= tau" in f for f in _fails("J.2"))


@pytest.mark.parametrize("label", ["K.2", "K.3"])
def test_soundness_fails_if_the_exact_tier_accepted_everything(monkeypatch, label):
    class Yes:
        verified, margin, reason = True, fmpq(1), ""
    monkeypatch.setattr(soundness, "check_lower", lambda *a, **k: Yes())
    monkeypatch.setattr(soundness, "N_RANDOM_2", 1)
    monkeypatch.setattr(soundness, "N_RANDOM_3", 0)
    assert any("proves rank" in f for f in _fails(label))


def test_h4_random_part_fails_with_a_wrong_residual(monkeypatch):
    monkeypatch.setattr(examples, "contrast_bound", lambda M: residual(M).q + 1)
    assert _fails("H.4")


def test_k5_fails_when_the_slack_is_understated(monkeypatch):
    # K.5: a zero slack claimed for float64 softmax images that are not exact; the exact
    # tier re-proves the slack and must refuse, so H.1 (every exported cell charges it) fails
    from proofs_checks import _export
    monkeypatch.setattr(_export, "slack_bound", lambda H, A0: fmpq(0))
    monkeypatch.setattr(grid, "H1_SIZES", (3, 5))
    assert any("verif" in f or "exact" in f for f in _fails("H.1"))


def test_a3_fails_when_no_instance_hides_a_shift(monkeypatch):
    # instances without row and column terms (H = C): rank H never exceeds rank C, and the
    # check's guard against a vacuous run must fail
    make = identities._a3_instance
    monkeypatch.setattr(identities, "_a3_instance", lambda *a: (make(*a)[1],) * 2)
    assert any("vacuous" in f for f in _fails("A.3"))


def test_d3_fails_for_a_non_shift_column_term(monkeypatch):
    monkeypatch.setattr(identities, "D3_COL_SHIFT", lambda b1, b2: sp.Matrix([[b1, 0], [0, b2]]))
    assert "column shift: C unchanged" in _fails("D.3")

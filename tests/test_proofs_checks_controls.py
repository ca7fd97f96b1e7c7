"""Negative controls for proofs_checks: every construction, perturbed, must make
its check fail. A check that cannot fail proves nothing."""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from flint import fmpq, fmpq_mat

from exact.certificates import check_lower
from exact.matrix import ExactMatrix
from proofs_checks import hardcore, identities
from proofs_checks._core import centring, qmat, row1
from proofs_checks._export import write_and_verify
from proofs_checks._residual import residual
from proofs_checks.examples import exhaustive_strict
from proofs_checks.geometry import meb_sq
from proofs_checks.soundness import leaky_decoders


@pytest.fixture(autouse=True)
def _export_to_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFS_CHECKS_OUT", str(tmp_path))


# ---------------------------------------------------------------- I.4

SMALL_I4 = {1: (2 ** 8, 2 ** 10, 2 ** 12)}


def test_i4_small_passes():
    summary, numbers, rec, table = hardcore.i4_run(SMALL_I4, name="I4small")
    assert not rec.failures, rec.failures
    assert 0.35 < numbers["fitted_exponent"]["1"] < 0.65        # the exponent's sign and size: r/2
    assert [row["bracket"] for row in table] == [f"[{r['messages']}, {r['messages']}]" for r in table]


@pytest.mark.parametrize("lam", [fmpq(9, 8), fmpq(1, 2)])
def test_i4_fails_with_a_bad_decoder(lam):
    # 9/8 I: not contractive (row-l1 norm above 1); 1/2 I: contractive but D A X is far from I
    _, _, rec, _ = hardcore.i4_run({1: (2 ** 8, 2 ** 10)}, lam=lam, name="I4bad")
    assert any("contractive" in f or "DAX" in f for f in rec.failures), rec.failures


def test_i4_fails_at_a_wrong_beta():
    M = hardcore.largest_m(2 ** 10, 1, hardcore.I4_EPS)
    ok, refuted, _ = hardcore.certify(2 ** 8, M, 1, hardcore.I4_EPS)       # beta four times smaller
    assert not ok and refuted


def test_i4_exported_witness_one_rank_too_high_is_refused(tmp_path):
    # the decoded witness for M messages cannot prove M + 1: take the M + 1 core's witness
    # at the beta where only M are certified; the exact tier must refuse it.
    beta = 2 ** 8
    M = hardcore.largest_m(beta, 1, hardcore.I4_EPS)
    core = hardcore.hard_core(beta, M + 3)
    tensors = {}
    cell = hardcore.core_cell("too_many", core, 1, hardcore.I4_EPS, tensors, {"test": True})
    _, doc = write_and_verify("too_many", [cell], tensors)
    assert doc["returncode"] == 1 and doc["cells"][0]["lower_verified"] is False


def test_i4_kronecker_bound_matches_full_computation():
    # r = 2: the channel bound from the 1-d factors is an upper bound on the directly
    # computed ||A X - I|| of the 2-d instance (float check of the formula, small case)
    core = hardcore.hard_core(2 ** 6, 3)
    H = hardcore.logits_nd(core, 2)
    A = np.exp(H - H.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    X = hardcore.cells_nd(3, hardcore.CELLS, 2)
    direct = np.abs(A @ X - np.eye(9)).sum(axis=1).max()
    bound = hardcore.channel_bound(core, 2)
    assert abs(direct - float(bound.mid())) < 1e-9


# ---------------------------------------------------------------- G.3

def test_g3_fails_when_the_appended_columns_are_too_large():
    _, _, rec, _ = hardcore.g3_run(betas=(2 ** 8,), scale_bits=1, name="G3big")
    assert rec.failures
    assert any("alpha" in f for f in rec.failures)


def test_g3_gap_closes():
    # an appended column larger than the linear one: the top visible-key direction is no
    # longer e1, so the exact gap test fails
    K = 8
    y = [fmpq(Y, 2 * K) for Y in range(-(K - 1), K, 2)]
    big = hardcore.stencil_columns(K, 1, fmpq(4))[0]
    F = fmpq_mat(K, 3, [v for j in range(K) for v in (y[j], -y[j] * y[j] / 2, big[j])])
    rank, eigen_ok, gap_ok, _ = hardcore.visible_key_gap(F, 1)
    assert rank == 3 and eigen_ok and not gap_ok
    small = hardcore.stencil_columns(K, 1, fmpq(1, 64))[0]
    F2 = fmpq_mat(K, 3, [v for j in range(K) for v in (y[j], -y[j] * y[j] / 2, small[j])])
    assert hardcore.visible_key_gap(F2, 1)[2]


def test_g3_fails_when_alpha_is_below_the_perturbation():
    # alpha = 1/64 is below ||A_pert - A_core|| (about 0.025) and below q(C - T_W) = 3/32
    _, _, rec, _ = hardcore.g3_run(betas=(2 ** 8, 2 ** 10), alpha=fmpq(1, 64), name="G3smallalpha")
    assert any("A_pert - A_core" in f for f in rec.failures) and any("residual" in f for f in rec.failures)


# ---------------------------------------------------------------- G.1-all

def test_all_n_step_fails_at_small_beta():
    _, _, rec, _ = identities.all_n_run(beta=1)
    assert rec.failures


def test_theta_upper_bounds_a_long_sum():
    from flint import arb
    t = identities.theta_upper(fmpq(1, 2), terms=2)
    long = 1 + 2 * sum((arb(-fmpq(k * k, 2)).exp() for k in range(1, 60)), arb(0))
    assert long < t and t - long < 1e-2


# ---------------------------------------------------------------- A.1, A.2, A.3

def test_a1_fails_for_nonnegative_values():
    M = qmat([[1, -1, "1/2"], [0, 2, -3]])
    assert identities.sign_norm(M) == row1(M)
    assert identities.sign_norm(M, values=(0, 1)) != row1(M)


def test_a2_containment_fails_for_a_perturbed_c():
    H = qmat([[1, 2, -1], [0, "1/3", 4]])
    C = centring(2) * H * centring(3)
    assert identities.enclosure_misses(H, C) == []
    C2 = fmpq_mat(C)
    C2[0, 1] = C2[0, 1] + fmpq(1, 2 ** 90)
    assert identities.enclosure_misses(H, C2) == [(0, 1)]


def test_a3_fails_for_a_non_row_column_term():
    C = centring(3) * qmat([[1, 0], [0, 1], [1, 1]]) * qmat([[1, 2, 0], [0, 1, 1]]) * centring(3)
    E = qmat([[1, 0, 0], [0, 0, 0], [0, 0, 0]])        # not a row or column term
    assert (centring(3) * (C + E) * centring(3)).rank() != C.rank() or \
        centring(3) * (C + E) * centring(3) != C


# ---------------------------------------------------------------- D.3, F.2, H.4, K.4

def test_d3_a_non_shift_moves_c():
    H = sp.Matrix([[1, -1], [-1, 1]])
    P = sp.eye(2) - sp.ones(2, 2) / 2
    assert sp.simplify(P * (H + sp.Matrix([[1, 0], [0, 0]])) * P - P * H * P) != sp.zeros(2, 2)


def test_f2_fails_with_a_wrong_beta_or_a_wrong_subspace():
    Q, K = qmat([[1, 2], [0, 1], [-1, 1]]), qmat([[2, 0], [1, 1]])
    beta = fmpq(3)
    PW = qmat([[1, 0], [0, 0]])
    TW = centring(3) * (Q * PW * K.transpose() * beta) * centring(2)
    X, Y = centring(3) * Q * PW, centring(2) * K * PW * (beta + 1)            # wrong beta
    assert X * Y.transpose() != TW
    H = Q * K.transpose() * beta
    C = centring(3) * H * centring(2)
    rows = lambda M: [[M[i, j] for j in range(M.ncols())] for i in range(M.nrows())]
    other = qmat([[0, 0], [0, 1]])
    native_other = H - Q * other * K.transpose() * beta
    assert residual(rows(C - TW)).q != residual(rows(native_other)).q
    assert meb_sq(rows(Q * PW)) is not None


def test_h4_search_fails_without_3x3():
    assert exhaustive_strict(((2, 2), (2, 3), (3, 2)))["shape"] is None


def test_leaky_decoders_are_refused_on_false_claims():
    A = qmat([["3/4", "1/4"], ["1/4", "3/4"]])
    EA = ExactMatrix.from_fmpq_mat(A)
    pool = [(w, d, lab) for w, d, lab in leaky_decoders(A) if d == 2]
    assert any("mutant" in lab for _, _, lab in pool)
    # rank 1 B = J/2 has error 1/2: no witness may prove rank 2 at eps = 1/2
    assert row1(A - qmat([["1/2", "1/2"]] * 2)) == fmpq(1, 2)
    for w, d, lab in pool:
        assert not check_lower(EA, w, fmpq(1, 2), d).verified, lab
    # and the leaky witnesses do verify somewhere (nonzero defect, eps small)
    assert any(check_lower(EA, w, fmpq(1, 100), d).verified for w, d, lab in pool if lab.startswith("leaky"))


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


def test_e3_selection_does_not_move_without_the_gauge():
    from proofs_checks._core import Recorder
    rec = Recorder()
    out = geometry._svd_selection(rec, "query", sp.diag(2, 1), sp.eye(2), sp.eye(2))
    assert out[0][3] == out[1][3]          # the check's "retained interactions differ" would fail


def test_e4_fails_when_the_kernel_moves(monkeypatch):
    monkeypatch.setattr(geometry, "E4_K", [[1, 0, 1], [-1, 0, 0], [0, 1, 0], [0, -1, 0]])
    assert _fails("E.4")


def test_f1_construction_fails_with_a_wrong_change_of_basis():
    from proofs_checks._core import Recorder
    rec = Recorder()
    geometry.gauge_construction(rec, *geometry.F1_INSTANCES[0][:5], geometry.F1_INSTANCES[0][5], perturb=True)
    assert any("invertible T" in f for f in rec.failures)
    ok = Recorder()
    geometry.gauge_construction(ok, *geometry.F1_INSTANCES[0])
    assert ok.count and not ok.failures


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


def test_g3_with_more_appended_columns():
    # d = 5: three appended stencil columns, visible key span of dimension 5, same transfer
    _, numbers, rec, _ = hardcore.g3_run(betas=(2 ** 8, 2 ** 10), d=5, name="G3d5")
    assert not rec.failures, rec.failures
    assert numbers["d"] == 5 and numbers["M"] == [7, 15]

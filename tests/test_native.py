"""Native features and the diagonal gauge audit (Appendix L.7, E.2, F.1)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from numeric.geometry import cell_descriptors
from numeric.geometry.native import AUDIT_RATIOS, diagonal_gauge, native_features


def _head(seed, m=20, n=18, d=6, spread=(0.2, 3.0)):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((m, d)) * rng.uniform(*spread, d)
    K = rng.standard_normal((n, d)) * rng.uniform(*spread, d)
    return Q, K


@pytest.mark.parametrize("ratio", AUDIT_RATIOS)
def test_diagonal_gauge_ratio_and_dyadic(ratio):
    g = diagonal_gauge(8, ratio)
    assert g.max() / g.min() == ratio
    assert all(math.frexp(x)[0] == 0.5 for x in g)  # powers of two: exact in float64


def test_svd_dimension_moves_under_a_gauge():
    """E.3: a gauge re-weights the key directions and changes which (and how
    many) native SVD directions carry the centred logits, while C is fixed."""
    rng = np.random.default_rng(0)
    d = 8
    M = rng.standard_normal((d, d))  # native coordinates mix the interaction directions
    Q = rng.standard_normal((30, d)) @ np.diag(np.geomspace(1, 0.1, d)) @ M
    K = rng.standard_normal((28, d)) @ np.diag(np.geomspace(1, 0.1, d)) @ np.linalg.inv(M).T
    f = native_features(Q, K, 1.0, ratios=(4, 16, 1024))
    moves = [f[f"svd_interaction_dim_move_g{c}"] for c in (4, 16, 1024)]
    assert max(moves) > 0
    assert all(f[f"intrinsic_move_g{c}"] <= 1e-12 for c in (4, 16, 1024))


def test_audit_native_moves_intrinsic_does_not():
    Q, K = _head(0)
    f = native_features(Q, K, 0.4)
    for c in AUDIT_RATIOS:
        assert f[f"logit_change_g{c}"] == 0.0
        assert f[f"intrinsic_move_g{c}"] == 0.0
        assert f[f"gamma_native_move_g{c}"] > 0.05
        assert f[f"width_spectrum_gap_move_g{c}"] > 0.0
    # a larger condition ratio distorts the native radii further (E.2)
    assert f["gamma_native_move_g16"] > f["gamma_native_move_g4"]
    # the full intrinsic descriptors of the gauged logits are bit-identical
    g = diagonal_gauge(Q.shape[1], 16)
    H, Hg = 0.4 * Q @ K.T, 0.4 * (Q * g) @ (K / g).T
    a = cell_descriptors(H, None, ranks=(1, 2))
    b = cell_descriptors(Hg, None, ranks=(1, 2))
    assert all(a[k] == b[k] for k in a if k != "geometry_seconds")


def test_gamma_native_on_cube_and_f1_lower_bound():
    """Rows on the corners of the cube {0, 1}^3: R = sqrt(3)/2 for Q and K, so
    Gamma = scale * 3/4. F.1: every native radius product is >= kappa(C), and
    here (an isotropic cube, E = P X X^T P) the optimum is attained."""
    X = np.array(list(itertools.product([0.0, 1.0], repeat=3)))
    f = native_features(X, X, 2.0, audit=False)
    assert abs(f["gamma_native"] - 2.0 * 0.75) < 1e-12
    d = cell_descriptors(2.0 * X @ X.T, None, ranks=(1,))
    assert d["kappa_lower"] <= f["gamma_native"] * (1 + 1e-12)
    assert abs(d["kappa_upper"] - 1.5) < 1e-9 and abs(d["kappa_lower"] - 1.5) < 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_native_radius_product_dominates_intrinsic_size(seed):
    Q, K = _head(10 + seed)
    f = native_features(Q, K, 0.3)
    d = cell_descriptors(0.3 * Q @ K.T, None, ranks=())
    # Gamma is one factorisation's radius product of C (after centring): >= kappa(C)
    assert d["kappa_lower"] <= f["gamma_native"] * (1 + 1e-12)
    assert d["kappa_dual"] <= f["gamma_native"] * (1 + 1e-9)
    for c in AUDIT_RATIOS:
        assert d["kappa_dual"] <= f[f"gamma_native_g{c}"] * (1 + 1e-9)


def test_svd_interaction_dim_on_exact_low_rank_keys():
    """Keys with variance in 2 of 6 coordinates: the native SVD subspace of
    dimension 2 reproduces H up to column constants (energy and residual 0)."""
    rng = np.random.default_rng(4)
    Q = rng.standard_normal((15, 6))
    K = np.zeros((12, 6))
    K[:, :2] = rng.standard_normal((12, 2)) * 3
    K[:, 2:] = 0.7  # constant columns only shift columns of H
    f = native_features(Q, K, 1.0, audit=False)
    assert f["svd_interaction_rank"] == 2
    assert f["svd_interaction_dim"] == pytest.approx(2 / 6)
    assert f["native_residual_tau"] <= 1e-12


def test_mask_terms_column_constant_do_not_change_features():
    Q, K = _head(5)
    mask = np.zeros((Q.shape[0], K.shape[0]))
    mask[:, 3] = -2.5  # a padding-style, column-constant term
    a = native_features(Q, K, 0.5, audit=False)
    b = native_features(Q, K, 0.5, mask=mask, audit=False)
    assert a["svd_interaction_rank"] == b["svd_interaction_rank"]
    assert a["native_residual_tau"] == pytest.approx(b["native_residual_tau"], abs=1e-12)


@pytest.mark.parametrize(
    "args",
    [
        (np.zeros((3, 2)), np.zeros((4, 3)), 1.0),
        (np.zeros((3, 2), dtype=np.float32), np.zeros((4, 2)), 1.0),
        (np.array([[np.nan, 0.0]]), np.zeros((4, 2)), 1.0),
        (np.zeros((3, 2)), np.zeros((4, 2)), -1.0),
        (np.zeros((3, 2)), np.zeros((4, 2)), float("inf")),
    ],
)
def test_bad_input_raises(args):
    with pytest.raises(ValueError):
        native_features(*args)

"""Native (coordinate-dependent) features of a head and the gauge audit (L.7).

The historical SoftRank block reads geometry off the model's own factors
``H = scale Q K^T``: radii of the query and key clouds, the SVD subspaces of the
keys. A gauge ``Q -> Q G``, ``K -> K G^-T`` leaves H and A unchanged but moves
all of these (E.2, E.3); the intrinsic descriptors of ``numeric.geometry.descriptors``
depend on H only through ``C = P_m H P_n`` and cannot move (F.1). The audit
applies diagonal gauges of condition ratio 4 and 16 (Appendix L.7) and records
how far each native feature moves and that the intrinsic ones do not.

Definitions (operationalised here; docs/geometry.md):

- ``gamma_native = scale R(Q) R(K)``, R the minimum-enclosing-ball radius of
  the rows (translation invariant, so "after centring" changes nothing);
- native SVD subspace ``W_r`` = top-r right singular vectors of the centred
  keys ``P_n K``; ``svd_interaction_dim`` = (smallest r whose truncation
  ``scale P Q W_r W_r^T K^T P`` leaves at most ``NATIVE_ENERGY_TOL`` of
  ``||P H P||_F``) / head_dim;
- ``width_spectrum_gap = log(gamma_native) - log(scale s_Q s_K)`` with
  ``s_Q = sigma_1(P_m Q)/sqrt(m)`` the largest standard deviation of the
  query cloud (likewise keys): radius product versus spectral width product;
- ``native_shape = (r/2) log(1 + Gamma_W)`` with ``Gamma_W`` the radius product
  of the factors projected on W (prefactor-free, a diagnostic only);
- ``native_residual_tau``: ``tau_r = 2 tanh(q(H - scale Q W_r W_r^T K^T)/4)``
  at the selected r (the residual envelope).
"""
from __future__ import annotations

import math

import numpy as np

from numeric.runtime import one_blas_thread
from numeric.geometry.interaction import visible_interaction
from numeric.geometry.meb import meb_radius
from numeric.geometry.residual import double_difference, residual_q, tau_of_q

__all__ = ["NATIVE_ENERGY_TOL", "AUDIT_RATIOS", "native_features", "diagonal_gauge", "geometric_gauge"]

# Relative Frobenius residual of the centred logits that selects the native
# SVD dimension: the smallest r whose top-r key directions leave at most 10%
# of ||P H P||_F. (A residual-allowance criterion, tau_r <= eps/5, selects
# r = head_dim on every MiniLM head we tried: tau_r stays above 0.3 until the
# last direction, so it carries no information; the energy criterion does.)
NATIVE_ENERGY_TOL = 0.1

# Condition ratios of the diagonal gauges in the paper's audit (Appendix L.7).
AUDIT_RATIOS = (4, 16)

# Floor of the denominator of a relative move: an intrinsic value of 0 (a
# rank-one cell has q = 0) gives the absolute move instead of a division by 0.
MOVE_FLOOR = 1e-300

_NATIVE_KEYS = ("gamma_native", "svd_interaction_dim", "width_spectrum_gap", "native_shape", "native_residual_tau")


def diagonal_gauge(d: int, ratio: float) -> np.ndarray:
    """Diagonal of a gauge with ``max/min = ratio``: ``ratio^(+-1/2)`` alternating.

    For ratios 4 and 16 the entries are powers of two, so ``Q G`` and
    ``K G^-1`` are exact in float64 and the gauged logits are bit-identical.

    >>> diagonal_gauge(4, 16).tolist()
    [0.25, 4.0, 0.25, 4.0]
    """
    if d < 1 or not ratio >= 1:
        raise ValueError("need d >= 1 and ratio >= 1")
    half = math.sqrt(ratio)
    g = np.where(np.arange(d) % 2 == 0, 1.0 / half, half)
    if d == 1:
        g = np.array([1.0])
    return g


def geometric_gauge(d: int, ratio: float) -> np.ndarray:
    """Diagonal of a gauge with ``max/min = ratio`` and geometric spacing:
    ``ratio^(i/(d-1) - 1/2)`` for ``i = 0..d-1``.

    Unlike :func:`diagonal_gauge`, most entries are not powers of two, so the
    gauged logits ``(Q G)(K G^-1)^T`` differ from the ungauged ones by
    rounding: an audit under this gauge tests that a descriptor is invariant
    in floating point, not only on paper (the study's I audit, docs/study.md).

    >>> g = geometric_gauge(5, 16); [round(float(x), 12) for x in g]
    [0.25, 0.5, 1.0, 2.0, 4.0]
    >>> float(geometric_gauge(32, 4).max() / geometric_gauge(32, 4).min())
    4.0
    """
    if d < 1 or not ratio >= 1:
        raise ValueError("need d >= 1 and ratio >= 1")
    if d == 1:
        return np.array([1.0])
    return np.asarray(float(ratio)) ** (np.arange(d) / (d - 1) - 0.5)


def _check(Q, K, scale, mask):
    Q = np.asarray(Q)
    K = np.asarray(K)
    for name, a in (("Q", Q), ("K", K)):
        if a.dtype != np.float64 or a.ndim != 2:
            raise ValueError(f"{name} must be a 2-D float64 array [token, head_dim], got {a.dtype} {a.shape}")
        if a.shape[0] == 0 or a.shape[1] == 0:
            raise ValueError(f"{name} is empty")
        if not np.isfinite(a).all():
            raise ValueError(f"{name} contains NaN or Inf")
    if Q.shape[1] != K.shape[1]:
        raise ValueError(f"Q and K head_dim differ: {Q.shape[1]} vs {K.shape[1]}")
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be finite and positive, got {scale}")
    if mask is not None:
        mask = np.asarray(mask, dtype=np.float64)
        if mask.shape != (Q.shape[0], K.shape[0]) or not np.isfinite(mask).all():
            raise ValueError("mask must be a finite [query, key] array")
    return Q, K, scale, mask


def _tau_native(Q, K, scale, H, V, r) -> float:
    W = V[:, :r]
    Hr = scale * (Q @ W) @ (K @ W).T
    return tau_of_q(residual_q(H - Hr).value)


def _core(Q: np.ndarray, K: np.ndarray, scale: float, H: np.ndarray) -> dict:
    m, d = Q.shape
    n = K.shape[0]
    rq, _ = meb_radius(Q)
    rk, _ = meb_radius(K)
    gamma = scale * rq * rk
    Qc = Q - Q.mean(axis=0)
    Kc = K - K.mean(axis=0)
    _, sk, Vt = np.linalg.svd(Kc, full_matrices=True)
    V = Vt.T
    # Native SVD truncation of the centred logits P H P = scale A B^T with
    # A = P Q V, B = P K V; B^T B = diag(sk^2), so the Frobenius energy left
    # outside the top-r key directions is sum_{k >= r} sk_k^2 |A_k|^2.
    A = Qc @ V
    sk_full = np.zeros(d)
    sk_full[: sk.size] = sk
    energy = (sk_full**2) * (A**2).sum(axis=0)
    tail = np.concatenate([np.cumsum(energy[::-1])[::-1], [0.0]])  # tail[r] = sum_{k>=r}
    total = tail[0]
    if total > 0:
        r = int(np.flatnonzero(tail <= (NATIVE_ENERGY_TOL**2) * total)[0])
    else:
        r = 0
    W = V[:, :r]
    if r > 0:
        gw = scale * meb_radius(Q @ W)[0] * meb_radius(K @ W)[0]
    else:
        gw = 0.0
    tau_r = _tau_native(Q, K, scale, H, V, r)
    sq = np.linalg.svd(Qc, compute_uv=False)[0] / math.sqrt(m)
    skk = sk[0] / math.sqrt(n)
    spec = scale * sq * skk
    gap = math.log(gamma) - math.log(spec) if gamma > 0 and spec > 0 else 0.0
    return {
        "gamma_native": gamma,
        "log1p_gamma_native": math.log1p(gamma),
        "native_radius_q": rq,
        "native_radius_k": rk,
        "svd_interaction_dim": r / d,
        "svd_interaction_rank": r,
        "width_spectrum_gap": gap,
        "native_shape": 0.5 * r * math.log1p(gw),
        "native_residual_tau": tau_r,
    }


def _intrinsic_quick(H: np.ndarray) -> tuple[float, float]:
    C = visible_interaction(H)
    return residual_q(C).value, double_difference(C)[0] / 4.0


def native_features(Q, K, scale, *, mask=None, ratios=AUDIT_RATIOS, audit: bool = True) -> dict:
    """Native features of ``H = scale Q K^T (+ mask)`` and the gauge audit (L.7).

    ``Q``: [query, head_dim], ``K``: [key, head_dim], float64; ``mask``: an
    optional additive [query, key] array. For each ratio c in ``ratios`` the
    diagonal gauge of :func:`diagonal_gauge` is applied and the dict gains
    ``{feature}_g{c}`` (the value under the gauge), ``{feature}_move_g{c}``
    (``|log ratio|`` for gamma_native, absolute difference otherwise),
    ``logit_change_g{c}`` (max |H_gauged - H|) and ``intrinsic_move_g{c}`` (the
    largest relative change of q(C) and the double-difference kappa bound
    recomputed from the gauged logits: zero up to rounding, by F.1).
    """
    Q, K, scale, mask = _check(Q, K, scale, mask)
    with one_blas_thread():
        return _native_features(Q, K, scale, mask, ratios, audit)


def _native_features(Q, K, scale, mask, ratios, audit) -> dict:
    H = scale * (Q @ K.T)
    if mask is not None:
        H = H + mask
    out = _core(Q, K, scale, H)
    if not audit:
        return out
    base = _intrinsic_quick(H)
    for c in ratios:
        g = diagonal_gauge(Q.shape[1], c)
        Qg, Kg = Q * g, K / g
        Hg = scale * (Qg @ Kg.T)
        if mask is not None:
            Hg = Hg + mask
        f = _core(Qg, Kg, scale, Hg)
        tag = f"g{c:g}"
        for key in _NATIVE_KEYS:
            out[f"{key}_{tag}"] = f[key]
            if key == "gamma_native":
                move = abs(math.log(f[key] / out[key])) if f[key] > 0 and out[key] > 0 else 0.0
            else:
                move = abs(f[key] - out[key])
            out[f"{key}_move_{tag}"] = move
        out[f"logit_change_{tag}"] = float(np.abs(Hg - H).max())
        now = _intrinsic_quick(Hg)
        out[f"intrinsic_move_{tag}"] = max(abs(a - b) / max(abs(b), MOVE_FLOOR) for a, b in zip(now, base))
    return out

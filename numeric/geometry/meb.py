"""Minimum enclosing balls (MEB) of point clouds, through the dual QP (J.1, D.1).

The radius ``R(X)`` of the smallest ball holding the rows of X is the size
that ``kappa(T) = inf {R(X) R(Y) : T = X Y^T}`` multiplies. Its dual is
``max_{lam in simplex} f(lam) = lam.diag(K) - lam^T K lam`` (the lam-weighted
variance) on the Gram matrix K of the points: any lam gives a centre
``c = sum lam_i x_i`` and the upper bound ``R^2 <= max_i |x_i - c|^2``, and
``f(lam) <= R^2``. A few away-step Frank-Wolfe steps find the active set, then
a primal active-set method (equal distances on the support, KKT) polishes to
machine precision.
"""
from __future__ import annotations

import numpy as np

__all__ = ["MEB_GAP_RTOL", "meb_radius", "meb_gram"]

# Stop when the duality gap R_up^2 - f(lam) is below this fraction of R_up^2,
# i.e. about 1e-12 relative on the radius -- far below every tolerance a
# descriptor is compared at.
MEB_GAP_RTOL = 1e-12
# Frank-Wolfe steps (to 1e-2 relative gap) before the active-set polish, and
# the most polish pivots (each adds or drops one support point; the optimal
# support has at most dim + 1 points).
MEB_FW_STEPS = 60
MEB_FW_RTOL = 1e-2
MEB_POLISH_STEPS = 400
# Ridge on the Gram matrix in the polish, relative to its largest diagonal
# entry: moves R^2 by at most this relative amount (far below MEB_GAP_RTOL's
# effect on any descriptor) and makes the active-set systems nonsingular.
MEB_REG = 1e-14
# Floor of the scales in the relative tests: an all-zero cloud (R = 0) stops
# at once instead of dividing by zero.
TINY = 1e-300


def _stats(K: np.ndarray, dg: np.ndarray, lam: np.ndarray):
    """``K lam``, ``lam^T K lam`` and the squared distances to the centre."""
    Kl = K @ lam
    lKl = float(lam @ Kl)
    return Kl, lKl, dg - 2.0 * Kl + lKl


def _frank_wolfe(K: np.ndarray, dg: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Away-step Frank-Wolfe on the dual, to ``MEB_FW_RTOL`` relative gap."""
    for _ in range(MEB_FW_STEPS):
        Kl, lKl, d2 = _stats(K, dg, lam)
        g = dg - 2.0 * Kl
        s = int(g.argmax())
        R2 = float(d2[s])
        f = float(lam @ dg - lKl)
        if R2 - f <= MEB_FW_RTOL * max(R2, TINY):
            break
        lg = float(lam @ g)
        supp = np.flatnonzero(lam > 0)
        a = int(supp[g[supp].argmin()])
        gd_fw, gd_aw = g[s] - lg, lg - g[a]
        if gd_fw >= gd_aw or lam[a] >= 1.0:
            dKd = K[s, s] - 2.0 * Kl[s] + lKl
            gamma = 1.0 if dKd <= 0 else min(1.0, gd_fw / (2.0 * dKd))
            lam *= 1.0 - gamma
            lam[s] += gamma
        else:
            gmax = lam[a] / (1.0 - lam[a])
            dKd = lKl - 2.0 * Kl[a] + K[a, a]
            gamma = gmax if dKd <= 0 else min(gmax, gd_aw / (2.0 * dKd))
            lam *= 1.0 + gamma
            lam[a] = 0.0 if gamma == gmax else lam[a] - gamma
        lam = np.clip(lam, 0.0, None)
        lam /= lam.sum()
    return lam


def _support_target(K: np.ndarray, dg: np.ndarray, S: list, tau: float):
    """Weights on the support S with equal regularised distances (KKT), or None.

    Solves ``2 (K + tau I)_SS l - rho 1 = diag_S``, ``1.l = 1``.
    """
    k = len(S)
    M = np.zeros((k + 1, k + 1))
    M[:k, :k] = 2.0 * K[np.ix_(S, S)] + 2.0 * tau * np.eye(k)
    M[:k, k] = -1.0
    M[k, :k] = 1.0
    rhs = np.concatenate([dg[S], [1.0]])
    try:
        return np.linalg.solve(M, rhs)[:k]
    except np.linalg.LinAlgError:
        return None


def _step_to_boundary(lam: np.ndarray, S: list, target: np.ndarray) -> tuple[np.ndarray, list]:
    """Move the support weights towards an infeasible target until one hits zero (drop it)."""
    cur = lam[S]
    step = target - cur
    neg = step < 0
    ratios = np.where(neg, cur / np.where(neg, -step, 1.0), np.inf)
    t = float(min(1.0, ratios.min()))
    newl = np.clip(cur + t * step, 0.0, None)
    newl[int(ratios.argmin())] = 0.0
    lam = np.zeros(lam.shape[0])
    lam[S] = newl
    lam /= lam.sum()
    return lam, [i for i in S if lam[i] > 0]


def _polish(K: np.ndarray, dg: np.ndarray, lam: np.ndarray):
    """Active-set polish on the regularised dual ``K + tau I``: every equality
    system is nonsingular, so the method cannot stall on affinely dependent
    supports. Step towards the support's KKT point until a weight hits zero
    (drop it), or, when it is feasible, add the point with the largest
    gradient if it violates KKT. Returns the best ``(R2, f, lam)`` met."""
    m = K.shape[0]
    tau = MEB_REG * max(float(dg.max()), TINY)
    best = None
    S: list = list(np.flatnonzero(lam > 0))        # support indices: numpy's, then appended Python ints
    for _ in range(MEB_POLISH_STEPS):
        Kl, lKl, d2 = _stats(K, dg, lam)
        R2 = float(d2.max())
        f = float(lam @ dg - lKl)
        if best is None or R2 < best[0]:
            best = (R2, f, lam.copy())
        if R2 - f <= MEB_GAP_RTOL * max(R2, TINY):
            break
        target = _support_target(K, dg, S, tau)
        if target is None:
            break
        if not (target >= 0).all():
            lam, S = _step_to_boundary(lam, S, target)
            continue
        lam = np.zeros(m)
        lam[S] = target
        g = dg - 2.0 * (K @ lam) - 2.0 * tau * lam
        rho = float(g[S].max())
        outside = np.setdiff1d(np.arange(m), S)
        if outside.size == 0:
            continue
        j = int(outside[g[outside].argmax()])
        if g[j] > rho + MEB_GAP_RTOL * max(float(dg.max()), TINY):
            S.append(j)
            continue
        Kl, lKl, d2 = _stats(K, dg, lam)
        R2 = float(d2.max())
        if R2 < best[0]:
            best = (R2, float(lam @ dg - lKl), lam.copy())
        break
    return best


def meb_gram(K: np.ndarray, lam0: np.ndarray | None = None):
    """MEB of the points with Gram matrix K: ``(R2_upper, f_lower, lam)``.

    ``lam0``: warm-start weights (a previous solution), or None.

    >>> R2, f, lam = meb_gram(np.array([[1.0, -1.0], [-1.0, 1.0]]))  # points +1, -1
    >>> R2, f, lam.tolist()
    (1.0, 1.0, [0.5, 0.5])
    """
    m = K.shape[0]
    dg = np.diag(K).copy()
    if lam0 is None or not np.isfinite(lam0).all():
        lam = np.zeros(m)
        lam[int((dg - 2 * K[0] + K[0, 0]).argmax())] = 1.0
    else:
        lam = lam0.copy()
    R2, f, lam = _polish(K, dg, _frank_wolfe(K, dg, lam))
    if R2 - f > MEB_GAP_RTOL * max(R2, TINY) and lam0 is not None:
        # a warm start can leave an affinely dependent support that the
        # equal-distance system cannot resolve: restart cold, keep the better.
        cold = meb_gram(K, None)
        if cold[0] < R2:
            return cold
    return R2, f, lam


def meb_radius(points: np.ndarray) -> tuple[float, np.ndarray]:
    """Float MEB radius of the rows of ``points`` and its centre.

    >>> r, c = meb_radius(np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.5]]))
    >>> round(r, 9), np.round(c, 9).tolist()
    (1.0, [1.0, 0.0])
    """
    P = np.asarray(points, dtype=np.float64)
    if P.shape[0] == 0:
        raise ValueError("no points")
    mu = P.mean(axis=0)
    Pc = P - mu
    _, _, lam = meb_gram(Pc @ Pc.T)
    c = lam @ Pc
    r = float(np.sqrt(((Pc - c) ** 2).sum(axis=1).max()))
    return r, c + mu

"""Bernstein widths and low-rank upper bounds of small matrices (helpers of ``research/oddmap_search.py``).

A is n x m (n rows). MATH.md section 2, in this orientation:

- row side: for Z (n x d), ``gamma_row(Z) = min_{w in range Z} ||A^T w||_1 / ||w||_1``
  = 1 / min { ||G||_row1 : Z^T A G = Z^T } (LP); row subsets are Z = I[:, S];
- column side (K.3): for X (m x d), ``gamma(W) = min_{x in W} ||A x||_inf / ||x||_inf``
  = 1 / min { ||R||_row1 : R A X = X } (LP);
- upper (K.1): ``err_k = min_{rank B <= k} ||A - B||_row1``, estimated from above by
  alternating LPs on B = P Q^T.

``best_row``/``best_col`` maximise gamma over d-dimensional subspaces by
exhaustive coordinate subspaces plus a seeded local search: a float lower
estimate of the best width, never a proof that no better subspace exists.
``row_subset_refuted`` proves, in rationals, that a row subset does not reach eps.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from scipy.optimize import linprog


def min_rownorm(K: np.ndarray, T: np.ndarray, left: bool) -> float:
    """min over M of ``max_j ||M_j||_1`` with ``K M = T`` (left) or ``M K = T`` (not left); inf if infeasible.

    left: M is (K cols) x (T cols); otherwise M is (T rows) x (K rows).
    """
    if left:
        p, q = K.shape[1], T.shape[1]
        E = np.kron(K, np.eye(q))
    else:
        p, q = T.shape[0], K.shape[0]
        E = np.kron(np.eye(p), K.T)
    nv = p * q
    A_eq = np.hstack([E, -E, np.zeros((E.shape[0], 1))])
    A_ub = np.zeros((p, 2 * nv + 1))
    for j in range(p):
        A_ub[j, j * q:(j + 1) * q] = 1
        A_ub[j, nv + j * q:nv + (j + 1) * q] = 1
        A_ub[j, -1] = -1
    c = np.zeros(2 * nv + 1)
    c[-1] = 1
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(p), A_eq=A_eq, b_eq=T.reshape(-1), method="highs")
    return res.fun if res.status == 0 else np.inf


def gamma_row(A: np.ndarray, Z: np.ndarray) -> float:
    """Row-side ``gamma_row(range Z)`` by the LP (0 when Z^T A is rank deficient)."""
    v = min_rownorm(Z.T @ A, Z.T.copy(), left=True)
    return 0.0 if not np.isfinite(v) or v <= 0 else 1.0 / v


def gamma_row_geo(A: np.ndarray, Z: np.ndarray) -> float:
    """The geometric ``gamma_row(range Z) = min ||A^T w||_1 / ||w||_1``: one LP per orthant of w.

    ``gamma_row`` above (the certificate LP with G) is only a lower bound of it:
    a left inverse from a subspace of l1 does not extend to l1 without loss
    (A = [[0,1,0,1,1],[0,1,1,1,0],[0,0,1,1,1]] / 3, Z = I: 7/27 against 1/3).
    """
    n, d = Z.shape
    m = A.shape[1]
    T = A.T @ Z
    best = np.inf
    for sg in itertools.product((1.0, -1.0), repeat=n - 1):
        s = np.array((1.0,) + sg)
        A_ub = np.vstack([np.hstack([T, -np.eye(m)]), np.hstack([-T, -np.eye(m)]),
                          np.hstack([-(s[:, None] * Z), np.zeros((n, m))])])
        res = linprog(np.concatenate([np.zeros(d), np.ones(m)]), A_ub=A_ub, b_ub=np.zeros(2 * m + n),
                      A_eq=np.concatenate([s @ Z, np.zeros(m)])[None], b_eq=[1.0],
                      bounds=[(None, None)] * (d + m), method="highs")
        if res.status == 0:
            best = min(best, res.fun)
    return 0.0 if not np.isfinite(best) else float(best)


def gamma_col(A: np.ndarray, X: np.ndarray) -> float:
    """Column-side ``gamma(range X)`` (K.3, LP-optimal R)."""
    v = min_rownorm(A @ X, X.copy(), left=False)
    return 0.0 if not np.isfinite(v) or v <= 0 else 1.0 / v


def _local(f, X0: np.ndarray, rng, steps: int) -> tuple[float, np.ndarray]:
    """Seeded hill climbing on a basis X: Gaussian moves, step halves after failures."""
    best, X = f(X0), X0.copy()
    step, fails = 0.3, 0
    for _ in range(steps):
        Y = X + step * rng.standard_normal(X.shape) * np.abs(X).max()
        v = f(Y)
        if v > best:
            best, X, fails = v, Y, 0
        else:
            fails += 1
            if fails >= 6:
                step, fails = step / 2, 0
                if step < 1e-4:
                    break
    return best, X


def _best_side(A, d, f, dim, svd_basis, rng, steps, starts):
    """max gamma over coordinate subspaces, the SVD subspace and local search from the best few."""
    cands = []
    for S in itertools.combinations(range(dim), d):
        X = np.eye(dim)[:, S]
        cands.append((f(X), X))
    coord = max(c[0] for c in cands)
    cands.append((f(svd_basis), svd_basis))
    cands.sort(key=lambda t: -t[0])
    best = cands[0][0]
    for g, X in cands[:starts]:
        best = max(best, _local(f, X, rng, steps)[0])
    for _ in range(max(0, starts - 2)):
        best = max(best, _local(f, rng.standard_normal((dim, d)), rng, steps)[0])
    return best, coord


def best_row(A, d, rng, steps=60, starts=3):
    """(best gamma_row found at dim d, best over row subsets (exact enumeration, float LP))."""
    U, _, _ = np.linalg.svd(A)
    return _best_side(A, d, lambda Z: gamma_row(A, Z), A.shape[0], U[:, :d], rng, steps, starts)


def best_row_geo(A, d, rng, steps=60, starts=3):
    """(best geometric gamma_row found at dim d, best over row subsets), orthant LPs (slower)."""
    U, _, _ = np.linalg.svd(A)
    return _best_side(A, d, lambda Z: gamma_row_geo(A, Z), A.shape[0], U[:, :d], rng, steps, starts)


def best_col(A, d, rng, steps=60, starts=3):
    """(best column-side gamma found at dim d, best over coordinate subspaces)."""
    _, _, Vt = np.linalg.svd(A)
    return _best_side(A, d, lambda X: gamma_col(A, X), A.shape[1], Vt[:d].T, rng, steps, starts)


def _fit(A, F, unknown_p: bool):
    """LP: the free factor minimising ``max_i ||a_i - p_i Q^T||_1`` (plus a small sum term), F the fixed one."""
    n, m = A.shape
    k = F.shape[1]
    nu = (n if unknown_p else m) * k
    nv = nu + n * m + 1
    rows, rhs = [], []
    for i in range(n):
        for j in range(m):
            r = np.zeros(nv)
            if unknown_p:
                r[i * k:(i + 1) * k] = F[j]
            else:
                r[j * k:(j + 1) * k] = F[i]
            r[nu + i * m + j] = -1
            rows.append(r)
            rhs.append(A[i, j])
            r2 = -r
            r2[nu + i * m + j] = -1
            rows.append(r2)
            rhs.append(-A[i, j])
        r = np.zeros(nv)
        r[nu + i * m:nu + (i + 1) * m] = 1
        r[-1] = -1
        rows.append(r)
        rhs.append(0.0)
    c = np.zeros(nv)
    c[-1] = 1
    c[nu:nu + n * m] = 1e-3
    bounds = [(None, None)] * nu + [(0, None)] * (n * m) + [(0, None)]
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds, method="highs")
    return res.x[:nu].reshape(-1, k)


def row_err(A, B) -> float:
    """``||A - B||_row1``."""
    return float(np.abs(A - B).sum(axis=1).max())


def err_rank(A: np.ndarray, k: int, rng, rounds=12, starts=3) -> float:
    """An upper estimate of ``min_{rank B <= k} ||A - B||_row1`` (alternating LPs on P, then on Q)."""
    if k <= 0:
        return row_err(A, 0 * A)
    if k >= min(A.shape):
        return 0.0
    _, _, Vt = np.linalg.svd(A)
    best = np.inf
    inits = [Vt[:k].T] + [rng.standard_normal((A.shape[1], k)) for _ in range(starts - 1)]
    for Q in inits:
        for _ in range(rounds):
            P = _fit(A, Q, True)
            Q = _fit(A, P, False)
            best = min(best, row_err(A, P @ Q.T))
    return best


def row_subset_refuted(Aq, S, eps: Fraction, A: np.ndarray) -> bool:
    """Exact proof that rows S do not certify |S|: a rational w on S with ``||A^T w||_1 <= eps ||w||_1``.

    One LP per sign pattern (w in that orthant, ||w||_1 = 1, min ||A_S^T w||_1), rounded to rationals.
    """
    d = len(S)
    AS = A[list(S)]
    m = A.shape[1]
    for pat in itertools.product((1, -1), repeat=d - 1):
        sg = np.array((1,) + pat, dtype=float)
        # variables w (d), e (m >= 0): min sum e, -e <= AS^T w <= e, sg w >= 0, sg . w = 1
        c = np.concatenate([np.zeros(d), np.ones(m)])
        A_ub = np.vstack([np.hstack([AS.T, -np.eye(m)]), np.hstack([-AS.T, -np.eye(m)]),
                          np.hstack([-np.diag(sg), np.zeros((d, m))])])
        b_ub = np.zeros(2 * m + d)
        A_eq = np.concatenate([sg, np.zeros(m)])[None]
        res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=[(None, None)] * (d + m),
                      method="highs")
        if res.status != 0 or res.fun > float(eps) + 1e-7:
            continue
        w = [Fraction(round(float(t) * 2 ** 30), 2 ** 30) for t in res.x[:d]]
        lhs = sum(abs(sum(w[a] * Aq[S[a]][j] for a in range(d))) for j in range(m))
        if lhs <= eps * sum(abs(t) for t in w):
            return True
    return False

"""The cross-fitting of ``numeric.study.fit`` for all folds of a bootstrap draw at once.

A bootstrap draw repeats sources; a fold trains on the copies of its training
rows. ``FastRidgeCV`` on the expanded rows (every copy a row) is the same
estimator as a ridge on the draw's distinct rows weighted by their number of
copies: the medians, means and standard deviations are those of the expanded
column, the Gram matrix is ``Z^T diag(w) Z``, the inner leave-one-out leaves
all ``w`` copies of a row out together (a copy left in would predict its twin:
the residual's divisor is ``1 - w * hat``), so the leave-one-out
error is the weighted mean over distinct rows, and the intercept's leverage is
``1 / sum(w)``. So
``weighted_cross_fit`` fits every fold of one model in one stacked
computation (weights zero on the fold's test rows), which is what makes the
1,000-resample bootstrap cheap. ``tests/test_study_stats.py`` checks it
against ``cross_fit`` on the expanded rows.

Most comparisons add a few columns to a model that the same draw already fits
(B1+G after B1). ``FoldFits.bordered`` gets the larger model's leave-one-out
leverages and fits from the smaller one's eigendecomposition by the block
inverse of the bordered Gram matrix, so a draw needs an eigendecomposition per
fold of only four models (B0, B1, B1 demeaned, B1 leave-one-head-out) instead
of sixteen; ``numeric.study.compare`` keeps the fits of a draw for this.

>>> import numpy as np
>>> x = np.arange(12.0)[:, None]; y = 2 * x[:, 0] + 1
>>> fold = np.repeat(np.arange(4), 3)
>>> p = weighted_cross_fit(x, y, np.ones(12), fold, 4)
>>> bool(np.allclose(p, y, atol=0.05))
True
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from numeric.study.fit import ALPHAS, negligible, FastRidgeCV

__all__ = ["FoldFits", "complete_fits", "fit_folds", "weighted_cross_fit", "weighted_mae"]


def _fold_moments(X0: np.ndarray, w: np.ndarray, fold: np.ndarray, ks: np.ndarray, B0=None):
    """Training weights ``N [k]``, weighted sums ``S [k, p]`` and second moments ``M [k, p, p]``
    of every fold (and with ``B0 [n, b]`` the cross moments ``B0^T diag(w) X0 [k, b, p]``):
    the totals over all rows minus the fold's own test rows (``2 n p^2`` work in all, not
    ``k n p^2``; leave-one-head-out has a fold per head)."""
    wX = w[:, None] * X0
    L = X0 if B0 is None else np.concatenate([X0, B0], axis=1)
    total_m, total_s, total_n = L.T @ wX, wX.sum(axis=0), w.sum()
    M = np.empty((ks.size,) + total_m.shape)
    S = np.empty((ks.size, X0.shape[1]))
    N = np.empty(ks.size)
    for i, f in enumerate(ks):
        t = fold == f
        M[i] = total_m - L[t].T @ wX[t]
        S[i] = total_s - wX[t].sum(axis=0)
        N[i] = total_n - w[t].sum()
    p = X0.shape[1]
    return (N, S, M) if B0 is None else (N, S, M[:, :p], M[:, p:])


@dataclass(frozen=True)
class FoldFits:
    """The weighted ``FastRidgeCV`` of every fold of one draw, in the eigenbasis of each fold's
    Gram matrix: what the held-out predictions and a bordered fit (``bordered``) need.

    Arrays: ``X0 [n, p]`` (X shifted by its first row, constant columns left out), ``W [k, n]``
    training weights, ``N [k]``, ``mean``/``isd [k, p]`` the standardisation, ``V [k, p, p]``
    and ``inv [k, alpha, p] = 1 / (lam + alpha)``, ``ZV [k, n, p] = Z V``, ``yc [k, n]``,
    ``y_mean [k]``, ``vty [k, p] = V^T Z^T W yc``, and the leave-one-out quantities of every
    row and penalty: ``hat [k, alpha, n]`` (leverage, intercept included) and ``fitted``."""

    X0: np.ndarray
    w: np.ndarray
    fold: np.ndarray
    ks: np.ndarray
    W: np.ndarray
    N: np.ndarray
    mean: np.ndarray
    isd: np.ndarray
    V: np.ndarray
    inv: np.ndarray
    ZV: np.ndarray
    yc: np.ndarray
    y_mean: np.ndarray
    vty: np.ndarray
    hat: np.ndarray
    fitted: np.ndarray
    is_bordered: bool = False

    def held_out(self) -> np.ndarray:
        """Row ``i``'s prediction by its own fold's model at that fold's LOO-best penalty."""
        with np.errstate(divide="ignore", invalid="ignore"):
            loo = (self.yc[:, None, :] - self.fitted) / (1.0 - self.W[:, None, :] * self.hat)   # all copies out
        loo = np.where(self.W[:, None, :] > 0, loo, 0.0)        # held-out rows are not in the LOO error
        best = np.argmin(np.einsum("kan,kn->ka", loo**2, self.W) / self.N[:, None], axis=1)
        P = self.fitted[np.arange(self.ks.size), best] + self.y_mean[:, None]
        return P[np.searchsorted(self.ks, self.fold), np.arange(self.fold.size)]

    def bordered(self, Xa: np.ndarray) -> "FoldFits":
        """The fits of the model with the columns ``Xa [n, q]`` added, from these ones by the
        block inverse of the bordered Gram matrix ``[[G + a, C], [C^T, D + a]]`` (Schur
        complement ``S = D + a - C^T (G + a)^-1 C``): with ``t_i = z_a,i - C^T (G + a)^-1 z_i``
        and ``beta_a = S^-1 (Z_a^T W yc - C^T (G + a)^-1 Z^T W yc)``, the leverage is
        ``h_i + t_i^T S^-1 t_i`` and the fit ``f_i + t_i^T beta_a``. The same estimator as
        fitting the joined columns (``tests/test_study_stats.py``), without an eigendecomposition."""
        if self.is_bordered:
            raise ValueError("a bordered fit is not a base")
        Xa0 = _shifted(Xa)
        if Xa0.shape[1] == 0:
            return replace(self, is_bordered=True)
        _, Sa, Maa, Mba = _fold_moments(Xa0, self.w, self.fold, self.ks, self.X0)
        mean_a = Sa / self.N[:, None]
        cov_a = Maa / self.N[:, None, None] - mean_a[:, :, None] * mean_a[:, None, :]
        isd_a = _inverse_sd(cov_a, np.abs(Xa0).max(axis=0))
        cross = Mba / self.N[:, None, None] - self.mean[:, :, None] * mean_a[:, None, :]
        C_hat = np.swapaxes(self.V, 1, 2) @ (self.N[:, None, None] * cross * self.isd[:, :, None] * isd_a[:, None, :])
        D = self.N[:, None, None] * cov_a * isd_a[:, :, None] * isd_a[:, None, :]
        Za = (Xa0[None, :, :] - mean_a[:, None, :]) * isd_a[:, None, :]            # [k, n, q]
        k, (p, q), n_alpha = self.ks.size, C_hat.shape[1:], len(ALPHAS)
        G = self.inv[:, :, :, None] * C_hat[:, None, :, :]                           # [k, alpha, p, q]
        S = (D[:, None] + np.asarray(ALPHAS)[None, :, None, None] * np.eye(q)
             - np.swapaxes(C_hat, 1, 2)[:, None] @ G)                                # [k, alpha, q, q]
        S_inv = np.linalg.inv(S)                                                     # SPD, eigenvalues >= alpha
        R = np.linalg.cholesky(S_inv)                                                # S^-1 = R R^T
        r = np.einsum("knq,kn->kq", Za, self.W * self.yc)[:, None] - np.einsum("kp,kapq->kaq", self.vty, G)
        beta_a = (S_inv @ r[..., None])[..., 0]                                      # [k, alpha, q]

        ZaV = np.concatenate([Za, self.ZV], axis=2)                                 # [k, n, q + p]

        def times_t(A):   # t_i^T A for every row i: [Za, ZV] [A; -G A], alpha folded into one product
            m = A.shape[-1]
            AG = np.concatenate([A, -(G @ A)], axis=2)                                # [k, alpha, q + p, m]
            return (ZaV @ np.swapaxes(AG, 1, 2).reshape(k, q + p, n_alpha * m)).reshape(k, -1, n_alpha, m)

        tR = times_t(R)                                                              # t^T S^-1 t = |t^T R|^2
        hat = self.hat + np.swapaxes(np.einsum("knaq,knaq->kna", tR, tR), 1, 2)
        fitted = self.fitted + np.swapaxes(times_t(beta_a[..., None])[..., 0], 1, 2)
        return replace(self, hat=hat, fitted=fitted, is_bordered=True)


def _shifted(X: np.ndarray) -> np.ndarray:
    """X minus its first row (a constant column becomes exactly 0 and the moments do not
    cancel), constant columns left out (also those that vary only by rounding residue relative
    to their magnitude, ``fit.negligible``): they add a zero row and column to every Gram
    matrix and nothing to any prediction."""
    X0 = X - X[:1]
    return X0[:, ~negligible(np.abs(X0).max(axis=0, initial=0.0), np.abs(X).max(axis=0, initial=0.0))]


def _inverse_sd(cov: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """1 / sd of every fold's column, 0 where the sd is negligible against the column's ``scale``
    (the column is constant on that fold's training rows: it gets no coefficient)."""
    sd = np.sqrt(np.maximum(np.einsum("kpp->kp", cov), 0.0))
    return np.where(negligible(sd, scale[None, :]), 0.0, 1.0 / np.where(sd > 0, sd, 1.0))


def fit_folds(X: np.ndarray, y: np.ndarray, w: np.ndarray, fold: np.ndarray, ks: np.ndarray) -> FoldFits:
    """The ridge of every fold, trained on the rows outside it with weights ``w`` (X ``[n, p]``
    complete, y ``[n]``): the weighted ``FastRidgeCV``, its LOO quantities for every row.

    Standardisation is an affine map per fold, so nothing ``[k, n, p]`` is built but ``Z V``:
    the weighted Gram matrix of Z comes from the weighted moments of X0, and
    ``Z V = X0 (D^-1 V) - m D^-1 V``."""
    X0 = _shifted(X)
    W = np.where(fold[None, :] == ks[:, None], 0.0, w[None, :])  # [k, n]: training weights per fold
    N, S, moments = _fold_moments(X0, w, fold, ks)
    mean = S / N[:, None]                                       # [k, p]
    cov = moments / N[:, None, None] - mean[:, :, None] * mean[:, None, :]
    isd = _inverse_sd(cov, np.abs(X0).max(axis=0, initial=0.0))   # [k, p]
    gram = N[:, None, None] * cov * isd[:, :, None] * isd[:, None, :]
    y_mean = (W @ y) / N                                        # [k]
    yc = y[None, :] - y_mean[:, None]                           # [k, n]
    lam, V = np.linalg.eigh(gram)
    lam = np.maximum(lam, 0.0)
    M = isd[:, :, None] * V                                     # [k, p, p]: Z V = (X0 - m) M
    ZV = X0[None, :, :] @ M - (mean[:, None, :] @ M)            # [k, n, p]
    vty = np.einsum("knp,kn->kp", ZV, W * yc)                   # [k, p]
    inv = 1.0 / (lam[:, None, :] + np.asarray(ALPHAS)[None, :, None])   # [k, alpha, p]
    ZVt = np.swapaxes(ZV, 1, 2)
    hat = inv @ (ZVt * ZVt) + (1.0 / N)[:, None, None]          # [k, alpha, n]
    fitted = (inv * vty[:, None, :]) @ ZVt                      # [k, alpha, n]
    return FoldFits(X0, w, fold, ks, W, N, mean, isd, V, inv, ZV, yc, y_mean, vty, hat, fitted)


def complete_fits(X: np.ndarray, y: np.ndarray, w: np.ndarray, fold: np.ndarray) -> FoldFits | None:
    """``fit_folds`` over the folds of ``fold`` when X has columns and no gap (None otherwise: the
    cases ``weighted_cross_fit`` handles on its own); ``ValueError`` under 2 folds."""
    ks = np.unique(fold)
    if ks.size < 2:
        raise ValueError("cross-fitting needs at least 2 folds")
    if X.shape[1] == 0 or not np.isfinite(X).all():
        return None
    return fit_folds(X, y, w, fold, ks)


def weighted_cross_fit(X, y, weights, fold, n_folds: int) -> np.ndarray:
    """Held-out predictions of every row: row ``i`` (``weights[i]`` copies, in fold ``fold[i]``) is
    predicted by the ridge fitted on the other folds' rows with their weights.

    Falls back to ``FastRidgeCV`` fold by fold on the expanded rows when ``X`` has a gap (the
    training medians are those of the expanded column)."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    w, fold = np.asarray(weights, dtype=np.float64), np.asarray(fold)
    fits = complete_fits(X, y, w, fold)
    if fits is not None:
        return fits.held_out()
    ks = np.unique(fold)
    if X.shape[1] == 0:
        pred = np.empty_like(y)
        for f in ks:
            tr = fold != f
            pred[fold == f] = np.sum(w[tr] * y[tr]) / np.sum(w[tr])
        return pred
    return _expanded_cross_fit(X, y, w, fold, ks)


def _expanded_cross_fit(X, y, w, fold, ks) -> np.ndarray:
    reps = w.astype(np.int64)
    pred = np.empty_like(y)
    for f in ks:
        tr = np.repeat(np.flatnonzero(fold != f), reps[fold != f])
        te = fold == f
        pred[te] = FastRidgeCV().fit(X[tr], y[tr], copies=reps[tr]).predict(X[te])
    return pred


def weighted_mae(y, pred, weights) -> float:
    """Mean absolute error over the expanded rows (row ``i`` counted ``weights[i]`` times)."""
    w = np.asarray(weights, dtype=np.float64)
    return float(np.sum(w * np.abs(np.asarray(y) - np.asarray(pred))) / np.sum(w))

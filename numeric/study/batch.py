"""The cross-fitting of ``numeric.study.fit`` for all folds of a bootstrap draw at once.

A bootstrap draw repeats sources; a fold trains on the copies of its training
rows. ``FastRidgeCV`` on the expanded rows (every copy a row) is the same
estimator as a ridge on the draw's distinct rows weighted by their number of
copies: the medians, means and standard deviations are those of the expanded
column, the Gram matrix is ``Z^T diag(w) Z``, the leave-one-out residual of
every copy of a row is the same, so the leave-one-out error is the weighted
mean over distinct rows, and the intercept's leverage is ``1 / sum(w)``. So
``weighted_cross_fit`` fits every fold of one model in one stacked
computation (weights zero on the fold's test rows), which is what makes the
1,000-resample bootstrap cheap. ``tests/test_study_stats.py`` checks it
against ``cross_fit`` on the expanded rows.

>>> import numpy as np
>>> x = np.arange(12.0)[:, None]; y = 2 * x[:, 0] + 1
>>> fold = np.repeat(np.arange(4), 3)
>>> p = weighted_cross_fit(x, y, np.ones(12), fold, 4)
>>> bool(np.allclose(p, y, atol=0.05))
True
"""
from __future__ import annotations

import numpy as np

from numeric.study.fit import ALPHAS

__all__ = ["weighted_cross_fit", "weighted_mae"]


def _fold_moments(X0: np.ndarray, w: np.ndarray, fold: np.ndarray, ks: np.ndarray):
    """Training weights ``N [k]``, weighted sums ``S [k, p]`` and second moments ``M [k, p, p]``
    of every fold: the totals over all rows minus the fold's own test rows (``2 n p^2`` work in
    all, not ``k n p^2``; leave-one-head-out has a fold per head)."""
    wX = w[:, None] * X0
    total_m, total_s, total_n = X0.T @ wX, wX.sum(axis=0), w.sum()
    M = np.empty((ks.size,) + total_m.shape)
    S = np.empty((ks.size, X0.shape[1]))
    N = np.empty(ks.size)
    for i, f in enumerate(ks):
        t = fold == f
        M[i] = total_m - X0[t].T @ wX[t]
        S[i] = total_s - wX[t].sum(axis=0)
        N[i] = total_n - w[t].sum()
    return N, S, M


def _stacked_fit(X: np.ndarray, y: np.ndarray, w: np.ndarray, fold: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """Held-out-ready predictions ``[k, n]`` of the ridge fitted on every fold's training rows
    (weights ``w``, zero on the fold's test rows; X ``[n, p]`` complete, y ``[n]``): the
    weighted ``FastRidgeCV``, predicting every row.

    Standardisation is an affine map per fold, so nothing ``[k, n, p]`` is built but ``Z V``:
    the weighted Gram matrix of Z comes from the weighted second moments of X (shifted by
    its first row first, so a constant column is exactly zero and the moments do not cancel;
    such a column is then left out: it adds a zero row and column to every Gram matrix and
    nothing to any prediction), and ``Z V = X0 (D^-1 V) - m D^-1 V``."""
    k = ks.size
    X0 = X - X[:1]
    X0 = X0[:, np.any(X0 != 0, axis=0)]                         # constant columns: exactly 0, left out
    W = np.where(fold[None, :] == ks[:, None], 0.0, w[None, :])  # [k, n]: training weights per fold
    N, S, moments = _fold_moments(X0, w, fold, ks)
    mean = S / N[:, None]                                       # [k, p]
    cov = moments / N[:, None, None] - mean[:, :, None] * mean[:, None, :]
    var = np.maximum(np.einsum("kpp->kp", cov), 0.0)
    sd = np.sqrt(var)
    isd = 1.0 / np.where(sd > 0, sd, 1.0)                        # [k, p]
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
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = (yc[:, None, :] - fitted) / (1.0 - hat)
    loo = np.where(W[:, None, :] > 0, loo, 0.0)                 # held-out rows are not in the LOO error
    best = np.argmin(np.einsum("kan,kn->ka", loo**2, W) / N[:, None], axis=1)
    return fitted[np.arange(k), best] + y_mean[:, None]


def weighted_cross_fit(X, y, weights, fold, n_folds: int) -> np.ndarray:
    """Held-out predictions of every row: row ``i`` (``weights[i]`` copies, in fold ``fold[i]``) is
    predicted by the ridge fitted on the other folds' rows with their weights.

    Falls back to ``FastRidgeCV`` fold by fold on the expanded rows when ``X`` has a gap (the
    training medians are those of the expanded column)."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    w, fold = np.asarray(weights, dtype=np.float64), np.asarray(fold)
    ks = np.unique(fold)
    if ks.size < 2:
        raise ValueError("cross-fitting needs at least 2 folds")
    if X.shape[1] == 0:
        pred = np.empty_like(y)
        for f in ks:
            tr = fold != f
            pred[fold == f] = np.sum(w[tr] * y[tr]) / np.sum(w[tr])
        return pred
    if not np.isfinite(X).all():
        return _expanded_cross_fit(X, y, w, fold, ks)
    P = _stacked_fit(X, y, w, fold, ks)
    return P[np.searchsorted(ks, fold), np.arange(y.size)]


def _expanded_cross_fit(X, y, w, fold, ks) -> np.ndarray:
    from numeric.study.fit import FastRidgeCV

    reps = w.astype(np.int64)
    pred = np.empty_like(y)
    for f in ks:
        tr = np.repeat(np.flatnonzero(fold != f), reps[fold != f])
        te = fold == f
        pred[te] = FastRidgeCV().fit(X[tr], y[tr]).predict(X[te])
    return pred


def weighted_mae(y, pred, weights) -> float:
    """Mean absolute error over the expanded rows (row ``i`` counted ``weights[i]`` times)."""
    w = np.asarray(weights, dtype=np.float64)
    return float(np.sum(w * np.abs(np.asarray(y) - np.asarray(pred))) / np.sum(w))

"""The study's model and its cross-fitting over clusters.

The model is a calibrated linear model: median imputation, standardised
features, ridge regression whose penalty is chosen on the training fold by
efficient leave-one-out cross-validation over ``ALPHAS`` (scikit-learn's
``RidgeCV`` estimator). ``make_model`` is that scikit-learn pipeline;
``FastRidgeCV`` is the same estimator in closed form from one SVD, because the
bootstrap refits it about 10^5 times and the pipeline costs tens of
milliseconds a fit on this machine (``tests/test_study_stats.py`` checks the
two agree). Cross-fitting is GroupKFold over clusters
(sources, or heads for leave-one-head-out): no cluster is ever in both the
training and the test part of a fold.

>>> import numpy as np
>>> x = np.arange(12.0)[:, None]; g = np.repeat(np.arange(4), 3)
>>> p = cross_fit(x, 2 * x[:, 0] + 1, g, 4).pred
>>> bool(np.allclose(p, 2 * x[:, 0] + 1, atol=0.05))
True
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.impute import SimpleImputer
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

__all__ = ["ALPHAS", "FOLDS", "REL_TOL", "CrossFit", "FastRidgeCV", "make_model", "cross_fit", "fold_indices",
           "mae", "negligible"]

#: Ridge penalties tried by the inner cross-validation: 1e-3 .. 1e4, half-decades.
ALPHAS = tuple(10.0 ** (k / 2) for k in range(-6, 9))
#: Outer folds of the source cross-fitting (16 sources: 4 per fold).
FOLDS = 4
#: A column whose spread is at most this fraction of its scale is constant (rounding residue, not
#: variation): it is left out of the fit instead of being divided by an sd of 1e-17.
REL_TOL = 1e-9


def negligible(sd, scale) -> np.ndarray:
    """Where a column's spread ``sd`` is rounding residue relative to its ``scale`` (largest
    magnitude, or its spread before within-head demeaning): ``sd <= REL_TOL * scale``.

    >>> negligible(np.array([1e-17, 0.5, 0.0]), np.array([1.0, 1.0, 0.0])).tolist()
    [True, False, True]
    """
    return np.asarray(sd) <= REL_TOL * np.asarray(scale)


def make_model():
    """Median imputation, standardisation, ridge with the penalty chosen by inner (LOO) CV."""
    return make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True), StandardScaler(),
                         RidgeCV(alphas=ALPHAS))


class FastRidgeCV:
    """Median imputation, standardisation and ridge with the leave-one-out-best
    penalty of ``ALPHAS``, the intercept unpenalised (as ``make_model``); ``alphas``: other
    penalties to choose from (one: a fixed penalty, the domain transfer's deletions)."""

    def __init__(self, alphas=None):
        self.alphas = ALPHAS if alphas is None else tuple(alphas)

    def fit(self, X: np.ndarray, y: np.ndarray, copies=None) -> "FastRidgeCV":
        """``copies[i]``: how many rows of ``X`` are copies of row ``i`` (a bootstrap draw); the
        inner leave-one-out leaves all copies of a row out together (divisor ``1 - copies * hat``)."""
        X = np.asarray(X, dtype=np.float64)
        self.median_ = np.zeros(X.shape[1])
        for j in np.flatnonzero(~np.isfinite(X).all(axis=0)):   # only columns with a gap
            ok = X[np.isfinite(X[:, j]), j]
            self.median_[j] = np.median(ok) if ok.size else 0.0
        X = self._impute(X)
        self.mean_ = X.mean(axis=0)
        sd = X.std(axis=0)
        flat = negligible(sd, np.abs(X).max(axis=0, initial=0.0))
        self.scale_ = np.where(flat, np.inf, sd)              # a constant column: Z = 0, no coefficient
        Z = (X - self.mean_) / self.scale_
        self.y_mean_ = float(y.mean())
        yc = y - self.y_mean_
        lam, V = np.linalg.eigh(Z.T @ Z)                       # Z^T Z = V diag(lam) V^T, lam = s^2
        lam = np.maximum(lam, 0.0)
        ZV = Z @ V                                             # = U diag(s): no division by small s
        vty = ZV.T @ yc
        inv = 1.0 / (lam + np.asarray(self.alphas)[:, None])   # [alpha, k]
        hat = inv @ (ZV**2).T + 1.0 / y.size                   # leverage, intercept included
        c = 1.0 if copies is None else np.asarray(copies, dtype=np.float64)
        loo = (yc - (inv * vty) @ ZV.T) / (1.0 - c * hat)
        best = int(np.argmin(np.mean(loo**2, axis=1)))
        self.alpha_ = self.alphas[best]
        self.coef_ = V @ (inv[best] * vty)
        return self

    def _impute(self, X: np.ndarray) -> np.ndarray:
        ok = np.isfinite(X)
        return X if ok.all() else np.where(ok, X, self.median_)

    def predict(self, X: np.ndarray) -> np.ndarray:
        Z = (self._impute(np.asarray(X, dtype=np.float64)) - self.mean_) / self.scale_
        return Z @ self.coef_ + self.y_mean_


@dataclass(frozen=True)
class CrossFit:
    """Held-out predictions (one per row), and those of ``X_alt`` through the same fitted models."""

    pred: np.ndarray
    pred_alt: np.ndarray | None


def fold_indices(groups, n_folds: int) -> list:
    """``[(train, test)]`` of GroupKFold over ``groups`` (at most one fold per cluster)."""
    groups = np.asarray(groups)
    k = min(n_folds, np.unique(groups).size)
    if k < 2:
        raise ValueError("cross-fitting needs at least 2 clusters")
    return list(GroupKFold(n_splits=k).split(np.zeros(groups.size), groups=groups))


def cross_fit(X, y, groups, n_folds: int = FOLDS, X_alt=None) -> CrossFit:
    """Cross-fitted predictions of ``y`` from ``X``, clusters ``groups`` kept whole."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    pred = np.empty_like(y)
    alt = None if X_alt is None else np.empty_like(y)
    for train, test in fold_indices(groups, n_folds):
        if X.shape[1] == 0:
            pred[test] = y[train].mean()
            continue
        m = FastRidgeCV().fit(X[train], y[train])
        pred[test] = m.predict(X[test])
        if alt is not None:
            alt[test] = m.predict(np.asarray(X_alt, dtype=np.float64)[test])
    return CrossFit(pred, alt)


def mae(y, pred) -> float:
    """Mean absolute error."""
    return float(np.mean(np.abs(np.asarray(y) - np.asarray(pred))))

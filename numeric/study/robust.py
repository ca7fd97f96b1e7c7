"""The gradient-boosted robustness check (issue 15 item 3, optional; ``--gbm N``).

The primary comparison and its intrinsic counterpart (``GBM_COMPARISONS``)
refitted with scikit-learn's ``HistGradientBoostingRegressor`` (default
settings, ``random_state`` the study's seed; it handles gaps natively)
instead of the calibrated ridge: the same per-family source cross-fitting,
the same Delta and rho, and a source-cluster bootstrap of ``N`` resamples
whose draws are the first ``N`` draws of the ridge bootstrap (same seed).
A nonlinear model that finds a gain the ridge misses would show here.
"""
from __future__ import annotations

import numpy as np

from numeric.study.compare import (ComparisonResult, Estimate, _gains, _interval, resample_rows)
from numeric.study.data import StudyData
from numeric.study.fit import FOLDS, fold_indices, mae

__all__ = ["GBM_COMPARISONS", "gbm_model", "gbm_check"]

#: The comparisons refitted with the boosted model.
GBM_COMPARISONS = ("B1 vs B1+G", "B1 vs B1+I")


def gbm_model(seed: int):
    """The boosted regressor (scikit-learn defaults, seeded)."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(random_state=seed)


def _maes(data: StudyData, rows: np.ndarray, cols: tuple, folds: int, seed: int) -> dict:
    """``{family: held-out MAE}`` of the boosted model on ``cols`` (source folds, expanded rows)."""
    out = {}
    for f in np.unique(data.families[rows]):
        r = rows[data.families[rows] == f]
        X, y = data.matrix(cols, r), data.y[r]
        pred = np.empty_like(y)
        for train, test in fold_indices(data.sources[r], folds):
            pred[test] = gbm_model(seed).fit(X[train], y[train]).predict(X[test])
        out[f] = mae(y, pred)
    return out


def _one(data, rows, comps, folds, seed) -> list:
    cache = {}
    out = []
    for c in comps:
        for cols in (c.base, c.base + c.added):
            if cols not in cache:
                cache[cols] = _maes(data, rows, cols, folds, seed)
        out.append(_gains(cache[c.base], cache[c.base + c.added]))
    return out


def gbm_check(data: StudyData, comparisons, *, replicates: int, seed: int, folds: int = FOLDS) -> list:
    """``ComparisonResult`` of each of ``GBM_COMPARISONS`` among ``comparisons`` under the boosted model."""
    comps = [c for c in comparisons if c.name in GBM_COMPARISONS]
    rng = np.random.default_rng(seed)
    draws = [resample_rows(data, rng) for _ in range(replicates)]
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):   # OpenMP threads of the booster only contend on small tables
        point = _one(data, np.arange(len(data)), comps, folds, seed)
        boot = [_one(data, rows, comps, folds, seed) for rows in draws]
    results = []
    for i, c in enumerate(comps):
        est = {}
        for f, (mb, ma, d, rho) in point[i].items():
            est[f] = Estimate(mb, ma, d, rho, _interval([b[i][f][2] for b in boot if f in b[i]]),
                              _interval([b[i][f][3] for b in boot if f in b[i]]))
        results.append(ComparisonResult(c, est, replicates, seed))
    return results

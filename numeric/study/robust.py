"""The gradient-boosted robustness check (optional; ``--gbm N``).

The primary comparison and its intrinsic counterpart (``GBM_COMPARISONS``)
refitted with scikit-learn's ``HistGradientBoostingRegressor`` (default
settings, ``random_state`` the study's seed; it handles gaps natively)
instead of the calibrated ridge: the same per-family source cross-fitting,
the same Delta and rho (aggregate: the mean of the family values), the same
calibrated interval on the paired held-out losses
(``numeric.study.intervals``), and as the secondary row a source-cluster
bootstrap of ``N`` resamples whose draws are the first ``N`` draws of the
ridge bootstrap (same seed, same stream). A nonlinear model that finds a gain
the ridge misses would show here.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from numeric.runtime import one_native_thread
from numeric.study.compare import AGGREGATE, ComparisonResult, _gains, _percentile, resample_rows, stream
from numeric.study.data import StudyData
from numeric.study.fit import FOLDS, fold_indices
from numeric.study.intervals import paired_estimates

__all__ = ["GBM_COMPARISONS", "gbm_model", "gbm_check"]

#: The comparisons refitted with the boosted model.
GBM_COMPARISONS = ("B1 vs B1+G", "B1 vs B1+I")


def gbm_model(seed: int):
    """The boosted regressor (scikit-learn defaults, seeded)."""
    return HistGradientBoostingRegressor(random_state=seed)


def _losses(data: StudyData, rows: np.ndarray, cols: tuple, folds: int, seed: int) -> dict:
    """``{family: held-out absolute errors}`` of the boosted model on ``cols`` (source folds, the
    rows as given: a bootstrap draw's copies are rows)."""
    out = {}
    for f in np.unique(data.families[rows]):
        r = rows[data.families[rows] == f]
        X, y = data.matrix(cols, r), data.y[r]
        pred = np.empty_like(y)
        for train, test in fold_indices(data.sources[r], folds):
            pred[test] = gbm_model(seed).fit(X[train], y[train]).predict(X[test])
        out[f] = np.abs(y - pred)
    return out


def _one(data, rows, comps, folds, seed) -> list:
    cache = {}
    out = []
    for c in comps:
        for cols in (c.base, c.base + c.added):
            if cols not in cache:
                cache[cols] = _losses(data, rows, cols, folds, seed)
        maes = [{f: float(v.mean()) for f, v in cache[cols].items()} for cols in (c.base, c.base + c.added)]
        out.append((_gains(*maes), cache[c.base], cache[c.base + c.added]))
    return out


def gbm_check(data: StudyData, comparisons, *, replicates: int, seed: int, folds: int = FOLDS) -> list:
    """``ComparisonResult`` of each of ``GBM_COMPARISONS`` among ``comparisons`` under the boosted model."""
    comps = [c for c in comparisons if c.name in GBM_COMPARISONS]
    rng = stream(seed, 0)
    draws = [resample_rows(data, rng) for _ in range(replicates)]
    everything = np.arange(len(data))
    with one_native_thread():   # OpenMP threads of the booster only contend on small tables
        point = _one(data, everything, comps, folds, seed)
        boot = [_one(data, rows, comps, folds, seed) for rows in draws]
    results = []
    for i, c in enumerate(comps):
        _, base, aug = point[i]
        l0, l1 = np.full(len(data), np.nan), np.full(len(data), np.nan)
        for f in base:
            m = data.families == f
            l0[m], l1[m] = base[f], aug[f]
        est = paired_estimates(l0, l1, data.families, data.sources, AGGREGATE)
        for f in est:
            ds = [b[i][0][f][2] for b in boot if f in b[i][0]]
            rs = [b[i][0][f][3] for b in boot if f in b[i][0]]
            if ds:
                est[f] = replace(est[f], boot_delta_ci=_percentile(ds), boot_rho_ci=_percentile(rs))
        results.append(ComparisonResult(c, est, replicates, seed))
    return results

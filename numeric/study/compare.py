"""Held-out comparisons ``base`` vs ``base + block`` with a source-cluster bootstrap.

For each family separately the base model and the augmented model are
cross-fitted (``numeric.study.fit``); the gain is ``Delta = MAE(base) -
MAE(base + block)`` and ``rho = Delta / MAE(base)``. The aggregate weights
the families equally: ``Delta = mean_f Delta_f`` and ``rho = Delta / mean_f
MAE_f(base)``. The 95% intervals come from resampling sources with
replacement (the same draw for every family), refitting and recomputing
Delta and rho; copies of a drawn source share its label, so they stay in one
fold. Everything is a function of the data and the seed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numeric.geometry.blas import one_blas_thread
from numeric.study.data import StudyData
from numeric.study.fit import FOLDS, cross_fit, mae

__all__ = ["Comparison", "Estimate", "ComparisonResult", "family_maes", "compare", "resample_rows",
           "AGGREGATE", "LEVEL"]

#: Label of the equally weighted aggregate over families.
AGGREGATE = "aggregate"
#: Two-sided coverage of the percentile intervals.
LEVEL = 0.95


@dataclass(frozen=True)
class Comparison:
    """``base`` vs ``base + added`` (column tuples); ``clusters`` "source" (GroupKFold) or
    "head" (leave one head out); ``demean``: subtract each head's mean from y and X first."""

    name: str
    base: tuple
    added: tuple
    clusters: str = "source"
    demean: bool = False

    def specs(self) -> tuple:
        return ((self.base, self.clusters, self.demean), (self.base + self.added, self.clusters, self.demean))


@dataclass(frozen=True)
class Estimate:
    mae_base: float
    mae_aug: float
    delta: float
    rho: float
    delta_ci: tuple
    rho_ci: tuple


@dataclass(frozen=True)
class ComparisonResult:
    comparison: Comparison
    estimates: dict          # family (and AGGREGATE) -> Estimate
    replicates: int
    seed: int


def _demeaned(v: np.ndarray, heads: np.ndarray) -> np.ndarray:
    out = np.array(v, dtype=np.float64, copy=True)
    for h in np.unique(heads):
        sel = heads == h
        out[sel] -= out[sel].mean(axis=0)
    return out


def family_maes(data: StudyData, rows: np.ndarray, spec: tuple, folds: int = FOLDS) -> dict:
    """``{family: held-out MAE}`` of the model ``spec = (cols, clusters, demean)`` on ``rows``."""
    cols, clusters, demean = spec
    out = {}
    for f in np.unique(data.families[rows]):
        r = rows[data.families[rows] == f]
        X, y, heads = data.matrix(cols, r), data.y[r], data.heads[r]
        if demean:
            X, y = _demeaned(X, heads), _demeaned(y, heads)
        groups = heads if clusters == "head" else data.sources[r]
        k = np.unique(heads).size if clusters == "head" else folds
        out[f] = mae(y, cross_fit(X, y, groups, k).pred)
    return out


def _gains(base: dict, aug: dict) -> dict:
    """``{family or AGGREGATE: (mae_base, mae_aug, delta, rho)}``."""
    out = {f: (base[f], aug[f], base[f] - aug[f], (base[f] - aug[f]) / base[f] if base[f] else 0.0)
           for f in base}
    mb, ma = np.mean([base[f] for f in base]), np.mean([aug[f] for f in base])
    out[AGGREGATE] = (float(mb), float(ma), float(mb - ma), float((mb - ma) / mb) if mb else 0.0)
    return out


def resample_rows(data: StudyData, rng: np.random.Generator) -> np.ndarray:
    """Rows of one bootstrap draw of sources (with replacement; at least 2 distinct)."""
    uniq = np.unique(data.sources)
    while True:
        draw = rng.choice(uniq, size=uniq.size, replace=True)
        if np.unique(draw).size >= 2:
            break
    return np.concatenate([np.flatnonzero(data.sources == s) for s in draw])


def _replicate(data, rows, comparisons, folds) -> list:
    cache = {}
    out = []
    for c in comparisons:
        maes = []
        for spec in c.specs():
            if spec not in cache:
                cache[spec] = family_maes(data, rows, spec, folds)
            maes.append(cache[spec])
        out.append(_gains(*maes))
    return out


def _interval(values) -> tuple:
    a = (1 - LEVEL) / 2
    lo, hi = np.percentile(np.asarray(values, dtype=np.float64), [100 * a, 100 * (1 - a)])
    return float(lo), float(hi)


def _replicates(data, comparisons, folds, draws) -> list:
    with one_blas_thread():   # small matrices: threads only contend
        return [_replicate(data, rows, comparisons, folds) for rows in draws]


def compare(data: StudyData, comparisons, *, replicates: int, seed: int, folds: int = FOLDS,
            jobs: int = 1) -> list:
    """Point estimates and bootstrap intervals of every comparison (one shared draw per replicate).

    The draws are made up front from ``seed``, so ``jobs`` (processes) does not change the answer."""
    if replicates < 1:
        raise ValueError("the bootstrap needs at least one replicate")
    rng = np.random.default_rng(seed)
    draws = [resample_rows(data, rng) for _ in range(replicates)]
    point = _replicates(data, comparisons, folds, [np.arange(len(data))])[0]
    if jobs > 1:
        from joblib import Parallel, delayed

        chunks = [draws[i::jobs] for i in range(jobs)]
        parts = Parallel(n_jobs=jobs)(delayed(_replicates)(data, comparisons, folds, c) for c in chunks)
        boot = [parts[i % jobs][i // jobs] for i in range(replicates)]
    else:
        boot = _replicates(data, comparisons, folds, draws)
    results = []
    for i, c in enumerate(comparisons):
        est = {}
        for f, (mb, ma, d, rho) in point[i].items():
            ds = [b[i][f][2] for b in boot if f in b[i]]
            rs = [b[i][f][3] for b in boot if f in b[i]]
            est[f] = Estimate(mb, ma, d, rho, _interval(ds), _interval(rs))
        results.append(ComparisonResult(c, est, replicates, seed))
    return results

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
from numeric.study.batch import complete_fits, weighted_cross_fit, weighted_mae
from numeric.study.fit import FOLDS, fold_indices

__all__ = ["Comparison", "Estimate", "ComparisonResult", "family_maes", "compare", "resample_rows",
           "AGGREGATE", "LEVEL"]

#: Label of the equally weighted aggregate over families.
AGGREGATE = "aggregate"
#: Two-sided coverage of the percentile intervals.
LEVEL = 0.95
#: Fewest bootstrap draws worth a process of their own.
MIN_PER_JOB = 50


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


class _Cache:
    """Per-process reuse: each spec's design matrix over all rows (built once, then indexed by a
    draw's rows) and, within one draw, each family's folds (``folds``: the same for every spec)
    and the fits of every fold (``fits``), from which a model with more columns is bordered."""

    def __init__(self, data: StudyData):
        self.data, self.mats = data, {}
        self.new_draw()

    def new_draw(self) -> None:
        self.folds, self.fits = {}, {}

    def matrix(self, cols, rows):
        if cols not in self.mats:
            self.mats[cols] = self.data.matrix(cols)
        return self.mats[cols][rows]


def _draw_folds(groups: np.ndarray, k: int, inverse: np.ndarray, n_unique: int) -> np.ndarray:
    """The fold of every distinct row: GroupKFold over the expanded rows' ``groups`` (copies of a
    source share its label, so all copies of a row share a fold)."""
    fold = np.empty(n_unique, dtype=np.int64)
    for f, (_, test) in enumerate(fold_indices(groups, k)):
        fold[inverse[test]] = f
    return fold


def family_maes(data: StudyData, rows: np.ndarray, spec: tuple, folds: int = FOLDS, cache=None) -> dict:
    """``{family: held-out MAE}`` of the model ``spec = (cols, clusters, demean)`` on ``rows``
    (a draw: a row may repeat). Computed on the draw's distinct rows weighted by their copies
    (``numeric.study.batch``), the same estimator as on the expanded rows.

    ``cache``: a ``_Cache`` of ``data`` whose fold memory belongs to this ``rows`` (one draw)."""
    cols, clusters, demean = spec
    cache = cache or _Cache(data)
    out = {}
    for f in np.unique(data.families[rows]):
        r = rows[data.families[rows] == f]
        uniq, inverse = np.unique(r, return_inverse=True)
        w = np.bincount(inverse).astype(np.float64)
        y, heads = data.y[uniq], data.heads[uniq]
        if demean:
            y = _weighted_demeaned(y, heads, w)

        def design(c, uniq=uniq, heads=heads, w=w):   # the draw's matrix of columns c (demeaned with y)
            X = cache.matrix(c, uniq)
            return _weighted_demeaned(X, heads, w) if demean else X

        groups = data.heads[r] if clusters == "head" else data.sources[r]
        k = np.unique(heads).size if clusters == "head" else folds
        key = (f, clusters, k)
        if key not in cache.folds:
            cache.folds[key] = _draw_folds(groups, k, inverse, uniq.size)
        fold = cache.folds[key]
        out[f] = weighted_mae(y, _held_out(cache, key + (demean,), cols, design, y, w, fold, k), w)
    return out


def _held_out(cache, key, cols, design, y, w, fold, k) -> np.ndarray:
    """``weighted_cross_fit(design(cols), y, w, fold, k)``; when the fits of a model with a subset
    of ``cols`` are cached under ``key`` (same draw, family, folds, demeaning), ``cols`` is that
    model bordered with the other columns (``FoldFits.bordered``: no eigendecomposition)."""
    fits = cache.fits.setdefault(key, [])
    bases = [(c, fit) for c, fit in fits if c < set(cols)]
    if bases:
        base_cols, base = max(bases, key=lambda b: len(b[0]))
        Xa = design(tuple(c for c in cols if c not in base_cols))
        if np.isfinite(Xa).all():
            return base.bordered(Xa).held_out()
    X = design(cols)
    fit = complete_fits(X, y, w, fold)
    if fit is None:
        return weighted_cross_fit(X, y, w, fold, k)
    fits.append((frozenset(cols), fit))
    return fit.held_out()


def _weighted_demeaned(v: np.ndarray, heads: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``v`` minus its head's mean over the expanded rows (row ``i`` counted ``w[i]`` times)."""
    v = np.asarray(v, dtype=np.float64)
    _, inv = np.unique(heads, return_inverse=True)
    total = np.bincount(inv, weights=w)
    if v.ndim == 1:
        return v - (np.bincount(inv, weights=w * v) / total)[inv]
    sums = np.zeros((total.size, v.shape[1]))
    np.add.at(sums, inv, w[:, None] * v)
    return v - (sums / total[:, None])[inv]


def _gains(base: dict, aug: dict) -> dict:
    """``{family or AGGREGATE: (mae_base, mae_aug, delta, rho)}``."""
    out = {f: (base[f], aug[f], base[f] - aug[f], (base[f] - aug[f]) / base[f] if base[f] else 0.0)
           for f in base}
    mb, ma = np.mean([base[f] for f in base]), np.mean([aug[f] for f in base])
    out[AGGREGATE] = (float(mb), float(ma), float(mb - ma), float((mb - ma) / mb) if mb else 0.0)
    return out


#: Draws tried before the bootstrap gives up on keeping 2 sources in every family.
MAX_REDRAWS = 10_000


def resample_rows(data: StudyData, rng: np.random.Generator) -> np.ndarray:
    """Rows of one bootstrap draw of sources (with replacement).

    Every family keeps at least 2 distinct sources (or all it has, if fewer): a draw that
    leaves a family one source cannot be cross-fitted, so it is drawn again (families with
    disjoint sources, such as text and images, make such draws common)."""
    uniq = np.unique(data.sources)
    need = [(set(data.sources[data.families == f]), min(2, np.unique(data.sources[data.families == f]).size))
            for f in np.unique(data.families)]
    for _ in range(MAX_REDRAWS):
        draw = rng.choice(uniq, size=uniq.size, replace=True)
        got = set(draw)
        if np.unique(draw).size >= 2 and all(len(fs & got) >= k for fs, k in need):
            return np.concatenate([np.flatnonzero(data.sources == s) for s in draw])
    raise ValueError(f"no bootstrap draw in {MAX_REDRAWS} keeps 2 sources in every family: "
                     f"give each family more sources")


def _replicate(data, rows, comparisons, folds, mats: _Cache) -> list:
    cache = {}
    mats.new_draw()   # folds and fits belong to one draw
    out = []
    for c in comparisons:
        maes = []
        for spec in c.specs():
            if spec not in cache:
                cache[spec] = family_maes(data, rows, spec, folds, mats)
            maes.append(cache[spec])
        out.append(_gains(*maes))
    return out


def _interval(values) -> tuple:
    a = (1 - LEVEL) / 2
    lo, hi = np.percentile(np.asarray(values, dtype=np.float64), [100 * a, 100 * (1 - a)])
    return float(lo), float(hi)


#: glibc's ``mallopt`` parameters: the size from which a block gets its own mapping, and the
#: free top of the heap kept before it is given back.
_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD = -3, -1


def _keep_freed_memory() -> None:
    """Let glibc reuse freed blocks up to 64 MiB instead of unmapping them.

    A bootstrap fit allocates temporaries of about a megabyte, above glibc's default mapping
    threshold, and frees them at once: without this, a fifth of the study's time went to the
    kernel mapping and unmapping them (``bench/study_speed.py``). Not glibc: nothing to do."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 64 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 128 << 20)
    except (OSError, AttributeError):
        pass


def _replicates(data, comparisons, folds, draws) -> list:
    _keep_freed_memory()
    with one_blas_thread():   # small matrices: threads only contend
        mats = _Cache(data)
        return [_replicate(data, rows, comparisons, folds, mats) for rows in draws]


def compare(data: StudyData, comparisons, *, replicates: int, seed: int, folds: int = FOLDS,
            jobs: int = 1) -> list:
    """Point estimates and bootstrap intervals of every comparison (one shared draw per replicate).

    The draws are made up front from ``seed``, so ``jobs`` (processes) does not change the answer."""
    if replicates < 1:
        raise ValueError("the bootstrap needs at least one replicate")
    rng = np.random.default_rng(seed)
    draws = [resample_rows(data, rng) for _ in range(replicates)]
    point = _replicates(data, comparisons, folds, [np.arange(len(data))])[0]
    jobs = min(jobs, max(1, replicates // MIN_PER_JOB))   # a process per few draws costs more than it saves
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

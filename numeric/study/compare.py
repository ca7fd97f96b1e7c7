"""Held-out comparisons ``base`` vs ``base + block`` (calibrated: docs/study.md).

For each family separately the base model and the augmented model are
cross-fitted (``numeric.study.fit``); the gain is ``Delta = MAE(base) -
MAE(base + block)`` and ``rho = Delta / MAE(base)``. The aggregate is the
plain mean of the family values (``rho = mean_f rho_f``: families weigh the
same whatever their target scale). The primary 95% intervals are
cluster-robust intervals on the point fit's paired held-out losses
(``numeric.study.intervals``; sources, or heads and sources for
leave-one-head-out), calibrated by simulation (``numeric.study.calibrate``).

Placebo comparisons (``Comparison.placebo``) add the block permuted
(``permuted``: rows within a family, head means between heads, or within each
head across its sources), ``PERMUTATIONS`` times from their own random
stream; their estimate is the mean over the permutations (a linear statistic:
its interval is the same cluster-robust interval on the averaged losses).

The secondary, conservative row is the percentile source-cluster bootstrap
(``replicates`` > 0): draws of sources with replacement, stratified by
source pool, refit, recompute; for the source-fold comparisons without
demeaning or placebo. Everything is a function of the data and the seed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from joblib import Parallel, delayed
import numpy as np

from numeric.runtime import keep_freed_memory, one_blas_thread
from numeric.study.data import StudyData
from numeric.study.caution import CALIBRATED_SOURCES, COVERAGE_FLOOR, SE_SD_FLOOR
from numeric.study.batch import FoldFits, complete_fits, weighted_cross_fit, weighted_mae
from numeric.study.demean import fold_demeaned
from numeric.study.fit import FOLDS, FastRidgeCV, fold_indices
from numeric.study.intervals import LEVEL, Estimate, paired_estimates
from numeric.study.loho import descriptive_reason, loho_estimates
from numeric.study.placebo import PLACEBO_MODES, permuted

__all__ = ["Comparison", "Estimate", "ComparisonResult", "family_maes", "compare", "resample_rows",
           "heldout_losses", "permuted", "source_pools", "stream", "shape_reason",
           "AGGREGATE", "LEVEL", "PERMUTATIONS", "MIN_SOURCES", "MIN_HEADS", "CALIBRATED_SOURCES",
           "calibration_caution"]

#: Label of the equally weighted aggregate over families.
AGGREGATE = "aggregate"
#: Fewest bootstrap draws worth a process of their own.
MIN_PER_JOB = 50
#: Permutations of a placebo block (a distribution, not one draw).
PERMUTATIONS = 20
#: Source cross-fitting needs at least this many sources in every family.
MIN_SOURCES = 4
#: Head analyses (demeaning, leave one head out, head-level placebos) need this many heads per family.
MIN_HEADS = 2


@dataclass(frozen=True)
class Comparison:
    """``base`` vs ``base + added`` (column tuples); ``clusters`` "source" (GroupKFold) or
    "head" (leave one head out); ``demean``: within-head demeaned (``numeric.study.demean``);
    ``placebo``: "" or one of ``PLACEBO_MODES`` (the added block permuted)."""

    name: str
    base: tuple
    added: tuple
    clusters: str = "source"
    demean: bool = False
    placebo: str = ""

    def specs(self) -> tuple:
        return ((self.base, self.clusters, self.demean), (self.base + self.added, self.clusters, self.demean))

    def bootstrapped(self) -> bool:
        """Whether the secondary bootstrap runs for it (source folds, no demeaning, no placebo)."""
        return self.clusters == "source" and not self.demean and not self.placebo


@dataclass(frozen=True)
class ComparisonResult:
    """``estimates``: family (and AGGREGATE) -> Estimate, empty with a one-line ``reason`` when the
    panel is too small for this comparison; ``placebo``: for a placebo row, the number of
    permutations and how many of them alone had a lower limit > 0 (on rho); ``note``: why a row's
    intervals are descriptive only (leave one head out with too few heads, ``numeric.study.loho``)."""

    comparison: Comparison
    estimates: dict
    replicates: int
    seed: int
    reason: str | None = None
    placebo: dict | None = None
    note: str | None = None


class _Cache:
    """Per-process reuse: each spec's design matrix over all rows (built once, then indexed by a
    draw's rows) and, within one draw, each family's folds (``folds``: the same for every spec)
    and the fits of every fold (``fits``), from which a model with more columns is bordered."""

    def __init__(self, data: StudyData):
        self.data, self.mats = data, dict[tuple[str, ...], np.ndarray]()
        self.new_draw()

    def new_draw(self) -> None:
        self.folds, self.fits = dict[tuple, np.ndarray](), dict[tuple, list[tuple[frozenset[str], FoldFits]]]()

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
    (a bootstrap draw: a row may repeat). Computed on the draw's distinct rows weighted by their
    copies (``numeric.study.batch``), the same estimator as on the expanded rows with the inner
    leave-one-out leaving all copies of a row out. No demeaning here (the bootstrap runs only
    for comparisons without it: ``Comparison.bootstrapped``).

    ``cache``: a ``_Cache`` of ``data`` whose fold memory belongs to this ``rows`` (one draw)."""
    cols, clusters, demean = spec
    if demean:
        raise ValueError("the bootstrap does not refit demeaned models")
    cache = cache or _Cache(data)
    out = {}
    for f in np.unique(data.families[rows]):
        r = rows[data.families[rows] == f]
        uniq, inverse = np.unique(r, return_inverse=True)
        w = np.bincount(inverse).astype(np.float64)
        y, heads = data.y[uniq], data.heads[uniq]

        def design(c, uniq=uniq):   # the draw's matrix of columns c
            return cache.matrix(c, uniq)

        groups = data.heads[r] if clusters == "head" else data.sources[r]
        k = np.unique(heads).size if clusters == "head" else folds
        key = (f, clusters, k)
        if key not in cache.folds:
            cache.folds[key] = _draw_folds(groups, k, inverse, uniq.size)
        fold = cache.folds[key]
        out[f] = weighted_mae(y, _held_out(cache, key, cols, design, y, w, fold=fold, k=k), w)
    return out


def _held_out(cache, key, cols, design, y, w, *, fold, k) -> np.ndarray:
    """``weighted_cross_fit(design(cols), y, w, fold, k)``; when the fits of a model with a subset
    of ``cols`` are cached under ``key`` (same draw, family, folds), ``cols`` is that
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


def _gains(base: dict, aug: dict) -> dict:
    """``{family or AGGREGATE: (mae_base, mae_aug, delta, rho)}``; the aggregate is the mean of the
    family values (rho: the mean of the family rhos)."""
    out: dict[str, tuple[float, ...]] = {
        f: (base[f], aug[f], base[f] - aug[f], (base[f] - aug[f]) / base[f] if base[f] else 0.0) for f in base}
    out[AGGREGATE] = tuple(float(np.mean([out[f][j] for f in base])) for j in range(4))
    return out


#: Draws tried before the bootstrap gives up on keeping 2 sources in every family.
MAX_REDRAWS = 10_000


def source_pools(data: StudyData) -> list:
    """The source pools: sets of sources linked by a family (text families share their windows,
    the image family has its own), sorted; a draw resamples each pool to its own size."""
    parent: dict[object, object] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for f in np.unique(data.families):
        srcs = np.unique(data.sources[data.families == f])
        for s in srcs:
            parent[find(s)] = find(srcs[0])
    pools: dict[object, list[str]] = {}
    for s in np.unique(data.sources):
        pools.setdefault(find(s), []).append(s)
    return sorted((np.array(sorted(p)) for p in pools.values()), key=lambda p: p[0])


def resample_rows(data: StudyData, rng: np.random.Generator) -> np.ndarray:
    """Rows of one bootstrap draw of sources with replacement, stratified by source pool (each
    pool drawn to its own size, so the image family gets as many picks as it has sources).

    Every family keeps at least 2 distinct sources (or all it has, if fewer): a draw that
    leaves a family one source cannot be cross-fitted, so it is drawn again."""
    pools = source_pools(data)
    need = [(set(data.sources[data.families == f]), min(2, np.unique(data.sources[data.families == f]).size))
            for f in np.unique(data.families)]
    for _ in range(MAX_REDRAWS):
        draw = np.concatenate([rng.choice(p, size=p.size, replace=True) for p in pools])
        got = set(draw)
        if np.unique(draw).size >= 2 and all(len(fs & got) >= k for fs, k in need):
            return np.concatenate([np.flatnonzero(data.sources == s) for s in draw])
    raise ValueError(f"no bootstrap draw in {MAX_REDRAWS} keeps 2 sources in every family: "
                     f"give each family more sources")


def stream(seed: int, *key: int) -> np.random.Generator:
    """The study's independent random streams (``SeedSequence`` spawn keys): ``stream(seed, 0)`` the
    bootstrap draws, ``stream(seed, 1 + m, j)`` placebo mode ``m``'s permutations of family ``j``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


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


def _percentile(values) -> tuple:
    a = (1 - LEVEL) / 2
    lo, hi = np.percentile(np.asarray(values, dtype=np.float64), [100 * a, 100 * (1 - a)])
    return float(lo), float(hi)


def _replicates(data, comparisons, folds, draws) -> list:
    keep_freed_memory()
    with one_blas_thread():   # small matrices: threads only contend
        mats = _Cache(data)
        return [_replicate(data, rows, comparisons, folds, mats) for rows in draws]


def bootstrap(data: StudyData, comparisons, *, replicates: int, seed: int, folds: int = FOLDS,
              jobs: int = 1) -> list:
    """Per comparison, ``{family or AGGREGATE: (delta interval, rho interval)}`` of the percentile
    source-cluster bootstrap (draws stratified by source pool from the seed's bootstrap stream,
    made up front, so ``jobs`` does not change the answer)."""
    if not comparisons:
        return []
    rng = stream(seed, 0)
    draws = [resample_rows(data, rng) for _ in range(replicates)]
    jobs = min(jobs, max(1, replicates // MIN_PER_JOB))   # a process per few draws costs more than it saves
    if jobs > 1:
        chunks = [draws[i::jobs] for i in range(jobs)]
        parts = Parallel(n_jobs=jobs)(delayed(_replicates)(data, comparisons, folds, c) for c in chunks)
        boot = [parts[i % jobs][i // jobs] for i in range(replicates)]
    else:
        boot = _replicates(data, comparisons, folds, draws)
    out = []
    for i in range(len(comparisons)):
        fams = set().union(*(b[i].keys() for b in boot))
        out.append({f: (_percentile([b[i][f][2] for b in boot if f in b[i]]),
                        _percentile([b[i][f][3] for b in boot if f in b[i]])) for f in fams})
    return out


# ---- the point fit and its calibrated intervals -------------------------------------------------

def heldout_losses(data: StudyData, r: np.ndarray, cols: tuple, clusters: str, demean: bool, folds: int = FOLDS,
                   *, extra: np.ndarray | None = None, jackknife: bool = False):
    """Absolute held-out errors of the rows ``r`` (one family) under the model on ``cols`` (and the
    extra columns ``extra [len(r), q]``), cross-fitted over sources (``folds`` folds) or heads
    (one fold per head); ``demean``: each fold demeaned by its training rows' head means.

    ``jackknife``: also ``(units, J)``, ``J[j, i]`` the error of row ``i`` with unit ``units[j]``
    (a source; a head for leave one head out) deleted (NaN on that unit's rows): the models of the
    folds that trained on it moved to first order at the same penalty and standardisation
    (``_deleted``)."""
    X = data.matrix(cols, r)
    if extra is not None:
        X = np.hstack([X, extra])
    y, heads = data.y[r], data.heads[r]
    src = data.sources[r]
    groups = heads if clusters == "head" else src
    k = np.unique(heads).size if clusters == "head" else folds
    loss = np.full(r.size, np.nan)
    labels, s_idx = np.unique(heads if clusters == "head" else src, return_inverse=True)   # deletion units
    J = None
    for train, test in fold_indices(groups, k):
        if demean:
            mask = np.zeros(r.size, dtype=bool)
            mask[train] = True
            Xd, yd = fold_demeaned(X, y, heads, mask)
        else:
            Xd, yd = X, y
        ok = train[np.isfinite(yd[train])]
        if Xd.shape[1] == 0:
            pred = np.full(test.size, yd[ok].mean())
            model = None
        else:
            model = FastRidgeCV().fit(Xd[ok], yd[ok])
            pred = model.predict(Xd[test])
        loss[test] = np.abs(yd[test] - pred)
        if jackknife:
            if J is None:
                J = np.empty((labels.size, r.size))
            J[:, test] = loss[test]
            for j, p in _deleted(model, Xd[ok], yd[ok], s_idx[ok], Xd[test]):
                J[j, test] = np.abs(yd[test] - p)
    if J is None:                   # no jackknife (with one, J is made at the first fold)
        return loss
    J[s_idx, np.arange(r.size)] = np.nan
    return loss, (labels, J)


def _deleted(model, X_tr, y_tr, groups_tr, X_te):
    """``(group, test predictions)`` of the fold's ridge without each training group's rows, to first
    order (the infinitesimal jackknife), penalty and standardisation fixed: with the augmented
    design ``D = [1, Z]`` and ``M = D^T D + diag(0, alpha)``, the coefficients move by
    ``-M^-1 D_g^T e_g`` (``e_g`` the group's in-sample residuals; the exact deletion has
    ``(I - D_g M^-1 D_g^T)^-1 e_g``, whose leverage factor inflates the variance 1.5-2x at the
    study's p/n, docs/study.md)."""
    if model is None:   # no columns: the prediction is the training mean
        for g in np.unique(groups_tr):
            m = groups_tr != g
            yield g, np.full(X_te.shape[0], y_tr[m].mean() if m.any() else np.nan)
        return
    with np.errstate(invalid="ignore"):
        Z = (model._impute(X_tr) - model.mean_) / model.scale_
        Zt = (model._impute(np.asarray(X_te, dtype=np.float64)) - model.mean_) / model.scale_
    Z, Zt = np.nan_to_num(Z), np.nan_to_num(Zt)
    D = np.hstack([np.ones((Z.shape[0], 1)), Z])
    Dt = np.hstack([np.ones((Zt.shape[0], 1)), Zt])
    pen = np.full(D.shape[1], model.alpha_)
    pen[0] = 0.0
    Minv = np.linalg.inv(D.T @ D + np.diag(pen))
    theta = np.concatenate([[model.y_mean_], model.coef_])
    e = y_tr - D @ theta
    for g in np.unique(groups_tr):
        m = groups_tr == g
        B = Minv @ D[m].T
        yield g, Dt @ (theta - B @ e[m])


def shape_reason(data: StudyData, c: Comparison) -> str | None:
    """A one-line reason why the panel is too small for ``c`` (None: it can run)."""
    for f in np.unique(data.families):
        m = data.families == f
        n_src, n_heads = np.unique(data.sources[m]).size, np.unique(data.heads[m]).size
        if c.clusters == "source" and n_src < MIN_SOURCES:
            return f"skipped: family {f} has {n_src} sources; source cross-fitting needs >= {MIN_SOURCES}"
        if (c.clusters == "head" or c.demean or c.placebo in ("heads", "within-head")) and n_heads < MIN_HEADS:
            return f"skipped: family {f} has {n_heads} head; a head analysis needs >= {MIN_HEADS}"
        if c.clusters == "head" and n_src < 2:
            return f"skipped: family {f} has {n_src} source; leave one head out clusters by source too (>= 2)"
    return None


def calibration_caution(data: StudyData) -> list[str]:
    """One line per family with fewer than ``CALIBRATED_SOURCES`` sources (empty: none): the study runs
    there, but the self-check's scan found its intervals short of coverage 0.94 or se/sd 0.9 there
    (``numeric.study.caution``).

    >>> d = StudyData.build({}, {}, [0.0] * 5, ["s0", "s1", "s2", "s3", "s0"], ["h"] * 5, ["a"] * 4 + ["b"])
    >>> calibration_caution(d)[0][:35]
    'family a has 4 sources, family b 1:'
    """
    few = [(f, np.unique(data.sources[data.families == f]).size) for f in np.unique(data.families)]
    few = [(str(f), int(n)) for f, n in few if n < CALIBRATED_SOURCES]
    if not few:
        return []
    names = ", ".join(f"family {f} has {n} sources" if i == 0 else f"family {f} {n}" for i, (f, n) in enumerate(few))
    return [f"{names}: below {CALIBRATED_SOURCES} sources a family, the intervals are not calibrated (the "
            f"self-check's scan: coverage below {COVERAGE_FLOOR} or se/sd below {SE_SD_FLOOR}); no equivalence "
            f"verdict; check this panel's shape with `python -m numeric study --calibrate DIR` before reading it"]


def _point(data: StudyData, c: Comparison, folds: int, rngs: dict, permutations: int, memo: dict):
    """The comparison's per-row losses ``(l0, l1)`` over all rows, the deletion losses ``(J0, J1)``
    (``[units, rows]``: sources, or heads for leave one head out), and for a placebo the per-row
    losses of every permutation (``l1`` and ``J1`` their means)."""
    jack = True
    labels = np.unique(data.heads if c.clusters == "head" else data.sources)
    n = len(data)

    def fit(r, f, cols, extra=None):
        out = heldout_losses(data, r, cols, c.clusters, c.demean, folds, extra=extra, jackknife=jack)
        if not jack:
            return out, None
        loss, (srcs, Jf) = out
        full = np.broadcast_to(loss, (labels.size, r.size)).copy()
        full[np.searchsorted(labels, srcs)] = Jf
        return loss, full

    def cached(r, f, cols):
        key = (f, cols, c.clusters, c.demean)
        if key not in memo:
            memo[key] = fit(r, f, cols)
        return memo[key]

    l0, l1 = np.full(n, np.nan), np.full(n, np.nan)
    J0 = np.full((labels.size, n), np.nan) if jack else None
    J1 = np.full((labels.size, n), np.nan) if jack else None
    per = np.full((permutations, n), np.nan) if c.placebo else None
    for f in np.unique(data.families):
        r = np.flatnonzero(data.families == f)
        l0[r], j0 = cached(r, f, c.base)
        if J0 is not None:              # jack
            J0[:, r] = j0
        if per is None:                 # not c.placebo
            l1[r], j1 = cached(r, f, c.base + c.added)
            if J1 is not None:
                J1[:, r] = j1
            continue
        block = data.matrix(c.added, r)
        rng = rngs[(c.placebo, f)]
        acc = np.zeros((labels.size, r.size)) if jack else None
        for k in range(permutations):
            lk, jk = fit(r, f, c.base, extra=permuted(block, data.heads[r], c.placebo, rng))
            per[k, r] = lk
            if acc is not None:         # jack
                acc += jk
        l1[r] = per[:, r].mean(axis=0)
        if J1 is not None and acc is not None:
            J1[:, r] = acc / permutations
    return l0, l1, (labels, J0, J1) if jack else None, per


#: The equivalence reading of a panel under the small-panel caution.
NO_EQUIVALENCE = "not shown (small panel)"


def _no_equivalence(est: dict) -> dict:
    """Under the small-panel caution no estimate reads "equivalent" ("different" stands)."""
    return {f: replace(e, equivalence=NO_EQUIVALENCE) if e.equivalence == "equivalent" else e for f, e in est.items()}


def _clusters(data: StudyData, c: Comparison):
    return [data.heads, data.sources] if c.clusters == "head" else data.sources


def compare(data: StudyData, comparisons, *, replicates: int = 0, seed: int, folds: int = FOLDS,
            jobs: int = 1, permutations: int = PERMUTATIONS) -> list:
    """Point estimates and calibrated intervals of every comparison, the placebos' permutation
    summaries, and (``replicates`` > 0) the secondary bootstrap's percentile intervals."""
    if replicates < 0:
        raise ValueError("replicates must be >= 0")
    if permutations < 1:
        raise ValueError("a placebo needs at least one permutation")
    memo: dict = {}
    results = []
    fams = list(np.unique(data.families))
    small = bool(calibration_caution(data))
    for c in comparisons:
        reason = shape_reason(data, c)
        if reason:
            results.append(ComparisonResult(c, {}, replicates, seed, reason))
            continue
        if c.clusters == "head" and not c.placebo:
            note = descriptive_reason(data)
            with one_blas_thread():
                est, _ = loho_estimates(data, c.base, c.base + c.added, demean=c.demean, folds=folds, memo=memo,
                                        losses=heldout_losses, aggregate=AGGREGATE, descriptive=note)
            results.append(ComparisonResult(c, _no_equivalence(est) if small else est, replicates, seed, None,
                                            None, note))
            continue
        # every placebo row of a mode sees the same permutations: its own stream per family
        rngs = {(c.placebo, f): stream(seed, 1 + PLACEBO_MODES.index(c.placebo), j)
                for j, f in enumerate(fams)} if c.placebo else {}
        with one_blas_thread():   # small matrices: threads only contend
            l0, l1, jack, per = _point(data, c, folds, rngs, permutations, memo)
        est = paired_estimates(l0, l1, data.families, _clusters(data, c), AGGREGATE, jack=jack)
        info = None
        if per is not None:
            hits = sum(paired_estimates(l0, p, data.families, _clusters(data, c), AGGREGATE)[AGGREGATE].rho_ci[0] > 0
                       for p in per)   # each permutation alone, cluster-robust (a count, not a test)
            info = {"permutations": permutations, "significant": int(hits), "mode": c.placebo}
        results.append(ComparisonResult(c, _no_equivalence(est) if small else est, replicates, seed, None, info))
    if replicates:
        todo = [i for i, r in enumerate(results) if r.reason is None and r.comparison.bootstrapped()]
        boot = bootstrap(data, [results[i].comparison for i in todo], replicates=replicates, seed=seed,
                         folds=folds, jobs=jobs)
        for i, b in zip(todo, boot):
            est = {f: replace(e, boot_delta_ci=b[f][0], boot_rho_ci=b[f][1]) if f in b else e
                   for f, e in results[i].estimates.items()}
            results[i] = replace(results[i], estimates=est)
    return results

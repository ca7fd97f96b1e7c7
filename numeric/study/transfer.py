"""The domain-transfer target (paper L.6: "domain-transfer targets remain null").

Every family of a panel run with a second domain (``python -m numeric panel
--domains all``; ``numeric.heads.domains``: stdlib docstrings and stdlib code
for the text families, upright and rotated held-out digits for ``digitvit``)
is fitted on one domain's cells and tested on the other's, in both
directions. For each direction and each comparison of ``COMPARISONS`` (the
primary B1 vs B1+G and the open question B1 vs B1+I): the base and the
augmented model are fitted on every cell of the fitting domain (the same
calibrated ridge as the study's, ``numeric.study.fit``) and predict every
cell of the test domain; ``Delta = MAE(base) - MAE(base + block)`` over the
test cells, ``rho = Delta / MAE(base)``, the aggregate the mean of the
family values, as in the primary comparison (``numeric.study.compare``).

**Domain effect: the level is re-estimated.** B0's domain one-hot is
constant on the fitting domain, so nothing carries the test domain's level
across. A shift of the targets between the domains would then enter every
absolute error, and a difference of two models' errors would turn into the
difference of their mean predictions (a block of pure noise "gained" under a
planted shift, ``research/study_transfer_calibration.py``). So each model's
prediction of a test cell is shifted by that model's mean residual on the
test cells of the *other* test sources (the domain's level, estimated
without the cell's own source, the analogue of B0's domain one-hot): a
constant shift of the test domain's targets leaves every estimate and
interval unchanged (a test plants one), and the row reports it as
``level`` (the base model's mean residual on the test domain), beside
``raw`` (its test MAE without the shift) and ``within`` (the base model
cross-fitted over the test domain's own sources). What the row measures is
then whether the block improves the predictions *within* the test domain,
up to its level.

**Interval.** The study's construction (``numeric.study.intervals``): the
mean of the cluster-robust variance over the test domain's sources and a
delete-one-source jackknife. Here the jackknife's units are the sources of
*both* domains: deleting a test source removes its cells and its share of
the other cells' level; deleting a fitting source refits both models
without it at the penalty they chose (standardisation refitted), the part of
the error the few fitting sources cause, which the cluster-robust part
cannot see. (The study's first-order deletion saw about a third of it here:
se 0.6 times the simulated sd, coverage 0.85-0.90; a refit that re-chooses
the penalty twice it.) Degrees of freedom: Welch-Satterthwaite on the two
variances. By simulation at the recorded shape the interval is
conservative (docs/study.md, section "Domain transfer").

**Skips.** A family with one domain, or with fewer than
``MIN_DOMAIN_SOURCES`` sources in either, is left out of the row, with its
reason in ``skipped``; a row with no family left is skipped with a one-line
reason. The study never fails on it.

The split (``transfer_splits``) is the only place the fitting and test cells
are chosen: the fitting cells are exactly the family's cells of the fitting
domain, the test cells exactly those of the test domain, and a source in
both is an error.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from numeric.runtime import one_blas_thread
from numeric.study.compare import AGGREGATE, heldout_losses
from numeric.study.data import StudyData
from numeric.study.fit import FOLDS, FastRidgeCV
from numeric.study.intervals import MARGIN, _combined, _family_point, _jk_var, cluster_variance
from numeric.study.blocks import block_columns
from numeric.heads.domains import DOMAINS
from dataclasses import replace

__all__ = ["COMPARISONS", "MIN_DOMAIN_SOURCES", "TransferSplit", "TransferRow", "transfer_splits",
           "split_predictions", "split_losses", "transfer_rows", "transfer_section", "transfer_markdown",
           "synthetic_domains"]

#: (base, block) pairs of the transfer rows: the primary comparison and the open question.
COMPARISONS = (("B1", "G"), ("B1", "I"))
#: Sources needed in each domain of a family: the test domain's interval has (sources - 1) degrees of freedom.
MIN_DOMAIN_SOURCES = 3
#: The directions: fit on the family's first domain (its primary one) and test on its second, and back.
DIRECTIONS = ("forward", "backward")


class TransferError(ValueError):
    """A split that would test on a fitting source (a bug, never bad input)."""


@dataclass(frozen=True)
class TransferSplit:
    """One family's cells fitted on ``fit_domain`` (rows ``train``) and tested on ``test_domain``
    (rows ``test``), row indices into the study's table."""

    family: str
    fit_domain: str
    test_domain: str
    train: np.ndarray
    test: np.ndarray


@dataclass(frozen=True)
class TransferRow:
    """One comparison in one direction: ``estimates`` per family and AGGREGATE (empty with a
    ``reason`` when skipped), each family's ``(fit, test)`` domains, ``within`` (the base
    model's MAE cross-fitted within the test domain), ``cells`` (fitting, test cells), the
    families left out with their reason (``skipped``), ``raw`` (the base model's test MAE
    without the level recalibration) and ``level`` (its mean residual on the test domain: the
    domain effect it did not predict)."""

    name: str
    base: str
    block: str
    direction: str
    estimates: dict
    domains: dict
    within: dict
    cells: dict
    skipped: dict
    raw: dict
    level: dict
    reason: str | None = None


def _domain_order(names) -> list:
    """A family's domains in registry order (its primary one first; unknown names after, sorted)."""

    known = [d for d in DOMAINS if d in names]
    return known + sorted(set(names) - set(known))


def transfer_splits(data: StudyData, direction: str) -> tuple:
    """``([TransferSplit], {family: reason})``: per family the split of ``direction`` (forward: fit
    on the first domain, test on the second), or why the family has none."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}")
    splits, skipped = [], {}
    doms = data.domains if data.domains is not None else np.full(len(data), "", dtype=str)
    for f in np.unique(data.families):
        m = data.families == f
        names = _domain_order(set(doms[m]) - {""})
        if len(names) < 2:
            skipped[str(f)] = f"one domain ({names[0] if names else 'unknown'})"
            continue
        a, b = names[:2] if direction == "forward" else names[1::-1]
        train, test = np.flatnonzero(m & (doms == a)), np.flatnonzero(m & (doms == b))
        few = [(d, np.unique(data.sources[r]).size) for d, r in ((a, train), (b, test))
               if np.unique(data.sources[r]).size < MIN_DOMAIN_SOURCES]
        if few:
            skipped[str(f)] = f"{few[0][1]} sources in domain {few[0][0]} (a transfer needs >= {MIN_DOMAIN_SOURCES})"
            continue
        if set(data.sources[train]) & set(data.sources[test]):
            raise TransferError(f"family {f}: a source is in both domains {a} and {b}")
        splits.append(TransferSplit(str(f), a, b, train, test))
    return splits, skipped


def split_predictions(data: StudyData, split: TransferSplit, cols: tuple):
    """The test cells' predictions by the model on ``cols`` fitted on the fitting cells (the study's
    ridge, ``numeric.study.fit.FastRidgeCV``), and ``(units, P)``: the fitting sources and, per
    source, the test predictions of the model refitted without that source's cells at the same
    penalty (standardisation and imputation refitted; module docstring)."""
    X = data.matrix(cols)
    train = split.train[np.isfinite(data.y[split.train])]
    groups = data.sources[train]
    if X.shape[1] == 0:
        model = None
        pred = np.full(split.test.size, data.y[train].mean())
    else:
        model = FastRidgeCV().fit(X[train], data.y[train])
        pred = model.predict(X[split.test])
    units, moved = [], []
    for g in np.unique(groups):    # each fitting source deleted: refitted exactly, the penalty kept
        keep = train[groups != g]
        units.append(g)
        moved.append(FastRidgeCV((model.alpha_,)).fit(X[keep], data.y[keep]).predict(X[split.test])
                     if model is not None else np.full(split.test.size, data.y[keep].mean()))
    return pred, (np.asarray(units, dtype=str), np.asarray(moved).reshape(len(units), split.test.size))


def _offsets(r: np.ndarray, src_idx: np.ndarray, n_src: int, drop: int | None = None) -> np.ndarray:
    """Per test cell, the mean residual ``r`` over the test cells of the *other* test sources (and
    not of source ``drop``): the test domain's level, estimated without the cell's own source."""
    S = np.bincount(src_idx, weights=r, minlength=n_src)
    N = np.bincount(src_idx, minlength=n_src).astype(np.float64)
    T, M = S.sum(), N.sum()
    if drop is not None:
        T, M = T - S[drop], M - N[drop]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (T - S[src_idx]) / (M - N[src_idx])


def split_losses(data: StudyData, split: TransferSplit, cols: tuple) -> tuple:
    """The test cells' level-recalibrated absolute errors (module docstring: each cell's prediction
    shifted by the model's mean residual on the other test sources), the raw residuals, and the
    deletion losses ``(units, J)``: units the sources of both domains, ``J [units, test cells]``
    the recalibrated errors with that source deleted (NaN on a deleted test source's own cells)."""
    y = data.y[split.test]
    pred, (fit_units, moved) = split_predictions(data, split, cols)
    test_units, src_idx = np.unique(data.sources[split.test], return_inverse=True)
    n_src = test_units.size
    r = y - pred
    loss = np.abs(r - _offsets(r, src_idx, n_src))
    J = np.empty((fit_units.size + n_src, y.size))
    for j, p in enumerate(moved):                  # a fitting source deleted: the model moves
        rg = y - p
        J[j] = np.abs(rg - _offsets(rg, src_idx, n_src))
    for g in range(n_src):                         # a test source deleted: its cells leave the mean
        J[fit_units.size + g] = np.abs(r - _offsets(r, src_idx, n_src, drop=g))
        J[fit_units.size + g, src_idx == g] = np.nan
    return loss, r, (np.concatenate([fit_units, test_units]), J)


def _within(data: StudyData, split: TransferSplit, cols: tuple, folds: int) -> float:
    """The base model's held-out MAE cross-fitted over the test domain's own sources (context)."""
    k = min(folds, np.unique(data.sources[split.test]).size)
    return float(np.nanmean(heldout_losses(data, split.test, cols, "source", False, k)))


def _estimates(parts: dict) -> dict:
    """``{family, AGGREGATE: Estimate}`` from ``parts[family] = (l0, l1, test sources, units, J0, J1)``:
    the study's point estimates and its calibrated variance (module docstring), families weighted
    equally in the aggregate."""
    fams = list(parts)
    point = {f: _family_point(p[0], p[1]) for f, p in parts.items()}
    units = sorted({u for p in parts.values() for u in p[3]})
    theta = np.empty((len(units), len(fams), 2))
    present = np.zeros((len(units), len(fams)), dtype=bool)
    psi_d, psi_r, clusters = [], [], []
    out = {}
    for j, f in enumerate(fams):
        l0, l1, src, us, J0, J1 = parts[f]
        mae0, _, delta, rho = point[f]
        n, d = l0.size, l0 - l1
        pd = (d - delta) / n
        pr = (d - rho * l0) / (n * mae0) if mae0 > 0 else np.zeros(n)
        psi_d.append(pd)
        psi_r.append(pr)
        clusters.append(src)
        vd, g = cluster_variance(pd, src)
        vr, _ = cluster_variance(pr, src)
        for i, u in enumerate(units):
            k = np.flatnonzero(us == u)
            theta[i, j] = point[f][2:]
            if k.size:
                keep = np.isfinite(J0[k[0]]) & np.isfinite(J1[k[0]])
                present[i, j] = True
                if keep.any():
                    theta[i, j] = _family_point(J0[k[0], keep], J1[k[0], keep])[2:]
        gs = present[:, j]
        out[f] = _combine(point[f], vd, vr, g - 1, _jk_var(theta[gs, j]), int(gs.sum()) - 1)
    agg = tuple(float(np.mean([point[f][i] for f in fams])) for i in range(4))
    src = np.concatenate(clusters)
    vd, g = cluster_variance(np.concatenate(psi_d) / len(fams), src)
    vr, _ = cluster_variance(np.concatenate(psi_r) / len(fams), src)
    ga = present.any(axis=1)
    out[AGGREGATE] = _combine(agg, vd, vr, g - 1, _jk_var(theta[ga].mean(axis=1)), int(ga.sum()) - 1)
    return out


def _combine(point, vd: float, vr: float, df_cr: int, jk: tuple, df_jk: int):
    """The study's estimate (``numeric.study.intervals``) with the mean of the cluster-robust variances
    ``vd, vr`` (``df_cr`` degrees of freedom) and the jackknife's ``jk`` (``df_jk``), on the
    Welch-Satterthwaite degrees of freedom of that mean (rounded down)."""
    a, b = vd / 2, jk[0] / 2
    df = df_cr
    if df_cr >= 1 and df_jk >= 1 and np.isfinite(a + b) and a + b > 0:
        df = int(max(1, min(df_cr + df_jk, np.floor((a + b) ** 2 / (a**2 / df_cr + b**2 / df_jk)))))
    return _combined(point, vd, vr, df, jk + (df,))


def _row_name(base: str, block: str, direction: str, pairs: dict) -> str:
    kinds = set(pairs.values())
    if len(kinds) == 1:
        a, b = next(iter(kinds))
    else:
        a, b = ("first domain", "second domain") if direction == "forward" else ("second domain", "first domain")
    return f"{base} vs {base}+{block}, domain transfer (fit {a}, test {b})"


def transfer_rows(data: StudyData, folds: int = FOLDS) -> list:
    """Every ``TransferRow``: the comparisons of ``COMPARISONS`` in both directions."""

    rows = []
    for direction in DIRECTIONS:
        splits, skipped = transfer_splits(data, direction)
        pairs = {s.family: (s.fit_domain, s.test_domain) for s in splits}
        for base, block in COMPARISONS:
            name = _row_name(base, block, direction, pairs)
            if not splits:
                why = "; ".join(f"family {f}: {r}" for f, r in skipped.items()) or "no rows"
                rows.append(TransferRow(name, base, block, direction, {}, {}, {}, {}, skipped, {}, {},
                                        f"skipped: no family has two domains with >= {MIN_DOMAIN_SOURCES} sources "
                                        f"each ({why}); run the panel with --domains all"))
                continue
            cols0 = block_columns(base)
            cols1 = cols0 + tuple(c for c in block_columns(block) if c not in cols0)
            parts, within, raw, level = {}, {}, {}, {}
            with one_blas_thread():   # small matrices: threads only contend
                for s in splits:
                    l0, r0, (units, J0) = split_losses(data, s, cols0)
                    l1, _, (_, J1) = split_losses(data, s, cols1)
                    parts[s.family] = (l0, l1, data.sources[s.test], units, J0, J1)
                    within[s.family] = _within(data, s, cols0, folds)
                    raw[s.family], level[s.family] = float(np.mean(np.abs(r0))), float(np.mean(r0))
            rows.append(TransferRow(name, base, block, direction, _estimates(parts), pairs, within,
                                    {s.family: (int(s.train.size), int(s.test.size)) for s in splits}, skipped,
                                    raw, level))
    return rows


def transfer_section(rows) -> list:
    """The rows as JSON-able dicts (``study.json``'s ``transfer``)."""
    return [dict(asdict(r), estimates={f: asdict(e) for f, e in r.estimates.items()},
                 domains={f: list(p) for f, p in r.domains.items()}, cells={f: list(c) for f, c in r.cells.items()})
            for r in rows]


def transfer_markdown(section: list) -> list:
    """``study.md``'s section of the transfer rows (from ``transfer_section``)."""
    lines = ["## Domain transfer (fit on one domain's cells, test on the other's)", "",
             "Each family's base and augmented models are fitted on every cell of one domain and tested on every "
             "cell of the other, each model's test predictions shifted by its mean residual on the other test "
             "sources (the test domain's level, which B0's domain one-hot cannot carry across). 95% intervals: "
             "cluster-robust over the test domain's sources averaged with a delete-one-source jackknife over the "
             "sources of both domains (fitting sources refitted at the same penalty), on Welch-Satterthwaite "
             "degrees of freedom; conservative by simulation (docs/study.md). Within: the base model "
             "cross-fitted over the test domain's own sources. Raw: the base model's test MAE without the level "
             "shift; level: its mean residual there (the domain effect it did not predict).", "",
             "| comparison | family | fit -> test (cells) | MAE base within | raw | level | MAE base | MAE +block "
             f"| Delta | 95% CI | rho | 95% CI | rho: different / equivalent (|rho| < {MARGIN}) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in section:
        if r.get("reason"):
            lines.append(f"| {r['name']} | - | {r['reason']} | | | | | | | | | | |")
            continue
        fams = [f for f in r["estimates"] if f != AGGREGATE]
        for f in fams + ([AGGREGATE] if len(fams) > 1 else []):
            e = r["estimates"][f]
            how = (f"{r['domains'][f][0]} -> {r['domains'][f][1]} ({r['cells'][f][0]} -> {r['cells'][f][1]})"
                   if f in r["domains"] else "-")
            ctx = " | ".join("-" if f not in r[k] else f"{r[k][f]:+.4f}" if k == "level" else f"{r[k][f]:.4f}"
                             for k in ("within", "raw", "level"))
            lines.append(f"| {r['name']} | {f} | {how} | {ctx} | {e['mae_base']:.4f} | {e['mae_aug']:.4f} | "
                         f"{e['delta']:+.4f} | [{e['delta_ci'][0]:+.4f}, {e['delta_ci'][1]:+.4f}] | {e['rho']:+.4f} | "
                         f"[{e['rho_ci'][0]:+.4f}, {e['rho_ci'][1]:+.4f}] | {e['equivalence']} |")
        for f, why in r.get("skipped", {}).items():
            lines.append(f"| {r['name']} | {f} | left out: {why} | | | | | | | | | | |")
    return lines


def synthetic_domains(data: StudyData, first: int, offset: float = 0.0, names=("docs", "code")) -> StudyData:
    """A synthetic table (``numeric.study.calibrate.synthetic``, sources ``pool:sK``) with two domains:
    sources ``K < first`` in ``names[0]``, the others in ``names[1]``, whose targets are moved by
    ``offset`` (a planted domain effect); for the tests and ``research/study_transfer_calibration.py``."""

    k = np.array([int(s.rsplit(":s", 1)[1]) for s in data.sources])
    doms = np.where(k < first, names[0], names[1])
    return replace(data, domains=doms, y=data.y + offset * (doms == names[1]))

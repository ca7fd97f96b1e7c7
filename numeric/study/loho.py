"""Leave-one-head-out rows: held-out gains on unseen heads, with a head-cluster jackknife interval.

Within each family the base and the augmented model are cross-fitted with one
fold per head (``numeric.study.compare.heldout_losses``), so every cell's loss
comes from models that never saw its head. The estimate is the study's (per
family ``rho_f = Delta_f / MAE_f``; the aggregate is the equal-weighted mean of
the family rhos). Its sampling error is mostly which heads the panel happened
to hold: when a block's values cluster by head (as the real G and I do), a
model on a few heads can fit head identity, and how much that costs on an
unseen head varies strongly with the draw of heads. Per-cell influence terms
(cluster-robust over heads and sources, or a first-order deletion) miss that
and under-cover (a head-only cluster-robust interval covered 0.73 of
head-structured no-signal tables at the built-in shape,
``research/study_loho_probe.py``; the exact head jackknife 1.00, conservative).

The interval here is the exact delete-one-head jackknife, stratified by
family: for every head ``h`` of family ``f`` the whole leave-one-head-out
comparison is refitted on the family without ``h`` (``theta_{-h}``), and
``V_f = (H_f - 1) / H_f sum_h (theta_{-h} - mean)^2``; the aggregate's variance
is ``sum_f V_f / F^2`` on Welch-Satterthwaite degrees of freedom from the
families' ``H_f - 1`` (a t reference with few degrees of freedom). Its
coverage is measured by the self-check's ``loho-head`` and ``loho-null``
scenarios (heads redrawn every replication).

Where the self-check found no interval that covers (fewer than ``MIN_LOHO_HEADS``
heads in a family), the rows are descriptive: the point estimate, no
interval, no reading, and the reason in the row (``descriptive_reason``).
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from numeric.study.data import StudyData
from numeric.study.intervals import LEVEL, Estimate, _family_point, tost

__all__ = ["MIN_LOHO_HEADS", "loho_estimates", "descriptive_reason"]

#: Fewest heads per family at which the self-check ran and passed the head jackknife (``--calibrate``'s
#: ``loho-head`` scenario at 8 and 24 heads a family); below it the rows are descriptive.
MIN_LOHO_HEADS = 8


def descriptive_reason(data: StudyData) -> str | None:
    """Why the leave-one-head-out intervals are not shown for this panel (None: they are)."""
    few = [(str(f), int(np.unique(data.heads[data.families == f]).size)) for f in np.unique(data.families)]
    few = [(f, h) for f, h in few if h < MIN_LOHO_HEADS]
    if not few:
        return None
    f, h = few[0]
    return (f"descriptive only: family {f} has {h} heads; below {MIN_LOHO_HEADS} heads a family the self-check "
            f"found no leave-one-head-out interval that covers")


def _point(losses, data, r, cols, demean, folds, *, memo, key):
    if key not in memo:
        memo[key] = losses(data, r, cols, "head", demean, folds)
    return memo[key]


def loho_estimates(data: StudyData, base: tuple, aug: tuple, *, demean: bool, folds: int, memo: dict,
                   losses, aggregate: str, descriptive: str | None = None) -> tuple:
    """``({family, aggregate: Estimate}, (l0, l1))`` of ``base`` vs ``aug`` left one head out,
    with the stratified exact head jackknife's intervals (module docstring); ``losses``:
    ``heldout_losses``; ``memo``: fits shared between rows (keyed by family, columns and the
    deleted head). ``descriptive``: a reason; the intervals are then NaN and the equivalence
    reading says so."""
    n = len(data)
    l0, l1 = np.full(n, np.nan), np.full(n, np.nan)
    fams = [str(f) for f in np.unique(data.families)]
    point, var, dfs = {}, {}, {}
    for f in fams:
        r = np.flatnonzero(data.families == f)
        l0[r] = _point(losses, data, r, base, demean, folds, memo=memo, key=("loho", f, base, demean, None))
        l1[r] = _point(losses, data, r, aug, demean, folds, memo=memo, key=("loho", f, aug, demean, None))
        ok = np.isfinite(l0[r]) & np.isfinite(l1[r])
        point[f] = _family_point(l0[r][ok], l1[r][ok])
        heads = np.unique(data.heads[r])
        deleted: list[tuple[float, ...]] = []
        if descriptive is None and heads.size >= 3:
            for h in heads:
                rr = r[data.heads[r] != h]
                a = _point(losses, data, rr, base, demean, folds, memo=memo, key=("loho", f, base, demean, h))
                b = _point(losses, data, rr, aug, demean, folds, memo=memo, key=("loho", f, aug, demean, h))
                keep = np.isfinite(a) & np.isfinite(b)
                deleted.append(_family_point(a[keep], b[keep])[2:])
        theta = np.asarray(deleted, dtype=np.float64).reshape(-1, 2)
        H = theta.shape[0]
        if H >= 2:
            var[f] = (H - 1) / H * np.sum((theta - theta.mean(axis=0)) ** 2, axis=0)
        else:
            var[f] = np.array([np.nan, np.nan])
        dfs[f] = max(H - 1, 1)
    out = {f: _estimate(point[f], var[f], dfs[f]) for f in fams}
    F = len(fams)
    agg = tuple(float(np.mean([point[f][j] for f in fams])) for j in range(4))
    v = sum(var[f] for f in fams) / F**2
    df = np.array([_satterthwaite([var[f][j] / F**2 for f in fams], [dfs[f] for f in fams]) for j in range(2)])
    out[aggregate] = _estimate(agg, v, int(df[1]))
    return out, (l0, l1)


def _satterthwaite(parts, dfs) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates (floored)."""
    tot = float(sum(parts))
    den = float(sum(p**2 / d for p, d in zip(parts, dfs)))
    if not (np.isfinite(tot) and tot > 0 and den > 0):
        return float(min(dfs))
    return float(max(1, np.floor(tot**2 / den)))


def _estimate(point, var, df: int) -> Estimate:
    mae0, mae1, delta, rho = point
    vd, vr = (float(x) for x in var)
    t = float(stats.t.ppf(0.5 + LEVEL / 2, df))
    hd, hr = t * np.sqrt(vd), t * np.sqrt(vr)
    se, rho_se = float(np.sqrt(vd)), float(np.sqrt(vr))
    eq = tost(rho, rho_se, df) if np.isfinite(rho_se) else "not shown (descriptive)"
    return Estimate(mae0, mae1, delta, rho, (delta - hd, delta + hd), (rho - hr, rho + hr), se, int(df), eq,
                    rho_se=rho_se)

"""Calibrated intervals from the point fit's paired held-out losses.

The point fit gives every row ``i`` of family ``f`` a held-out absolute error
under the base model, ``l0_i``, and under the augmented one, ``l1_i``. The
estimates are means of them: ``MAE_f = mean l0``, ``Delta_f = mean(l0 - l1)``,
``rho_f = Delta_f / MAE_f``; across families the aggregate is the plain mean
of the family values (``Delta = mean_f Delta_f``, ``rho = mean_f rho_f``:
every family weighs the same in rho whatever its target scale).

Each estimate is a smooth function of row means, so its sampling error is
that of a sum of per-row influence terms ``psi_i`` (``(d_i - Delta_f) / n_f``
for Delta, ``(d_i - rho_f l0_i) / (n_f MAE_f)`` for rho, divided by the
number of families for the aggregate). Rows of one source are dependent, so
the terms are summed per cluster and the variance is the cluster-robust
``G / (G - 1) sum_c S_c^2`` over the G clusters; the interval is
``estimate +- t_{G-1} se``. Leave-one-head-out clusters two ways (heads and
sources: Cameron, Gelbach and Miller's ``V_head + V_source - V_cell``, never
below the larger one-way variance) with ``min(G_head, G_source) - 1`` degrees
of freedom, so its interval speaks about unseen heads. Coverage, false
positive rate and power are measured by simulation
(``numeric.study.calibrate``, ``python -m numeric study --calibrate``).

The study's one aggregate is rho (the equal-weighted mean of the family
rhos): every decision, self-check rate and equivalence test reads rho's
interval, never Delta's.

The equivalence reading is on rho, checked in this order: *different* when
the 95 % interval of rho excludes 0; *equivalent* when two one-sided tests of
``|rho| < MARGIN`` at 5 % each pass (the 90 % interval inside ``(-MARGIN,
+MARGIN)``); *not shown* otherwise. ``MARGIN`` = 0.05 was fixed before any
recorded result was read, from the self-check's design alone: it is below the
planted gain the self-check sizes the study for (rho 0.08) by more than the
cross-fitted ridge's shrinkage of that gain (its mean estimate is about 0.07)
plus the TOST's one-sided 5 % allowance, so that a real gain of 0.08 is called
equivalent in at most 5 % of panels (measured by ``--calibrate``: the
``equivalence size`` check).

>>> tost(0.001, 0.002, 30), tost(0.06, 0.01, 30), tost(0.03, 0.02, 30)
('equivalent', 'different', 'not shown')
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["LEVEL", "RESOLUTION", "MARGIN", "Estimate", "paired_estimates", "cluster_variance", "tost"]

#: Two-sided coverage of the intervals.
LEVEL = 0.95
#: The paper's absolute study resolution delta in U/n (L.5): the gauge audit's threshold.
RESOLUTION = 0.02
#: The equivalence margin on rho (module docstring: why 0.05).
MARGIN = 0.05


@dataclass(frozen=True)
class Estimate:
    """One family's (or the aggregate's) gain: MAEs, Delta and rho with calibrated intervals
    (``se`` and ``df`` of Delta's, ``rho_se`` of rho's), the equivalence reading on rho, and the
    secondary bootstrap's percentile intervals (None when not run for this comparison)."""

    mae_base: float
    mae_aug: float
    delta: float
    rho: float
    delta_ci: tuple
    rho_ci: tuple
    se: float
    df: int
    equivalence: str
    boot_delta_ci: tuple | None = None
    boot_rho_ci: tuple | None = None
    rho_se: float = float("nan")


def cluster_variance(psi: np.ndarray, clusters) -> tuple:
    """``(variance, number of clusters)`` of ``sum psi`` with ``psi`` summed per cluster
    (``clusters``: one label array, or several for multi-way clustering: the inclusion-exclusion
    sum over their intersections, floored at the largest one-way variance)."""
    ways = [np.asarray(c) for c in (clusters if isinstance(clusters, (list, tuple)) else [clusters])]

    def one(labels):
        _, inv = np.unique(labels, return_inverse=True)
        g = int(inv.max()) + 1
        s = np.bincount(inv, weights=psi, minlength=g)
        return (g / (g - 1) * float(np.sum(s**2)) if g > 1 else np.inf), g

    if len(ways) == 1:
        return one(ways[0])
    (va, ga), (vb, gb) = one(ways[0]), one(ways[1])
    vab, _ = one(np.char.add(np.char.add(ways[0].astype(str), "\x00"), ways[1].astype(str)))
    return max(va + vb - vab, va, vb), min(ga, gb)


def _t(df: int, level: float) -> float:
    return float(stats.t.ppf(0.5 + level / 2, df)) if df >= 1 else np.inf


def tost(value: float, se: float, df: int, margin: float = MARGIN) -> str:
    """"different" when the 95 % interval of ``value`` excludes 0 (checked first), "equivalent"
    when two one-sided tests of ``|value| < margin`` at 5 % each pass, else "not shown"."""
    if not np.isfinite(se):
        return "not shown"
    h95 = _t(df, LEVEL) * se
    if value - h95 > 0 or value + h95 < 0:
        return "different"
    h90 = _t(df, 0.90) * se
    return "equivalent" if -margin < value - h90 and value + h90 < margin else "not shown"


def _interval(value: float, var: float, df: int) -> tuple:
    h = _t(df, LEVEL) * np.sqrt(var)
    return float(value - h), float(value + h)


def _family_point(l0, l1) -> tuple:
    mae0, mae1 = float(np.mean(l0)), float(np.mean(l1))
    delta = mae0 - mae1
    return mae0, mae1, delta, (delta / mae0 if mae0 > 0 else 0.0)


def paired_estimates(l0: np.ndarray, l1: np.ndarray, families: np.ndarray, clusters, aggregate: str,
                     jack=None) -> dict:
    """``{family, aggregate: Estimate}`` from the held-out absolute errors ``l0`` (base) and ``l1``
    (augmented) of the same rows (NaN: a row without a loss, left out of both).

    ``jack = (sources, J0, J1)``: the losses with each source deleted (``[sources, rows]``, NaN on the
    deleted source's rows, the models that trained on it moved to first order): the variance is
    then the mean of the cluster-robust variance and the delete-one-unit jackknife's (units:
    sources; heads for leave one head out, whose cluster-robust part is two-way)
    ``(G - 1) / G sum_g (theta_-g - mean)^2``. The first misses how a source moves the fitted
    models and under-covers (se 0.74x the simulated sd); the second sees it but counts the
    models' share of a loss that is quadratic in their errors about twice (1.2-1.4x); their
    mean is calibrated by simulation (``numeric.study.calibrate``, docs/study.md). Otherwise
    cluster-robust over ``clusters`` (leave one head out: heads and sources)."""
    ok = np.isfinite(l0) & np.isfinite(l1)
    fams = list(np.unique(families[ok]))
    point = {f: _family_point(l0[ok & (families == f)], l1[ok & (families == f)]) for f in fams}
    agg = tuple(float(np.mean([point[f][j] for f in fams])) for j in range(4))
    jk = _jackknife(point, families, ok, jack, aggregate) if jack is not None else None
    clusters = [np.asarray(c)[ok] for c in (clusters if isinstance(clusters, (list, tuple)) else [clusters])]
    l0, l1, families = l0[ok], l1[ok], families[ok]
    d = l0 - l1
    psi_d, psi_r = np.zeros(d.size), np.zeros(d.size)
    out = {}
    for f in fams:
        m = families == f
        n = int(m.sum())
        mae0, _, delta, rho = point[f]
        pd = (d[m] - delta) / n
        pr = (d[m] - rho * l0[m]) / (n * mae0) if mae0 > 0 else np.zeros(n)
        psi_d[m], psi_r[m] = pd, pr
        vd, g = cluster_variance(pd, [c[m] for c in clusters])
        vr, _ = cluster_variance(pr, [c[m] for c in clusters])
        out[f] = _combined(point[f], vd, vr, g - 1, jk and jk[f])
    vd, g = cluster_variance(psi_d / len(fams), clusters)
    vr, _ = cluster_variance(psi_r / len(fams), clusters)
    out[aggregate] = _combined(agg, vd, vr, g - 1, jk and jk[aggregate])
    return out


def _combined(point, vd: float, vr: float, df: int, jk) -> Estimate:
    """The estimate with the cluster-robust variances ``vd``, ``vr``, averaged with the jackknife's
    ``jk = (vd, vr, df)`` when given."""
    if jk is None:
        return _estimate(point, vd, vr, df)
    return _estimate(point, (vd + jk[0]) / 2, (vr + jk[1]) / 2, min(df, jk[2]))


def _jackknife(point: dict, families: np.ndarray, ok: np.ndarray, jack, aggregate: str) -> dict:
    """``{family, aggregate: (var delta, var rho, df)}`` of the delete-one-source jackknife."""
    sources, J0, J1 = jack
    fams = list(point)
    # theta[g, f] = (delta, rho) of family f with source g deleted; families without g unchanged
    theta = np.empty((len(sources), len(fams), 2))
    present = np.zeros((len(sources), len(fams)), dtype=bool)
    for j, f in enumerate(fams):
        m = families == f
        for g in range(len(sources)):
            a, b = J0[g, m], J1[g, m]
            keep = np.isfinite(a) & np.isfinite(b) & ok[m]
            present[g, j] = bool(np.any(ok[m] & ~(np.isfinite(a) & np.isfinite(b))))   # g has rows here
            _, _, delta, rho = _family_point(a[keep], b[keep]) if keep.any() else point[f]
            theta[g, j] = (delta, rho)
    out = {}
    for j, f in enumerate(fams):
        gs = present[:, j]
        out[f] = _jk_var(theta[gs, j]) + (int(gs.sum()) - 1,)
    ga = present.any(axis=1)
    out[aggregate] = _jk_var(theta[ga].mean(axis=1)) + (int(ga.sum()) - 1,)
    return out


def _jk_var(theta: np.ndarray) -> tuple:
    """Jackknife variances of the columns of ``theta [G, 2]`` (delta, rho)."""
    g = theta.shape[0]
    if g < 2:
        return np.inf, np.inf
    dev = theta - theta.mean(axis=0)
    v = (g - 1) / g * np.sum(dev**2, axis=0)
    return float(v[0]), float(v[1])


def _estimate(point, vd: float, vr: float, df: int) -> Estimate:
    mae0, mae1, delta, rho = point
    se, rho_se = float(np.sqrt(vd)), float(np.sqrt(vr))
    return Estimate(mae0, mae1, delta, rho, _interval(delta, vd, df), _interval(rho, vr, df), se, df,
                    tost(rho, rho_se, df), rho_se=rho_se)

"""Probe: coverage of leave-one-head-out intervals for a head-structured no-signal block.

Heads redrawn every replication (the interval speaks about unseen heads); the block is the
self-check's head-identity block (random head constants plus within-head noise, independent of the
target). Candidates: the study's old interval (two-way cluster-robust averaged with a first-order
delete-one-head jackknife), the head-only cluster-robust interval on t(H - 1), and the exact
delete-one-head jackknife (stratified by family, refitted) on Satterthwaite degrees of freedom.

    python research/study_loho_probe.py --shape encoder=24x16@text --reps 100
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from numeric.study.calibrate import FOUR_FAMILY, parse_shape, synthetic
from numeric.study.compare import heldout_losses
from numeric.study.blocks import block_columns, G
from numeric.study.intervals import cluster_variance


def rho_of(l0, l1):
    return (l0.mean() - l1.mean()) / l0.mean()


def one(data, cols0, cols1):
    fams = np.unique(data.families)
    rhos, jk, cr = [], [], []
    for f in fams:
        r = np.flatnonzero(data.families == f)
        l0 = heldout_losses(data, r, cols0, "head", False)
        l1 = heldout_losses(data, r, cols1, "head", False)
        rho = rho_of(l0, l1)
        rhos.append(rho)
        mae0 = l0.mean()
        psi = ((l0 - l1) - rho * l0) / (l0.size * mae0)
        v, g = cluster_variance(psi, data.heads[r])
        cr.append((v, g - 1))
        heads = np.unique(data.heads[r])
        th = []
        for h in heads:
            rr = r[data.heads[r] != h]
            a = heldout_losses(data, rr, cols0, "head", False)
            b = heldout_losses(data, rr, cols1, "head", False)
            th.append(rho_of(a, b))
        th = np.array(th)
        H = th.size
        jk.append(((H - 1) / H * np.sum((th - th.mean()) ** 2), H - 1))
    F = len(fams)
    est = float(np.mean(rhos))
    out = {}
    for name, parts in (("cr-head", cr), ("jk-head", jk)):
        v = sum(p[0] for p in parts) / F**2
        comp = [p[0] / F**2 for p in parts]
        df = v**2 / sum(c**2 / p[1] for c, p in zip(comp, parts))
        h = stats.t.ppf(0.975, max(df, 1)) * np.sqrt(v)
        out[name] = (est - h, est + h)
        hmin = stats.t.ppf(0.975, min(p[1] for p in parts)) * np.sqrt(v)
        out[name + "-tmin"] = (est - hmin, est + hmin)
    return est, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape")
    p.add_argument("--reps", type=int, default=60)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--scenario", default="head-identity")
    a = p.parse_args()
    shape = parse_shape(a.shape) if a.shape else FOUR_FAMILY
    cols0 = block_columns("B1")
    cols1 = cols0 + G
    ests, cis = [], []
    t0 = time.process_time()
    for i in range(a.reps):
        rng = np.random.default_rng(np.random.SeedSequence(a.seed, spawn_key=(i,)))
        data = synthetic(shape, a.scenario, rng, rng)
        e, o = one(data, cols0, cols1)
        ests.append(e)
        cis.append(o)
    truth = float(np.mean(ests))
    sd = float(np.std(ests, ddof=1))
    print(f"{shape.describe()} {a.scenario} reps {a.reps}: mean rho {truth:+.4f} sd {sd:.4f}; "
          f"{time.process_time() - t0:.0f} s CPU")
    for k in cis[0]:
        cov = np.mean([c[k][0] <= truth <= c[k][1] for c in cis])
        excl = np.mean([c[k][0] > 0 or c[k][1] < 0 for c in cis])
        se = np.mean([(c[k][1] - c[k][0]) / 2 / 1.96 for c in cis])
        print(f"  {k:14s} coverage {cov:.3f}  excludes 0 {excl:.3f}  mean half-width/1.96 {se:.4f} (sd {sd:.4f})")


if __name__ == "__main__":
    main()

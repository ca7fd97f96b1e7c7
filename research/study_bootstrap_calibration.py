"""Does the secondary percentile bootstrap earn its place?

On synthetic tables of the built-in four-family shape (``numeric.study.calibrate``,
heads fixed per scenario as in the self-check), run the primary comparison
B1 vs B1+G with both intervals, the calibrated one and the percentile
source-cluster bootstrap (``--draws`` resamples, stratified by pool, inner
LOO leaving all copies out), and print side by side: the rate of "lower
limit > 0", the coverage of the simulation's mean rho, the mean interval
width and the width ratio. CPU time (process time) is printed, not wall time.

    python -m research.study_bootstrap_calibration --replications 40 --draws 200 --scenarios null,gain
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from numeric.study.calibrate import FOUR_FAMILY, SCENARIOS, synthetic
from numeric.study.compare import AGGREGATE, compare
from numeric.study.protocol import _c


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--replications", type=int, default=40)
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--seed", type=int, default=20260415)
    p.add_argument("--rho", type=float, default=0.08)
    p.add_argument("--scenarios", default="null,gain")
    a = p.parse_args()
    for sc in a.scenarios.split(","):
        t0 = time.process_time()
        k = SCENARIOS.index(sc)
        heads = np.random.default_rng(np.random.SeedSequence(a.seed, spawn_key=(k, 2**31))).bit_generator.state
        ests = []
        for i in range(a.replications):
            hr = np.random.default_rng()
            hr.bit_generator.state = heads
            rng = np.random.default_rng(np.random.SeedSequence(a.seed, spawn_key=(k, i)))
            data = synthetic(FOUR_FAMILY, sc, hr, rng, a.rho)
            ests.append(compare(data, [_c("B1", "G")], replicates=a.draws, seed=a.seed + i)[0].estimates[AGGREGATE])
        truth = np.mean([e.rho for e in ests])
        print(f"{sc} ({a.replications} replications, {a.draws} draws; planted rho {a.rho if sc == 'gain' else 0}; "
              f"mean estimate {truth:+.4f}; {time.process_time() - t0:.0f} s CPU)")
        print("| interval | lower > 0 | covers the mean rho | mean width |")
        print("|---|---|---|---|")
        widths = {}
        for name, key in (("calibrated (primary)", "rho_ci"), ("percentile bootstrap (secondary)", "boot_rho_ci")):
            ci = np.array([getattr(e, key) for e in ests])
            widths[name] = float(np.mean(ci[:, 1] - ci[:, 0]))
            print(f"| {name} | {np.mean(ci[:, 0] > 0):.3f} | {np.mean((ci[:, 0] <= truth) & (truth <= ci[:, 1])):.3f} | "
                  f"{widths[name]:.4f} |")
        print(f"width ratio bootstrap / calibrated: {widths['percentile bootstrap (secondary)'] / widths['calibrated (primary)']:.2f}\n",
              flush=True)


if __name__ == "__main__":
    main()

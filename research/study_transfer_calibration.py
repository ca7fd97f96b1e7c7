"""Is the domain-transfer row's interval calibrated? (``numeric.study.transfer``)

Synthetic tables (``numeric.study.calibrate.synthetic``, heads fixed per
scenario as in the study's self-check) of the recorded run's shape by
default (one family, 4 heads x 16 sources, the first 8 sources one domain
and the last 8 the other), with a planted domain effect (the second domain's
targets moved by ``--offset``). For B1 vs B1+G in both directions it prints
the rate of "lower limit > 0" (the false-positive rate under ``null``, the
power under ``gain``), the coverage of the simulation's mean rho, the mean
estimate and the mean width of the rho interval. CPU time (process time) is
printed, not wall time.

    python -m research.study_transfer_calibration --replications 200 --scenarios null,gain --rho 0.3
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from numeric.study.calibrate import FOUR_FAMILY, SCENARIOS, Shape, parse_shape, synthetic
from numeric.study.compare import AGGREGATE
from numeric.study.transfer import synthetic_domains, transfer_rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--replications", type=int, default=200)
    p.add_argument("--seed", type=int, default=20260415)
    p.add_argument("--rho", type=float, default=0.3)
    p.add_argument("--offset", type=float, default=1.0)
    p.add_argument("--shape", default="fam0=4x16@text", help="NAME=HEADSxSOURCES@POOL,... (numeric study --shape)")
    p.add_argument("--scenarios", default="null,gain")
    a = p.parse_args()
    shape = Shape(parse_shape(a.shape).families, FOUR_FAMILY.head_constant)
    half = min(s for _, _, s, _ in shape.families) // 2
    print(f"shape {shape.describe()}; sources 0..{half - 1} one domain, the rest the other (+{a.offset} in y); "
          f"{a.replications} replications")
    for sc in a.scenarios.split(","):
        t0 = time.process_time()
        k = SCENARIOS.index(sc)
        heads = np.random.default_rng(np.random.SeedSequence(a.seed, spawn_key=(k, 2**31))).bit_generator.state
        ests: dict = {}
        for i in range(a.replications):
            hr = np.random.default_rng()
            hr.bit_generator.state = heads
            rng = np.random.default_rng(np.random.SeedSequence(a.seed, spawn_key=(k, i)))
            extra = np.random.default_rng(np.random.SeedSequence(a.seed, spawn_key=(k, i, 1)))   # the I block: noise
            data = synthetic_domains(synthetic(shape, sc, hr, rng, rho=a.rho, rng_extra=extra), half, a.offset)
            for r in transfer_rows(data):
                if r.block == "G":
                    ests.setdefault(r.name, []).append(r.estimates[AGGREGATE])
        for name, es in ests.items():
            rho = np.array([e.rho for e in es])
            lo = np.array([e.rho_ci[0] for e in es])
            hi = np.array([e.rho_ci[1] for e in es])
            dlo = np.array([e.delta_ci[0] for e in es])
            truth = rho.mean()
            print(f"{sc}{' rho ' + str(a.rho) if sc == 'gain' else ''}: {name}: lower limit > 0 in "
                  f"{np.mean(dlo > 0):.3f}; covers the mean rho {np.mean((lo <= truth) & (truth <= hi)):.3f}; "
                  f"mean rho {truth:+.3f}, sd {rho.std():.3f}; mean width {np.mean(hi - lo):.3f}")
        print(f"  ({time.process_time() - t0:.1f} s CPU)", flush=True)


if __name__ == "__main__":
    main()

"""CPU time of the study's comparisons on a synthetic table of a recorded shape.

The calibrated intervals add a first-order source jackknife to every source-fold
fit and 20 permutations to each placebo row; the secondary bootstrap is 200
resamples by default. This prints the process (CPU) time of
``compare(data, comparisons(), ...)`` on a synthetic table of the four-family
recorded shape (1,084 rows: 24 + 16 + 16 heads on 16 text sources, 12 on 16
image sources), with the bootstrap off and at 200 resamples, one process.

    python bench/study_time.py
"""
from __future__ import annotations

import time

import numpy as np

from numeric.study.calibrate import parse_shape, synthetic
from numeric.study.compare import compare
from numeric.study.protocol import comparisons

SHAPE = "encoder=24x16@text,docgpt2=16x16@text,docqwen2=16x16@text,digitvit=12x16@image"


def main() -> None:
    data = synthetic(parse_shape(SHAPE), "null", np.random.default_rng(0), np.random.default_rng(1),
                     rng_extra=np.random.default_rng(2))
    print(f"{len(data)} rows, {len(comparisons())} comparisons")
    for reps in (0, 200):
        t0 = time.process_time()
        res = compare(data, comparisons(), replicates=reps, seed=1, jobs=1)
        print(f"replicates {reps}: {time.process_time() - t0:.1f} s CPU; rows run: "
              f"{sum(r.reason is None for r in res)}/{len(res)}", flush=True)


if __name__ == "__main__":
    main()

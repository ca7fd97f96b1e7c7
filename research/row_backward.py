"""The reference's lower search, in a plain form: backward elimination of row sets (the reference search).

The reference search found larger L on some diffuse heads by backward
elimination: start from a farthest-first pool of rows, solve the row-side
decoder LP (``numeric.search.lp.min_norm_row_decoder``, with its duals), and
while the pool does not certify at eps (``norm * eps >= 1 - 1e-3``), drop the
tenth of the rows whose dual rows are largest (the rows in the near-dependency
that limits ``gamma_row``), then solve again. This prints, per MiniLM head of
the quality heads (``research/heads.py``) and tolerance, the size certified, the LP norm, the
number of solves and the CPU seconds, to compare with the brackets of
``docs/benchmarks.md`` section 7.2. A float screen only: nothing here goes
through the exact tier.

    python -m research.row_backward [--pool 40] [--heads 3] [--eps 0.1,0.25]
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]

import numpy as np

import numeric.search.lp as lp
from numeric.search.far_rows import far_order

#: The float margin a pool must clear: ``norm * eps < 1 - MARGIN``.
MARGIN = 1e-3


def backward(A: np.ndarray, eps: float, pool: int) -> tuple:
    """(rows certified, LP norm, solves) of backward elimination from the first ``pool`` far rows."""
    S = list(far_order(A)[:pool])
    solves = 0
    while True:
        _, v, Lam = lp.min_norm_row_decoder(A[S], iterations=20000, duals=True)
        solves += 1
        if v * eps < 1 - MARGIN or len(S) == 1:
            return len(S), v, solves
        drop = set(np.argsort(-np.abs(Lam).sum(axis=1), kind="stable")[:max(1, len(S) // 10)].tolist())
        S = [s for i, s in enumerate(S) if i not in drop]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pool", type=int, default=40)
    p.add_argument("--heads", type=int, default=3)
    p.add_argument("--eps", default="0.1,0.25")
    args = p.parse_args(argv)
    from research.heads import minilm_cases

    print(f"{'head':<14}{'eps':>6}{'pool':>6}{'rows':>6}{'norm':>9}{'solves':>8}{'CPU s':>8}")
    for name, A, _, _ in minilm_cases(args.heads):
        for eps in (float(e) for e in args.eps.split(",")):
            t = time.process_time()
            rows, v, solves = backward(A, eps, args.pool)
            print(f"{name:<14}{eps:>6}{args.pool:>6}{rows:>6}{v:>9.3f}{solves:>8}{time.process_time() - t:>8.1f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

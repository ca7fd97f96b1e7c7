"""The descents' steps, this tree's against a git ref's, side by side in CPU time.

Upper trials: for each head and rank, the same trial (from the truncated SVD, ``--iters``
steps, at ``--eps``) runs with the ref's ``refine`` (``git show REF:numeric/search/refine.py``,
loaded beside this tree, nothing checked out) and with this tree's. Row-side maps: for each
size d in ``--row-sets``, ``descend_row_map`` of d random rows of the head (seeded) from their
initial map, with the ref's ``row_map`` and with this tree's. Each pair runs alternately
``--repeat`` times in one process on one thread (``time.process_time``). Prints each side's CPU
milliseconds per step run (the median of the repeats), their ratio, each side's result (error
over eps; the map's norm) and steps run, and whether the two returned the same arrays to the
last bit (against ``ff0949b``, whose descents ran on autograd, this tree writes the gradients out
in the same operations, ``refine._surrogate`` and ``row_map._gradient``, so they should).

    python -m research.refine_step --heads-npz HEADS.npz --heads demo1_l5h4,q256_l2h0 --ranks 4,8,20,60,130 --row-sets 5,12,30,60,100
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from research.anneal_tune import module_at
from numeric.heads.extract import softmax_rows
from numeric.search import refine as rf
from numeric.search import row_map as rm
from numeric.search import upper as up
from numeric.search.budget import Budget
from numeric.search.starts import svd_factors


def upper_trial(refine, A, start, eps, iters):
    """(CPU ms per step run, error / eps, steps run, factors) of one trial."""
    b = Budget(10**12)
    t = time.process_time()
    P, Q, err = refine(A, *start, eps, iters=iters, budget=b)
    cpu = time.process_time() - t
    steps = b.used // rf.step_work(*A.shape, start[1].shape[1])
    return 1e3 * cpu / max(steps, 1), err / eps, steps, (P, Q)


def row_descent(row_map, AS, G0):
    """(CPU ms per step run, norm of the map, steps run, map) of one descent (one budget unit a step)."""
    b = Budget(10**9)
    t = time.process_time()
    G, norm = row_map.descend_row_map(AS, G0, 0.0, b)
    cpu = time.process_time() - t
    return 1e3 * cpu / max(b.used, 1), norm, b.used, (G,)


def side_by_side(label, old, new, repeat, out):
    """Runs ``old()`` and ``new()`` alternately; prints a row and appends (ratio, same bits) to ``out``."""
    runs = {"ref": [], "new": []}
    for _ in range(repeat):
        runs["ref"].append(old())
        runs["new"].append(new())
    ms = {s: float(np.median([r[0] for r in v])) for s, v in runs.items()}
    same = all(np.array_equal(a, b) for a, b in zip(runs["ref"][0][3], runs["new"][0][3]))
    out.append((ms["new"] / ms["ref"], same))
    (_, vr, sr, _), (_, vn, sn, _) = runs["ref"][0], runs["new"][0]
    print(f"{label:<22} {ms['ref']:>11.3f} {ms['new']:>11.3f} {out[-1][0]:>6.2f}  "
          f"{vr:>12.6g} {vn:>12.6g} {sr:>9} {sn:>9} {str(same):>9}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.refine_step", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads-npz", required=True, help="logits saved with np.savez (read without pickle)")
    ap.add_argument("--heads", required=True, help="comma-separated names in the npz")
    ap.add_argument("--ranks", default="4,8,20,60,130", help="comma-separated ranks (those below the SVD rank run)")
    ap.add_argument("--row-sets", default="5,12,30,60,100", help="comma-separated row-set sizes ('' for none)")
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--iters", type=int, default=600)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ref", default="ff0949b", help="git ref of the descents to compare with")
    args = ap.parse_args(argv)
    old_rf, old_rm = module_at(args.ref), module_at(args.ref, "numeric/search/row_map.py")
    with np.load(args.heads_npz, allow_pickle=False) as data:
        heads = {h: np.asarray(data[h], dtype=np.float64) for h in args.heads.split(",")}
    warm_up = np.full((4, 4), 0.25)                                    # torch's first-call set-up
    upper_trial(rf.refine, warm_up, (np.ones((4, 1)), np.full((4, 1), 0.2)), args.eps, 10)
    print(f"{'trial':<22} {'ref ms/step':>11} {'new ms/step':>11} {'ratio':>6}  "
          f"{'ref result':>12} {'new result':>12} {'ref steps':>9} {'new steps':>9} {'same bits':>9}")
    results: dict[str, list] = {"upper trials": [], "row maps": []}
    for name, H in heads.items():
        A = softmax_rows(H)
        svd, _ = up.svd_baseline(A)
        for k in map(int, args.ranks.split(",")):
            if k < min(A.shape):
                start = svd_factors(*svd, k)
                side_by_side(f"{name} rank {k}", lambda: upper_trial(old_rf.refine, A, start, args.eps, args.iters),
                             lambda: upper_trial(rf.refine, A, start, args.eps, args.iters), args.repeat,
                             results["upper trials"])
        rng = np.random.default_rng(0)
        for d in (int(x) for x in args.row_sets.split(",") if x):
            S = sorted(rng.choice(A.shape[0], d, replace=False).tolist())
            G0 = rm.initial_row_map(A, S, None)
            side_by_side(f"{name} rows {d}", lambda: row_descent(old_rm, A[S], G0),
                         lambda: row_descent(rm, A[S], G0), args.repeat, results["row maps"])
    for what, rows in results.items():
        if rows:
            print(f"{what}: median ratio new / ref {float(np.median([r for r, _ in rows])):.2f} over {len(rows)}; "
                  f"the same result to the last bit in {sum(s for _, s in rows)} of {len(rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

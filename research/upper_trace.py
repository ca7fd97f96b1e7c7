"""Every trial of the upper search, per head and tolerance: where its work units go.

Runs ``search_brackets`` on heads saved with ``np.savez`` (read without pickle) and prints,
for each call of ``search_upper`` (thorough calls it twice per tolerance: its base preset's
run, then its own), the budget, the units spent and one line per trial: phase, start,
rank, steps run out of the trial's length, how it ended and its error / eps. The code
traced is whichever ``numeric`` is first on ``PYTHONPATH``: code with
``numeric.runtime.trial_trace`` (the annealed trials) is traced through it; older code (such as
``5d20121``, before the annealing change) through a wrapper of ``upper.refine``, which
gives rank, length, steps and error (no phase or start).

    PYTHONPATH=. python -m research.upper_trace --heads-npz HEADS.npz --heads demo1_l1h3 --effort default
    PYTHONPATH=OLD_TREE python -m research.upper_trace --heads-npz HEADS.npz --heads demo0_l3h8 --effort thorough --eps 1/10
    PYTHONPATH=. python -m research.upper_trace --heads-npz HEADS.npz --heads q256_l2h0 --eps 1/10 --upper-work 1280000
"""
from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.upper_trace", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads-npz", required=True)
    ap.add_argument("--heads", required=True, help="comma-separated names in the npz")
    ap.add_argument("--effort", default="default")
    ap.add_argument("--eps", default="1/10,1/4,1/2")
    ap.add_argument("--upper-work", type=int, help="the preset with this upper budget (units per tolerance)")
    args = ap.parse_args(argv)

    import dataclasses

    import numeric.search.driver as drv
    import numeric.search.refine as rf
    import numeric.search.upper as up
    from numeric.heads.extract import softmax_rows

    import numeric.runtime as runtime

    new = hasattr(runtime, "trial_trace")
    if not new:
        real_refine = up.refine

        def logged(A, P0, Q0, e, **kw):
            b = kw.get("budget")
            u0 = b.used if b is not None else 0
            P, Q, err = real_refine(A, P0, Q0, e, **kw)
            k = P0.shape[1]
            steps = (b.used - u0) // rf.step_work(*A.shape, k) if b is not None else -1
            print(f"    trial k={k:4d} steps={steps:5d}/{kw.get('iters')} err/eps={err / e:.4f}", flush=True)
            return P, Q, err

        up.refine = logged
    real = drv.search_upper
    used = []

    def traced(A, e, budget, **kw):
        trace = runtime.trial_trace() if new else contextlib.nullcontext()
        print(f"  search_upper eps={e:.6g} budget={budget.units:,} hybrid={kw.get('hybrid')} "
              f"warm={kw.get('warm') is not None}", flush=True)
        with trace as record:
            r = real(A, e, budget, **kw)
        used.append(budget.used)
        if new:
            for t, log in zip(record.trials, record.refines):
                print(f"    {t[0]:9s} {t[1]:15s} k={t[2]:4d} steps={log.steps:5d}/{t[3]:5d} {log.reason:9s} "
                      f"err/eps={t[4] / e:.4f}")
        print(f"   used={budget.used:,} found {[(x.rank, x.family) for x in r[:3]]}", flush=True)
        return r

    drv.search_upper = traced
    effort = args.effort
    if args.upper_work is not None:
        from numeric.search.effort import effort_budgets
        effort = dataclasses.replace(effort_budgets(args.effort), upper_work=args.upper_work)
    with np.load(args.heads_npz, allow_pickle=False) as data:
        logits = {h: np.asarray(data[h], dtype=np.float64) for h in args.heads.split(",")}
    for h, H in logits.items():
        used.clear()
        t = time.process_time()
        res = drv.search_brackets(softmax_rows(H), args.eps.split(","), logits=H, id_prefix=h, effort=effort)
        print(f"{h} cpu {time.process_time() - t:.1f} upper units {sum(used):,} float brackets "
              f"{[(str(r.eps), r.lower, r.upper) for r in res.results]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

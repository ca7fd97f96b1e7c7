"""One upper trial per variant of the annealing schedules, side by side.

For each head and tolerance, a rank just below the upper rank the search reached before
the annealed upper trials (``--ranks``, or the truncated-SVD rank's half when not given) is tried from the truncated SVD
with each variant: the trial of the code before the annealed upper trials (``git show REF:numeric/search/refine.py``,
600 and 1,800 steps with its stall rule and its temperature eps -> 0.003 eps), and the
continuation run of ``numeric.search.refine`` at 600 and 2,000 steps, with and without
the Huber smoothing and with the old relative temperature. Prints the error over eps, the
steps run and why the trial ended, and the work units (``refine.step_work``): CPU-load free.

    python -m research.anneal_tune --heads-npz HEADS.npz --heads q256_l0h0,q256_l2h0 --ranks 54,53,5:95,44,17
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from numeric.runtime import trial_trace
from numeric.heads.extract import softmax_rows
from numeric.search import refine as rf
from numeric.search import upper as up

EPS = (0.1, 0.25, 0.5)


#: Imports of the old ``refine.py`` whose targets moved since (the old module runs against this tree).
MOVED = {"from numeric.search.threads import torch_threads": "from numeric.runtime import torch_threads",
         "from numeric.search.upper import pick_device": "from numeric.search.device import pick_device"}


def module_at(ref: str, path: str = "numeric/search/refine.py"):
    """The module ``path`` of ``ref`` (loaded from ``git show`` beside this tree, nothing checked out)."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:{path}"], check=True,
                          capture_output=True, text=True).stdout
    for was, now in MOVED.items():
        text = text.replace(was, now)
    name = "old_" + Path(path).stem
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(text)
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod            # a dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def variants(old):
    """name -> function(A, P0, Q0, eps, budget) -> (P, Q, err)."""
    def new(iters, **patch):
        def run(A, P0, Q0, eps, budget):
            saved = {k: getattr(rf, k) for k in patch}
            try:
                for k, v in patch.items():
                    setattr(rf, k, v)
                return rf.refine(A, P0, Q0, eps, iters=iters, budget=budget)
            finally:
                for k, v in saved.items():
                    setattr(rf, k, v)
        return run

    out = {"old600": lambda A, P0, Q0, e, b: old.refine(A, P0, Q0, e, iters=600, budget=b),
           "old1800": lambda A, P0, Q0, e, b: old.refine(A, P0, Q0, e, iters=1800, stall_gain=0.02, budget=b)}
    out.update({"new600": new(600), "new2000": new(2000), "new2000-noHuber": new(2000, HUBER_D0=1e-9, HUBER_D1=1e-9),
                "new2000-T=eps": new(2000, LSE_T0=10.0, LSE_T0_EPS=1.0),
                "new2000-floor/2": new(2000, LSE_FLOOR_DIV=60.0), "new600-floor/2": new(600, LSE_FLOOR_DIV=60.0)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.anneal_tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads-npz", required=True, help="logits saved with np.savez (read without pickle)")
    ap.add_argument("--heads", required=True, help="comma-separated names in the npz")
    ap.add_argument("--ranks", help="per head, colon-separated; per head the ranks at eps 1/10, 1/4, 1/2")
    ap.add_argument("--variants", default="old600,old1800,new600,new2000,new2000-noHuber,new2000-T=eps")
    ap.add_argument("--ref", default="5d20121", help="git ref of the code before the annealed upper trials")
    args = ap.parse_args(argv)
    from numeric.search.budget import Budget

    runs = variants(module_at(args.ref))
    names = args.variants.split(",")
    with np.load(args.heads_npz, allow_pickle=False) as data:
        heads = {h: np.asarray(data[h], dtype=np.float64) for h in args.heads.split(",")}
    ranks = [list(map(int, r.split(","))) for r in args.ranks.split(":")] if args.ranks else None
    print(f"{'head':<12} {'eps':>5} {'rank':>5} " + " ".join(f"{n:>22}" for n in names))
    for hi, (name, H) in enumerate(heads.items()):
        A = softmax_rows(H)
        svd, errs = up.svd_baseline(A)
        for ei, eps in enumerate(EPS):
            k = ranks[hi][ei] if ranks else max(1, int(np.nonzero(errs <= eps)[0][0]) // 2)
            start = up.svd_factors(*svd, k)
            cols = []
            for n in names:
                b = Budget(10**12)
                t = time.process_time()
                with trial_trace() as trace:
                    _, _, err = runs[n](A, *start, eps, b)
                cpu = time.process_time() - t
                why = trace.refines[0].reason[:4] if trace.refines else "-"
                cols.append(f"{err / eps:.4f} {b.used // 1000:>5}k {why:<4} {cpu:4.1f}s")
            print(f"{name:<12} {eps:>5} {k:>5} " + " ".join(f"{c:>22}" for c in cols), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

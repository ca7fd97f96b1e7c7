"""Where the gap L < U sits: measurements beyond the default search.

For every open cell (L < U) of the given bracket files (written by
``the former quality script --out DIR``), measure with budgets far above the default
search's:

- upper side: the smooth-max descent at rank U - 1 with ``--steps`` steps and
  no stall exit, from two starts: the truncated SVD (the search's start) and a
  basis of rows of A chosen greedily by largest residual (a different basin).
  The error reached, relative to eps, shows how far rank U - 1 is;
- lower side, column families beyond the row-side L: the decoded inverse,
  the LP-optimal map on the top singular subspace (``lp-svd`` from d = 1), the
  same LP on mixed subspaces ``span(V_k, e_T)`` (singular vectors plus
  coordinates in order of column peak, grown from three bases k), and the
  Frobenius tail (K.2) on the best row subset (rows by l2 norm);
- the count of singular values above eps and above eps / 2.5.

Every lower figure here is a float estimate of a certificate the search could
export (none is exported); the upper errors are float descents. The script
prints one table row per cell and the ratios side by side.

    python -m research.quality --groups minilm --out DIR
    OMP_NUM_THREADS=1 python -m research.gap DIR/minilm_*.safetensors [--steps 4000] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np


from exact.bracketfile import read_bracket_file
from exact.errors import CertificateError
from numeric.search.budget import Budget
from numeric.search.candidate import certifies_subspace
from numeric.search.frobenius import frobenius
from numeric.search.inverse import decoded
from numeric.search.lp import LPFailed, min_norm_left_inverse
from numeric.search.lp_subspace import lp_svd
from numeric.search.refine import refine
from numeric.search.starts import svd_factors

#: Row LPs per cell for the column-side families: the former 20 s of HiGHS, at the 54 row LPs
#: per second that the search's LP on singular subspaces ran on MiniLM heads (81 in 1.5 s).
LP_SOLVES = 1000


def residual_row_basis(A: np.ndarray, k: int):
    """Rows of A taken one at a time by largest l1 residual of the least-squares fit; factors (P, Q)."""
    S: list[int] = []
    err = np.abs(A).sum(axis=1)
    for _ in range(k):
        S.append(int(np.argmax(err)))
        C, *_ = np.linalg.lstsq(A[S].T, A.T, rcond=None)
        err = np.abs(A - (A[S].T @ C).T).sum(axis=1)
    C, *_ = np.linalg.lstsq(A[S].T, A.T, rcond=None)
    return C.T, A[S].T.copy()


def descent_floor(A: np.ndarray, rank: int, eps: float, steps: int) -> dict:
    """Least max row-l1 error at ``rank`` from the SVD and the row-basis starts: one complete annealed
    trial each (since the annealed upper trials, no stall rule ends a trial before its last quarter)."""
    U, S, Vt = np.linalg.svd(A, full_matrices=False)
    return {name: refine(A, *start, eps, iters=steps)[2]
            for name, start in (("svd", svd_factors(U, S, Vt, rank)), ("rows", residual_row_basis(A, rank)))}


def lp_certifies(A: np.ndarray, X: np.ndarray, eps: float, budget: Budget) -> bool:
    """K.3: the LP-optimal R on range X passes the search's float check (``certifies_subspace``)."""
    try:
        R, _ = min_norm_left_inverse(A @ X, X, budget=budget)
    except LPFailed:
        return False
    return certifies_subspace(A, X, R, eps)


def mixed_rank(A: np.ndarray, Vt: np.ndarray, k: int, eps: float, budget: Budget) -> int:
    """Largest ``dim span(V_k, e_T)`` certified by the LP, T grown in order of column peak."""
    n = A.shape[1]
    X = Vt[:k].T.copy()
    for t in np.argsort(-A.max(axis=0), kind="stable"):
        if budget.exhausted or A[:, t].max() <= eps:
            break
        Xt = np.hstack([X, np.eye(n)[:, [t]]])
        if np.linalg.matrix_rank(Xt) == Xt.shape[1] and lp_certifies(A, Xt, eps, budget):
            X = Xt
    return X.shape[1]


def frobenius_rows(A: np.ndarray, eps: float) -> int:
    """Largest d with ``F_(d-1)(A[S, :]) > sqrt(|S|) eps`` over row prefixes S by l2 norm (K.2 on A[S, :])."""
    order = np.argsort(-np.linalg.norm(A, axis=1))
    best = 0
    for s in range(1, A.shape[0] + 1):
        c = frobenius(np.linalg.svd(A[order[:s]], compute_uv=False), s, eps)
        if c is not None:
            best = max(best, c.rank)
    return best


def column_side(A: np.ndarray, eps: float) -> dict:
    U, S, Vt = np.linalg.svd(A)
    budget = Budget(LP_SOLVES)
    dec = decoded(A, eps)
    ls = lp_svd(A, eps, Vt, 1, Budget(LP_SOLVES // 2))
    k = ls.rank if ls is not None else 0
    mixed = max(mixed_rank(A, Vt, b, eps, budget) for b in sorted({k, k // 2, 0}, reverse=True))
    return {"decoded": dec.rank if dec is not None else 0, "lp_svd": k, "mixed": mixed,
            "frobenius_rows": frobenius_rows(A, eps),
            "sigma_above_eps": int((S > eps).sum()), "sigma_above_eps/2.5": int((S > eps / 2.5).sum())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.gap", description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="bracket files from the former quality script --out")
    ap.add_argument("--steps", type=int, default=4000, help="descent steps per start (default 4000)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for path in args.files:
        try:
            bf = read_bracket_file(path)
        except CertificateError as exc:
            print(f"error: {path}: {exc}", file=sys.stderr)
            return 2
        for cell in bf.cells:
            L, U = cell.lower.rank, cell.upper.rank
            if L >= U:
                continue
            A = np.array(bf.tensors[cell.target.matrix], dtype=np.float64)
            eps = float(cell.eps)
            t0 = time.perf_counter()
            row = {"file": os.path.basename(path), "eps": cell.eps_text, "L": L, "U": U}
            row.update({f"U-1 {k}": v / eps for k, v in descent_floor(A, U - 1, eps, args.steps).items()})
            row.update(column_side(A, eps))
            row["seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            if not args.json:
                print(" | ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()),
                      flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    elif rows:
        col = [max(r["decoded"], r["lp_svd"], r["mixed"]) / r["L"] for r in rows]
        fro = [r["frobenius_rows"] / r["L"] for r in rows]
        print(f"cells {len(rows)}; error at U-1 / eps, median: svd start "
              f"{np.median([r['U-1 svd'] for r in rows]):.3f}, row-basis start "
              f"{np.median([r['U-1 rows'] for r in rows]):.3f} (min {min(min(r['U-1 svd'], r['U-1 rows']) for r in rows):.3f}); "
              f"best column family / L, median {np.median(col):.2f} (max {max(col):.2f}); "
              f"row-subset Frobenius / L, median {np.median(fro):.2f} (max {max(fro):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

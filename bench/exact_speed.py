"""Exact verification versus the same checks in float64, on one 256 x 256 cell.

The cell: a softmax head (logits of a random low-rank query/key model at
temperature 1), an upper witness of rank 50 (truncated SVD factors), a
column-side reconstruction witness of rank 10 (truncated pseudo-inverse,
K.3), a row-side witness of rank 10, and the softmax target with its slack
(K.5). Both pipelines run the same checks: the exact one through
``exact.verify`` (reading the bracket file, converting, proving the slack
with arb), the float one with numpy on the stored arrays.

    python bench/exact_speed.py [--n 256] [--upper-rank 50] [--lower-rank 10] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from exact.verify import verify_file  # noqa: E402
from numeric.export import rational_string, write_bracket_file  # noqa: E402


def make_cell(n: int, k_up: int, d_low: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    Qh, Kh = rng.standard_normal((n, 16)), rng.standard_normal((n, 16))
    H = (Qh @ Kh.T) / 4.0
    A = np.exp(H - H.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    U, s, Vt = np.linalg.svd(A)
    P, Q = U[:, :k_up] * s[:k_up], Vt[:k_up].T
    up_err = np.abs(A - P @ Q.T).sum(axis=1).max()
    X = Vt[:d_low].T.copy()
    R = X @ np.diag(1 / s[:d_low]) @ U[:, :d_low].T
    Lm = X.T.copy()
    Z = U[:, :d_low].copy()
    G = Vt[:d_low].T @ np.diag(1 / s[:d_low]) @ U[:, :d_low].T
    M = Z.T.copy()
    low_norm = max(np.abs(R).sum(axis=1).max(), np.abs(G).sum(axis=1).max())
    slack = 1e-12
    eps = max(up_err * 1.01 + slack, 1e-3)
    eps_low = 0.5 / low_norm            # a lower claim that holds: ||R|| eps ~ 1/2
    tensors = {"A": A, "H": H, "P": P, "Q": Q, "R": R, "X": X, "L": Lm, "G": G, "Z": Z, "M": M}
    target = {"matrix": "A", "logits": "H", "slack": rational_string(slack)}
    cells = [
        {"id": "upper", "eps": rational_string(eps), "target": target,
         "lower": {"rank": 0, "witness": {"kind": "trivial"}},
         "upper": {"rank": k_up, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}},
        {"id": "lower", "eps": rational_string(eps_low), "target": target,
         "lower": {"rank": d_low, "witness": {"kind": "reconstruction", "R": "R", "X": "X", "L": "L"}},
         "upper": {"rank": n, "witness": {"kind": "trivial"}}},
        {"id": "row-lower", "eps": rational_string(eps_low), "target": target,
         "lower": {"rank": d_low, "witness": {"kind": "row_reconstruction", "G": "G", "Z": "Z", "M": "M"}},
         "upper": {"rank": n, "witness": {"kind": "trivial"}}},
    ]
    return cells, tensors, eps, eps_low, slack


def float_checks(t, eps, eps_low, slack):
    """The same conditions in float64 (not rigorous): what the exact tier is compared with."""
    A, H = t["A"], t["H"]
    row1 = lambda M: np.abs(M).sum(axis=1).max()  # noqa: E731
    E_soft = np.exp(H - H.max(axis=1, keepdims=True))
    E_soft /= E_soft.sum(axis=1, keepdims=True)
    ok_slack = row1(E_soft - A) <= slack
    ok_up = row1(A - t["P"] @ t["Q"].T) <= eps - slack
    d = t["X"].shape[1]
    E = t["R"] @ (A @ t["X"]) - t["X"]
    F = t["L"] @ t["X"] - np.eye(d)
    eta = row1(E) * row1(t["L"]) / (1 - row1(F))
    ok_low = row1(t["R"]) * (eps_low + slack) < 1 - eta
    E2 = t["Z"].T @ A @ t["G"] - t["Z"].T
    F2 = t["M"] @ t["Z"] - np.eye(d)
    eta2 = row1(E2) * row1(t["M"].T) / (1 - row1(F2.T))
    ok_row = row1(t["G"]) * (eps_low + slack) < 1 - eta2
    return bool(ok_slack and ok_up and ok_low and ok_row)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/exact_speed.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--upper-rank", type=int, default=50)
    ap.add_argument("--lower-rank", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    cells, tensors, eps, eps_low, slack = make_cell(args.n, args.upper_rank, args.lower_rank)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cell.safetensors")
        write_bracket_file(path, cells, tensors)
        exact_times, float_times = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            reports = verify_file(path)
            exact_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            from exact.bracketfile import read_bracket_file
            bf = read_bracket_file(path)   # the float check reads the same file
            ok = float_checks(bf.tensors, eps, eps_low, slack)
            float_times.append(time.perf_counter() - t0)
    verdicts = {r.id: (r.lower.verified, r.upper.verified) for r in reports}
    te, tf = min(exact_times), min(float_times)
    print(f"cell {args.n}x{args.n}: upper rank {args.upper_rank}, reconstruction rank {args.lower_rank} "
          f"(column and row side), softmax target with slack {slack:g}")
    print(f"exact verdicts (lower, upper): {verdicts}")
    print(f"float64 verdict: {ok}")
    print(f"exact   {te * 1e3:9.1f} ms  (3 cells: slack proved once per cell, best of {args.repeat})")
    print(f"float64 {tf * 1e3:9.1f} ms")
    print(f"ratio exact/float64: {te / tf:.1f}")
    return 0 if all(all(v) for v in verdicts.values()) and ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

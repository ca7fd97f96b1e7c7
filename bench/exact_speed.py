"""Exact verification versus the same checks in float64, on one 256 x 256 cell.

The cell (see ``make_cell``): a softmax target with its slack (K.5), an
upper witness of rank 50 (K.1) and a reconstruction witness of rank 10 (K.3),
once column-side and once row-side. Both pipelines run the same checks: the exact one through
``exact.verify`` (reading the bracket file, converting, proving the slack
with arb), the float one with numpy on the stored arrays.

    python bench/exact_speed.py [--n 256] [--upper-rank 50] [--lower-rank 10] [--repeat 3]
                                [--slack fixed|float-tier|arb]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from fractions import Fraction

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")          # one core for both pipelines, before numpy loads

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from exact.cellspec import CellSpec, Claim, TargetSpec
from exact.verify import verify_file
from numeric.bracketwriter import rational_string, write_bracket_file


def _slack(H, A, mode: str):
    """The claimed slack: ``fixed`` 1e-12 (a producer that rounds up), ``float-tier`` what
    ``numeric.search.slack.target_slack`` writes (the exact tier's float bound, rounded up), ``arb`` the
    tight arb bound (what the float tier wrote before, which sends every row to arb)."""
    if mode == "fixed":
        return 1e-12
    if mode == "arb":
        from exact.slack import softmax_slack_bound
        q = softmax_slack_bound(H, A)
        return Fraction(int(q.p), int(q.q))
    from numeric.search.slack import target_slack
    return target_slack(H, A)[1]


def make_cell(n: int, k_up: int, d_low: int, seed: int = 0, slack_mode: str = "fixed"):
    """A 256 x 256 softmax target with r_eps in [d_low, k_up] at one eps.

    ``A = 0.7 W + 0.3 S1 S2``: W averages within d_low blocks (rank d_low,
    singular values 1), S1 (n x (k_up - d_low)) and S2 row-stochastic, so A is
    row-stochastic of rank <= k_up; the logits are ``log A`` (softmax_row(log A)
    = A). Upper: SVD factors of rank k_up. Lower: truncated pseudo-inverse of
    rank d_low (column side) and its row-side twin.
    """
    rng = np.random.default_rng(seed)
    blocks = np.repeat(np.arange(d_low), -(-n // d_low))[:n]
    W = (blocks[:, None] == blocks[None, :]).astype(float)
    W /= W.sum(axis=1, keepdims=True)
    S1 = rng.random((n, k_up - d_low)) ** 4
    S1 /= S1.sum(axis=1, keepdims=True)
    S2 = rng.random((k_up - d_low, n)) ** 4
    S2 /= S2.sum(axis=1, keepdims=True)
    A0 = 0.7 * W + 0.3 * S1 @ S2
    H = np.log(A0)
    A = np.exp(H - H.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    U, s, Vt = np.linalg.svd(A)
    P, Q = U[:, :k_up] * s[:k_up], Vt[:k_up].T
    up_err = np.abs(A - P @ Q.T).sum(axis=1).max()
    X = Vt[:d_low].T.copy()
    R = X @ np.diag(1 / s[:d_low]) @ U[:, :d_low].T
    G = R.copy()
    Z = U[:, :d_low].copy()
    low_norm = np.abs(R).sum(axis=1).max()
    slack = _slack(H, A, slack_mode)
    eps = 0.5 / low_norm                 # ||R|| eps ~ 1/2: the lower claim holds
    assert up_err + float(slack) < eps, (up_err, eps)
    tensors = {"A": A, "H": H, "P": P, "Q": Q, "R": R, "X": X, "L": X.T.copy(), "G": G, "Z": Z,
               "M": Z.T.copy()}
    target = TargetSpec("A", "H", rational_string(slack))
    upper = Claim.of(k_up, "factors", P="P", Q="Q")
    cells = [
        CellSpec("column-side", rational_string(eps), target, Claim.of(d_low, "reconstruction", R="R", X="X", L="L"),
                 upper),
        CellSpec("row-side", rational_string(eps), target, Claim.of(d_low, "row_reconstruction", G="G", Z="Z", M="M"),
                 upper),
    ]
    return cells, tensors, eps, slack


def float_checks(t, eps, slack, row_side: bool):
    """The same conditions in float64 (not rigorous): what the exact tier is compared with."""
    A, H = t["A"], t["H"]
    row1 = lambda M: np.abs(M).sum(axis=1).max()
    E_soft = np.exp(H - H.max(axis=1, keepdims=True))
    E_soft /= E_soft.sum(axis=1, keepdims=True)
    ok_slack = row1(E_soft - A) <= float(slack)
    slack = float(slack)
    ok_up = row1(A - t["P"] @ t["Q"].T) <= eps - slack
    d = t["Z" if row_side else "X"].shape[1]
    if row_side:
        E = t["Z"].T @ A @ t["G"] - t["Z"].T
        F = t["M"] @ t["Z"] - np.eye(d)
        eta = row1(E) * row1(t["M"].T) / (1 - row1(F.T))
        ok_low = row1(t["G"]) * (eps + slack) < 1 - eta
    else:
        E = t["R"] @ (A @ t["X"]) - t["X"]
        F = t["L"] @ t["X"] - np.eye(d)
        eta = row1(E) * row1(t["L"]) / (1 - row1(F))
        ok_low = row1(t["R"]) * (eps + slack) < 1 - eta
    return bool(ok_slack and ok_up and ok_low)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/exact_speed.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--upper-rank", type=int, default=50)
    ap.add_argument("--lower-rank", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--slack", choices=["fixed", "float-tier", "arb"], default="fixed",
                    help="the claimed slack (see _slack; default fixed 1e-12)")
    args = ap.parse_args(argv)
    cells, tensors, eps, slack = make_cell(args.n, args.upper_rank, args.lower_rank, slack_mode=args.slack)
    from exact.bracketfile import read_bracket_file
    print(f"{args.n}x{args.n} softmax target (slack {float(slack):.3g}, {args.slack}), eps = {eps:.4g}: upper factors of rank "
          f"{args.upper_rank}, reconstruction witness of rank {args.lower_rank}; best of {args.repeat}")
    print(f"{'cell':<12} {'exact ms':>9} {'float64 ms':>11} {'ratio':>7}  verdicts (exact lower, upper; float)")
    all_ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for cell in cells:
            path = os.path.join(tmp, cell.id + ".safetensors")
            write_bracket_file(path, [cell], tensors)
            exact_times, float_times = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                (report,) = verify_file(path)
                exact_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                bf = read_bracket_file(path)          # the float check reads the same file
                ok = float_checks(bf.tensors, eps, slack, cell.id == "row-side")
                float_times.append(time.perf_counter() - t0)
            te, tf = min(exact_times), min(float_times)
            verdict = (report.lower.verified, report.upper.verified, ok)
            all_ok &= all(verdict)
            print(f"{cell.id:<12} {te * 1e3:9.1f} {tf * 1e3:11.1f} {te / tf:7.1f}  {verdict}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

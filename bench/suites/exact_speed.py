"""Exact verification versus the same checks in float64, on one 256 x 256 cell.

The cell (see ``make_cell``): a softmax target with its slack (K.5), an
upper witness of rank 50 (K.1) and a reconstruction witness of rank 10 (K.3),
once column-side and once row-side. Both pipelines run the same checks: the exact one through
``exact.verify`` (reading the bracket file, converting, proving the slack), the float one with
numpy on the stored arrays (not rigorous: what the exact tier is compared with). CPU time of this
process (``time.process_time``), one BLAS thread, best of the repeats. Cases: the slack claimed
as a producer that rounds up would (``fixed``, 1e-12) and as the float tier writes it
(``float-tier``, the exact tier's own float bound rounded up).
"""
from __future__ import annotations

import os
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from bench.common import fmt, table
from bench.runner import Case, Suite
from exact.cellspec import CellSpec, Claim, TargetSpec
from exact.verify import verify_file
from fileio.bracketwriter import rational_string, write_bracket_file


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


def cases(size: str) -> list[Case]:
    if size == "smoke":
        return [Case("smoke-n32", {"n": 32, "upper_rank": 8, "lower_rank": 2, "repeat": 1, "slack": "fixed"})]
    return [Case(f"n256-{mode}", {"n": 256, "upper_rank": 50, "lower_rank": 10, "repeat": 5, "slack": mode})
            for mode in ("fixed", "float-tier")]


def run(case: Case, tmp: Path) -> dict:
    from exact.bracketfile import read_bracket_file

    p = case.params
    cells, tensors, eps, slack = make_cell(p["n"], p["upper_rank"], p["lower_rank"], slack_mode=p["slack"])
    rows = []
    for cell in cells:
        path = os.path.join(tmp, cell.id + ".safetensors")
        write_bracket_file(path, [cell], tensors)
        exact_times, float_times = [], []
        for _ in range(p["repeat"]):
            t0 = time.process_time()
            (report,) = verify_file(path)
            exact_times.append(time.process_time() - t0)
            t0 = time.process_time()
            bf = read_bracket_file(path)          # the float check reads the same file
            ok = float_checks(bf.tensors, eps, slack, cell.id == "row-side")
            float_times.append(time.process_time() - t0)
        rows.append({"cell": cell.id, "exact_ms": 1e3 * min(exact_times), "float64_ms": 1e3 * min(float_times),
                     "exact_lower": bool(report.lower.verified), "exact_upper": bool(report.upper.verified),
                     "float": ok})
    return {"slack": float(slack), "eps": float(eps), "cells": rows}


def tables(results: list[dict]) -> dict[str, str]:
    rows = []
    for r in results:
        p, rec = r["params"], r["record"]
        for c in rec["cells"]:
            verdict = ", ".join("verified" if c[k] else "REFUSED" for k in ("exact_lower", "exact_upper"))
            rows.append([f"{c['cell']}, n = {p['n']}", f"{p['slack']} ({rec['slack']:.3g})", fmt(c["exact_ms"], 1),
                         fmt(c["float64_ms"], 1), fmt(c["exact_ms"] / max(c["float64_ms"], 1e-9), 1),
                         f"{verdict}; {'true' if c['float'] else 'false'}"])
    return {"ratio": table(["cell", "slack claimed", "exact ms", "float64 ms", "exact / float64",
                            "verdicts (exact lower, upper; float)"], rows, "llrrrl")}


SUITE = Suite("exact_speed", "the exact tier against float64 on one cell", cases, run, tables,
              "python -m bench run exact_speed")

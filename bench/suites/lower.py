"""The lower side beside a plain row-side LP, and its stability under tiny input changes.

Per head and tolerance (1/2, 1/4, 1/10, run largest first, each handing its best row set on as the search
does): the verified L of the lower families at default and at thorough (``numeric.search.lower``; every
L here is the first candidate that the exact tier verifies, ``exact.certificates.check_lower``), and the
verified L of a plain row-side LP, the reference: backward elimination from the ``REFERENCE_POOL``
farthest-first rows (``far_rows.far_order``), solving the decoder LP (``lp.min_norm_row_decoder``) and
dropping the tenth of the rows with the largest dual rows until the pool certifies. Stability: default's
verified L on the head and on ``PERTURBATIONS`` copies with every entry scaled by ``1 + u``, u uniform
in [-1e-6, 1e-6], rows renormalised; the spread is max minus min. CPU seconds of each search, one BLAS
thread. Heads (softmax of logits): ``diffuse`` (``0.5 q k^T / 4``, q, k standard normal with 16
columns), ``qk`` (the same at 2), ``local`` (``-(i - j)^2 / 8`` plus noise: banded).
"""
from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from bench.common import fmt, table
from bench.runner import Case, Suite

EPS = ("1/2", "1/4", "1/10")
KINDS = ("diffuse", "qk", "local")
#: Rows the reference's backward elimination starts from.
REFERENCE_POOL = 48
#: Perturbed copies of each head, and their relative size.
PERTURBATIONS, PERTURBATION_SIZE = 10, 1e-6


def head(kind: str, n: int) -> np.ndarray:
    """The row-stochastic head of a kind (module docstring), seeded by n."""
    rng = np.random.default_rng(n + KINDS.index(kind))
    if kind == "local":
        i = np.arange(n, dtype=float)
        H = -((i[:, None] - i[None, :]) ** 2) / 8.0 + 0.5 * rng.normal(size=(n, n))
    else:
        q, k = rng.normal(size=(n, 16)), rng.normal(size=(n, 16))
        H = {"diffuse": 0.5, "qk": 2.0}[kind] * q @ k.T / 4.0
    E = np.exp(H - H.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _verified_rank(A: np.ndarray, candidates, eps: Fraction) -> int:
    from flint import fmpq

    from exact.certificates import check_lower
    from exact.matrix import ExactMatrix
    from numeric.search.across import exact_lower_witness

    Aq, e = ExactMatrix.from_float64(A), fmpq(eps.numerator, eps.denominator)
    for c in candidates:
        if c.rank > 0 and check_lower(Aq, exact_lower_witness(c), e, c.rank).verified:
            return int(c.rank)
    return 0


def _search_chain(A: np.ndarray, effort: str) -> tuple[list[int], float]:
    """Verified L per tolerance (largest first, row sets handed on) at a preset, and the CPU seconds."""
    from numeric.search.candidate import strongest_rows
    from numeric.search.effort import BASE, PRESETS
    from numeric.search.lower import lower_candidates

    t0 = time.process_time()
    svd = np.linalg.svd(A)
    Ls, start = [], None
    for text in EPS:
        eps = Fraction(text)
        found = []
        for name in ([BASE[effort]] if effort in BASE else []) + [effort]:   # thorough runs default first
            found += lower_candidates(A, float(eps), svd, PRESETS[name], start=start, seed=1)
            start = strongest_rows(found) or start
        found.sort(key=lambda c: -c.rank)
        Ls.append(_verified_rank(A, found, eps))
    return Ls, time.process_time() - t0


def reference(A: np.ndarray, eps: float):
    """The plain row-side LP's witness at ``eps`` (module docstring), or None."""
    from numeric.search.candidate import SAFETY, row_witness
    from numeric.search.far_rows import far_order
    from numeric.search.lp import LPFailed, min_norm_row_decoder

    S = list(far_order(A)[:REFERENCE_POOL])
    while S:
        try:
            G, v, Lam = min_norm_row_decoder(A[S], iterations=50000, duals=True)
        except LPFailed:
            return None
        if v * eps < 1 - SAFETY:
            return row_witness(A, S, G, "row_reconstruction/reference")
        drop = set(np.argsort(-np.abs(Lam).sum(axis=1), kind="stable")[:max(1, len(S) // 10)].tolist())
        S = [s for i, s in enumerate(S) if i not in drop]
    return None


def cases(size: str) -> list[Case]:
    if size == "smoke":
        return [Case("smoke-local-n12", {"kind": "local", "n": 12, "perturbations": 1, "efforts": ["quick", "quick"]})]
    every = [Case(f"{kind}-n{n:03d}", {"kind": kind, "n": n, "perturbations": PERTURBATIONS,
                                       "efforts": ["default", "thorough"]})
             for n in (64, 128) for kind in KINDS]
    return every if size == "large" else [c for c in every if c.params["n"] == 64]


def run(case: Case, tmp: Path) -> dict:
    from threadpoolctl import threadpool_limits

    p = case.params
    A = head(p["kind"], p["n"])
    low, high = p["efforts"]
    with threadpool_limits(1):
        default, t_default = _search_chain(A, low)
        thorough, t_thorough = _search_chain(A, high)
        t0 = time.process_time()
        ref = []
        for text in EPS:
            w = reference(A, float(Fraction(text)))
            ref.append(_verified_rank(A, [w] if w is not None else [], Fraction(text)))
        t_ref = time.process_time() - t0
        rng = np.random.default_rng(0)
        moved = [default]
        for _ in range(p["perturbations"]):
            B = A * (1 + PERTURBATION_SIZE * rng.uniform(-1, 1, A.shape))
            moved.append(_search_chain(B / B.sum(axis=1, keepdims=True), low)[0])
    spread = [max(m[i] for m in moved) - min(m[i] for m in moved) for i in range(len(EPS))]
    return {"eps": list(EPS), "efforts": [low, high], "default": default, "thorough": thorough, "reference": ref, "spread": spread,
            "perturbations": p["perturbations"], "cpu_s": {"default": round(t_default, 2),
                                                          "thorough": round(t_thorough, 2),
                                                          "reference": round(t_ref, 2)}}


def tables(results: list[dict]) -> dict[str, str]:
    rows = []
    behind = 0
    for r in sorted(results, key=lambda r: (r["params"]["n"], KINDS.index(r["params"]["kind"]))):
        c = r["record"]
        for i, e in enumerate(c["eps"]):
            behind += c["thorough"][i] < c["reference"][i]
            rows.append([f"{r['params']['kind']} {r['params']['n']} x {r['params']['n']}", e, c["default"][i],
                         c["thorough"][i], c["reference"][i], c["spread"][i]])
        rows.append(["", "CPU s", fmt(c["cpu_s"]["default"], 1), fmt(c["cpu_s"]["thorough"], 1),
                     fmt(c["cpu_s"]["reference"], 1), f"over {c['perturbations']} copies"])
    return {"side_by_side": table(["head", "eps", "L default", "L thorough", "L plain row-side LP",
                                   "spread of default's L"], rows, "lrrrrr"),
            "behind": f"Cells where thorough's L is below the plain row-side LP's: **{behind}**."}


SUITE = Suite("lower", "the lower side beside a plain row-side LP, and its stability", cases, run, tables,
              "python -m bench run lower")

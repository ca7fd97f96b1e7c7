"""Lower witnesses: float searches for certificates of ``r_eps(A) >= d``.

Families (MATH.md section 2), each returning ``LowerCandidate`` records:

- ``trivial``: rank 1 iff ``eps < ||A||_row1``.
- ``frobenius``: K.2, the largest k with ``F_k(A) > sqrt(m) eps``; rank k + 1.
- ``reconstruction/pinv``: K.3 with the truncated pseudo-inverse,
  ``X = V_d``, ``R = V_d S_d^-1 U_d^T``, ``L = V_d^T``.
- ``reconstruction/decoded``: K.3 decoded inverse, ``X = I[:, T]``,
  ``R = I[:, T] A[S, T]^-1 I[S, :]``; (S, T) grown greedily, each column t
  paired with the unused row of largest weight on it.
- ``reconstruction/lp-svd``: K.3 with the LP-optimal R on the top-d right
  singular subspace (``numeric.lp.min_norm_left_inverse``, norm ``1/gamma(W)``),
  d above the best rank found so far, while HiGHS time lasts.
- ``row_reconstruction/far-rows``: the row-side lemma with ``Z = I[:, S]``,
  rows S taken greedily in farthest-first l1 order. The map
  ``G = C K^-1 I[S, :]`` aggregates columns into Voronoi cells (column j goes
  to the row of S with the largest weight on it, C the cell indicator,
  ``K = A[S, :] C``), so ``Z^T A G = Z^T`` and ``||G|| = ||K^-1||_row1``.
- ``row_reconstruction/far-rows-lp``: the same rows extended, with the
  LP-optimal G (``numeric.lp.min_norm_row_decoder``, norm ``1/gamma_row``).

All margins are float estimates; the exact tier decides.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from numeric.lp import LPFailed, min_norm_row_decoder

__all__ = ["LowerCandidate", "lower_candidates", "far_order"]

#: Float safety margin on every lower test ``norm * eps < 1 - eta``: the exact
#: defect terms of float witnesses are about 1e-13, so 1e-6 of room is ample.
SAFETY = 1e-6
#: Seconds of HiGHS time per tolerance for the LP extension of far rows.
LP_BUDGET_S = 4.0
#: The LP extension of far rows gives up after this many rows in a row failed.
LP_MISSES = 3


@dataclass(frozen=True)
class LowerCandidate:
    """A float-checked lower witness: claimed rank, family, kind and tensors."""

    rank: int
    family: str
    kind: str                      # "trivial" | "frobenius" | "reconstruction" | "row_reconstruction"
    tensors: dict = field(default_factory=dict)   # R, X, L  or  G, Z, M
    k: int | None = None           # Frobenius tail index
    norm: float | None = None      # ||R|| or ||G|| (float)


def _rownorm(M: np.ndarray) -> float:
    return float(np.abs(M).sum(axis=1).max()) if M.size else 0.0


def trivial(A: np.ndarray, eps: float) -> LowerCandidate:
    """Rank 1 when ``eps < ||A||_row1`` (trivial lower), else rank 0."""
    return LowerCandidate(1 if eps < _rownorm(A) * (1 - SAFETY) else 0, "trivial", "trivial")


def frobenius(S: np.ndarray, m: int, eps: float) -> LowerCandidate | None:
    """K.2: the largest k with ``F_k(A)^2 > m eps^2`` (float, with margin), rank k + 1."""
    tail = np.concatenate([np.cumsum((S ** 2)[::-1])[::-1], [0.0]])   # tail[k] = sum_{i >= k} s_i^2
    ks = np.nonzero(tail > m * eps * eps * (1 + 1e-6))[0]
    if ks.size == 0:
        return None
    k = int(ks[-1])
    return LowerCandidate(k + 1, "frobenius", "frobenius", k=k)


def pinv(U, S, Vt, eps: float) -> LowerCandidate | None:
    """K.3 truncated pseudo-inverse: the largest d with ``||V_d S_d^-1 U_d^T|| eps < 1``."""
    n, m = Vt.shape[1], U.shape[0]
    R = np.zeros((n, m))
    best = None
    for d in range(1, S.size + 1):
        if S[d - 1] <= 0:
            break
        R += np.outer(Vt[d - 1], U[:, d - 1]) / S[d - 1]
        if _rownorm(R) * eps < 1 - SAFETY:
            best = d
        elif best is not None and d > 2 * best + 8:
            break
    if best is None:
        return None
    X = Vt[:best].T.copy()
    R = (Vt[:best].T / S[:best]) @ U[:, :best].T
    return LowerCandidate(best, "reconstruction/pinv", "reconstruction",
                          {"R": R, "X": X, "L": X.T.copy()}, norm=_rownorm(R))


def far_order(M: np.ndarray) -> list[int]:
    """Rows of M in farthest-first order under the l1 distance (start: the most peaked row)."""
    m = M.shape[0]
    first = int(np.argmax(M.max(axis=1)))
    order = [first]
    mind = np.abs(M - M[first]).sum(axis=1)
    mind[first] = -1.0
    for _ in range(m - 1):
        j = int(np.argmax(mind))
        order.append(j)
        mind = np.minimum(mind, np.abs(M - M[j]).sum(axis=1))
        mind[order] = -1.0
    return order


def _voronoi(A: np.ndarray, S: list[int]):
    AS = A[S]
    cell = np.argmax(AS, axis=0)
    C = np.zeros((A.shape[1], len(S)))
    C[np.arange(A.shape[1]), cell] = 1.0
    K = AS @ C
    try:
        Ki = np.linalg.inv(K)
    except np.linalg.LinAlgError:
        return None, np.inf
    if not np.isfinite(Ki).all():
        return None, np.inf
    return C @ Ki, _rownorm(Ki)


def _row_witness(A: np.ndarray, S: list[int], GS: np.ndarray, family: str) -> LowerCandidate:
    m, n = A.shape
    d = len(S)
    Z = np.zeros((m, d))
    Z[S, np.arange(d)] = 1.0
    G = np.zeros((n, m))
    G[:, S] = GS
    return LowerCandidate(d, family, "row_reconstruction", {"G": G, "Z": Z, "M": Z.T.copy()}, norm=_rownorm(GS))


def far_rows(A: np.ndarray, eps: float, order: list[int]) -> tuple[LowerCandidate | None, list[int]]:
    """Row-side witness on far-apart rows with the Voronoi map (greedy over ``order``)."""
    S: list[int] = []
    for i in order:
        _, nrm = _voronoi(A, S + [i])
        if nrm * eps < 1 - SAFETY:
            S.append(i)
    if not S:
        return None, S
    GS, _ = _voronoi(A, S)
    return _row_witness(A, S, GS, "row_reconstruction/far-rows"), S


def far_rows_lp(A: np.ndarray, eps: float, S: list[int], order: list[int],
                budget_s: float = LP_BUDGET_S) -> LowerCandidate | None:
    """Extend S with the next far rows as long as the LP-optimal G certifies (doubling steps)."""
    t0 = time.perf_counter()
    rest = [i for i in order if i not in set(S)]
    best = None
    base = list(S)
    step = 1
    misses = 0
    while rest and time.perf_counter() - t0 < budget_s and misses < LP_MISSES:
        trial = base + rest[:step]
        left = budget_s - (time.perf_counter() - t0)
        try:
            GS, v = min_norm_row_decoder(A[trial], time_limit=max(left, 0.1))
        except LPFailed:
            break
        # the LP norm is a float; re-measure the row-l1 norm of the map we export
        if _rownorm(GS) * eps < 1 - SAFETY and np.abs(A[trial] @ GS - np.eye(len(trial))).max() < 1e-9:
            best = _row_witness(A, trial, GS, "row_reconstruction/far-rows-lp")
            base, rest = trial, rest[step:]
            step *= 2
            misses = 0
        elif step > 1:
            step = 1
        else:
            rest = rest[1:]   # skip this row, try the next
            misses += 1
    return best


def lp_svd(A: np.ndarray, eps: float, Vt: np.ndarray, start: int,
           budget_s: float = LP_BUDGET_S) -> LowerCandidate | None:
    """K.3 with the LP-optimal R on ``W = span(V_d)`` (norm ``1/gamma(W)``), d from ``start`` up."""
    from numeric.lp import min_norm_left_inverse

    t0 = time.perf_counter()
    best = None
    for d in range(max(start, 1), Vt.shape[0] + 1):
        left = budget_s - (time.perf_counter() - t0)
        if left <= 0:
            break
        X = Vt[:d].T.copy()
        try:
            R, _ = min_norm_left_inverse(A @ X, X, time_limit=max(left, 0.1))
        except LPFailed:
            break
        if _rownorm(R) * eps < 1 - SAFETY and np.abs(R @ A @ X - X).max() < 1e-9:
            best = LowerCandidate(d, "reconstruction/lp-svd", "reconstruction",
                                  {"R": R, "X": X, "L": X.T.copy()}, norm=_rownorm(R))
        else:
            break
    return best


def decoded(A: np.ndarray, eps: float) -> LowerCandidate | None:
    """K.3 decoded inverse on (S, T) grown greedily: columns by peak weight, rows by argmax."""
    m, n = A.shape
    cols = np.argsort(-A.max(axis=0), kind="stable")
    S: list[int] = []
    T: list[int] = []
    used = np.zeros(m, dtype=bool)
    for t in cols:
        w = np.where(used, -np.inf, A[:, t])
        s = int(np.argmax(w))
        if used[s]:
            break
        Ss, Ts = S + [s], T + [int(t)]
        try:
            inv = np.linalg.inv(A[np.ix_(Ss, Ts)])
        except np.linalg.LinAlgError:
            continue
        if np.isfinite(inv).all() and _rownorm(inv) * eps < 1 - SAFETY:
            S, T = Ss, Ts
            used[s] = True
    if not S:
        return None
    d = len(S)
    inv = np.linalg.inv(A[np.ix_(S, T)])
    X = np.zeros((n, d))
    X[T, np.arange(d)] = 1.0
    R = np.zeros((n, m))
    R[np.ix_(T, S)] = inv
    return LowerCandidate(d, "reconstruction/decoded", "reconstruction",
                          {"R": R, "X": X, "L": X.T.copy()}, norm=_rownorm(inv))


def lower_candidates(A: np.ndarray, eps: float, svd, *, lp: bool = True,
                     lp_budget_s: float = LP_BUDGET_S) -> list[LowerCandidate]:
    """Every family's best float witness at ``eps``, strongest first (ties: cheaper kind first)."""
    U, S, Vt = svd
    m = A.shape[0]
    out = [trivial(A, eps)]
    if out[0].rank == 0:
        return out
    for c in (frobenius(S, m, eps), pinv(U, S, Vt, eps), decoded(A, eps)):
        if c is not None:
            out.append(c)
    if lp:
        start = max(c.rank for c in out) + 1
        c = lp_svd(A, eps, Vt, start, budget_s=lp_budget_s / 2)
        if c is not None:
            out.append(c)
    order = far_order(A)
    fr, Srows = far_rows(A, eps, order)
    if fr is not None:
        out.append(fr)
    if lp and Srows:
        c = far_rows_lp(A, eps, Srows, order, budget_s=lp_budget_s)
        if c is not None:
            out.append(c)
    kind_cost = {"trivial": 0, "frobenius": 1, "reconstruction": 2, "row_reconstruction": 3}
    out.sort(key=lambda c: (-c.rank, kind_cost[c.kind]))
    return out

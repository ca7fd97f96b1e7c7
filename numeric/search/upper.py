"""Upper witnesses (K.1): factors P, Q with ``||A - P Q^T||_row1 <= eps``.

The truncated SVD is the baseline: it minimises the Frobenius error, not the
max row-l1 error. ``search_upper`` bisects the rank between a lower bound
and the SVD rank with ``refine.refine`` (smooth-max descent), warm-starting
each trial from the best feasible factors (compressed to the trial rank by
an SVD of ``P Q^T``), then polishes ranks below the best with longer
schedules; near misses on boundary cells are rounded to dyadic factors
(``refine.snap_dyadic``). Trials start while the ``Budget`` of Adam steps
lasts: the reach of the search is counted work, not seconds. A trial's
second try starts from the truncated SVD only once the best is no longer
the truncated SVD itself (before that the first try started from it).

Warm starts across tolerances (issue 17): ``search_upper(warm=(P, Q))`` takes
the factors verified at a smaller tolerance. They are feasible here too (a
rank-r witness at eps' is one at every eps >= eps'), so when their rank is
below the SVD rank they are the bisection's first best (family
``factors/warm``) and its trials start from their compressions; otherwise
their compression is the second try of each trial that misses before the
first success, and the last start of each polish rank that misses
closely (MiniLM layer-1 head 3 at eps 1/4: the rank-87 factors of eps 1/10
compressed to rank 44 reach 0.9998 eps in a polish trial, the truncated
SVD 1.0078 eps and the compressed rank-45 factors 1.32 eps).

Everything here is float: the exact tier re-checks the chosen factors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numeric.search.budget import Budget
from numeric.search.l1fit import refit_rows
from numeric.search.norms import row_l1_error, row_l1_norm
from numeric.search.refine import DEFAULT_ITERS, NEAR_FRACTION, refine, snap_dyadic

__all__ = ["UpperResult", "svd_baseline", "svd_factors", "compress", "hybrid_factors", "search_upper", "pick_device"]

#: The polish's stall rule is looser: its schedule is three times longer, so the smooth
#: max anneals slowly and early windows gain little (layer-3 head 7 at eps = 1/4, rank 16,
#: 1800 steps from the truncated SVD: the usual rule stops at 1.39 eps after 0.3 s, this
#: one reaches 1.0001 eps; 4000 steps without a stall exit reached eps one rank below the
#: search's U in 7 of 21 open MiniLM cells, bench/gap.py).
POLISH_STALL_GAIN = 0.02
#: A polish trial that misses eps by at most this relative amount is repeated from the
#: truncated SVD of A (the two-bit cell A(3/4, 3/4) at eps = 3/4: the warm start stalls
#: at 0.7508 at rank 1, the SVD start reaches 0.75000002 and snaps to 7/64 J, error 3/4).
RESTART_WINDOW = 1e-2
#: After the bisection, ranks below the best are tried with this many times the steps.
POLISH_FACTOR = 3
#: A polish trial that misses eps by at most this relative amount is rounded to dyadic
#: factors (``snap_dyadic``) and offered too: the caller's target is eps (1 - 1e-6), so a
#: candidate in this window may still meet the exact eps; the exact tier decides.
SNAP_WINDOW = 2e-6
#: A trial that misses eps by at most this relative amount has its rows over eps refitted
#: exactly on span(Q) (``l1fit.refit_rows``: each row's l1 optimum, the descent's rows are
#: not); MiniLM heads: a refit lowers an over-eps row by 0.1 to 1 % (docs/benchmarks.md).
REFIT_WINDOW = 2e-2
#: ... when at most this many rows are over eps (more: the descent is far from feasible).
REFIT_ROWS = 32


def pick_device(device=None):
    """CUDA when torch sees one and no device is given, else CPU."""
    import torch

    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass(frozen=True)
class UpperResult:
    """A float-feasible upper witness: rank, factors, float error and family name."""

    rank: int
    P: np.ndarray | None
    Q: np.ndarray | None
    error: float
    family: str


def svd_baseline(A: np.ndarray):
    """The SVD of A and the max row-l1 error of every truncation (index k = rank k).

    >>> _, errs = svd_baseline(np.eye(2) / 2 + 0.25); errs.round(12).tolist()
    [1.0, 0.5, 0.0]
    """
    U, S, Vt = np.linalg.svd(A, full_matrices=False)
    R = A.copy()
    errs = [row_l1_norm(R)]
    for k in range(S.size):
        R -= S[k] * np.outer(U[:, k], Vt[k])
        errs.append(row_l1_norm(R))
    return (U, S, Vt), np.array(errs)


def svd_factors(U, S, Vt, k: int):
    """Balanced truncated-SVD factors ``P = U_k S_k^(1/2)``, ``Q = V_k S_k^(1/2)``."""
    r = np.sqrt(S[:k])
    return U[:, :k] * r, Vt[:k].T * r


def compress(P: np.ndarray, Q: np.ndarray, k: int):
    """Best Frobenius rank-k factors of ``P Q^T`` (warm start for a lower rank)."""
    qp, rp = np.linalg.qr(P)
    qq, rq = np.linalg.qr(Q)
    u, s, vt = np.linalg.svd(rp @ rq.T)
    return svd_factors(qp @ u, s, vt @ qq.T, k)


def hybrid_factors(A: np.ndarray, eps: float, k: int):
    """Rank-k start for sharp heads: coordinate columns for near-one-hot rows, the SVD for the rest.

    A row whose largest entry ``a_ij >= 1 - eps/2`` is within eps of ``e_j`` in l1
    (``||a_i - e_j||_1 = 2 (1 - a_ij)``), so the column ``e_j`` in Q serves all such
    rows at one rank. The columns J covering the most of these rows are taken
    (all of them, or three quarters, or half: the best start of the three), the
    remaining rows get the top right singular vectors of their rows with the
    columns J zeroed (orthogonal to ``E_J``), and ``P = A Q`` (Q has orthonormal
    columns). None when no row is near one-hot. Issue 17: the reference search's
    "start that mixes coordinate columns for near-one-hot rows with the SVD".

    >>> A = np.array([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.3, 0.3, 0.4]])
    >>> P, Q = hybrid_factors(A, 0.25, 2); Q[:, 0].tolist(), Q.shape
    ([1.0, 0.0, 0.0], (3, 2))
    >>> hybrid_factors(A, 0.1, 2) is None        # no row within 0.1 of a coordinate vector
    True
    """
    top, arg = A.max(axis=1), A.argmax(axis=1)
    sharp = np.flatnonzero(2 * (1 - top) <= eps)
    if sharp.size == 0 or k < 1:
        return None
    cols, counts = np.unique(arg[sharp], return_counts=True)
    order = cols[np.argsort(-counts, kind="stable")]
    best = None
    for nj in sorted({min(order.size, k), min(order.size, k) * 3 // 4, min(order.size, k) // 2} - {0}):
        J = order[:nj]
        rest = np.setdiff1d(np.arange(A.shape[0]), sharp[np.isin(arg[sharp], J)])
        B = A[rest].copy()
        B[:, J] = 0.0
        V = np.linalg.svd(B, full_matrices=False)[2][:k - nj].T if k > nj and rest.size else \
            np.zeros((A.shape[1], 0))
        E = np.zeros((A.shape[1], nj))
        E[J, np.arange(nj)] = 1.0
        Q = np.hstack([E, V, np.zeros((A.shape[1], k - nj - V.shape[1]))])
        P = A @ Q
        err = row_l1_error(A, P, Q)
        if best is None or err < best[2]:
            best = (P, Q, err)
    return best[:2]


def _rescue(A, eps, P, Q, err, budget):
    """A near miss (within ``REFIT_WINDOW``) with its rows over eps refitted exactly; else as given."""
    if eps < err <= eps * (1 + REFIT_WINDOW):
        P2, err2 = refit_rows(A, P, Q, eps, budget, REFIT_ROWS)
        if err2 < err:
            return P2, Q, err2
    return P, Q, err


def _second_start(svd, mid: int, best_is_svd: bool, warm):
    """The start of a trial's second try, or None: while the best is the truncated SVD, the first
    try started from it (compressed, the same product), so the second starts from the compressed
    ``warm`` factors when they have more than ``mid`` columns, and is skipped otherwise; after
    that, from the truncated SVD."""
    if not best_is_svd:
        return svd_factors(*svd, mid)
    return compress(*warm, mid) if warm is not None and warm[1].shape[1] > mid else None


def _bisect(A, eps, lo, found, svd, budget, iters, device, hybrid: bool = False, warm=None) -> set:
    """Rank bisection in ``[lo, found[0].rank)``; feasible ranks go to the front of ``found``.

    Each trial starts from the compressed best factors and, when it misses,
    again from the truncated SVD (or ``warm``, ``_second_start``), and with
    ``hybrid`` from ``hybrid_factors``. Returns the ranks missed from every start.
    """
    hi = found[0].rank
    best = (found[0].P, found[0].Q)
    best_is_svd = found[0].family == "svd"
    missed = set()
    while lo < hi and not budget.exhausted:
        mid = (lo + hi) // 2
        P1, Q1, err = refine(A, *compress(*best, mid), eps, iters=iters, device=device, budget=budget)
        second = _second_start(svd, mid, best_is_svd, warm) if err > eps else None
        if second is not None:
            P2, Q2, err2 = refine(A, *second, eps, iters=iters, device=device, budget=budget)
            if err2 < err:
                P1, Q1, err = P2, Q2, err2
        start = hybrid_factors(A, eps, mid) if hybrid and err > eps else None
        if start is not None:
            P3, Q3, err3 = refine(A, *start, eps, iters=iters, device=device, budget=budget)
            if err3 < err:
                P1, Q1, err = P3, Q3, err3
        P1, Q1, err = _rescue(A, eps, P1, Q1, err, budget)
        if err <= eps:
            hi = mid
            best, best_is_svd = (P1, Q1), False
            found.insert(0, UpperResult(mid, P1, Q1, err, "factors/refined"))
        else:
            missed.add(mid)
            lo = mid + 1
    return missed


def _polish(A, eps, lower, found, missed, svd, budget, iters, device, warm=None) -> None:
    """Ranks below the best, ``POLISH_FACTOR`` times the steps, warm-started; near misses snapped.

    A rank the bisection missed from both starts gets a fresh start from the
    truncated SVD (its iterate has converged; Adam restarted on it does not
    move); any other rank starts from the compressed factors of the rank
    above, and a close miss (``RESTART_WINDOW``) is retried from the SVD; a rank still
    missed closely is tried again from the compressed ``warm`` factors of a smaller
    tolerance (a far miss is not: on MiniLM layer-1 head 3 at eps 1/2 that try doubled the
    default upper work and won nothing).
    """
    U, S, Vt = svd
    long = dict(iters=POLISH_FACTOR * iters, device=device, stall_gain=POLISH_STALL_GAIN, budget=budget)
    k, cur = found[0].rank, (found[0].P, found[0].Q)
    while k - 1 >= lower and not budget.exhausted:
        fresh = k - 1 in missed
        start = svd_factors(U, S, Vt, k - 1) if fresh else compress(*cur, k - 1)
        P1, Q1, err = refine(A, *start, eps, **long)
        if eps < err <= eps * (1 + RESTART_WINDOW) and not fresh:
            P2, Q2, err2 = refine(A, *svd_factors(U, S, Vt, k - 1), eps, **long)
            if err2 < err:
                P1, Q1, err = P2, Q2, err2
        if eps < err <= eps * (1 + RESTART_WINDOW) and warm is not None and warm[1].shape[1] > k - 1 \
                and not budget.exhausted:
            P2, Q2, err2 = refine(A, *compress(*warm, k - 1), eps, **long)
            if err2 < err:
                P1, Q1, err = P2, Q2, err2
        P1, Q1, err = _rescue(A, eps, P1, Q1, err, budget)
        k, cur = k - 1, (P1, Q1)
        if err <= eps:
            found.insert(0, UpperResult(k, P1, Q1, err, "factors/refined"))
            continue
        if err > eps * (1 + NEAR_FRACTION):
            break
        Ps, Qs = snap_dyadic(A, P1, Q1)
        if row_l1_error(A, Ps, Qs) <= eps * (1 + SNAP_WINDOW):
            found.insert(0, UpperResult(k, Ps, Qs, row_l1_error(A, Ps, Qs), "factors/snapped"))


def search_upper(A: np.ndarray, eps: float, budget: Budget, *, lower: int = 0, svd=None, device=None,
                 iters: int = DEFAULT_ITERS, hybrid: bool = False, warm=None) -> list[UpperResult]:
    """Float-feasible upper witnesses at tolerance ``eps``, best (lowest rank) first.

    The list always ends with the SVD baseline rank (or is empty when no
    truncation reaches eps: the caller falls back to the trivial upper).
    Bisection over ranks in ``[max(lower, 1), k_svd - 1]`` with warm starts,
    then the polish; a trial starts only while ``budget`` (Adam work units, ``refine.step_work``) lasts.
    ``hybrid``: bisection trials that miss from both usual starts also start from ``hybrid_factors``.
    ``warm``: factors (P, Q) found at a smaller tolerance (module docstring); offered as
    ``factors/warm`` when within eps in float and below the SVD rank.
    Rank 0 is returned directly (B = 0) when no singular direction is needed.
    """
    if svd is None:
        svd, errs = svd_baseline(A)
    else:
        svd, errs = svd
    ok = np.nonzero(errs <= eps)[0]
    if ok.size == 0:
        return []
    k_svd = int(ok[0])
    if k_svd == 0:
        return [UpperResult(0, np.zeros((A.shape[0], 0)), np.zeros((A.shape[1], 0)), errs[0], "zero")]
    P, Q = svd_factors(*svd, k_svd)
    found = [UpperResult(k_svd, P, Q, row_l1_error(A, P, Q), "svd")]
    if warm is not None and 0 < warm[1].shape[1] < k_svd and row_l1_error(A, *warm) <= eps:
        found.insert(0, UpperResult(warm[1].shape[1], *warm, row_l1_error(A, *warm), "factors/warm"))
    lo = max(int(lower), 1)
    missed = _bisect(A, eps, lo, found, svd, budget, iters, device, hybrid, warm)
    _polish(A, eps, lo, found, missed, svd, budget, iters, device, warm)
    return found

"""Upper witnesses (K.1): factors P, Q with ``||A - P Q^T||_row1 <= eps``.

The truncated SVD is the baseline: it minimises the Frobenius error, not the
max row-l1 error. ``search_upper`` bisects the rank between a lower bound
and the SVD rank with ``refine.refine`` (smooth-max descent), warm-starting
each trial from the best feasible factors (compressed to the trial rank by
an SVD of ``P Q^T``), then polishes ranks below the best with longer
schedules; near misses on boundary cells are rounded to dyadic factors
(``refine.snap_dyadic``). Trials start while the ``Budget`` of Adam steps
lasts: the reach of the search is counted work, not seconds.

Everything here is float: the exact tier re-checks the chosen factors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numeric.search.budget import Budget
from numeric.search.l1fit import refit_rows
from numeric.search.norms import row_l1_error, row_l1_norm
from numeric.search.refine import DEFAULT_ITERS, NEAR_FRACTION, refine, snap_dyadic

__all__ = ["UpperResult", "svd_baseline", "svd_factors", "compress", "search_upper", "pick_device"]

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


def _rescue(A, eps, P, Q, err, budget):
    """A near miss (within ``REFIT_WINDOW``) with its rows over eps refitted exactly; else as given."""
    if eps < err <= eps * (1 + REFIT_WINDOW):
        P2, err2 = refit_rows(A, P, Q, eps, budget, REFIT_ROWS)
        if err2 < err:
            return P2, Q, err2
    return P, Q, err


def _bisect(A, eps, lo, found, svd, budget, iters, device) -> set:
    """Rank bisection in ``[lo, found[0].rank)``; feasible ranks go to the front of ``found``.

    Each trial starts from the compressed best factors and, when it misses,
    again from the truncated SVD. Returns the ranks missed from both starts.
    """
    U, S, Vt = svd
    hi = found[0].rank
    best = (found[0].P, found[0].Q)
    missed = set()
    while lo < hi and not budget.exhausted:
        mid = (lo + hi) // 2
        P1, Q1, err = refine(A, *compress(*best, mid), eps, iters=iters, device=device, budget=budget)
        if err > eps:
            P2, Q2, err2 = refine(A, *svd_factors(U, S, Vt, mid), eps, iters=iters, device=device, budget=budget)
            if err2 < err:
                P1, Q1, err = P2, Q2, err2
        P1, Q1, err = _rescue(A, eps, P1, Q1, err, budget)
        if err <= eps:
            hi = mid
            best = (P1, Q1)
            found.insert(0, UpperResult(mid, P1, Q1, err, "factors/refined"))
        else:
            missed.add(mid)
            lo = mid + 1
    return missed


def _polish(A, eps, lower, found, missed, svd, budget, iters, device) -> None:
    """Ranks below the best, ``POLISH_FACTOR`` times the steps, warm-started; near misses snapped.

    A rank the bisection missed from both starts gets a fresh start from the
    truncated SVD (its iterate has converged; Adam restarted on it does not
    move); any other rank starts from the compressed factors of the rank
    above, and a close miss (``RESTART_WINDOW``) is retried from the SVD.
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
                 iters: int = DEFAULT_ITERS) -> list[UpperResult]:
    """Float-feasible upper witnesses at tolerance ``eps``, best (lowest rank) first.

    The list always ends with the SVD baseline rank (or is empty when no
    truncation reaches eps: the caller falls back to the trivial upper).
    Bisection over ranks in ``[max(lower, 1), k_svd - 1]`` with warm starts,
    then the polish; a trial starts only while ``budget`` (Adam work units, ``refine.step_work``) lasts.
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
    lo = max(int(lower), 1)
    missed = _bisect(A, eps, lo, found, svd, budget, iters, device)
    _polish(A, eps, lo, found, missed, svd, budget, iters, device)
    return found

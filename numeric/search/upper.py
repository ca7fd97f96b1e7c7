"""Upper witnesses (K.1): factors P, Q with ``||A - P Q^T||_row1 <= eps``.

The truncated SVD is the baseline: it minimises the Frobenius error, not the
max row-l1 error. ``refine`` takes factors at a fixed rank k and runs Adam in
torch (cosine step schedule) on the smooth max ``T logsumexp(e / T)`` of the
row-l1 errors ``e_i = sum_j |A - P Q^T|_ij`` (the K.1 quantity), the
temperature decaying from eps to 0.003 eps (continuation), stopping as soon
as the float64 max row error is at most the target. ``search_upper`` bisects
the rank between a lower bound and the SVD rank, warm-starting each trial
from the best feasible factors (compressed to the trial rank by an SVD of
``P Q^T``), then polishes ranks below the best with more steps; near misses
on boundary cells are rounded to dyadic factors (``snap_dyadic``).

Everything here is float: the exact tier re-checks the chosen factors.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from numeric.search.norms import row_l1_error, row_l1_norm

__all__ = ["UpperResult", "svd_baseline", "svd_factors", "refine", "search_upper", "pick_device"]

#: Hinge target as a fraction of the tolerance: pushing every row to 98% of
#: eps leaves room for the float64 re-check and the exact check.
HINGE_FRACTION = 0.98
#: Adam step as a fraction of the mean absolute factor entry (tuned on MiniLM heads:
#: 3e-2 beat 3e-3, 1e-2 and 1e-1 at 600 steps on layer-0 head 0 at eps = 0.1).
LR_FRACTION = 3e-2
#: Adam steps per rank trial; the trial stops early once feasible.
DEFAULT_ITERS = 600
#: A trial also stops when STALL_WINDOW steps closed less than STALL_GAIN of the
#: gap between its best error and eps (a rank that cannot reach eps stalls early).
STALL_WINDOW = 100
STALL_GAIN = 0.1
#: ... except when the best error is within this relative distance of eps.
NEAR_FRACTION = 1e-3
#: Smooth-max temperature, as a fraction of eps, at the first and the last step:
#: ``T logsumexp(e / T)`` is within ``T log m`` of ``max e``; decaying 0.03 -> 0.003
#: beat the squared hinge by 0.3128 -> 0.2981 (rank 16, layer-0 head 0, eps = 1/4, 1500 steps).
LSE_T0 = 1.0
LSE_T1 = 0.003
#: Torch threads for the CPU descent: these products are small (256 x 256 x k),
#: and on a shared 2-core machine two threads ran 20 times slower than one.
CPU_THREADS = 1
#: Retry a failed rank trial from the truncated SVD of A (besides the compressed best factors).
SECOND_START = True
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
#: Grid exponents tried by ``snap_dyadic`` (2^-4 to 2^-30).
SNAP_BITS = tuple(range(4, 31, 2))


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
    """The SVD of A and the max row-l1 error of every truncation (index k = rank k)."""
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


def refine(A: np.ndarray, P0: np.ndarray, Q0: np.ndarray, eps: float, *, iters: int = DEFAULT_ITERS,
           device=None, stall_gain: float | None = None):
    """Refine rank-k factors to bring the max row-l1 error to ``eps`` or below (K.1).

    Returns (P, Q, err) of the best iterate by float64 max row-l1 error.
    """
    import torch

    dev = pick_device(device)
    threads = torch.get_num_threads()
    if dev.type == "cpu":
        torch.set_num_threads(CPU_THREADS)
    try:
        return _refine(torch, A, P0, Q0, eps, iters, dev, STALL_GAIN if stall_gain is None else stall_gain)
    finally:
        torch.set_num_threads(threads)


def _refine(torch, A, P0, Q0, eps, iters, dev, stall_gain):
    dtype = torch.float64
    At = torch.as_tensor(A, dtype=dtype, device=dev)
    P = torch.as_tensor(P0, dtype=dtype, device=dev).clone().requires_grad_(True)
    Q = torch.as_tensor(Q0, dtype=dtype, device=dev).clone().requires_grad_(True)
    scale = float(np.abs(P0).mean() + np.abs(Q0).mean()) / 2 or 1e-3
    opt = torch.optim.Adam([P, Q], lr=LR_FRACTION * scale)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(iters, 1))
    best_err, best = np.inf, (P0, Q0)
    window_start = np.inf
    for it in range(iters):
        e = (At - P @ Q.T).abs().sum(1)
        m = float(e.detach().max())
        if m < best_err:
            best_err, best = m, (P.detach().clone(), Q.detach().clone())
            if m <= eps:
                break
        if it % STALL_WINDOW == 0:
            # give up when a window of steps gained less than STALL_GAIN of the remaining gap
            # (except within NEAR_FRACTION of eps, where convergence is slow but worth it)
            if it and window_start - best_err < stall_gain * (window_start - eps) \
                    and best_err > eps * (1 + NEAR_FRACTION):
                break
            window_start = best_err
        # smooth max of the row errors, temperature decaying geometrically (continuation)
        T = eps * LSE_T0 * (LSE_T1 / LSE_T0) ** (it / iters)
        loss = T * torch.logsumexp(e / T, 0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    Pb, Qb = (t.cpu().numpy() if hasattr(t, "cpu") else t for t in best)
    Pb, Qb = np.array(Pb, dtype=np.float64), np.array(Qb, dtype=np.float64)
    return Pb, Qb, row_l1_error(A, Pb, Qb)


def snap_dyadic(A: np.ndarray, P: np.ndarray, Q: np.ndarray, bits=SNAP_BITS):
    """Factors rounded to short dyadic rationals, for boundary cells (K.1 with error exactly eps).

    Each column pair is rescaled so that ``max |P_ic| = 1`` (``P Q^T`` unchanged), then
    P and Q are rounded to multiples of ``2^-b``; the rounding with the smallest float
    max row-l1 error over ``b`` in ``bits`` is returned. A minimax optimum whose product
    is dyadic (such as ``7/64 J`` for the two-bit matrix A(3/4, 3/4), MATH.md 4) is then
    represented exactly, and the exact tier can accept an error of exactly eps.

    >>> A = np.full((2, 2), 0.5); P = np.full((2, 1), 0.3); Q = np.full((2, 1), 0.5 / 0.3)
    >>> Ps, Qs = snap_dyadic(A, P, Q); float(np.abs(A - Ps @ Qs.T).max())
    0.0
    """
    s = np.abs(P).max(axis=0)
    s[s == 0] = 1.0
    P1, Q1 = P / s, Q * s
    best, best_err = (P, Q), row_l1_error(A, P, Q)
    for b in sorted(bits, reverse=True):
        g = 2.0 ** b
        Ps, Qs = np.round(P1 * g) / g, np.round(Q1 * g) / g
        e = row_l1_error(A, Ps, Qs)
        if e <= best_err:      # ties go to the rounded (coarsest) factors
            best, best_err = (Ps, Qs), e
    return best


def search_upper(A: np.ndarray, eps: float, *, lower: int = 0, svd=None, device=None,
                 iters: int = DEFAULT_ITERS, budget_s: float | None = None) -> list[UpperResult]:
    """Float-feasible upper witnesses at tolerance ``eps``, best (lowest rank) first.

    The list always ends with the SVD baseline rank (or is empty when no
    truncation reaches eps: the caller falls back to the trivial upper).
    Bisection over ranks in ``[max(lower, 1), k_svd - 1]`` with warm starts;
    rank 0 is tried directly (B = 0) when ``lower == 0``.
    """
    t0 = time.perf_counter()
    if svd is None:
        svd, errs = svd_baseline(A)
    else:
        errs = svd[1]
        svd = svd[0]
    U, S, Vt = svd
    found: list[UpperResult] = []
    ok = np.nonzero(errs <= eps)[0]
    if ok.size == 0:
        return found
    k_svd = int(ok[0])
    if k_svd == 0:
        return [UpperResult(0, np.zeros((A.shape[0], 0)), np.zeros((A.shape[1], 0)), errs[0], "zero")]
    P, Q = svd_factors(U, S, Vt, k_svd)
    found.append(UpperResult(k_svd, P, Q, row_l1_error(A, P, Q), "svd"))
    lo, hi = max(int(lower), 1), k_svd
    best = (P, Q)
    missed = set()    # ranks the bisection tried and missed
    while lo < hi:
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            break
        mid = (lo + hi) // 2
        P0, Q0 = compress(*best, mid)
        P1, Q1, err = refine(A, P0, Q0, eps, iters=iters, device=device)
        if err > eps and SECOND_START:
            # a second start from the truncated SVD of A itself
            P0, Q0 = svd_factors(U, S, Vt, mid)
            P2, Q2, err2 = refine(A, P0, Q0, eps, iters=iters, device=device)
            if err2 < err:
                P1, Q1, err = P2, Q2, err2
        if err <= eps:
            hi = mid
            best = (P1, Q1)
            found.insert(0, UpperResult(mid, P1, Q1, err, "factors/refined"))
        else:
            missed.add(mid)
            lo = mid + 1
    # polish: ranks below the best feasible, warm-started, with POLISH_FACTOR times the steps;
    # a near miss (within NEAR_FRACTION of eps: a boundary cell) is rounded to dyadic factors,
    # offered when the rounding meets eps within SNAP_WINDOW, and the descent goes on from it
    k, cur = found[0].rank, (found[0].P, found[0].Q)
    while k - 1 >= max(int(lower), 1) and (budget_s is None or time.perf_counter() - t0 < budget_s):
        # a rank the bisection missed from both starts (600 steps each) gets a fresh start from the
        # truncated SVD with the longer schedule (its iterate has converged; Adam restarted on it
        # does not move); any other rank starts from the compressed factors of rank k
        fresh = k - 1 in missed
        start = svd_factors(U, S, Vt, k - 1) if fresh else compress(*cur, k - 1)
        P1, Q1, err = refine(A, *start, eps, iters=POLISH_FACTOR * iters, device=device,
                             stall_gain=POLISH_STALL_GAIN)
        if eps < err <= eps * (1 + RESTART_WINDOW) and SECOND_START and not fresh:
            # a close miss from the warm start: the truncated SVD of A may lead to another basin
            P2, Q2, err2 = refine(A, *svd_factors(U, S, Vt, k - 1), eps, iters=POLISH_FACTOR * iters,
                                  device=device, stall_gain=POLISH_STALL_GAIN)
            if err2 < err:
                P1, Q1, err = P2, Q2, err2
        k, cur = k - 1, (P1, Q1)
        if err <= eps:
            found.insert(0, UpperResult(k, P1, Q1, err, "factors/refined"))
            continue
        if err > eps * (1 + NEAR_FRACTION):
            break
        Ps, Qs = snap_dyadic(A, P1, Q1)
        if row_l1_error(A, Ps, Qs) <= eps * (1 + SNAP_WINDOW):
            found.insert(0, UpperResult(k, Ps, Qs, row_l1_error(A, Ps, Qs), "factors/snapped"))
    return found

"""Refinement of upper factors (K.1): Adam on a smooth max of the row-l1 errors.

``refine`` takes factors P, Q at a fixed rank and runs Adam in torch (cosine
step schedule) on ``T logsumexp(e / T)`` of the row-l1 errors
``e_i = sum_j |A - P Q^T|_ij`` (the K.1 quantity). The temperature T decays
geometrically from ``LSE_T0 eps`` (= eps) to ``LSE_T1 eps`` (= 0.003 eps), a
continuation from a smooth problem to nearly the max; the descent stops as
soon as the float64 max row error is at most the target, or on a stall.
``snap_dyadic`` rounds near misses on boundary cells to dyadic factors.

Everything here is float: the exact tier re-checks the chosen factors.
"""
from __future__ import annotations

import numpy as np

from numeric.search.budget import Budget
from numeric.search.norms import row_l1_error
from numeric.search.threads import torch_threads

__all__ = ["DEFAULT_ITERS", "refine", "snap_dyadic", "step_work"]

#: Adam step as a fraction of the mean absolute factor entry (tuned on MiniLM heads:
#: 3e-2 beat 3e-3, 1e-2 and 1e-1 at 600 steps on layer-0 head 0 at eps = 0.1).
LR_FRACTION = 3e-2
#: Adam step scale when the starting factors are all zero (their mean entry gives no scale).
ZERO_SCALE = 1e-3
#: Adam steps per rank trial; the trial stops early once feasible.
DEFAULT_ITERS = 600
#: A trial also stops when STALL_WINDOW steps closed less than STALL_GAIN of the
#: gap between its best error and eps (a rank that cannot reach eps stalls early).
STALL_WINDOW = 100
STALL_GAIN = 0.1
#: ... except when the best error is within this relative distance of eps.
NEAR_FRACTION = 1e-3
#: Smooth-max temperature, as a fraction of eps, at the first and the last step:
#: ``T logsumexp(e / T)`` is within ``T log m`` of ``max e``. The continuation beat the
#: squared hinge (0.3128 -> 0.2981, rank 16, layer-0 head 0, eps = 1/4, 1500 steps; that
#: comparison started at 0.03 eps, the search starts at eps since the smooth-max commit).
LSE_T0 = 1.0
LSE_T1 = 0.003
#: Torch threads for the CPU descent: these products are small (256 x 256 x k),
#: and on a shared 2-core machine two threads ran 20 times slower than one.
CPU_THREADS = 1
#: Work units of one Adam step (``step_work``): a fixed part for the step's overhead plus
#: the size of the product ``P Q^T`` in units of 256 x 256 x 1. On one core a step over
#: 256 x 256 took about 1.3 ms plus 0.016 ms per unit of rank (ranks 8 to 128), so a
#: budget of these units spends about the same time at every rank and size, as the
#: former wall-clock budget did.
STEP_OVERHEAD_UNITS = 64
STEP_UNIT_ENTRIES = 256 * 256
#: Grid exponents tried by ``snap_dyadic`` (2^-4 to 2^-30).
SNAP_BITS = tuple(range(4, 31, 2))


def step_work(m: int, n: int, k: int) -> int:
    """Work units of one Adam step on rank-``k`` factors of an m x n matrix.

    >>> step_work(256, 256, 16), step_work(256, 256, 86), step_work(128, 128, 16)
    (80, 150, 68)
    """
    return STEP_OVERHEAD_UNITS + -(-m * n * k // STEP_UNIT_ENTRIES)


def refine(A: np.ndarray, P0: np.ndarray, Q0: np.ndarray, eps: float, *, iters: int = DEFAULT_ITERS,
           device=None, stall_gain: float | None = None, budget: Budget | None = None):
    """Refine rank-k factors to bring the max row-l1 error to ``eps`` or below (K.1).

    Each Adam step spends ``step_work`` units of ``budget`` (the trial itself is
    bounded by ``iters`` steps; only a stop request, through the budget's safety cap, stops it early). Returns
    (P, Q, err) of the best iterate by float64 max row-l1 error. The torch
    thread count is set for the call and restored.
    """
    import torch

    from numeric.search.upper import pick_device

    dev = pick_device(device)
    with torch_threads(CPU_THREADS if dev.type == "cpu" else torch.get_num_threads()):
        return _refine(torch, A, P0, Q0, eps, iters, dev, STALL_GAIN if stall_gain is None else stall_gain,
                       budget if budget is not None else Budget(iters * step_work(*A.shape, P0.shape[1])))


def _stalled(it, window_start, best_err, eps, stall_gain) -> bool:
    """A window of steps gained less than ``stall_gain`` of the remaining gap (not near eps)."""
    return bool(it and window_start - best_err < stall_gain * (window_start - eps)
                and best_err > eps * (1 + NEAR_FRACTION))


def _refine(torch, A, P0, Q0, eps, iters, dev, stall_gain, budget):
    dtype = torch.float64
    At = torch.as_tensor(A, dtype=dtype, device=dev)
    P = torch.as_tensor(P0, dtype=dtype, device=dev).clone().requires_grad_(True)
    Q = torch.as_tensor(Q0, dtype=dtype, device=dev).clone().requires_grad_(True)
    scale = float(np.abs(P0).mean() + np.abs(Q0).mean()) / 2 or ZERO_SCALE
    opt = torch.optim.Adam([P, Q], lr=LR_FRACTION * scale)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(iters, 1))
    best_err, best = np.inf, (P0, Q0)
    window_start = np.inf
    units = step_work(*A.shape, P0.shape[1])
    for it in range(iters):
        e = (At - P @ Q.T).abs().sum(1)
        m = float(e.detach().max())
        if m < best_err:
            best_err, best = m, (P.detach().clone(), Q.detach().clone())
            if m <= eps:
                break
        if it % STALL_WINDOW == 0:
            if _stalled(it, window_start, best_err, eps, stall_gain) or (budget.cap and budget.cap.expired()):
                break
            window_start = best_err
        budget.spend(units)
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

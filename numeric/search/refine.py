"""Refinement of upper factors (K.1): one annealed continuation run of Adam per trial.

``refine`` takes factors P, Q at a fixed rank and runs Adam in torch (cosine
step schedule) on a smooth max ``T logsumexp(h / T)`` of Huber-smoothed row-l1
errors ``h_i = sum_j huber_delta(A - P Q^T)_ij``, where ``huber_delta(x)`` is
``x^2 / (2 delta)`` for ``|x| < delta`` and ``|x| - delta / 2`` beyond (so
``h_i <= e_i <= h_i + n delta / 2`` for the row-l1 errors ``e_i``, the K.1 quantity),
with the surrogate's gradient written out (``_surrogate``: autograd's operations, without
its bookkeeping).
A trial is one complete continuation run (the annealed upper trials): the temperature T and the
Huber width delta decay geometrically over the steps the trial actually runs,
from a smooth problem to nearly the max of the exact row errors:

- T from ``LSE_T0`` (absolute, 0.05, at most eps/2) to the floor ``eps / (LSE_FLOOR_DIV log m)``
  (so ``T log m``, the smooth max's excess over the max, ends at 1/60 of eps: 0.0015 at
  eps 1/2 and m = 256). Row errors are l1 sums of n entries whose size is set by eps,
  not by n, so T0 does not move with n; the floor moves as ``1 / log m``.
- delta from ``HUBER_D0 eps / n`` to ``HUBER_D1 eps / n`` (about 1e-2 to 1e-5 at eps
  1/2, n = 256): a residual row of l1 size eps has entries near eps / n, diffuse rows
  entries near 1/n, and the smoothing's bias ``n delta / 2`` per row ends at 0.25 % of eps
  at every n.
- a trial's ``Objective`` may change both: a hot one (a start of thorough's restarts) starts T at
  ``LSE_HOT_EPS`` eps instead, the schedule before the absolute temperature; a plain one keeps
  delta at ``PLAIN_D eps / n``.

A trial ends at its last step, or, in the last quarter of its schedule only
(``_hopeless``), when its surrogate has stalled at the current temperature and its
value minus ``T log m`` (a lower estimate of what this descent can reach) is still
clearly above eps; never on the max row error while T is high (it barely moves
then), and never on a stall in the first three quarters. A trial that becomes
feasible jumps to the floor (T and delta) and runs ``margin`` more steps (a
fraction ``MARGIN_FRACTION`` of its length), so that the factors it hands down as
warm starts carry margin below eps. The best iterate by float64 max row error is
returned. ``snap_dyadic`` rounds near misses on boundary cells to dyadic factors.

Everything here is float: the exact tier re-checks the chosen factors.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from numeric.search.budget import Budget
from numeric.search.device import pick_device
from numeric.search.norms import row_l1_error
from numeric.runtime import record_refine, torch_threads
from numeric._optional import require

__all__ = ["DEFAULT_ITERS", "FULL_ITERS", "Objective", "TrialLog", "refine", "schedule", "snap_dyadic", "step_work"]

#: Adam step as a fraction of the mean absolute factor entry (tuned on MiniLM heads:
#: 3e-2 beat 3e-3, 1e-2 and 1e-1 at 600 steps on layer-0 head 0 at eps = 0.1).
LR_FRACTION = 3e-2
#: Adam step scale when the starting factors are all zero (their mean entry gives no scale).
ZERO_SCALE = 1e-3
#: Adam steps of a short trial (the rank bisection's, which narrows the range).
DEFAULT_ITERS = 600
#: Adam steps of a full trial (ranks near the boundary; measured on a sharp MiniLM head at
#: eps 1/2, rank 180, 600 steps reached 1.077 eps and 2,000 uninterrupted steps 0.953 eps).
FULL_ITERS = 2000
#: Within this relative distance of eps a miss counts as near (the polish continues past it).
NEAR_FRACTION = 1e-3
#: Smooth-max temperature at the first step (absolute; never above ``LSE_T0_EPS`` eps).
LSE_T0 = 0.05
LSE_T0_EPS = 0.5
#: ... and of a hot trial (``Objective(hot=True)``, the schedule before the absolute temperature:
#: from eps itself). Plain and hot, 2,000 steps from the truncated SVD, it ended lowest of the four
#: objectives at 6 of the 8 ranks above 125 at eps 1/10 (MiniLM l2h0, rank 128: 1.0193 eps, the
#: others 1.046 to 1.073), and at none of 16 lower ranks and ranks at eps 1/4 and 1/2, where it
#: ended highest at 15 (``research/hot_start.py``, docs/explanation/search-lessons.md). A start of thorough's
#: restarts only.
LSE_HOT_EPS = 1.0
#: The floor: ``T log m = eps / LSE_FLOOR_DIV`` (T = 0.0015 at eps 1/2, m = 256). The issue's
#: 0.003 at eps 1/2 (divisor 30) left boundary ranks just short: MiniLM l0h0 at eps 1/4, rank 21,
#: 2,000 steps from the truncated SVD: 1.0003 eps with divisor 30, 0.9958 eps with 60; better or
#: equal with 60 in 4 of 6 boundary ranks of l0h0 and l1h3 (``research/anneal_tune.py``).
LSE_FLOOR_DIV = 60.0
#: Huber width at the first and last step, in units of eps / n.
HUBER_D0 = 5.0
HUBER_D1 = 5e-3
#: The Huber width of a trial run without the smoothing (``Objective(huber=False)``), in units of
#: eps / n: the surrogate is then the row-l1 error itself to within ``PLAIN_D / 2`` eps a row.
PLAIN_D = 1e-9
#: A feasible trial runs this fraction of its length past feasibility at the floor (at least
#: ``MARGIN_MIN`` steps): 250 steps of a full trial, 75 of a short one.
MARGIN_FRACTION = 0.125
MARGIN_MIN = 25
#: The surrogate is judged every ``max(JUDGE_MIN, iters // JUDGE_WINDOWS)`` steps, at the current
#: temperature: stalled when the window lowered it by less than ``STALL_REL`` of its value ...
JUDGE_WINDOWS = 20
JUDGE_MIN = 50
STALL_REL = 1e-3
#: ... and hopeless when its value minus ``T log m`` is above eps by more than this fraction;
#: judged only in the last quarter of the schedule (``LATE_FRACTION``): earlier, the rule ended
#: trials that went on to reach eps (MiniLM l2h0 at eps 1/4, rank 95: a 600-step trial judged
#: hopeless after 135 steps at 1.15 eps, where the 2,000-step trial reaches 0.990 eps;
#: ``research/anneal_tune.py``).
HOPELESS_FRACTION = 0.02
LATE_FRACTION = 0.75
#: Torch threads for the CPU descent: these products are small (256 x 256 x k),
#: and on a shared 2-core machine two threads ran 20 times slower than one.
CPU_THREADS = 1
#: Work units of one Adam step (``step_work``): a fixed part for the step's overhead plus
#: the size of the product ``P Q^T`` in units of 256 x 256 x 1. On one core a step over
#: 256 x 256 took about 1.3 ms plus 0.016 ms per unit of rank (ranks 8 to 128), so a
#: budget of these units spends about the same time at every rank and size, as the
#: former wall-clock budget did. (The Huber term costs no more, and since the surrogate's
#: gradient is written out, ``_surrogate``, a step takes about 0.8 times that time: the units
#: count work, and the work of a step is the same.)
STEP_OVERHEAD_UNITS = 64
STEP_UNIT_ENTRIES = 256 * 256
#: Grid exponents tried by ``snap_dyadic`` (2^-4 to 2^-30).
SNAP_BITS = tuple(range(4, 31, 2))


@dataclass(frozen=True)
class Objective:
    """What a trial descends: with or without the Huber smoothing (``huber``), its temperature from
    the usual start or from ``LSE_HOT_EPS`` eps (``hot``): ``refine``'s and ``schedule``'s ``objective``."""

    huber: bool = True
    hot: bool = False


def step_work(m: int, n: int, k: int) -> int:
    """Work units of one Adam step on rank-``k`` factors of an m x n matrix.

    >>> step_work(256, 256, 16), step_work(256, 256, 86), step_work(128, 128, 16)
    (80, 150, 68)
    """
    return STEP_OVERHEAD_UNITS + -(-m * n * k // STEP_UNIT_ENTRIES)


def schedule(eps: float, m: int, n: int, objective: Objective = Objective()) -> tuple[float, float, float, float]:
    """``(T0, T1, d0, d1)``: the temperature and Huber width at the first and the last step
    (without the objective's ``huber``, the width is ``PLAIN_D eps / n`` throughout; with its
    ``hot``, T0 is ``LSE_HOT_EPS`` eps).

    >>> [round(x, 6) for x in schedule(0.5, 256, 256)]
    [0.05, 0.001503, 0.009766, 1e-05]
    >>> [round(x, 6) for x in schedule(0.1, 1024, 1024)]
    [0.05, 0.00024, 0.000488, 0.0]
    >>> schedule(0.5, 256, 256, Objective(huber=False))[2:] == (0.5e-9 / 256, 0.5e-9 / 256)
    True
    >>> [round(x, 6) for x in schedule(0.1, 256, 256, Objective(hot=True))[:2]]
    [0.1, 0.000301]
    """
    t0 = LSE_HOT_EPS * eps if objective.hot else min(LSE_T0, LSE_T0_EPS * eps)
    t1 = min(t0, eps / (LSE_FLOOR_DIV * math.log(max(m, 2))))
    d0, d1 = (HUBER_D0, HUBER_D1) if objective.huber else (PLAIN_D, PLAIN_D)
    return t0, t1, d0 * eps / n, d1 * eps / n


@dataclass(frozen=True)
class TrialLog:
    """What one trial did: steps run out of its length, why it ended, the temperature
    at its last step and the floor, and the float64 error of the returned factors."""

    steps: int
    iters: int
    reason: str                  # "length", "feasible", "hopeless", "stopped"
    feasible_at: int | None      # the step at which the max row error first met eps
    last_T: float
    floor_T: float
    error: float


def refine(A: np.ndarray, P0: np.ndarray, Q0: np.ndarray, eps: float, *, iters: int = DEFAULT_ITERS,
           device: Any = None, budget: Budget | None = None, lr_scale: float = 1.0, margin: int | None = None,
           objective: Objective = Objective()) -> tuple[np.ndarray, np.ndarray, float]:
    """Refine rank-k factors to bring the max row-l1 error to ``eps`` or below (K.1): one trial.

    The trial runs ``iters`` Adam steps with its temperature and Huber schedules spread
    over them (module docstring); it ends early only when feasible (after ``margin``
    steps at the floor, default ``MARGIN_FRACTION`` of ``iters``), on the surrogate's
    hopeless rule, or on a stop request (the budget's safety cap). Each step spends
    ``step_work`` units of ``budget``; the caller sizes ``iters`` to what it affords.
    ``lr_scale`` multiplies the Adam step; ``objective`` (``Objective``) may run the trial without
    the Huber smoothing (the smooth max of the row-l1 errors themselves) or start its temperature at
    ``LSE_HOT_EPS`` eps (``schedule``). Returns (P, Q, err) of the best iterate by
    float64 max row-l1 error. The torch thread count is set for the call and restored.
    """
    torch = require("torch")

    dev = pick_device(device)
    iters = max(int(iters), 1)
    if margin is None:
        margin = max(MARGIN_MIN, int(MARGIN_FRACTION * iters))
    with torch_threads(CPU_THREADS if dev.type == "cpu" else torch.get_num_threads()):
        spend = budget if budget is not None else Budget(iters * step_work(A.shape[0], A.shape[1], P0.shape[1]))
        P, Q, err, log = _refine(torch, A, P0, Q0, eps, iters=iters, dev=dev, lr_scale=lr_scale, margin=margin,
                                 budget=spend, objective=objective)
    record_refine(log)                                   # into numeric.runtime.trial_trace, when one is open
    return P, Q, err


def _hopeless(s_then: float, s_now: float, T: float, logm: float, eps: float) -> bool:
    """The surrogate ``s = T logsumexp(h / T)`` (at the current temperature T and Huber width, of the
    iterate at the window's start and now) gained less than ``STALL_REL`` of its value over the
    window, and ``s_now - T log m`` misses eps clearly: the descent sits at a minimum of its
    surrogate, and near it no iterate does better in max row error, since
    ``max_i e_i >= max_i h_i >= s - T log m``.

    >>> _hopeless(0.600, 0.5999, 0.003, 5.5, 0.5), _hopeless(0.700, 0.600, 0.003, 5.5, 0.5)
    (True, False)
    >>> _hopeless(0.600, 0.5999, 0.05, 5.5, 0.5)        # T log m = 0.275: may still reach eps
    False
    """
    return s_then - s_now < STALL_REL * s_now and s_now - T * logm > eps * (1 + HOPELESS_FRACTION)


def _surrogate(torch: ModuleType, R: Any, T: float, d: float) -> tuple[Any, Any]:
    """The trial's surrogate at the residual ``R = P Q^T - A``: ``(s, G)`` with ``s = T logsumexp(h / T)``
    (a 0-d tensor: read only on the steps the hopeless rule judges), ``h_i = sum_j huber_d(R_ij) / d``,
    and ``G = ds/dR``.

    Written out rather than left to autograd, whose bookkeeping was a fifth of a step on these
    small products (``research/refine_step.py``). With ``c = clamp(R, -d, d)``,
    ``huber_d(x) = c (x - c / 2)`` (``x^2 / 2`` inside the width, ``d |x| - d^2 / 2`` beyond) and
    ``huber_d'(x) = c``; ``ds/dh_i = exp(z_i - logsumexp(z))`` with ``z = h / T``, so
    ``G_ij = c_ij exp(z_i - logsumexp(z)) / d``. Each operation is the one autograd ran, in
    its order (``T`` times the weight, then divided by ``T`` and by ``d``), so the descent is
    the same to the last bit.
    """
    c = R.clamp(-d, d)
    z = (c * (R - c / 2)).sum(1) / d / T
    lse = torch.logsumexp(z, 0)
    w = T * (z - lse).exp() / T / d
    return T * lse, c.mul_(w[:, None])


def _refine(torch: ModuleType, A: np.ndarray, P0: np.ndarray, Q0: np.ndarray, eps: float, *, iters: int, dev: Any,
            lr_scale: float, margin: int, budget: Budget,
            objective: Objective) -> tuple[np.ndarray, np.ndarray, float, TrialLog]:
    dtype = torch.float64
    m, n = A.shape
    At = torch.as_tensor(A, dtype=dtype, device=dev)
    P = torch.as_tensor(P0, dtype=dtype, device=dev).clone()
    Q = torch.as_tensor(Q0, dtype=dtype, device=dev).clone()
    P.grad, Q.grad = torch.zeros_like(P), torch.zeros_like(Q)
    scale = float(np.abs(P0).mean() + np.abs(Q0).mean()) / 2 or ZERO_SCALE
    opt = torch.optim.Adam([P, Q], lr=LR_FRACTION * lr_scale * scale)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, iters)
    t0, t1, d0, d1 = schedule(eps, m, n, objective)
    logm = math.log(m)
    window = max(JUDGE_MIN, iters // JUDGE_WINDOWS)
    best_err, best = np.inf, (P0, Q0)
    units = step_work(m, n, P0.shape[1])
    end, reason, T, judge, feasible, feasible_at = iters, "length", t0, None, False, None
    it = 0
    while it < end:
        frac = it / iters
        T = t1 if feasible else t0 * (t1 / t0) ** frac
        d = d1 if feasible else d0 * (d1 / d0) ** frac
        R = P @ Q.T - At
        mx = float(R.abs().sum(1).max())
        if mx < best_err:
            best_err, best = mx, (P.clone(), Q.clone())
            if mx <= eps and not feasible:
                feasible, reason, end, feasible_at = True, "feasible", min(iters, it + margin), it
                T, d = t1, d1                          # the floor from this step on
                if it >= end:
                    break
        if budget.cap and it % window == 0 and budget.cap.expired():
            reason = "stopped"
            break
        s, G = _surrogate(torch, R, T, d)
        if it % window == 0 and not feasible and it >= LATE_FRACTION * iters:
            if judge is not None:
                s_then = float(_surrogate(torch, judge[0] @ judge[1].T - At, T, d)[0])
                if _hopeless(s_then, float(s), T, logm, eps):
                    reason = "hopeless"
                    break
            judge = (P.clone(), Q.clone())
        budget.spend(units)
        torch.matmul(G, Q, out=P.grad)
        torch.matmul(G.T, P, out=Q.grad)
        opt.step()
        sched.step()
        it += 1
    Pb, Qb = (t.cpu().numpy() if hasattr(t, "cpu") else t for t in best)
    Pb, Qb = np.array(Pb, dtype=np.float64), np.array(Qb, dtype=np.float64)
    err = row_l1_error(A, Pb, Qb)
    return Pb, Qb, err, TrialLog(it, iters, reason, feasible_at, T, t1, err)


def snap_dyadic(A: np.ndarray, P: np.ndarray, Q: np.ndarray,
                bits: Iterable[int] = SNAP_BITS) -> tuple[np.ndarray, np.ndarray]:
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

"""The residual ``q(M)``, ``tau = 2 tanh(q/4)`` and the double difference (MATH.md section 3).

``q(M) = min_b max_i osc_j(M_ij - b_j)`` is an LP, solved here exactly as a
*maximum cycle mean*: with ``D_jj' = max_i (M_ij - M_ij')``,
``max_i osc_j(M_ij - b_j) = max_{j,j'} (D_jj' - b_j + b_j')`` and the LP dual of
``min_b`` of that is the best mean weight of a cycle of D (Karp's algorithm).
A cycle is an exact lower certificate (on a closed walk the potentials
cancel), the potentials ``b`` an exact upper one (:mod:`numeric.geometry.bounds`).

``tau(T) = 2 tanh(q(C - T)/4)`` is the Hilbert-metric bound (the paper's (7)).
The double difference ``max |M_ij - M_ij' - M_i'j + M_i'j'| / 4`` lower-bounds
``kappa(M)`` (J.1) and reuses the same ``D``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import fmpq

from exact.matrix import ExactMatrix
from numeric.geometry.bounds import cycle_mean, osc_upper

__all__ = ["tau_of_q", "QResidual", "residual_q", "double_difference"]


def tau_of_q(q: float) -> float:
    """``2 tanh(q / 4)`` (MATH.md section 3, the paper's (7)).

    >>> round(tau_of_q(math.log(4.0)), 12)
    0.666666666667
    """
    return 2.0 * math.tanh(q / 4.0)


def _pair_max(M: np.ndarray, want_arg: bool = False):
    """``D[j, j'] = max_i (M_ij - M_ij')`` (and the row index attaining it)."""
    MT = np.ascontiguousarray(np.asarray(M, dtype=np.float64).T)
    n = MT.shape[0]
    D = np.empty((n, n))
    arg = np.empty((n, n), dtype=np.int64) if want_arg else None
    rows = np.arange(n)
    for j in range(n):
        diff = MT[j][None, :] - MT
        if arg is not None:         # want_arg
            a = diff.argmax(axis=1)
            arg[j] = a
            D[j] = diff[rows, a]
        else:
            D[j] = diff.max(axis=1)
    return D, arg


def _best_cycle(D: np.ndarray, walk: list) -> list:
    """The closed sub-walk of ``walk`` with the largest mean weight of D."""
    best_cycle, best_mean = [walk[0]], -math.inf
    last: dict[Any, int] = {}
    for t, u in enumerate(walk):
        if u in last:
            cyc = walk[last[u] : t]
            w = sum(D[cyc[s], cyc[(s + 1) % len(cyc)]] for s in range(len(cyc))) / len(cyc)
            if w > best_mean:
                best_mean, best_cycle = w, cyc
        last[u] = t
    return best_cycle


def _karp(D: np.ndarray) -> tuple[float, list[int], np.ndarray]:
    """Maximum cycle mean of the complete digraph with weights D (Karp 1978).

    Walks may start anywhere (a zero-weight super source). Returns the value,
    the best closed walk found on the optimal n-step walk (its mean is an exact
    lower bound) and potentials ``pi`` with ``D_uv + pi_u - pi_v <= value``
    (up to rounding), read off the same table: ``pi(v) = max_k F_k(v) - k value``.
    """
    n = D.shape[0]
    F = np.empty((n + 1, n))
    pred = np.zeros((n + 1, n), dtype=np.int64)
    F[0] = 0.0
    cols = np.arange(n)
    DT = np.ascontiguousarray(D.T)
    for k in range(1, n + 1):
        S = DT + F[k - 1][None, :]
        p = S.argmax(axis=1)
        pred[k] = p
        F[k] = S[cols, p]
    ks = np.arange(n)
    ratios = (F[n][None, :] - F[:n]) / (n - ks)[:, None]
    per_v = ratios.min(axis=0)
    v = int(per_v.argmax())
    lam = float(per_v[v])
    walk = [v]
    for k in range(n, 0, -1):
        walk.append(int(pred[k][walk[-1]]))
    walk.reverse()
    pi = (F - np.arange(n + 1)[:, None] * lam).max(axis=0)
    return lam, _best_cycle(D, walk), pi


@dataclass(frozen=True)
class QResidual:
    """``q(M)`` with its LP certificates (MATH.md section 3).

    ``value``: max cycle mean in float; ``b``: column shift attaining it (up to
    rounding); ``cycle``: columns j_0 -> j_1 -> ... -> j_0 whose mean weight
    lower-bounds q exactly; ``lower``/``upper``: exact rationals (``fmpq``)
    when certified (None otherwise).
    """

    value: float
    b: np.ndarray
    cycle: tuple
    lower: fmpq | None = None
    upper: fmpq | None = None


def residual_q(M, *, exact: ExactMatrix | None = None) -> QResidual:
    """``q(M) = min_b max_i osc_j(M_ij - b_j)`` as a maximum cycle mean.

    With ``exact`` (the exact rational image of M) also returns rigorous
    ``lower`` (mean of the cycle, exactly) and ``upper`` (max oscillation with
    the found b, exactly) bounds.

    >>> r = residual_q(np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> r.value  # the two rows' differences are +1 and -1: q = |2| / 2
    1.0
    """
    M = np.asarray(M, dtype=np.float64)
    m, n = M.shape
    if n == 1 or m == 1:
        b = M[0].copy() if m == 1 else np.zeros(n)
        if exact is None:
            return QResidual(0.0, b, (0,))
        return QResidual(0.0, b, (0,), fmpq(0), osc_upper(exact, b))
    D, _ = _pair_max(M)
    lam, cycle, pi = _karp(D)
    b = -pi
    lam = max(lam, 0.0)
    if exact is None:
        return QResidual(lam, b, tuple(cycle))
    lo = cycle_mean(exact, cycle)
    return QResidual(lam, b, tuple(cycle), max(lo, fmpq(0)), osc_upper(exact, b))


def double_difference(M) -> tuple[float, tuple[int, int, int, int]]:
    """``max |M_ij - M_ij' - M_i'j + M_i'j'|`` and an attaining (i, i', j, j').

    O(m n^2) through ``D_jj' + D_j'j`` with ``D_jj' = max_i (M_ij - M_ij')``: the
    double difference at (i, i', j, j') is ``(M_ij - M_ij') + (M_i'j' - M_i'j)``,
    each bracket maximised over its own row. kappa(M) >= value / 4 (MATH.md 3).

    >>> double_difference(np.array([[1.0, -1.0], [-1.0, 1.0]]))[0]
    4.0
    """
    M = np.asarray(M, dtype=np.float64)
    if M.shape[0] < 2 or M.shape[1] < 2:
        return 0.0, (0, 0, 0, 0)
    D, arg = _pair_max(M, want_arg=True)
    S = D + D.T
    j, jp = np.unravel_index(int(S.argmax()), S.shape)
    return float(S[j, jp]), (int(arg[j, jp]), int(arg[jp, j]), int(j), int(jp))

"""Linear programs of the float tier, solved with HiGHS (``highspy``).

Two LPs produce lower witnesses (MATH.md section 2, K.3 and its row-side
transpose):

- ``min_norm_row_decoder(A_S)``: the row-side reconstruction map G of least
  row-l1 norm with ``A[S, :] G = I_d``; ``1 / ||G||`` is a lower bound on
  ``gamma_row(I[:, S])``, not always equal to it (l1 is not injective: on
  ``A = [[0,1,0,1,1],[0,1,1,1,0],[0,0,1,1,1]] / 3`` the LP gives 7/27 and the
  geometric value is 1/3; docs/oddmap.md).
- ``min_norm_left_inverse(Y, T)``: the column-side map of least row-l1 norm
  with ``R Y = X`` for a given ``Y = A X`` (LP-optimal R on a subspace W,
  norm ``1 / gamma(W)``); the rows decouple, so it is one small LP per row.

Every solve is bounded by a HiGHS iteration limit (``iterations``), never by
HiGHS time: the answer does not depend on the load of the machine. HiGHS
runs with one thread, so the same LP gives the same solution every time.

Everything here is float: the results are witnesses that the exact tier
re-checks, never claims on their own.
"""
from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np
import scipy.sparse as sp

from numeric._optional import require
from numeric.runtime import stdout_silenced
from numeric.search.budget import Budget

__all__ = ["LPFailed", "solve_lp", "min_norm_row_decoder", "min_norm_left_inverse", "decoder_work"]

INF = float("inf")
#: HiGHS interior point (with crossover) solved the 256 x 22 decoder LP of a
#: MiniLM head in 2.8 s against 5.9 s for simplex and 114 s for PDLP.
DECODER_SOLVER = "ipm"
#: Work units of one decoder LP (``decoder_work``): a thousandth of the LP of 16 rows over
#: 256 columns, plus a fixed part for setting up a solve. HiGHS's time grows about as
#: ``n d^3`` (MiniLM heads, 256 columns, one core: 0.03 s at d = 4, 0.12 s at 8, 0.4 s
#: at 12, 0.7-1.0 s at 16, 3.5-4.2 s at 24), so a budget of these units spends about
#: the same time whatever the size of the row sets, as the former wall-clock budgets did.
DECODER_UNIT_ROWS, DECODER_UNIT_COLS, DECODER_OVERHEAD = 16, 256, 25


class LPFailed(RuntimeError):
    """HiGHS did not report an optimal solution."""


_BANNER_DONE = False


def _quiet_highs() -> Any:
    """A silent ``highspy.Highs``: the first one prints a banner on file descriptor 1,
    which would corrupt ``--json`` output, so fd 1 points at /dev/null while it is made
    (``numeric.runtime.stdout_silenced``)."""
    highspy = require("highspy")

    global _BANNER_DONE
    if _BANNER_DONE:
        h = highspy.Highs()
    else:
        with stdout_silenced():
            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
        _BANNER_DONE = True
    h.setOptionValue("output_flag", False)
    return h


@overload
def solve_lp(c: Any, A_ub: Any = ..., b_ub: Any = ..., A_eq: Any = ..., b_eq: Any = ..., *, lb: Any = ...,
             ub: Any = ..., iterations: int | None = ..., solver: str = ...,
             row_duals: Literal[False] = ...) -> tuple[np.ndarray, float]: ...
@overload
def solve_lp(c: Any, A_ub: Any = ..., b_ub: Any = ..., A_eq: Any = ..., b_eq: Any = ..., *, lb: Any = ...,
             ub: Any = ..., iterations: int | None = ..., solver: str = ...,
             row_duals: Literal[True]) -> tuple[np.ndarray, float, np.ndarray]: ...
def solve_lp(c: Any, A_ub: Any = None, b_ub: Any = None, A_eq: Any = None, b_eq: Any = None, *, lb: Any = None,
             ub: Any = None, iterations: int | None = None, solver: str = "choose",
             row_duals: bool = False) -> tuple[np.ndarray, float] | tuple[np.ndarray, float, np.ndarray]:
    """Minimise ``c x`` subject to ``A_ub x <= b_ub``, ``A_eq x = b_eq``, ``lb <= x <= ub``.

    A thin wrapper on ``highspy.Highs.passModel`` with sparse CSC constraint
    matrices; returns (x, objective) or raises ``LPFailed`` (also when HiGHS needs
    more than ``iterations`` interior-point or simplex iterations). With ``row_duals``
    it returns (x, objective, y), y the duals of the rows (inequalities first).

    >>> x, v = solve_lp(np.array([1.0, 1.0]), A_eq=sp.csr_matrix([[1.0, 2.0]]), b_eq=np.array([2.0]))
    >>> round(v, 9), [round(float(t), 9) for t in x]
    (1.0, [0.0, 1.0])
    """
    highspy = require("highspy")

    c = np.asarray(c, dtype=np.float64)
    nv = c.size
    blocks, lo, hi = [], [], []
    if A_ub is not None:
        blocks.append(sp.csr_matrix(A_ub))
        lo.append(np.full(A_ub.shape[0], -INF))
        hi.append(np.asarray(b_ub, dtype=np.float64))
    if A_eq is not None:
        blocks.append(sp.csr_matrix(A_eq))
        lo.append(np.asarray(b_eq, dtype=np.float64))
        hi.append(np.asarray(b_eq, dtype=np.float64))
    M = sp.vstack(blocks).tocsc() if blocks else sp.csc_matrix((0, nv))
    lp = highspy.HighsLp()
    lp.num_col_ = nv
    lp.num_row_ = M.shape[0]
    lp.col_cost_ = c
    lp.col_lower_ = np.zeros(nv) if lb is None else np.asarray(lb, dtype=np.float64)
    lp.col_upper_ = np.full(nv, INF) if ub is None else np.asarray(ub, dtype=np.float64)
    lp.row_lower_ = np.concatenate(lo) if lo else np.zeros(0)
    lp.row_upper_ = np.concatenate(hi) if hi else np.zeros(0)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = M.indptr.astype(np.int32)
    lp.a_matrix_.index_ = M.indices.astype(np.int32)
    lp.a_matrix_.value_ = M.data.astype(np.float64)
    h = _quiet_highs()
    h.setOptionValue("threads", 1)
    h.setOptionValue("solver", solver)
    if iterations is not None:
        h.setOptionValue("ipm_iteration_limit", int(iterations))
        h.setOptionValue("simplex_iteration_limit", int(iterations))
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise LPFailed(f"HiGHS status {h.modelStatusToString(status)}")
    sol = h.getSolution()
    x = np.asarray(sol.col_value, dtype=np.float64)
    v = float(h.getInfo().objective_function_value)
    if row_duals:
        return x, v, np.asarray(sol.row_dual, dtype=np.float64)
    return x, v


def decoder_work(n: int, d: int) -> int:
    """Work units of the decoder LP of ``d`` rows over ``n`` columns (``DECODER_UNIT_ROWS``).

    >>> decoder_work(256, 16), decoder_work(256, 4), decoder_work(256, 32)
    (1025, 41, 8025)
    """
    return int(np.ceil(1000 * (n / DECODER_UNIT_COLS) * (d / DECODER_UNIT_ROWS) ** 3)) + DECODER_OVERHEAD


@overload
def min_norm_row_decoder(AS: np.ndarray, iterations: int | None = ...,
                         duals: Literal[False] = ...) -> tuple[np.ndarray, float]: ...
@overload
def min_norm_row_decoder(AS: np.ndarray, iterations: int | None = ..., *,
                         duals: Literal[True]) -> tuple[np.ndarray, float, np.ndarray]: ...
def min_norm_row_decoder(AS: np.ndarray, iterations: int | None = None,
                         duals: bool = False) -> tuple[np.ndarray, float] | tuple[np.ndarray, float, np.ndarray]:
    """G (n x d) of least row-l1 norm with ``AS @ G = I_d`` (AS = A[S, :], d x n).

    Row-side reconstruction (MATH.md, transpose of K.3): with Z = I[:, S] the
    certificate needs ``Z^T A G' = Z^T``; G' = G I[S, :] and ``||G'|| = ||G||``.
    ``1 / optimum`` is a lower bound on ``gamma_row(Z)``, not always equal to it
    (module docstring; docs/oddmap.md). Variables
    G = G+ - G-, t; minimise t with ``sum_l |G_jl| <= t`` for every row j.
    Returns (G, norm), and with ``duals`` also the d x d duals ``Lam`` of the
    equalities ``(AS G)_sl = delta_sl``: row s of ``Lam`` is large when row s of
    AS takes part in the near-dependency that limits ``gamma_row`` (the rows to
    swap out first in a row-set search).
    """
    d, n = AS.shape
    nv = 2 * n * d + 1
    c = np.zeros(nv)
    c[-1] = 1.0
    # variable index of G+[j, l] = j*d + l ; G-[j, l] = n*d + j*d + l
    # equalities: for (s, l): sum_j AS[s, j] G[j, l] = delta_sl
    rows, cols, vals = [], [], []
    js, ss = np.nonzero(AS.T)  # AS.T[j, s]
    w = AS.T[js, ss]
    for l in range(d):
        r = ss * d + l
        rows += [r, r]
        cols += [js * d + l, n * d + js * d + l]
        vals += [w, -w]
    A_eq = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(d * d, nv))
    b_eq = np.eye(d).reshape(-1)
    jj = np.repeat(np.arange(n), d)
    ll = np.tile(np.arange(d), n)
    ur = np.concatenate([jj, jj, np.arange(n)])
    uc = np.concatenate([jj * d + ll, n * d + jj * d + ll, np.full(n, nv - 1)])
    uv = np.concatenate([np.ones(2 * n * d), -np.ones(n)])
    A_ub = sp.csr_matrix((uv, (ur, uc)), shape=(n, nv))
    x, v, y = solve_lp(c, A_ub=A_ub, b_ub=np.zeros(n), A_eq=A_eq, b_eq=b_eq, iterations=iterations,
                       solver=DECODER_SOLVER, row_duals=True)
    G = (x[: n * d] - x[n * d : 2 * n * d]).reshape(n, d)
    if duals:
        return G, v, y[n:].reshape(d, d)
    return G, v


def min_norm_left_inverse(Y: np.ndarray, X: np.ndarray, iterations: int | None = None,
                          budget: Budget | None = None) -> tuple[np.ndarray, float]:
    """R (n x m) of least row-l1 norm with ``R @ Y = X`` (Y = A X is m x d, X n x d).

    LP-optimal R on the subspace W = range X (K.3): row i of R minimises
    ``||r||_1`` subject to ``r Y = X[i, :]``; the norm is ``1/gamma(W)``.
    Rows with ``X[i, :] = 0`` get ``r = 0``. Each nonzero row is one LP,
    spent from ``budget`` (a ``numeric.search.budget.Budget`` of solves;
    ``LPFailed`` when it runs out before the last row).

    >>> R, v = min_norm_left_inverse(np.array([[2.0], [1.0]]), np.array([[1.0]])); round(v, 9)
    0.5
    """
    m, d = Y.shape
    n = X.shape[0]
    R = np.zeros((n, m))
    A_eq = sp.csr_matrix(np.hstack([Y.T, -Y.T]))
    best = 0.0
    for i in range(n):
        if not X[i].any():
            continue
        if budget is not None:
            if budget.exhausted:
                raise LPFailed("LP budget spent")
            budget.spend()
        x, v = solve_lp(np.ones(2 * m), A_eq=A_eq, b_eq=X[i], iterations=iterations)
        R[i] = x[:m] - x[m:]
        best = max(best, v)
    return R, best

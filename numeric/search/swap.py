"""Swap search for small row sets on the LP-optimal norm (row-side K.3, MATH.md section 2).

``rows_swap`` certifies ``|S| + 1`` rows, then more: the set starts as S
plus the row farthest (l1) from it; while its LP-optimal norm
``1/gamma_row`` (``lp.min_norm_row_decoder``) is at least ``1/eps``, one
row is exchanged. The rows with the largest LP duals (those in the
near-dependency that limits ``gamma_row``) are swapped for the rows
farthest from the rest, and the first exchange that lowers the norm is
kept; at a local optimum random exchanges from the far rows are tried
instead (iterated local search). Each LP solve spends its size in LP work
units (``lp.decoder_work``); the random exchanges draw from a generator
seeded by the cell.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from numeric.search.budget import Budget
from numeric.search.candidate import SAFETY, LowerCandidate, certifies_rows, row_witness
from numeric.search.lp import LPFailed, decoder_work, min_norm_row_decoder

__all__ = ["SWAP_MAX_ROWS", "rows_swap"]

#: The largest set the swap search tries (the LP grows as ``n d^2``; larger sets go to the growth searches).
SWAP_MAX_ROWS = 16
#: Members (largest duals first) and far candidates tried per exchange round.
SWAP_MEMBERS = 2
SWAP_CANDIDATES = 6
#: Random exchanges at a local optimum, and the pool of far rows they draw from.
SWAP_KICKS = 20
SWAP_POOL = 40


#: An LP-optimal map of a row set: ``(G, norm, duals)`` (``lp.min_norm_row_decoder``).
_Solution = tuple[np.ndarray, float, np.ndarray]
_Solve = Callable[[list[int]], "_Solution | None"]


class _Solver:
    """LP-optimal maps of row sets, ``lp.decoder_work`` units per solve (None once spent or failed)."""

    def __init__(self, A: np.ndarray, budget: Budget, iterations: int | None) -> None:
        self.A, self.budget, self.iterations = A, budget, iterations

    def __call__(self, rows: list[int]) -> _Solution | None:
        if not self.budget.take(decoder_work(self.A.shape[1], len(rows))):
            return None
        try:
            return min_norm_row_decoder(self.A[rows], iterations=self.iterations, duals=True)
        except LPFailed:
            return None


def _far_from(A: np.ndarray, rows: list[int], exclude: list[int]) -> np.ndarray:
    """l1 distance of every row of A to the nearest of ``rows``; -1 on ``exclude``."""
    d = np.full(A.shape[0], np.inf)
    for k in rows:
        d = np.minimum(d, np.abs(A - A[k]).sum(axis=1))
    d[exclude] = -1.0
    return d


def _exchange(A: np.ndarray, cur: list[int], sol: _Solution, solve: _Solve,
              tabu: set[int]) -> tuple[list[int], _Solution] | None:
    """One deterministic exchange that lowers the norm: (rows, solution) or None."""
    G, v, lam = sol
    for pos in np.argsort(-np.abs(lam).sum(axis=1), kind="stable")[:SWAP_MEMBERS]:
        dist = _far_from(A, cur[:pos] + cur[pos + 1:], cur + sorted(tabu))
        for c in np.argsort(-dist, kind="stable")[:SWAP_CANDIDATES]:
            trial = list(cur)
            trial[pos] = int(c)
            new = solve(trial)
            if new is None:
                break
            if new[1] < v:
                tabu.add(cur[pos])
                return trial, new
    return None


def _kick(A: np.ndarray, cur: list[int], sol: _Solution, solve: _Solve,
          rng: np.random.Generator) -> tuple[list[int], _Solution] | None:
    """A random exchange from the far rows that lowers the norm: (rows, solution) or None."""
    for _ in range(SWAP_KICKS):
        pos = int(rng.integers(len(cur)))
        dist = _far_from(A, cur[:pos] + cur[pos + 1:], cur)
        trial = list(cur)
        trial[pos] = int(rng.choice(np.argsort(-dist, kind="stable")[:SWAP_POOL]))
        new = solve(trial)
        if new is None:
            return None
        if new[1] < sol[1]:
            return trial, new
    return None


def rows_swap(A: np.ndarray, eps: float, S: list[int], budget: Budget, *, seed: int,
              max_rows: int = SWAP_MAX_ROWS, iterations: int | None = None) -> LowerCandidate | None:
    """Certify ``len(S) + 1`` rows, then more, by a swap search on the LP-optimal norm (see the module)."""
    target = (1 - SAFETY) / eps
    m, n = A.shape
    rng = np.random.default_rng(seed)
    solve = _Solver(A, budget, iterations)
    best: LowerCandidate | None = None
    cur = list(S)
    while len(cur) < min(max_rows, m, n) and not budget.exhausted:
        cur = cur + [int(np.argmax(_far_from(A, cur, cur)))]
        sol = solve(cur)
        if sol is None:
            break
        tabu: set[int] = set()
        while sol[1] >= target and not budget.exhausted:
            step = _exchange(A, cur, sol, solve, tabu) or _kick(A, cur, sol, solve, rng)
            if step is None:
                break
            cur, sol = step
        if sol[1] < target and certifies_rows(A, cur, sol[0], eps):
            best = row_witness(A, cur, sol[0], "row_reconstruction/swap")
        else:
            break
    return best

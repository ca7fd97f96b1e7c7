"""Lower witnesses: every family's float search for certificates of ``r_eps(A) >= d``.

``lower_candidates`` runs the families of MATH.md section 2, each in its
own module, and returns their witnesses strongest first:

- ``frobenius``: the trivial bound and the Frobenius tail (K.2);
- ``inverse``: K.3 with the truncated pseudo-inverse and the decoded inverse;
- ``far_rows``: row-side K.3 on far-apart rows (Voronoi, LP-optimal and
  descent maps);
- ``row_growth``: the screened greedy growth and the LP growth of row sets;
- ``swap``: the LP swap search on small row sets;
- ``row_backward``: backward elimination from a pool larger than the best set (thorough);
- ``lp_subspace``: K.3 with the LP-optimal map on singular subspaces.

The far-rows order suits large tolerances (the rows must be nearly
disjoint) and the span-aware growth small ones; ``search_brackets`` runs
the tolerances largest first and hands each row set on (``start``), so
every tolerance begins where the larger one ended. Every search spends a
counted budget of the ``Effort`` (``numeric.search.effort``). All margins
are float estimates; the exact tier decides.
"""
from __future__ import annotations

import numpy as np

from numeric.search.budget import Budget, SafetyCap
from numeric.search.candidate import SAFETY, LowerCandidate, rows_and_map, rows_of, strongest_rows
from numeric.search.effort import Effort
from numeric.search.far_rows import LP_MAX_ROWS, far_order, far_rows, far_rows_descent, far_rows_lp
from numeric.search.frobenius import frobenius, trivial
from numeric.search.inverse import decoded, pinv
from numeric.search.lp_subspace import lp_svd
from numeric.search.row_backward import rows_backward
from numeric.search.row_growth import LP_APPEND_MAX_ROWS, rows_greedy, rows_lp_append
from numeric.search.starts import Svd
from numeric.search.swap import SWAP_MAX_ROWS, rows_swap

__all__ = ["lower_candidates"]

#: Ties between witnesses of equal rank go to the cheaper kind to check exactly.
KIND_COST = {"trivial": 0, "frobenius": 1, "reconstruction": 2, "row_reconstruction": 3}


def _direct(A: np.ndarray, eps: float, svd: Svd, start: LowerCandidate | None) -> list[LowerCandidate]:
    """The families without a search budget, and the row set handed on from a larger tolerance."""
    U, S, Vt = svd
    out = [c for c in (frobenius(S, A.shape[0], eps), pinv(U, S, Vt, eps), decoded(A, eps)) if c is not None]
    if start is not None and start.kind == "row_reconstruction" and start.norm is not None \
            and start.norm * eps < 1 - SAFETY:
        out.append(start)      # valid at eps: ||G|| eps' < 1 - eta for eps' > eps implies it at eps
    return out


def _row_sets(A: np.ndarray, eps: float, out: list[LowerCandidate | None], effort: Effort, *, lp: bool, seed: int,
              cap: SafetyCap | None) -> None:
    """Append the row-side families' witnesses to ``out``, each grown from the strongest so far."""
    n = A.shape[1]
    its = effort.lp_iterations
    order = far_order(A)
    fr, Srows = far_rows(A, eps, order)
    if fr is not None:
        out.append(fr)
    if lp and Srows and len(Srows) < LP_MAX_ROWS and effort.far_lp_work:
        out.append(far_rows_lp(A, eps, Srows, order, Budget(effort.far_lp_work, cap), its))
    top = strongest_rows([c for c in out if c is not None])
    if effort.descent_steps and top is not None:
        S0, G0 = rows_and_map(top, n)
        out.append(far_rows_descent(A, eps, S0, order, G0, Budget(effort.descent_steps, cap)))
    top = strongest_rows([c for c in out if c is not None])
    if effort.greedy_steps:
        out.append(rows_greedy(A, eps, *rows_and_map(top, n), Budget(effort.greedy_steps, cap),
                               Budget(effort.greedy_rows, cap)))
    top = strongest_rows([c for c in out if c is not None])
    if lp and effort.swap_work and top is not None and top.rank < SWAP_MAX_ROWS:
        out.append(rows_swap(A, eps, rows_of(top), Budget(effort.swap_work, cap), seed=seed, iterations=its))
    top = strongest_rows([c for c in out if c is not None])
    if lp and effort.lp_append_work and top is not None and SWAP_MAX_ROWS <= top.rank < LP_APPEND_MAX_ROWS - 1:
        out.append(rows_lp_append(A, eps, *rows_and_map(top, n), Budget(effort.lp_append_work, cap), its))
    top = strongest_rows([c for c in out if c is not None])
    if lp and effort.backward_work:
        out.append(rows_backward(A, eps, rows_of(top) if top is not None else [], order,
                                 Budget(effort.backward_work, cap), its))


def lower_candidates(A: np.ndarray, eps: float, svd: Svd, effort: Effort, *, lp: bool = True,
                     start: LowerCandidate | None = None, seed: int = 0,
                     cap: SafetyCap | None = None) -> list[LowerCandidate]:
    """Every family's best float witness at ``eps``, strongest first (ties: cheaper kind first).

    ``svd``: (U, S, Vt) of A. ``effort``: the budgets (a zero budget skips its
    family); ``lp``: run the LP families. ``start``: a row-side selection
    witness found at a larger tolerance; it stays valid at ``eps``, so it is
    offered as it is and the row-set searches grow it instead of starting
    over. ``seed``: the cell's seed (random exchanges of the swap search);
    ``cap``: the cell's safety cap (fired by a stop request).
    """
    out = [trivial(A, eps)]
    if out[0].rank == 0:
        return out
    out += _direct(A, eps, svd, start)
    grown: list[LowerCandidate | None] = list(out)
    _row_sets(A, eps, grown, effort, lp=lp, seed=seed, cap=cap)
    out = [c for c in grown if c is not None]
    if lp and effort.lp_svd_solves:
        # column side last: it has to beat every row-side witness, so its LPs start above them
        # (and its cheap test ``||A x|| / ||x|| <= eps`` on a basis vector usually stops it at once)
        c = lp_svd(A, eps, svd[2], max(c.rank for c in out) + 1, Budget(effort.lp_svd_solves, cap),
                   effort.lp_iterations)
        if c is not None:
            out.append(c)
    out.sort(key=lambda c: (-c.rank, KIND_COST[c.kind]))
    return out

"""Row-set searches of the float tier's lower side: the screened
greedy growth and the LP swap search. Every witness they return must satisfy
``A[S, :] G = I`` to rounding and be accepted by the exact tier; the searches
must find row sets the farthest-first order misses; and the bracket search
must carry row sets from large to small tolerances without changing the order
of its output."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from flint import fmpq

from exact.certificates import RowReconstructionWitness, check_lower
from exact.matrix import ExactMatrix
from dataclasses import replace

from numeric.search.budget import Budget
from numeric.search.candidate import rows_of
from numeric.search.effort import PRESETS
from numeric.search.far_rows import far_order, far_rows
from numeric.search.lower import lower_candidates
from numeric.search.row_growth import append_bounds, rows_greedy, rows_lp_append
from numeric.search.row_map import voronoi_map
from numeric.search.swap import rows_swap
from numeric.heads.extract import softmax_rows
from numeric.search.lp import min_norm_row_decoder
from numeric.search import search_brackets


def sink_head(seed: int, n: int = 48):
    """Random logits of rank 8 with an attention sink on column 0 (as in 6 of 8 MiniLM heads)."""
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(n, 8)), rng.normal(size=(n, 8))
    H = 2.0 * q @ k.T / np.sqrt(8)
    H[:, 0] += 2.0
    return softmax_rows(H)


def _exactly_verified(A, c, eps: Fraction):
    w = RowReconstructionWitness(*(ExactMatrix.from_float64(c.tensors[t]) for t in ("G", "Z", "M")))
    return check_lower(ExactMatrix.from_float64(A), w, fmpq(eps.numerator, eps.denominator), c.rank)


def test_append_bounds_give_exact_right_inverses_within_the_bound():
    """The appended map [G - g c, g] inverts A[S + [i], :] and its norm is within the screened bound."""
    A = sink_head(0)
    _, S = far_rows(A, 0.5, far_order(A))
    GS, _ = voronoi_map(A, S)
    bound, g, C = append_bounds(A, S, GS)
    assert np.isinf(bound[S]).all()
    for i in [i for i in range(A.shape[0]) if i not in S][:12]:
        Gn = np.hstack([GS - np.outer(g[i], C[i]), g[i][:, None]])
        assert np.abs(A[S + [i]] @ Gn - np.eye(len(S) + 1)).max() < 1e-9
        assert np.abs(Gn).sum(axis=1).max() <= bound[i] * (1 + 1e-12)


def test_rows_greedy_grows_a_certified_set_and_the_exact_tier_accepts_it():
    A = sink_head(1)
    eps = Fraction(1, 4)
    _, S = far_rows(A, float(eps), far_order(A))
    c = rows_greedy(A, float(eps), S, voronoi_map(A, S)[0], Budget(20_000))
    assert c is not None and c.rank > len(S)
    assert c.family == "row_reconstruction/greedy"
    rows = rows_of(c)
    assert rows[:len(S)] == S                   # the start set is kept, rows are only added
    assert np.abs(A[rows] @ c.tensors["G"][:, rows] - np.eye(c.rank)).max() < 1e-9
    v = _exactly_verified(A, c, eps)
    assert v.verified, v.reason


def test_lp_growth_certifies_rows_the_descent_misses():
    """The greedy's descent maps stop at 13 rows here; LP-optimal maps (norm 1/gamma_row) certify more."""
    A = sink_head(1)
    eps = Fraction(1, 4)
    _, S = far_rows(A, float(eps), far_order(A))
    g = rows_greedy(A, float(eps), S, voronoi_map(A, S)[0], Budget(20_000))
    S2 = rows_of(g)
    c = rows_lp_append(A, float(eps), S2, g.tensors["G"][:, S2], Budget(200_000))  # LP work units (lp.decoder_work)
    assert c is not None and c.rank > g.rank
    assert c.family == "row_reconstruction/greedy-lp"
    assert rows_of(c)[:g.rank] == S2
    v = _exactly_verified(A, c, eps)
    assert v.verified, v.reason


def test_rows_swap_certifies_a_set_the_far_order_misses():
    """At eps = 1/2 the 9 farthest-first rows have LP norm 2.2 > 2, so no witness on them exists;
    the swap search exchanges rows until 9 (or more) rows certify, and the exact tier agrees."""
    A = sink_head(0)
    eps = Fraction(1, 2)
    order = far_order(A)
    _, S = far_rows(A, float(eps), order)
    _, nu = min_norm_row_decoder(A[order[:len(S) + 1]])
    assert nu * float(eps) >= 1                 # the far prefix of size |S| + 1 cannot certify
    c = rows_swap(A, float(eps), S, Budget(300_000), seed=0)  # LP work units
    assert c is not None and c.rank >= len(S) + 1
    assert c.family == "row_reconstruction/swap"
    assert c.norm * float(eps) < 1
    v = _exactly_verified(A, c, eps)
    assert v.verified, v.reason
    # the same witness at a tolerance just above 1/||G|| (where ||G|| eps >= 1) is refused
    w = RowReconstructionWitness(*(ExactMatrix.from_float64(c.tensors[t]) for t in ("G", "Z", "M")))
    q = Fraction(c.norm).limit_denominator(10 ** 6)
    loose = fmpq(q.denominator, q.numerator) * fmpq(1001, 1000)
    assert not check_lower(ExactMatrix.from_float64(A), w, loose, c.rank).verified


def test_start_witness_is_reused_at_a_smaller_tolerance():
    """A row witness found at eps' stays valid at eps < eps' and is offered as it is."""
    A = sink_head(2)
    svd = np.linalg.svd(A)
    greedy_only = replace(PRESETS["default"], descent_steps=0, swap_work=0)
    big = lower_candidates(A, 0.5, svd, greedy_only, lp=False)
    start = max((c for c in big if c.kind == "row_reconstruction"), key=lambda c: c.rank)
    small = lower_candidates(A, 0.25, svd, replace(greedy_only, greedy_steps=0), lp=False, start=start)
    assert any(c is start for c in small)
    assert small[0].rank >= start.rank


@pytest.mark.parametrize("eps", [[0.1, 0.25, 0.5], [0.5, 0.1, 0.25]])
def test_search_keeps_the_callers_order_and_lower_ranks_fall_with_eps(eps):
    A = sink_head(3, n=32)
    out = search_brackets(A, eps, attack=False, effort="quick")
    assert [r.eps for r in out.results] == eps
    assert [c.id for c in out.cells] == [f"cell/eps={e}" for e in eps]
    by_eps = sorted(out.results, key=lambda r: r.eps)
    assert all(a.lower >= b.lower for a, b in zip(by_eps, by_eps[1:]))
    assert all(r.lower <= r.upper for r in out.results)


def test_lp_budgets_count_work_by_the_size_of_each_lp():
    """Counted budgets: an LP budget is spent in ``decoder_work`` units, which grow with the row set
    (a large LP costs more of it, as it cost more seconds); a budget of exactly one solve's
    units allows that solve and no second one."""
    from numeric.search.far_rows import far_rows_lp
    from numeric.search.lp import decoder_work

    assert decoder_work(256, 8) < decoder_work(256, 16) < decoder_work(256, 24)
    assert decoder_work(128, 16) < decoder_work(256, 16)
    A = sink_head(0)
    eps = 0.5
    order = far_order(A)
    _, S = far_rows(A, eps, order)
    one = decoder_work(A.shape[1], len(S) + 1)
    budget = Budget(one)
    far_rows_lp(A, eps, S, order, budget)
    assert budget.used == one                  # the first trial adds one row; then the budget is spent

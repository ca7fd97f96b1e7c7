"""Upper witnesses (K.1): refinement, rank search, dyadic snapping, attacks share the machinery."""
from fractions import Fraction

import numpy as np
import pytest

from numeric.runtime import trial_trace
from numeric.search import refine as rf
from numeric.search import upper as up
from numeric.search.attack import attack_rank
from numeric.search.budget import Budget

#: Adam steps for a rank search in these tests: far more than a 48 x 48 head needs.
STEPS = 16_000_000  # Adam work units (refine.step_work): about 200,000 steps


def _softmax(h):
    z = np.exp(h - h.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def head():
    rng = np.random.default_rng(7)
    q, k = rng.normal(size=(48, 8)), rng.normal(size=(48, 8))
    return _softmax(q @ k.T / 2.0)


def test_refine_beats_svd_at_fixed_rank(head):
    (U, S, Vt), errs = up.svd_baseline(head)
    k = 6
    P, Q, err = rf.refine(head, *up.svd_factors(U, S, Vt, k), 1e-3, iters=300)
    assert err == pytest.approx(np.abs(head - P @ Q.T).sum(axis=1).max())
    assert err < 0.9 * errs[k]          # the smooth max lowers the max row-l1 error well below the SVD's


def test_search_upper_is_float_feasible_and_ordered(head):
    svd, errs = up.svd_baseline(head)
    eps = 0.25
    found = up.search_upper(head, eps, Budget(STEPS), svd=(svd, errs), full_iters=600)
    ranks = [u.rank for u in found]
    assert ranks == sorted(ranks) and found[-1].family == "svd"
    assert found[-1].rank == int(np.nonzero(errs <= eps)[0][0])
    assert found[0].rank < found[-1].rank      # refinement goes below the SVD baseline here
    for u in found:
        assert u.P.shape == (48, u.rank) and u.Q.shape == (48, u.rank)
        assert np.abs(head - u.P @ u.Q.T).sum(axis=1).max() <= eps


def test_search_upper_respects_lower(head):
    svd = up.svd_baseline(head)
    found = up.search_upper(head, 0.25, Budget(STEPS), lower=10, svd=svd, full_iters=600)
    assert all(u.rank >= 10 for u in found)


def test_boundary_retries_a_rank_the_narrowing_missed_from_the_svd_with_full_trials(head, monkeypatch):
    """A rank the narrowing's short trials missed is tried again in the boundary phase, first from
    the truncated SVD (not its converged iterate), with a full-length trial; the real descent runs
    throughout (one complete annealed run per trial)."""
    svd, errs = up.svd_baseline(head)
    eps, short, full = 0.25, 150, 400
    real = up.refine

    def short_misses(A, P0, Q0, e, *, iters=rf.DEFAULT_ITERS, **kw):
        P, Q, err = real(A, P0, Q0, e, iters=iters, **kw)
        if iters <= short and P0.shape[1] <= target:     # the narrowing's short trials miss here
            err = max(err, 2 * e)
        return P, Q, err

    # the lowest rank the real descent reaches: the boundary phase must get there on its own
    target = up.search_upper(head, eps, Budget(STEPS), svd=(svd, errs), iters=short, full_iters=full)[0].rank
    monkeypatch.setattr(up, "refine", short_misses)
    with trial_trace() as record:
        found = up.search_upper(head, eps, Budget(STEPS), svd=(svd, errs), iters=short, full_iters=full)
    trace = record.trials
    assert found[0].rank <= target
    missed = {k for phase, _, k, _, _ in trace if phase == "narrow" and k <= target}
    first = {}
    for phase, kind, k, steps, _ in trace:
        if phase == "boundary":
            first.setdefault(k, (kind, steps))
    assert any(k in missed for k in first)                 # the branch under test ran
    assert all(first[k] == ("svd", full) for k in first if k in missed)
    assert all(steps == full for phase, _, _, steps, _ in trace if phase == "boundary")


def test_snap_dyadic_represents_a_dyadic_product_exactly():
    P = np.array([[0.3], [0.6]])
    Q = np.array([[0.25 / 0.3], [0.5 / 0.3]])
    A = P @ Q.T
    Ps, Qs = rf.snap_dyadic(np.array([[0.25, 0.5], [0.5, 1.0]]), P, Q)
    prod = [[sum(Fraction(Ps[i, c]) * Fraction(Qs[j, c]) for c in range(1)) for j in range(2)] for i in range(2)]
    assert prod == [[Fraction(1, 4), Fraction(1, 2)], [Fraction(1, 2), Fraction(1)]]
    assert np.allclose(A, Ps @ Qs.T)


def test_attack_reaches_a_feasible_rank_and_not_below_frobenius_bound(head):
    svd, errs = up.svd_baseline(head)
    eps = 0.25
    u = up.search_upper(head, eps, Budget(STEPS), svd=(svd, errs), full_iters=600)[0]
    hit = attack_rank(head, u.rank, eps, svd)          # the same machinery reaches U (teeth)
    assert hit.success and hit.error <= eps
    miss = attack_rank(head, 0, eps, svd)              # rank 0: error is the max row sum, 1
    assert not miss.success and miss.error == pytest.approx(1.0)
    # K.2 from numpy's singular values alone: a rank-k matrix within eps in row-l1 is within
    # sqrt(m) eps in Frobenius norm, so every rank k with sum_{i >= k} s_i^2 > m eps^2 is out of reach
    s = np.linalg.svd(head, compute_uv=False)
    m = head.shape[0]
    frob_rank = max(k for k in range(1, s.size + 1) if (s[k - 1:] ** 2).sum() > m * eps * eps)
    assert u.rank >= frob_rank                          # the refined rank is not below the bound
    below = attack_rank(head, frob_rank - 1, eps, svd)
    assert not below.success and below.error > eps


def test_l1_row_fit_is_the_l1_distance_to_the_span(head):
    """The dual LP's optimum is the l1 distance from a row to span(Q), and p attains it."""
    from numeric.search.l1fit import l1_row_fit

    (U, S, Vt), _ = up.svd_baseline(head)
    Q = Vt[:5].T
    rng = np.random.default_rng(3)
    for i in range(6):
        p, d = l1_row_fit(head[i], Q)
        assert np.abs(head[i] - Q @ p).sum() == pytest.approx(d, rel=1e-9)
        # no random nearby coefficient vector does better (p is a minimiser)
        for _ in range(50):
            trial = p + rng.normal(scale=1e-3, size=p.size)
            assert np.abs(head[i] - Q @ trial).sum() >= d - 1e-12


def test_refit_rows_rescues_a_near_miss_and_touches_no_other_row(head):
    """A near miss whose over-eps rows are refitted on span(Q) becomes feasible; rows below the
    target stay as they were, no row gets worse, and a spent budget refits nothing."""
    from numeric.search.l1fit import refit_rows, refit_work

    (U, S, Vt), _ = up.svd_baseline(head)
    P, Q = up.svd_factors(U, S, Vt, 6)
    err = np.abs(head - P @ Q.T).sum(axis=1)
    target = float(np.sort(err)[-3]) * 1.0001          # the two worst rows are over it
    over = err > target
    P2, e2 = refit_rows(head, P, Q, target, Budget(10**9), max_rows=8)
    err2 = np.abs(head - P2 @ Q.T).sum(axis=1)
    assert e2 == pytest.approx(err2.max()) and e2 <= target
    assert np.array_equal(P2[~over], P[~over]) and (err2 <= err + 1e-15).all()
    P3, e3 = refit_rows(head, P, Q, target, Budget(refit_work(48, 6) - 1), max_rows=8)
    assert np.array_equal(P3, P) and e3 == pytest.approx(err.max())
    P4, _ = refit_rows(head, P, Q, target, Budget(10**9), max_rows=1)   # more rows over than allowed
    assert np.array_equal(P4, P)


def test_hybrid_start_serves_one_hot_rows_with_coordinate_columns():
    """Sharp rows are served by coordinate columns: a matrix of k near-one-hot rows (distinct
    columns) plus diffuse rows near a 1-dimensional span is within eps of the hybrid start at
    rank k + 1, whose first k columns are those coordinate vectors."""
    rng = np.random.default_rng(5)
    n, k, eps = 40, 12, 0.25
    A = np.full((n, n), 0.0)
    cols = rng.permutation(n)[:k]
    for i, j in enumerate(cols):                 # rows 0..k-1: 0.9 on column j, the rest spread
        A[i] = 0.1 / (n - 1)
        A[i, j] = 0.9
    A[k:] = 1.0 / n                              # diffuse rows: uniform
    A[k:] += rng.normal(scale=1e-4, size=(n - k, n))
    A[k:] /= A[k:].sum(axis=1, keepdims=True)
    P, Q = up.hybrid_factors(A, eps, k + 1)
    assert set(np.flatnonzero(np.abs(Q[:, :k]).sum(axis=1))) == set(cols)
    assert np.abs(A - P @ Q.T).sum(axis=1).max() <= eps
    assert up.hybrid_factors(A, 0.1, k + 1) is None

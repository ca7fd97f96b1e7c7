"""The float tier's bracket search: exported brackets verify exactly,
close where r_eps is known, and the attack machinery is both harmless on
certified cells and strong enough to reach the upper rank on closed ones."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from exact.verify import verify_file
from numeric.search.attack import attack_rank
from numeric.search.export import write_bracket_file
from numeric.search import search_brackets
from numeric.search.upper import svd_baseline


def _k(t):
    return t * np.eye(2) + (1 - t) * np.ones((2, 2)) / 2


def twobit(t, s):
    """A(t, s) = K(t) (x) K(s), MATH.md section 4 (exact in float64 for dyadic t, s)."""
    return np.kron(_k(t), _k(s))


def softmax_rows(h):
    z = np.exp(h - h.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def _search_and_verify(tmp_path, A, eps, name="cell", **kw):
    out = search_brackets(A, eps, id_prefix=name, **kw)
    path = write_bracket_file(tmp_path / f"{name}.safetensors", out.cells, out.tensors)
    reports = verify_file(path)
    assert len(reports) == len(eps)
    for rep in reports:
        assert rep.lower.verified, rep.lower.reason
        assert rep.upper.verified, rep.upper.reason
    for rec, cell in zip(out.results, out.cells):
        assert cell.lower.rank == rec.lower <= rec.upper == cell.upper.rank
        assert rec.attack_success in (None, False)
    return out


def test_twobit_cells_close(tmp_path):
    """MATH.md section 4: A(3/4, 1/2) closes at 4, 3, 2, 1; A(3/4, 3/4) at eps 5/8 closes at 3."""
    out = _search_and_verify(tmp_path, twobit(0.75, 0.5), [Fraction(1, 4), Fraction(7, 16), Fraction(5, 8),
                                                           Fraction(7, 8)], name="t12")
    assert [(r.lower, r.upper) for r in out.results] == [(4, 4), (3, 3), (2, 2), (1, 1)]
    out = _search_and_verify(tmp_path, twobit(0.75, 0.75), [Fraction(5, 8)], name="t34")
    r = out.results[0]
    assert (r.lower, r.upper) == (3, 3)
    # the truncated pseudo-inverse fails here (norm 11/6); an LP-optimal map wins
    assert r.lower_witness != "reconstruction/pinv"


def test_twobit_boundary_cell_closes_with_error_exactly_eps(tmp_path):
    """MATH.md section 4: r_{3/4}(A(3/4, 3/4)) = 1, attained only at the boundary (B = 7/64 J has
    error exactly 3/4). The polish restarts a close miss from the SVD, snaps it to dyadic
    factors, and the exact tier accepts the rank-1 witness with margin exactly 0."""
    out = _search_and_verify(tmp_path, twobit(0.75, 0.75), [Fraction(3, 4)], name="t34b")
    r = out.results[0]
    assert (r.lower, r.upper) == (1, 1)
    assert r.upper_witness == "factors/snapped"
    assert r.upper_margin == "0"


def test_finite_grid_gaussian_is_full_rank(tmp_path):
    """G.1: a 1-D grid with ||A - I|| < (1 - eps)/2 has r_eps = n, from logits with slack (K.5)."""
    x = np.arange(12.0)
    H = -3.0 * (x[:, None] - x[None, :]) ** 2
    A = softmax_rows(H)
    eps = [0.1, 0.25]
    assert np.abs(A - np.eye(12)).sum(1).max() < (1 - max(eps)) / 2
    out = _search_and_verify(tmp_path, A, eps, logits=H, name="grid")
    assert all((r.lower, r.upper) == (12, 12) for r in out.results)
    assert all(c.target.logits == "grid/logits" and c.target.slack is not None for c in out.cells)
    assert all(r.slack is not None and r.slack < 1e-12 for r in out.results)


@pytest.mark.parametrize("scale", [0.5, 4.0, 40.0])
def test_written_slack_is_proved_on_the_fast_path(scale):
    """The slack the float tier writes (K.5) is at least the tight arb bound, so it is true, and the exact
    tier proves it from its float64 row bounds alone: no row goes to arb."""
    from exact.slack import SlackProof, softmax_slack_bound
    from numeric.search.slack import target_slack

    H = np.random.default_rng(3).normal(scale=scale, size=(40, 64))
    A = softmax_rows(H)
    q, f = target_slack(H, A)
    assert Fraction(f) == Fraction(int(q.p), int(q.q)) and q >= softmax_slack_bound(H, A)
    proof = SlackProof(H, A)
    assert proof.bound_for(q) <= q and not proof.arb


def test_rank_one_and_block_diagonal_close(tmp_path):
    """Equal rows: r_eps = 1 for eps < 1. Uniform blocks on disjoint supports: r_eps = #blocks for eps < 1."""
    w = np.array([0.5, 0.25, 0.125, 0.0625, 0.0625])
    out = _search_and_verify(tmp_path, np.tile(w, (6, 1)), [0.1, 0.5], name="r1")
    assert [(r.lower, r.upper) for r in out.results] == [(1, 1), (1, 1)]
    B = np.zeros((12, 12))
    for b in range(4):
        B[3 * b:3 * b + 3, 3 * b:3 * b + 3] = 1 / 3
    out = _search_and_verify(tmp_path, B, [0.1, 0.5, 0.9], name="blocks")
    assert [(r.lower, r.upper) for r in out.results] == [(4, 4)] * 3


def test_random_head_refined_beats_svd_and_verifies(tmp_path):
    """A random 48 x 48 softmax head: every bracket verifies, refinement beats the SVD rank, attacks fail."""
    rng = np.random.default_rng(7)
    q, k = rng.normal(size=(48, 8)), rng.normal(size=(48, 8))
    H = 1.5 * q @ k.T
    out = _search_and_verify(tmp_path, softmax_rows(H), [0.1, 0.25], logits=H, name="rand")
    assert any(r.upper < r.svd_rank for r in out.results)
    assert any(r.upper_witness == "factors/refined" for r in out.results)
    assert all(r.attack_success is False for r in out.results if r.lower >= 2)
    assert all(r.lower >= 2 for r in out.results)


def test_attack_machinery_reaches_the_upper_rank_on_closed_controls():
    """Item 3: the attack is not toothless: at rank U on a closed cell it succeeds, at L - 1 it fails."""
    A = twobit(0.75, 0.5)
    svd = svd_baseline(A)[0]
    ok = attack_rank(A, 3, 7 / 16, svd)
    assert ok.success and ok.error <= 7 / 16
    no = attack_rank(A, 2, 7 / 16 * (1 - 1e-3), svd)
    assert not no.success and no.error > 7 / 16


def test_several_searches_share_one_file(tmp_path):
    a = search_brackets(twobit(0.75, 0.5), [0.25], id_prefix="a")
    b = search_brackets(twobit(0.75, 0.75), [0.625], id_prefix="b")
    assert not set(a.tensors) & set(b.tensors)
    path = write_bracket_file(tmp_path / "ab.safetensors", a.cells + b.cells, {**a.tensors, **b.tensors})
    reps = verify_file(path)
    assert [r.id for r in reps] == ["a/eps=0.25", "b/eps=0.625"] and all(r.verified for r in reps)
    assert a.cells[0].eps == "1/4" and b.cells[0].eps == "5/8"


def test_provenance_is_merged():
    out = search_brackets(twobit(0.75, 0.5), [0.25], provenance={"model": "m", "layer": 3}, attack=False)
    prov = out.cells[0].provenance
    assert prov["model"] == "m" and prov["layer"] == 3
    assert prov["search"]["lower_family"] == out.results[0].lower_witness


@pytest.mark.parametrize("matrix, eps, message", [
    (np.ones((3, 3)), [0.1], "row-stochastic"),
    (np.full((2, 2), np.nan), [0.1], "NaN"),
    (np.full((2, 2), 0.5, dtype=np.float32), [0.1], "float64"),
    (np.full((2, 2, 2), 0.5), [0.1], "2-D"),
    (np.full((2, 2), 0.5), [0.0], "outside"),
    (np.full((2, 2), 0.5), [1.5], "outside"),
    (np.full((2, 2), 0.5), ["x"], "not a rational"),
])
def test_bad_input_is_a_value_error(matrix, eps, message):
    with pytest.raises(ValueError, match=message):
        search_brackets(matrix, eps)


def test_spurious_float_attack_is_refused_exactly(monkeypatch):
    """A float 'success' of the attack is re-checked exactly; wrong factors are not a soundness alarm."""
    import numeric.search.driver as ns
    from numeric.search.attack import AttackResult

    def fake(A, rank, eps, svd, **kw):
        return AttackResult(rank, eps, 0.0, True, np.zeros((A.shape[0], rank)), np.zeros((A.shape[1], rank)))

    monkeypatch.setattr(ns, "attack_rank", fake)
    out = search_brackets(twobit(0.75, 0.5), [Fraction(7, 16)])
    assert out.results[0].lower == 3 and out.results[0].attack_success is False


def test_an_exactly_verified_attack_fails_loudly(monkeypatch):
    """If the exact tier ever accepted a rank-(L-1) attack, the result says so and a warning is raised."""
    import exact.certificates as ec
    import numeric.search.driver as ns
    from exact.verdict import verified
    from numeric.search.attack import AttackResult

    real = ec.check_upper

    def fake_attack(A, rank, eps, svd, **kw):
        return AttackResult(rank, eps, 0.0, True, np.zeros((A.shape[0], rank)), np.zeros((A.shape[1], rank)))

    def lenient(A, w, eps, rank):   # a deliberately unsound checker: accepts the attack's rank
        return verified("factors", rank, None) if rank == 2 else real(A, w, eps, rank)

    monkeypatch.setattr(ns, "attack_rank", fake_attack)
    monkeypatch.setattr(ns, "check_upper", lenient)
    with pytest.warns(RuntimeWarning, match="SOUNDNESS BUG"):
        out = search_brackets(twobit(0.75, 0.5), [Fraction(7, 16)])
    assert out.results[0].attack_success is True


def test_descent_row_map_extends_far_rows_and_verifies_exactly():
    """Row-side K.3: the descent-found map G certifies more far rows than the Voronoi map,
    satisfies A[S, :] G = I to rounding, and the exact tier accepts the exported witness."""
    from exact.certificates import RowReconstructionWitness, check_lower
    from exact.matrix import ExactMatrix
    from numeric.search.budget import Budget
    from numeric.search.far_rows import far_order, far_rows, far_rows_descent
    from numeric.search.row_map import voronoi_map

    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(64, 8)), rng.normal(size=(64, 8))
    A = softmax_rows(3.0 * q @ k.T / np.sqrt(8))
    eps = 0.1
    order = far_order(A)
    _, S = far_rows(A, eps, order)
    c = far_rows_descent(A, eps, S, order, voronoi_map(A, S)[0], Budget(4000))
    assert c is not None and c.rank > len(S)
    assert c.family == "row_reconstruction/far-rows-descent"
    rows = [int(i) for i in np.argmax(c.tensors["Z"], axis=0)]
    assert np.abs(A[rows] @ c.tensors["G"][:, rows] - np.eye(c.rank)).max() < 1e-9
    assert c.norm * eps < 1
    w = RowReconstructionWitness(*(ExactMatrix.from_float64(c.tensors[t]) for t in ("G", "Z", "M")))
    from flint import fmpq

    v = check_lower(ExactMatrix.from_float64(A), w, fmpq(1, 10), c.rank)
    assert v.verified, v.reason


def test_lp_svd_skips_subspaces_a_basis_vector_refutes():
    """K.3: gamma(W) <= ||A x|| / ||x|| for x in W, so a near-uniform matrix gets no LP-SVD witness,
    and the cheap test stops it before any LP is solved."""
    from numeric.search.budget import Budget
    from numeric.search.lp_subspace import lp_svd

    A = np.full((32, 32), 1 / 32) + 1e-3 * np.eye(32)
    A /= A.sum(axis=1, keepdims=True)
    _, _, Vt = np.linalg.svd(A)
    budget = Budget(1000)
    assert lp_svd(A, 0.25, Vt, 2, budget) is None
    assert budget.used == 0


def test_the_safety_cap_stops_the_search_and_the_cell_says_so(tmp_path):
    """Counted budgets: the outer cap (fired by a stop request, the only thing that ends a search
    early: no clock is read) stops every budgeted search at once; the cell records ``capped`` and
    is still a verified bracket. Cells without a stop request are not capped."""
    from numeric.runtime import stop_scope

    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(24, 4)), rng.normal(size=(24, 4))
    A = softmax_rows(q @ k.T)
    with stop_scope() as token:
        token.request()
        out = _search_and_verify(tmp_path, A, [0.25], name="capped", effort="quick")
    assert out.results[0].capped and out.cells[0].provenance["search"]["capped"] is True
    assert out.provenance.capped == ("capped/eps=0.25",) and out.provenance.to_json()["capped"] == ["capped/eps=0.25"]
    free = search_brackets(A, [0.25], effort="quick", attack=False)
    assert not free.results[0].capped and free.provenance.capped == ()


def test_thorough_keeps_the_default_witnesses(tmp_path):
    """Thorough runs the default preset first (its own row chain across tolerances) and keeps the better
    verified side: never a wider bracket than default. With its own budgets starved, it returns exactly
    default's brackets; with them as shipped, L is no lower and U no higher at every tolerance."""
    from numeric.search.effort import PRESETS

    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(24, 6)), rng.normal(size=(24, 6))
    H = 2.0 * q @ k.T
    A, eps = softmax_rows(H), [0.25, 0.5]
    base = _search_and_verify(tmp_path, A, eps, logits=H, name="d", effort="default", attack=False)
    starved = PRESETS["thorough"].replace(upper_work=1, far_lp_work=1, descent_steps=1, greedy_steps=1,
                                          greedy_rows=1, swap_work=1, lp_append_work=1, lp_svd_solves=1)
    weak = _search_and_verify(tmp_path, A, eps, logits=H, name="w", effort=starved, attack=False)
    full = _search_and_verify(tmp_path, A, eps, logits=H, name="t", effort="thorough", attack=False)
    assert [(r.lower, r.upper) for r in weak.results] == [(r.lower, r.upper) for r in base.results]
    for b, t in zip(base.results, full.results):
        assert t.lower >= b.lower and t.upper <= b.upper
    assert full.provenance.run.base_effort == "default" and base.provenance.run.base_effort is None

"""The study's calibrated intervals, placebos, demeaning and self-check.

Synthetic tables with a known truth (``numeric.study.calibrate``); every seed,
replication count and tolerance is stated in the test. The full-size
self-check (4 families x 8 heads x 16 sources, 200 replications) is
``python -m numeric study --calibrate``, recorded in docs/study.md; here a
smaller shape and fewer replications keep each test to seconds.
"""
from __future__ import annotations

import numpy as np
import pytest

from numeric.study.calibrate import SCENARIOS, Shape, calibrate, report_lines, synthetic
from numeric.study.compare import AGGREGATE, Comparison, compare, heldout_losses, permuted
from numeric.study.data import StudyData
from numeric.study.demean import fold_demeaned
from numeric.study.fit import FastRidgeCV
from numeric.study.intervals import cluster_variance, paired_estimates, tost
from numeric.study.protocol import demeaned_name, placebo_name, reading

#: The test suite's shape: one family of the built-in shape, 8 heads x 16 sources (128 cells).
SMALL = Shape((("a", 8, 16, "text"),), ("b0_depth",) + tuple(
    f"b1_{m}_{s}" for m in ("wq", "wk", "wqk") for s in ("sv1", "sv2", "sv3", "stable_rank", "eff_rank")))
#: Replications per scenario in the suite, and the gain planted (one family cannot see rho 0.08).
REPS, RHO = 30, 0.25


def _heads_table(seed: int, head_sd: float = 1.0) -> StudyData:
    """12 heads x 8 sources; y = head effect + cell signal + noise; ``base`` sees the cell signal."""
    rng = np.random.default_rng(seed)
    H, S = 12, 8
    h, s = np.repeat(np.arange(H), S), np.tile(np.arange(S), H)
    eff = head_sd * rng.normal(size=H)
    base = rng.normal(size=H * S)
    y = eff[h] + base + 0.5 * rng.normal(size=H * S)
    cols = {"base": base, "noise": rng.normal(size=H * S)}
    cols.update({f"hc{j}": rng.normal(size=H)[h] for j in range(HC)})   # random head constants
    return StudyData.build(cols, {}, y, [f"s{i}" for i in s], [f"h{i}" for i in h], ["enc"] * (H * S))


#: Columns of the head-identity block (random head-level constants, independent of y).
HC = 8
HCONST = tuple(f"hc{j}" for j in range(HC))


# ---- within-head demeaning --------------------------------------------------------------------------

def test_demeaned_head_constant_block_is_dropped_not_rescaled_rounding():
    """A block constant within every head adds exactly nothing once demeaned: Delta is exactly 0
    (the old demeaning left 1e-17 residue, divided it by its sd and reported a 'significant'
    Delta). Seed 1; 12 heads x 8 sources."""
    data = _heads_table(1)
    r = compare(data, [Comparison("hc", ("base",), HCONST, demean=True)], replicates=1, seed=0)[0]
    e = r.estimates[AGGREGATE]
    assert e.delta == 0.0 and e.delta_ci[0] <= 0 <= e.delta_ci[1]


def test_demeaning_uses_the_training_rows_head_means_only():
    """A test row's own values never enter its transformation: changing the target of every row of
    one source changes nothing in the other sources' demeaned values of that fold (the old
    demeaning subtracted head means over all rows, test fold included)."""
    data = _heads_table(2)
    X = data.matrix(("base", "noise"))
    train = data.sources != "s0"
    y2 = data.y.copy()
    y2[~train] += 100.0
    a, b = fold_demeaned(X, data.y, data.heads, train), fold_demeaned(X, y2, data.heads, train)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1][train], b[1][train])
    # the held-out losses of the demeaned model on the other sources do not move either
    r = np.arange(len(data))
    moved = StudyData.build(data.numeric, {}, y2, data.sources, data.heads, data.families)
    la = heldout_losses(data, r, ("base",), "source", True, 4)
    lb = heldout_losses(moved, r, ("base",), "source", True, 4)
    from numeric.study.fit import fold_indices

    test = next(t for _, t in fold_indices(data.sources, 4) if "s0" in set(data.sources[t]))
    keep = test[data.sources[test] != "s0"]     # s0's fold-mates: same models, same training means
    assert keep.size and np.array_equal(la[keep], lb[keep])


def test_a_gap_voids_only_its_own_cell():
    """One NaN in a column: the other cells of that head keep their demeaned values (head mean over
    the finite values), instead of the whole head's column becoming a gap."""
    X = np.array([[1.0], [3.0], [np.nan], [10.0], [14.0]])
    heads = np.array(["a", "a", "a", "b", "b"])
    Xd, _ = fold_demeaned(X, np.zeros(5), heads, np.ones(5, dtype=bool))
    assert Xd[:, 0].tolist()[:2] == [-1.0, 1.0] and np.isnan(Xd[2, 0]) and Xd[3:, 0].tolist() == [-2.0, 2.0]


def test_ridge_drops_a_column_of_rounding_residue():
    """fit.py: a column that is constant up to rounding (1e-16 relative) gets no coefficient; the
    old ``sd > 0`` rule scaled it to unit variance and fitted its noise."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] + rng.normal(size=60)
    resid = 5.0 + 5.0 * 1e-16 * rng.normal(size=60)
    Xt = rng.normal(size=(10, 3))
    a = FastRidgeCV().fit(X, y).predict(Xt)
    b = FastRidgeCV().fit(np.column_stack([X, resid]), y).predict(np.column_stack([Xt, np.full(10, 5.0)]))
    assert np.allclose(a, b, rtol=0, atol=1e-12)


# ---- placebos -------------------------------------------------------------------------

def test_head_level_placebo_keeps_head_structure_and_loses_the_link():
    """``heads`` mode: every head stays constant-plus-deviations (its mean is another head's mean,
    its deviations its own, shuffled); ``within-head``: head means kept; ``rows``: a permutation."""
    rng = np.random.default_rng(4)
    heads = np.repeat(np.array(["h0", "h1", "h2", "h3"]), 5)
    block = np.repeat(np.arange(4.0) * 10, 5)[:, None] + rng.normal(size=(20, 1))
    means = {h: block[heads == h, 0].mean() for h in np.unique(heads)}
    p = permuted(block, heads, "heads", np.random.default_rng(0))
    got = sorted(round(p[heads == h, 0].mean(), 9) for h in np.unique(heads))
    assert got == sorted(round(m, 9) for m in means.values())
    for h in np.unique(heads):   # the deviations of each head stay in that head
        dev = np.sort(block[heads == h, 0] - means[h])
        assert np.allclose(np.sort(p[heads == h, 0] - p[heads == h, 0].mean()), dev)
    w = permuted(block, heads, "within-head", np.random.default_rng(0))
    assert all(np.isclose(w[heads == h, 0].mean(), means[h]) for h in means)
    assert sorted(permuted(block, heads, "rows", np.random.default_rng(0))[:, 0]) == sorted(block[:, 0])


def test_head_level_placebo_flags_head_identity_and_the_row_placebo_does_not():
    """A block of random head constants independent of y, where the base cannot tell the heads apart
    (y has head effects): it 'gains' after the base, the head-level placebo (20 permutations) gains
    too, the row placebo does not, the demeaned row finds nothing, and the reading rule does not
    count it. Seed 5; 12 heads x 8 sources."""
    data = _heads_table(5, head_sd=1.5)
    comps = [Comparison("B1 vs B1+G", ("base",), HCONST),
             Comparison(placebo_name("G"), ("base",), HCONST, placebo="heads"),
             Comparison("rows", ("base",), HCONST, placebo="rows"),
             Comparison(demeaned_name("G"), ("base",), HCONST, demean=True)]
    res = compare(data, comps, replicates=0, seed=1)
    e = {r.comparison.name: r.estimates[AGGREGATE] for r in res}
    assert e["B1 vs B1+G"].delta_ci[0] > 0
    assert e[placebo_name("G")].delta_ci[0] > 0 and res[1].placebo["significant"] >= 10
    assert e["rows"].delta_ci[0] <= 0
    assert e[demeaned_name("G")].delta == 0.0
    assert reading(res, "G") == "gain, not counted: the head-level placebo gains too (head identity)"


def test_placebo_permutations_have_their_own_stream():
    """The placebo's permutations do not depend on the bootstrap's resamples (separate streams)."""
    data = _heads_table(6)
    c = [Comparison("p", ("base",), ("noise",), placebo="rows")]
    a = compare(data, c, replicates=0, seed=9)[0].estimates[AGGREGATE]
    b = compare(data, c + [Comparison("x", ("base",), ("noise",))], replicates=3, seed=9)[0].estimates[AGGREGATE]
    assert a == b


# ---- intervals (the study's bootstrap calibration; the equivalence reading) ---------------------------------------

def test_cluster_variance_known_answer():
    """Three clusters with sums 1, -1, 0: CR1 variance 3/2 * 2 = 3; two-way with nested labels
    reduces to the coarser one."""
    psi = np.array([0.5, 0.5, -1.0, 0.0])
    c = np.array(["a", "a", "b", "c"])
    assert cluster_variance(psi, c) == (3.0, 3)
    v, g = cluster_variance(psi, [c, np.array(["x", "y", "z", "w"])])
    assert g == 3 and v >= 3.0


def test_tost_reads_equivalent_not_shown_different():
    assert tost(0.001, 0.002, 30) == "equivalent"
    assert tost(0.05, 0.005, 30) == "different"
    assert tost(0.01, 0.01, 30) == "not shown"


def test_aggregate_interval_is_from_the_same_losses():
    """The aggregate of two families is the mean of theirs, and its interval is centred on it."""
    rng = np.random.default_rng(7)
    l0 = np.abs(rng.normal(size=40)) + 0.5
    l1 = l0 - 0.1 + 0.05 * rng.normal(size=40)
    fam = np.repeat(["a", "b"], 20)
    src = np.tile([f"s{i}" for i in range(5)], 8)
    e = paired_estimates(l0, l1, fam, src, AGGREGATE)
    assert e[AGGREGATE].rho == pytest.approx((e["a"].rho + e["b"].rho) / 2)
    lo, hi = e[AGGREGATE].delta_ci
    assert lo < e[AGGREGATE].delta < hi and (lo + hi) / 2 == pytest.approx(e[AGGREGATE].delta)


def test_too_small_panel_gets_a_one_line_reason_in_the_row():
    """3 sources: source rows skipped with a reason; 1 head: head analyses skipped."""
    data = _heads_table(8)
    few = np.isin(data.sources, ["s0", "s1", "s2"])
    small = StudyData.build({k: v[few] for k, v in data.numeric.items()}, {}, data.y[few], data.sources[few],
                            data.heads[few], data.families[few])
    r = compare(small, [Comparison("x", ("base",), ("noise",)),
                        Comparison("loho", ("base",), ("noise",), clusters="head")], replicates=2, seed=0)
    assert r[0].estimates == {} and "3 sources" in r[0].reason and "\n" not in r[0].reason
    assert r[1].reason is None and r[1].estimates
    one = data.heads == "h0"
    single = StudyData.build({k: v[one] for k, v in data.numeric.items()}, {}, data.y[one], data.sources[one],
                             data.heads[one], data.families[one])
    r = compare(single, [Comparison("d", ("base",), ("noise",), demean=True)], seed=0)
    assert "1 head" in r[0].reason


# ---- the self-check at a small size (the study's self-check) -------------------------------------------

@pytest.fixture(scope="module")
def small_checks():
    """REPS replications per scenario at the SMALL shape, seed 11, 3 placebo permutations."""
    return {sc: calibrate(SMALL, sc, REPS, seed=11, rho=RHO, permutations=3) for sc in SCENARIOS}


def test_self_check_null_is_calibrated(small_checks):
    """Null: false-positive rate <= 0.05 + 2 sd (0.13 at 30 replications); coverage of the
    simulation mean within 0.95 +- (2 sd + 0.01) = 0.09, for the primary and the demeaned row."""
    r = small_checks["null"]
    sd = np.sqrt(0.05 * 0.95 / REPS)
    assert r.rate("B1 vs B1+G", lambda e: e.delta_ci[0] > 0) <= 0.05 + 2 * sd
    for row in ("B1 vs B1+G", demeaned_name("G")):
        assert abs(r.coverage(row) - 0.95) <= 2 * sd + 0.01, row
    assert abs(small_checks["gain"].coverage("B1 vs B1+G") - 0.95) <= 2 * sd + 0.01
    loho = small_checks["loho-null"]
    assert loho.coverage("B1 vs B1+G, leave one head out") >= 0.95 - 2 * sd - 0.01   # may be conservative


def test_self_check_finds_a_planted_gain(small_checks):
    """rho RHO planted at the small shape (rho 0.08 needs more families): power >= 0.8."""
    r = small_checks["gain"]
    assert r.rate("B1 vs B1+G", lambda e: e.delta_ci[0] > 0) >= 0.8


def test_self_check_flags_head_identity(small_checks):
    """Head identity and head-constant blocks are never counted as geometry (<= 0.05 + 2 sd), and
    the demeaned head-constant block is exactly 0."""
    for sc in ("head-identity", "head-constant"):
        r = small_checks[sc]
        assert np.mean([v == "gain counted as geometry" for v in r.verdicts]) <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / REPS)
    assert max(abs(e.delta) for e in small_checks["head-constant"].estimates[demeaned_name("G")]) == 0.0


def test_self_check_report_has_every_line(small_checks):
    lines, failed = report_lines(small_checks)
    text = "\n".join(lines)
    for needle in ("false-positive rate", "power at planted rho", "coverage", "head-identity flagged",
                   "leave-one-head-out coverage"):
        assert needle in text


def test_synthetic_shape_and_head_constant_columns():
    data = synthetic(SMALL, "head-constant", np.random.default_rng(0), np.random.default_rng(1))
    assert len(data) == 8 * 16 and set(data.families) == {"a"}
    for c in ("b1_wq_sv1", "svd_interaction_dim"):
        for h in np.unique(data.heads):
            assert np.unique(data.numeric[c][data.heads == h]).size == 1
    assert np.unique(data.numeric["b1_q_norm_mean"][data.heads == data.heads[0]]).size > 1


def test_within_head_permutation_keeps_a_head_level_gain():
    """The head-preserving placebo: G permuted over the sources of each head keeps its head means, so a gain
    that lives in head-level structure survives it (the paper's reading of L.6), while a
    cell-level gain does not. Seed 9; 12 heads x 8 sources; y's head effects are hc0's."""
    rng = np.random.default_rng(9)
    data = _heads_table(9, head_sd=0.0)
    y = data.y + 2.0 * data.numeric["hc0"]                 # a head-level signal carried by hc0
    cell = rng.normal(size=len(data))
    num = dict(data.numeric, cell=cell)
    d = StudyData.build(num, {}, y + 3.0 * cell, data.sources, data.heads, data.families)
    comps = [Comparison("head", ("base",), ("hc0",), placebo="within-head"),
             Comparison("cell", ("base",), ("cell",), placebo="within-head"),
             Comparison("cell real", ("base",), ("cell",))]
    e = {r.comparison.name: r.estimates[AGGREGATE] for r in compare(d, comps, seed=2)}
    assert e["head"].delta_ci[0] > 0
    assert e["cell real"].delta_ci[0] > 0 and e["cell"].delta_ci[0] <= 0


def test_protocol_has_issue_29_rows():
    from numeric.study.protocol import comparisons

    names = {c.name: c for c in comparisons()}
    assert names["B0 vs B0+G, leave one head out"].clusters == "head"
    assert names[placebo_name("G", "within-head", "B0")].placebo == "within-head"
    assert names[placebo_name("I")].placebo == "heads" and names[demeaned_name("I")].demean

"""The study's calibrated statistics (docs/study.md, "Calibrated statistics"): intervals, placebos, demeaning, self-check.

Synthetic tables with a known truth (``numeric.study.calibrate``); every seed,
replication count and tolerance is stated in the test. The full-size
self-check (200 replications per scenario) is ``python -m numeric study
--calibrate``, recorded in docs/study.md; here the recorded four-family shape
with 20 to 40 replications per scenario and exact binomial tolerances.
"""
from __future__ import annotations

import numpy as np
import pytest

from numeric.study.calibrate import (FOUR_FAMILY, RECORDED_FOUR_FAMILY, CalibrationResult, Shape, binomial_tail, calibrate, lower_bound, max_count,
                                     report_lines, synthetic, within_rate)
from numeric.study.compare import AGGREGATE, Comparison, compare, heldout_losses, permuted
from numeric.study.data import StudyData
from numeric.study.demean import fold_demeaned
from numeric.study.fit import FastRidgeCV
from numeric.study.intervals import Estimate, cluster_variance, paired_estimates, tost
from numeric.study.protocol import demeaned_name, placebo_name, reading

#: One family of the built-in shape, 8 heads x 16 sources (128 cells): the synthetic table's layout.
SMALL = Shape((("a", 8, 16, "text"),), ("b0_depth",) + tuple(
    f"b1_{m}_{s}" for m in ("wq", "wk", "wqk") for s in ("sv1", "sv2", "sv3", "stable_rank", "eff_rank")))


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


# ---- demeaning --------------------------------------------------------------------------------

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


# ---- placebos ----------------------------------------------------------------------------------

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
    assert e["B1 vs B1+G"].rho_ci[0] > 0
    assert e[placebo_name("G")].rho_ci[0] > 0 and res[1].placebo["significant"] >= 10
    assert e["rows"].rho_ci[0] <= 0
    assert e[demeaned_name("G")].delta == 0.0
    assert reading(res, "G") == "gain, not counted: the within-head demeaned row does not agree (head-level only)"


def test_placebo_permutations_have_their_own_stream():
    """The placebo's permutations do not depend on the bootstrap's resamples (separate streams)."""
    data = _heads_table(6)
    c = [Comparison("p", ("base",), ("noise",), placebo="rows")]
    a = compare(data, c, replicates=0, seed=9)[0].estimates[AGGREGATE]
    b = compare(data, c + [Comparison("x", ("base",), ("noise",))], replicates=3, seed=9)[0].estimates[AGGREGATE]
    assert a == b


# ---- intervals, weighting, equivalence ---------------------------------------

def test_cluster_variance_known_answer():
    """Three clusters with sums 1, -1, 0: CR1 variance 3/2 * 2 = 3; two-way with nested labels
    reduces to the coarser one."""
    psi = np.array([0.5, 0.5, -1.0, 0.0])
    c = np.array(["a", "a", "b", "c"])
    assert cluster_variance(psi, c) == (3.0, 3)
    v, g = cluster_variance(psi, [c, np.array(["x", "y", "z", "w"])])
    assert g == 3 and v >= 3.0


def test_tost_reads_equivalent_not_shown_different():
    """On rho, margin 0.05, "different" first."""
    assert tost(0.001, 0.002, 30) == "equivalent"
    assert tost(0.05, 0.005, 30) == "different"
    assert tost(0.03, 0.02, 30) == "not shown"


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


# ---- the self-check in the suite: the recorded four-family shape, few replications ----------------

#: Replications per scenario in the suite (the command's default is 200), its seed and its planted gain:
#: the self-check's criterion at the shape it names (the recorded four families, 1,088 cells), with exact
#: binomial tolerances in place of the command's replications (``calibrate.max_count``, ``lower_bound``).
REPS = {"null": 40, "gain": 40, "head-identity": 20, "head-constant": 20, "within-head": 20}
#: Leave one head out refits every head's deletion: its scenarios run at the built-in shape (8 heads a family).
LOHO_REPS = {"loho-null": 10, "loho-head": 10}
SEED, RHO, PERMS = 11, 0.08, 3


@pytest.fixture(scope="module")
def zoo_checks():
    """REPS replications per scenario at RECORDED_FOUR_FAMILY, seed 11, planted rho 0.08, 3 placebo
    permutations per replication (most of the file's 35 s of CPU, measured 2026-12-02)."""
    out = {sc: calibrate(RECORDED_FOUR_FAMILY, sc, n, seed=SEED, rho=RHO, permutations=PERMS)
           for sc, n in REPS.items()}
    return out | {sc: calibrate(FOUR_FAMILY, sc, n, seed=SEED, permutations=1) for sc, n in LOHO_REPS.items()}


def _hits(r, row: str = "B1 vs B1+G") -> int:
    return sum(e.rho_ci[0] > 0 for e in r.estimates[row])


def _coverage_ok(cov: float, n: int) -> bool:
    """Coverage of the simulation mean within 0.95 +- (2 simulation sd + 0.01) (the command's tolerance)."""
    return abs(cov - 0.95) <= 2 * np.sqrt(0.95 * 0.05 / n) + 0.01


def test_self_check_null_is_calibrated(zoo_checks):
    """Null, 40 replications: the false-positive rate is not above 5 % by a one-sided exact binomial test
    at level 5 % (at most ``max_count(40, 0.05)`` = 4 hits; seen: 0); coverage of the simulation mean
    within 0.95 +- 0.079 for the primary and the demeaned row (seen: 1.00 and 1.00, conservative), and
    under the planted gain (seen: 1.00); leave one head out covers at least 0.95 - 0.107 (seen: 1.00)."""
    r = zoo_checks["null"]
    n = REPS["null"]
    assert max_count(n, 0.05) == 4
    assert _hits(r) <= max_count(n, 0.05)
    for row in ("B1 vs B1+G", demeaned_name("G")):
        assert _coverage_ok(r.coverage(row), n), row
    assert _coverage_ok(zoo_checks["gain"].coverage("B1 vs B1+G"), REPS["gain"])
    for sc, n in LOHO_REPS.items():   # no signal, heads redrawn; loho-head: a head-structured block
        loho = zoo_checks[sc]
        assert _hits(loho, "B1 vs B1+G, leave one head out") <= max_count(n, 0.05), sc
        assert loho.coverage("B1 vs B1+G, leave one head out") >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / n) - 0.01, sc


def test_self_check_power_at_rho_008_is_shown(zoo_checks):
    """The criterion: power >= 80 % at a planted rho of 0.08 at the four-family shape. Shown, not
    just seen: the exact one-sided 95 % lower bound of the power (Clopper-Pearson) reaches 0.80, i.e. a
    one-sided exact binomial test rejects "power <= 0.80" at level 5 % (at 40 replications: at least
    37 hits; seen: 40 of 40, lower bound 0.928)."""
    r = zoo_checks["gain"]
    k, n = _hits(r), REPS["gain"]
    assert lower_bound(k, n) >= 0.80, (k, n)
    assert binomial_tail(k, n, 0.80) <= 0.05


def test_power_and_false_positive_checks_can_fail(zoo_checks):
    """Negative controls: a planted rho of 0.02 (20 replications, seed 11) does not show 80 % power (seen:
    3 of 20, bound 0.04), and the false-positive check refuses the primary row's rate on the head-identity
    block (a spurious gain, seen in 10 of 20 replications; at most 3 allowed)."""
    weak = calibrate(RECORDED_FOUR_FAMILY, "gain", 20, seed=SEED, rho=0.02, permutations=1)
    assert lower_bound(_hits(weak), 20) < 0.80
    assert not within_rate(zoo_checks["head-identity"].rate("B1 vs B1+G", lambda e: e.rho_ci[0] > 0), 20, 0.05)


def test_self_check_flags_head_identity(zoo_checks):
    """Head identity and head-constant blocks are never counted as geometry (at most ``max_count(20, 0.05)``
    = 3 of 20; seen 0 and 0), while the primary row alone takes them for a gain; the demeaned
    head-constant block is exactly 0."""
    for sc in ("head-identity", "head-constant"):
        r = zoo_checks[sc]
        assert sum(v == "gain counted as geometry" for v in r.verdicts) <= max_count(REPS[sc], 0.05), sc
        assert _hits(r) > 0, sc                      # the block does fool the primary row alone
    assert max(abs(e.delta) for e in zoo_checks["head-constant"].estimates[demeaned_name("G")]) == 0.0


def test_self_check_report_has_every_line(zoo_checks):
    lines, failed = report_lines(zoo_checks)
    text = "\n".join(lines)
    assert not failed, failed
    for needle in ("false-positive rate", "[shown] power at planted rho 0.08", "lower bound", "coverage",
                   "head-identity flagged", "leave-one-head-out coverage (loho-head)", "within-head gain counted",
                   "equivalence size (rho 0.08)", "single aggregate (gain)"):
        assert needle in text


def _null_result(n: int, covered: dict) -> CalibrationResult:
    """A null-scenario result of ``n`` replications in which row ``r`` covers the mean rho (0) in the first
    ``covered[r]`` replications and misses it from below in the rest (no fit: the report's checks alone)."""
    def est(hit):
        return Estimate(mae_base=1.0, mae_aug=1.0, delta=0.0, rho=0.0, delta_ci=(-1.0, 1.0) if hit else (-1.0, -0.5),
                        rho_ci=(-1.0, 1.0) if hit else (-1.0, -0.5), se=1.0, df=n - 1, equivalence="not shown")
    return CalibrationResult(shape=RECORDED_FOUR_FAMILY, scenario="null", replications=n, rho=0.0,
                             estimates={row: [est(i < k) for i in range(n)] for row, k in covered.items()},
                             verdicts=["no gain"] * n)


def test_coverage_checks_fail_where_they_should():
    """Negative controls of the null scenario's coverage checks at 200 replications (tolerance 0.95 +-
    0.041): the primary row fails both ways (0.80 and 1.00), the demeaned row only when it covers too
    little (a confirming row may be conservative: it covered 1.000 of 200 on the recorded MiniLM panel,
    where its power under a gain is measured directly)."""
    dm, n = demeaned_name("G"), 200
    for row, cov, fails in (("B1 vs B1+G", 0.80, True), ("B1 vs B1+G", 1.00, True), ("B1 vs B1+G", 0.95, False),
                            (dm, 0.80, True), (dm, 1.00, False), (dm, 0.95, False)):
        covered = {"B1 vs B1+G": int(0.95 * n), dm: int(0.95 * n), placebo_name("G"): n, row: int(cov * n)}
        _, failed = report_lines({"null": _null_result(n, covered)})
        assert (f"coverage ({row})" in failed) == fails, (row, cov, failed)
        assert "null false-positive rate" not in failed


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


# ---- --calibrate: bad input and panels too small for a row -------------------------------------

@pytest.mark.parametrize("kind", ("missing", "file", "empty", "garbage", "fifo", "not-a-record"))
def test_calibrate_on_a_directory_that_is_not_a_panel(tmp_path, capsys, kind):
    """``--calibrate DIR`` where DIR is not a panel: one line on stderr, exit 2, the self-check never starts
    (nothing on stdout)."""
    import os

    from numeric.study.cli import main

    d = tmp_path / "d"
    if kind == "file":
        d.write_text("x")
    elif kind != "missing":
        d.mkdir()
    if kind == "garbage":
        (d / "panel.json").write_text("garbage")
    elif kind == "fifo":
        os.mkfifo(d / "panel.json")
    elif kind == "not-a-record":
        (d / "panel.json").write_text("[1, 2]")
    assert main(["--calibrate", str(d), "--calibrations", "1", "--workers", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("python -m numeric study: error: ") and ("panel" in err), err


@pytest.mark.parametrize("shape, needle, rc", (("a=1x8", "1 head", (0, 1)), ("a=8x3", "3 sources", (0, 1)),
                                               ("a=1x3", "", (1,))))
def test_calibrate_too_small_a_shape_skips_rows_with_a_reason(capsys, shape, needle, rc):
    """A shape with 1 head skips the head rows (placebo, demeaned, leave one head out), 3 sources the
    source-fold rows, each as a ``[skipped]`` line with its one-line reason; the other checks run. With
    nothing left to run (1 head, 3 sources) the self-check says so and exits 1, never 'every check passed'.
    2 replications (only the plumbing is checked here), seed the default."""
    from numeric.study.cli import main

    got = main(["--calibrate", "--shape", shape, "--calibrations", "2", "--permutations", "1", "--scan", "0"])
    out = capsys.readouterr().out
    skipped = [line for line in out.splitlines() if line.startswith("  [skipped] ")]
    assert got in rc and skipped, out
    assert all(("1 head" in line or "3 sources" in line or "1 source" in line) for line in skipped)
    if needle:
        assert any(needle in line for line in skipped)
        assert "[ok]" in out                                  # the rows it can run, it runs
        assert "rows skipped: the shape is too small for them" in out.splitlines()[-1]
    else:
        assert out.splitlines()[-1].startswith("no check ran") and "[ok]" not in out

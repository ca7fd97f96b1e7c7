"""The study's statistics on synthetic tables with a known answer.

The tables are drawn here with a fixed seed: a target that a ``signal``
column carries by construction, a ``noise`` column independent of it, and a
base column that carries part of it. The expectations follow from the
construction, not from the code under test.
"""
from __future__ import annotations

import numpy as np
import pytest

from numeric.study.compare import AGGREGATE, Comparison, compare, resample_rows
from numeric.study.data import StudyData
from numeric.study.fit import FastRidgeCV, cross_fit, fold_indices, make_model

SOURCES, HEADS = 12, 4
REPLICATES = 60   # small for CI; the real run uses >= 1,000


def _table(seed: int = 0, families=("enc",)) -> StudyData:
    """y = base + signal + noise at the cell level, plus a per-source shift."""
    rng = np.random.default_rng(seed)
    rows = [(f, s, h) for f in families for s in range(SOURCES) for h in range(HEADS)]
    n = len(rows)
    shift = rng.normal(scale=0.3, size=SOURCES)
    base, signal, noise = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    y = base + signal + np.array([shift[s] for _, s, _ in rows]) + rng.normal(scale=0.5, size=n)
    return StudyData.build({"base": base, "signal": signal, "noise": noise}, {}, y,
                           [f"s{s}" for _, s, _ in rows], [f"{f}:{h}" for f, _, h in rows],
                           [f for f, _, _ in rows])


COMPS = [Comparison("signal", ("base",), ("signal",)), Comparison("noise", ("base",), ("noise",))]


@pytest.fixture(scope="module")
def results():
    data = _table()
    comps = COMPS + [Comparison("placebo", ("base",), ("signal",), placebo="rows")]
    return {r.comparison.name: r.estimates[AGGREGATE] for r in compare(data, comps, replicates=REPLICATES, seed=3)}


def test_signal_block_has_a_positive_gain_whose_interval_excludes_zero(results):
    est = results["signal"]
    assert est.delta > 0 and est.delta_ci[0] > 0 and est.boot_delta_ci[0] > 0
    assert 0 < est.rho_ci[0] <= est.rho <= est.rho_ci[1] < 1


def test_noise_block_interval_covers_zero(results):
    lo, hi = results["noise"].delta_ci
    assert lo <= 0 <= hi


def test_permuted_block_interval_covers_zero(results):
    """The signal block with its rows permuted (20 permutations): no gain; no bootstrap for a placebo."""
    lo, hi = results["placebo"].delta_ci
    assert lo <= 0 <= hi and results["placebo"].boot_delta_ci is None


def test_folds_never_share_a_source():
    data = _table(1)
    for train, test in fold_indices(data.sources, 4):
        assert not set(data.sources[train]) & set(data.sources[test])
    rows = resample_rows(data, np.random.default_rng(5))       # a bootstrap draw with copies
    for train, test in fold_indices(data.sources[rows], 4):
        assert not set(data.sources[rows][train]) & set(data.sources[rows][test])


def test_leave_one_head_out_holds_out_exactly_one_head():
    data = _table(2)
    folds = fold_indices(data.heads, HEADS)
    assert len(folds) == HEADS
    for _, test in folds:
        assert len(set(data.heads[test])) == 1


def test_bootstrap_is_reproducible_from_its_seed():
    data = _table(3)
    a = compare(data, COMPS, replicates=5, seed=11)
    b = compare(data, COMPS, replicates=5, seed=11)
    c = compare(data, COMPS, replicates=5, seed=12)
    assert [r.estimates for r in a] == [r.estimates for r in b]
    assert [r.estimates for r in a] != [r.estimates for r in c]


def test_families_are_weighted_equally():
    """The aggregate rho is the mean of the family rhos, whatever the families' target scales (the
    study's calibration; the old ratio of mean MAEs gave the family with the largest scale the say): a gain
    planted in one of two families, that family's target 100 times smaller, still counts half."""
    a, b = _table(4, families=("enc",)), _table(5, families=("dec",))
    y = np.concatenate([a.y, 0.01 * b.y])
    num = {k: np.concatenate([a.numeric[k], b.numeric[k]]) for k in a.numeric}
    num["signal"] = np.concatenate([a.numeric["signal"], b.numeric["noise"]])   # signal only in enc...
    y[len(a):] = 0.01 * (b.numeric["base"] + b.numeric["signal"])               # ...whose scale is 100x
    data = StudyData.build(num, {}, y, np.concatenate([a.sources, b.sources]), np.concatenate([a.heads, b.heads]),
                           np.concatenate([a.families, b.families]))
    r = compare(data, COMPS[:1], replicates=1, seed=0)[0].estimates
    assert r[AGGREGATE].rho == pytest.approx((r["enc"].rho + r["dec"].rho) / 2, abs=1e-12)
    assert r[AGGREGATE].delta == pytest.approx((r["enc"].delta + r["dec"].delta) / 2, abs=1e-12)
    assert r["enc"].rho > 0.3 and abs(r["dec"].rho) < 0.1


def test_fast_ridge_matches_scikit_learn_pipeline():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(80, 5))
    X[3, 2] = np.nan
    y = X[:, 0] - 2 * np.nan_to_num(X[:, 2]) + rng.normal(size=80)
    Xt = rng.normal(size=(20, 5))
    ref = make_model().fit(X, y)
    ours = FastRidgeCV().fit(X, y)
    assert ours.alpha_ == ref[-1].alpha_
    assert np.allclose(ours.predict(Xt), ref.predict(Xt), atol=1e-9)


def test_cross_fit_predicts_a_linear_target_held_out():
    x = np.linspace(0, 1, 24)[:, None]
    groups = np.repeat(np.arange(6), 4)
    pred = cross_fit(x, 3 * x[:, 0] - 1, groups, 3).pred
    assert np.allclose(pred, 3 * x[:, 0] - 1, atol=0.05)


def test_parallel_bootstrap_gives_the_same_answer():
    from numeric.study.compare import MIN_PER_JOB

    data = _table(5)
    one = compare(data, COMPS, replicates=2 * MIN_PER_JOB, seed=2)
    two = compare(data, COMPS, replicates=2 * MIN_PER_JOB, seed=2, jobs=2)   # two processes
    assert [r.estimates for r in one] == [r.estimates for r in two]


def _grouped_loo_fit(X, y, copies, alphas):
    """Reference ridge on expanded rows whose penalty is chosen by leaving out *all* copies of a
    row at once, by brute force: standardise on the training rows (as the estimator does, outside
    the inner loop), then for every penalty and every distinct row refit the ridge with an
    unpenalised intercept without that row's copies. Returns (alpha, predict)."""
    mu, sd = X.mean(axis=0), X.std(axis=0)
    Z = (X - mu) / np.where(sd > 0, sd, 1.0)
    D = np.hstack([np.ones((len(y), 1)), Z])
    ids = np.repeat(np.arange(len(copies)), copies)     # the distinct row of every expanded row
    err = []
    for a in alphas:
        P = np.diag([0.0] + [a] * Z.shape[1])
        e = 0.0
        for g in np.unique(ids):
            keep = ids != g
            theta = np.linalg.solve(D[keep].T @ D[keep] + P, D[keep].T @ y[keep])
            e += np.sum((y[~keep] - D[~keep] @ theta) ** 2)
        err.append(e)
    a = alphas[int(np.argmin(err))]
    theta = np.linalg.solve(D.T @ D + np.diag([0.0] + [a] * Z.shape[1]), D.T @ y)
    return a, lambda Xt: np.hstack([np.ones((len(Xt), 1)), (Xt - mu) / np.where(sd > 0, sd, 1.0)]) @ theta


def test_inner_leave_one_out_leaves_all_copies_of_a_row_out():
    """The study's bootstrap calibration: in a bootstrap draw a row may have copies; the inner leave-one-out that
    picks the penalty must leave all of them out (divisor ``1 - w * hat``), or a copy left in
    predicts its twin and the penalty comes out too small. Checked against a brute-force grouped
    leave-one-out on the expanded rows, fold by fold (fails with the old ``1 - hat``)."""
    from numeric.study.batch import weighted_cross_fit
    from numeric.study.fit import ALPHAS

    rng = np.random.default_rng(21)
    n, p = 40, 8
    X = rng.normal(size=(n, p))
    y = X[:, 0] + 2.0 * rng.normal(size=n)                 # much noise: the right penalty is large
    w = rng.integers(1, 4, size=n).astype(float)           # copies per distinct row
    fold = np.arange(n) % 4
    ours = weighted_cross_fit(X, y, w, fold, 4)
    for f in range(4):
        tr = fold != f
        reps = w[tr].astype(int)
        a, predict = _grouped_loo_fit(np.repeat(X[tr], reps, axis=0), np.repeat(y[tr], reps), reps, ALPHAS)
        assert np.allclose(ours[fold == f], predict(X[fold == f]), rtol=0, atol=1e-8), f


@pytest.mark.parametrize("gap", [False, True])
def test_weighted_cross_fit_is_cross_fit_on_the_expanded_rows(gap):
    """A draw's distinct rows weighted by their copies give the held-out predictions of the same
    estimator on the expanded rows (``FastRidgeCV`` told the copies of every expanded row)."""
    from numeric.study.batch import weighted_cross_fit, weighted_mae
    from numeric.study.fit import mae

    data = _table(8)
    rows = resample_rows(data, np.random.default_rng(9))
    X = data.matrix(("base", "signal", "noise"))
    if gap:
        X[::7, 1] = np.nan
    uniq, inverse = np.unique(rows, return_inverse=True)
    w = np.bincount(inverse).astype(float)
    copies = w[inverse]
    expanded = np.empty(rows.size)
    for train, test in fold_indices(data.sources[rows], 4):
        m = FastRidgeCV().fit(X[rows][train], data.y[rows][train], copies=copies[train])
        expanded[test] = m.predict(X[rows][test])
    fold = np.empty(uniq.size, dtype=int)
    for f, (_, test) in enumerate(fold_indices(data.sources[rows], 4)):
        fold[inverse[test]] = f
    ours = weighted_cross_fit(X[uniq], data.y[uniq], w, fold, 4)
    assert np.allclose(ours[inverse], expanded, rtol=0, atol=1e-10)
    assert weighted_mae(data.y[uniq], ours, w) == pytest.approx(mae(data.y[rows], expanded), abs=1e-12)


@pytest.mark.parametrize("folds", [4, 24])
def test_bordered_fit_is_the_fit_of_the_joined_columns(folds):
    """``FoldFits.bordered`` (block inverse of the bordered Gram matrix) gives the leverages,
    fits and held-out predictions of fitting the joined columns directly, also with an added
    column that nearly repeats a base column and constant columns on both sides."""
    from numeric.study.batch import fit_folds

    rng = np.random.default_rng(folds)
    n = 150
    Xb = rng.standard_normal((n, 12))
    Xb[:, 3] = 2.0
    Xa = rng.standard_normal((n, 4))
    Xa[:, 0] = 3 * Xb[:, 1] + 1e-6 * rng.standard_normal(n)
    Xa[:, 2] = -1.0
    y = Xb[:, 0] - 2 * Xa[:, 1] + 0.3 * rng.standard_normal(n)
    w = rng.integers(1, 4, n).astype(float)
    fold = rng.integers(0, folds, n)
    ks = np.unique(fold)
    direct = fit_folds(np.hstack([Xb, Xa]), y, w, fold, ks)
    bordered = fit_folds(Xb, y, w, fold, ks).bordered(Xa)
    for name in ("hat", "fitted"):
        assert np.allclose(getattr(bordered, name), getattr(direct, name), rtol=0, atol=1e-9), name
    assert np.allclose(bordered.held_out(), direct.held_out(), rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="not a base"):
        bordered.bordered(Xa)


def test_comparisons_border_their_base_and_agree_with_direct_fits(monkeypatch):
    """In a draw, a model whose columns extend a fitted one is bordered from it; its family MAEs
    are those of fitting it directly (the cache turned off)."""
    from numeric.study import compare as C

    data = _table(6, families=("enc", "dec"))
    rows = resample_rows(data, np.random.default_rng(4))
    cached, direct = C._Cache(data), C._Cache(data)
    more = [Comparison("both", ("base", "signal"), ("noise",), clusters=k) for k in ("source", "head")]
    specs = [s for c in COMPS + more for s in c.specs()]
    calls = []
    real = C.complete_fits
    monkeypatch.setattr(C, "complete_fits", lambda *a: calls.append(a[0].shape[1]) or real(*a))
    got = [C.family_maes(data, rows, s, 4, cached) for s in specs]
    assert len(calls) < 2 * len(set(specs))                 # two families: some specs were bordered                     # some specs were bordered
    for s, g in zip(specs, got):
        direct.new_draw()
        want = C.family_maes(data, rows, s, 4, direct)
        assert g.keys() == want.keys() and all(abs(g[f] - want[f]) < 1e-10 for f in g), s


def test_draw_folds_keep_every_source_whole():
    """The folds the bootstrap uses (on a draw's distinct rows) never split a source, copies included."""
    from numeric.study.compare import _draw_folds

    data = _table(10)
    for seed in range(5):
        rows = resample_rows(data, np.random.default_rng(seed))
        uniq, inverse = np.unique(rows, return_inverse=True)
        fold = _draw_folds(data.sources[rows], 4, inverse, uniq.size)
        for s in np.unique(data.sources[uniq]):
            assert np.unique(fold[data.sources[uniq] == s]).size == 1


def test_point_estimate_is_scikit_learns():
    """The held-out MAE of a model is that of scikit-learn's pipeline under GroupKFold by source."""
    from sklearn.model_selection import GroupKFold, cross_val_predict

    from numeric.study.compare import family_maes

    data = _table(11)
    for cols, clusters in ((("base",), "source"), (("base", "signal"), "source"), (("base", "noise"), "head")):
        groups = data.heads if clusters == "head" else data.sources
        k = HEADS if clusters == "head" else 4
        ref = cross_val_predict(make_model(), data.matrix(cols), data.y, groups=groups, cv=GroupKFold(k))
        ours = family_maes(data, np.arange(len(data)), (cols, clusters, False))["enc"]
        assert ours == pytest.approx(np.mean(np.abs(ref - data.y)), rel=1e-9)


def test_gbm_check_finds_the_signal():
    """The boosted robustness check: a gain for the signal block, none claimed for noise."""
    from numeric.study.robust import gbm_check

    rng = np.random.default_rng(12)
    n = 12 * 10   # 12 sources of 10 rows: the booster needs leaves of 20 rows
    base, signal, noise = rng.normal(size=(3, n))
    data = StudyData.build({"base": base, "signal": signal, "noise": noise}, {}, base + signal,
                           np.repeat([f"s{i}" for i in range(12)], 10), [f"h{i % 10}" for i in range(n)], ["enc"] * n)
    comps = [Comparison("B1 vs B1+G", ("base",), ("signal",)), Comparison("B1 vs B1+I", ("base",), ("noise",)),
             Comparison("other", ("base",), ("signal",))]
    res = {r.comparison.name: r.estimates[AGGREGATE] for r in gbm_check(data, comps, replicates=1, seed=0)}
    assert set(res) == {"B1 vs B1+G", "B1 vs B1+I"}
    assert res["B1 vs B1+G"].delta > 0.1 and res["B1 vs B1+G"].rho > res["B1 vs B1+I"].rho


def test_bootstrap_draws_keep_two_sources_in_every_family():
    """Families with disjoint sources (text and image): every draw keeps >= 2 distinct sources
    of each family, so the cross-fitting of a replicate never meets a one-source family
    (a 4 + 4 source panel crashed on such a draw), and the comparison runs; each pool is drawn
    to its own size (the image family got 6 to 25 picks of 16 from a pooled draw)."""
    a, b = _table(3, families=("enc",)), _table(4, families=("vit",))
    ka, kb = np.isin(a.sources, ["s0", "s1", "s2", "s3"]), np.isin(b.sources, ["s0", "s1", "s2", "s3"])
    data = StudyData.build({k: np.concatenate([a.numeric[k][ka], b.numeric[k][kb]]) for k in a.numeric}, {},
                           np.concatenate([a.y[ka], b.y[kb]]),
                           np.concatenate([a.sources[ka], np.char.add("img", b.sources[kb])]),
                           np.concatenate([a.heads[ka], b.heads[kb]]),
                           np.concatenate([a.families[ka], b.families[kb]]))
    rng = np.random.default_rng(0)
    per_source = {f: len(data) // 2 // 4 for f in ("enc", "vit")}
    for _ in range(200):
        rows = resample_rows(data, rng)
        for f in ("enc", "vit"):
            assert np.unique(data.sources[rows][data.families[rows] == f]).size >= 2
            assert np.sum(data.families[rows] == f) == 4 * per_source[f]    # 4 source picks per pool
    res = compare(data, COMPS[:1], replicates=20, seed=1)
    assert set(res[0].estimates) >= {"enc", "vit"}

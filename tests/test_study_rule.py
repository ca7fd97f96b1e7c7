"""The study's reading rule, its one aggregate, its equivalence test, its leave-one-head-out interval, its
small-panel caution, its written readings and its shipped cell table (docs/study.md).

Each test builds a small planted-signal table (seconds, no torch) with a stated seed; each names the
defect of the old statistics it guards against.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from numeric.study.compare import AGGREGATE, Comparison, compare
from numeric.study.data import StudyData, StudyError
from numeric.study.intervals import MARGIN, tost
from numeric.study.protocol import COUNTED, demeaned_name, placebo_name, reading


def _table(seed: int, *, heads: int = 8, sources: int = 12, families=("a",), scale=None, gain=None,
           within: float = 0.0, identity: float = 1.0, head_sd: float = 1.0, tie: float = 1.0) -> StudyData:
    """``families`` x ``heads`` x ``sources``; y = head effect (``head_sd``) + ``base`` + noise (+ ``within`` u
    in the families of ``gain``), times the family's ``scale``. Columns: ``base`` (seen by the base model),
    ``g0`` = u + noise (the cell-level carrier), ``g1..g3`` random head constants (``g1`` plus ``tie`` times
    the head effect), ``noise``."""
    rng = np.random.default_rng(seed)
    scale = scale or {}
    gain = set(families if gain is None else gain)
    cols: dict = {k: [] for k in ("base", "g0", "g1", "g2", "g3", "noise")}
    y, src, hd, fam = [], [], [], []
    for f in families:
        n = heads * sources
        h, s = np.repeat(np.arange(heads), sources), np.tile(np.arange(sources), heads)
        eff = head_sd * rng.normal(size=heads)
        base, u = rng.normal(size=n), rng.normal(size=n)
        yf = eff[h] + base + 0.5 * rng.normal(size=n) + (within * u if f in gain else 0.0)
        y.append(scale.get(f, 1.0) * yf)
        cols["base"].append(base)
        cols["g0"].append(u + 0.3 * rng.normal(size=n))
        for j in (1, 2, 3):   # head constants that tell heads apart (and can learn the head effect)
            cols[f"g{j}"].append(identity * (tie * eff[h] * (j == 1) + rng.normal(size=heads)[h]))
        cols["noise"].append(rng.normal(size=n))
        src += [f"{f}s{i}" for i in s]
        hd += [f"{f}:h{i}" for i in h]
        fam += [f] * n
    return StudyData.build({k: np.concatenate(v) for k, v in cols.items()}, {}, np.concatenate(y), src, hd, fam)


G4 = ("g0", "g1", "g2", "g3")


def _rows(block=G4, base=("base",)):
    return [Comparison("B1 vs B1+G", base, block), Comparison(placebo_name("G"), base, block, placebo="heads"),
            Comparison(demeaned_name("G"), base, block, demean=True)]


# ---- the rule counts a within-head gain of a head-structured block ---------------------------------

def test_within_head_gain_of_a_head_structured_block_is_counted():
    """A genuine cell-level gain (g0 carries u) in a block whose other columns are head constants that
    learn the head effect: the demeaned row finds it, and the rule counts it. The old rule vetoed it
    because the head-level placebo's own interval excluded 0 (its head constants gain too), whatever the
    primary row's advantage over it. Seed 3, one family of 8 heads x 12 sources, 4 permutations."""
    data = _table(3, within=0.8)
    res = compare(data, _rows(), seed=1, permutations=4)
    e = {r.comparison.name: r.estimates[AGGREGATE] for r in res}
    assert e[demeaned_name("G")].rho_ci[0] > 0 and e["B1 vs B1+G"].rho_ci[0] > 0
    assert e[placebo_name("G")].rho_ci[0] > 0          # the placebo gains too: head identity
    assert reading(res, "G") == COUNTED


def test_head_identity_alone_is_never_counted():
    """Head constants only (no within-head signal): the primary row gains (head identity), the demeaned
    row drops them, the rule does not count it. Seed 4."""
    data = _table(4)
    res = compare(data, _rows(("g1", "g2", "g3")), seed=1, permutations=2)
    assert res[0].estimates[AGGREGATE].rho_ci[0] > 0
    assert reading(res, "G").startswith("gain, not counted")


# ---- one aggregate ------------------------------------------------------------------------------

def test_the_decision_is_the_printed_aggregate_rho():
    """Two families of very different target scale, the gain only in the small one: the printed aggregate
    (the mean of family rhos) excludes 0, and so does the rule's primary condition (the old rule read the
    scale-weighted Delta aggregate, dominated by the large family's noise, and said "no gain"). Seed 5."""
    data = _table(5, families=("big", "small"), scale={"big": 50.0, "small": 0.01}, gain=("small",), within=1.5,
                  identity=0.0)
    res = compare(data, [Comparison("B1 vs B1+G", ("base",), ("g0", "noise")),
                         Comparison(demeaned_name("G"), ("base",), ("g0", "noise"), demean=True)], seed=1)
    agg = res[0].estimates[AGGREGATE]
    assert agg.rho == pytest.approx(np.mean([res[0].estimates[f].rho for f in ("big", "small")]))
    assert agg.rho_ci[0] > 0 and agg.delta_ci[0] < 0          # the two aggregates disagree here
    assert reading(res, "G") != "no gain"
    assert agg.equivalence == "different"                     # the equivalence test reads the same rho


# ---- an equivalence test that can fail -------------------------------------------------------------

def test_equivalence_is_on_rho_and_different_comes_first():
    """A gain whose interval excludes 0 is "different", never "equivalent" (the old test checked
    equivalence first, on an absolute margin of 0.02 in U/n larger than B1's whole error)."""
    assert tost(0.35, 0.02, 30) == "different"
    assert tost(0.01, 0.004, 30) == "different"             # excludes 0, inside the margin: different first
    assert tost(0.0, 0.01, 30) == "equivalent" and MARGIN == 0.05
    assert tost(0.02, 0.03, 30) == "not shown"


def test_a_planted_gain_at_small_target_scale_is_not_equivalent():
    """Target of scale 0.01 (as U/n of a decoder family) with a planted gain: Delta is far below 0.02 in
    absolute terms, but the rho interval excludes 0: "different". Seed 6."""
    data = _table(6, scale={"a": 0.01}, within=1.0, identity=0.0, sources=16)
    e = compare(data, [Comparison("B1 vs B1+G", ("base",), ("g0",))], seed=1)[0].estimates[AGGREGATE]
    assert abs(e.delta) < 0.02 and e.rho_ci[0] > 0 and e.equivalence == "different"


def test_no_equivalence_verdict_under_the_small_panel_caution(monkeypatch):
    """A noise block on a 5-source panel (below the calibrated sources): the same estimates that read
    "equivalent" without the caution read "not shown (small panel)" under it. Seed 7."""
    import numeric.study.compare as cmp
    from numeric.study.caution import CALIBRATED_SOURCES

    assert CALIBRATED_SOURCES > 5
    data = _table(7, sources=5, heads=24, identity=0.0, head_sd=0.2)
    comp = [Comparison("x", ("base",), ("noise",))]
    e = compare(data, comp, seed=1)[0].estimates[AGGREGATE]
    assert e.equivalence == "not shown (small panel)"
    monkeypatch.setattr(cmp, "calibration_caution", lambda d: [])
    assert compare(data, comp, seed=1)[0].estimates[AGGREGATE].equivalence == "equivalent"


# ---- the caution threshold is measured ------------------------------------------------------------

def test_caution_threshold_is_computed_from_the_scan():
    """The study's threshold is the tabulated scan's (not a hand-set number), and the rule reads it off
    correctly: the smallest number of sources at which coverage >= 0.94 and se/sd >= 0.9."""
    from numeric.study import caution
    from numeric.study.calibrate import ScanPoint, caution_threshold

    assert caution.SCAN, "the tabulated scan is empty"
    assert caution.CALIBRATED_SOURCES == max(caution.threshold(rows) for rows in caution.SCAN.values())
    pts = [ScanPoint(4, 0.90, 0.80, 40), ScanPoint(8, 0.93, 0.95, 40), ScanPoint(12, 0.95, 0.92, 40),
           ScanPoint(16, 0.96, 0.99, 40)]
    assert caution_threshold(pts) == 12
    assert caution_threshold(pts[:2]) is None                 # no grid point reaches both floors


def test_source_scan_runs_at_a_shape():
    """The self-check's scan: a ScanPoint per grid point (2 replications each: plumbing only)."""
    from numeric.study.calibrate import Shape, source_scan

    shape = Shape((("a", 4, 16, "text"),), ("b0_depth",))
    pts = source_scan(shape, (4, 6), 2, seed=1)
    assert [p.sources for p in pts] == [4, 6] and all(0 <= p.coverage <= 1 for p in pts)


# ---- leave one head out covers for a head-structured block ------------------------------------------

def test_leave_one_head_out_interval_is_the_exact_head_jackknife():
    """Known answer, recomputed independently with scikit-learn's pipeline and LeaveOneGroupOut: the
    leave-one-head-out rho of one family and its variance, the delete-one-head jackknife of the whole
    comparison refitted without each head, ``(H - 1)/H sum (theta_-h - mean)^2``, on t(H - 1). The old
    interval (two-way cluster-robust averaged with a first-order deletion) is not this variance. Seed 12;
    one family of 8 heads x 4 sources, head constants without signal."""
    from scipy import stats
    from sklearn.model_selection import LeaveOneGroupOut, cross_val_predict

    from numeric.study.fit import make_model

    data = _table(12, sources=4, head_sd=1.5, tie=0.0)
    base, aug = ("base",), ("base", "g1", "g2", "g3")
    e = compare(data, [Comparison("loho", base, aug[1:], clusters="head")], seed=1)[0].estimates[AGGREGATE]

    def rho(keep):
        y, g = data.y[keep], data.heads[keep]
        mae = [np.mean(np.abs(y - cross_val_predict(make_model(), data.matrix(c)[keep], y, groups=g,
                                                    cv=LeaveOneGroupOut()))) for c in (base, aug)]
        return (mae[0] - mae[1]) / mae[0]

    heads = np.unique(data.heads)
    theta = np.array([rho(data.heads != h) for h in heads])
    H = heads.size
    se = np.sqrt((H - 1) / H * np.sum((theta - theta.mean()) ** 2))
    assert e.rho == pytest.approx(rho(np.ones(len(data), dtype=bool)), abs=1e-9)
    assert e.rho_se == pytest.approx(se, rel=1e-6) and e.df == H - 1
    half = stats.t.ppf(0.975, H - 1) * se
    assert e.rho_ci == pytest.approx((e.rho - half, e.rho + half), rel=1e-6)


def test_leave_one_head_out_is_descriptive_with_too_few_heads():
    """Fewer heads than the self-check found an interval for: no interval, no reading, the reason in the row."""
    from numeric.study.loho import MIN_LOHO_HEADS

    data = _table(8, heads=MIN_LOHO_HEADS - 1, sources=6)
    r = compare(data, [Comparison("loho", ("base",), ("g0",), clusters="head")], seed=1)[0]
    assert r.note and "descriptive" in r.note and np.isnan(r.estimates[AGGREGATE].rho_ci[0])


# ---- readings written by the tool, and the shipped table --------------------------------------------

def _synthetic(seed: int = 9) -> StudyData:
    from numeric.study.calibrate import Shape, synthetic

    shape = Shape((("fa", 4, 8, "text"), ("fb", 4, 8, "text")), ("b0_depth",))
    rng = np.random.default_rng(seed)
    return synthetic(shape, "gain", rng, rng, rho=0.3, rng_extra=np.random.default_rng(seed + 1))


def test_study_md_states_each_reading_beside_its_power(tmp_path):
    """study.md and study.json state the rule's verdict per block, for the aggregate and per family,
    each with its power at rho 0.08 (the old study.md had one line per block, without power)."""
    from numeric.study.protocol import comparisons, readings
    from numeric.study.results import StudyResults

    data = _synthetic()
    res = compare(data, comparisons()[:5], seed=1, permutations=1)
    r = readings(res)
    assert r["G"]["verdict"] == reading(res, "G") and set(r["G"]["families"]) == {"fa", "fb"}
    assert 0 <= r["G"]["power"] <= 1 and all(0 <= v["power"] <= 1 for v in r["G"]["families"].values())
    doc = {"command": "x", "reading": r, "comparisons": [], "gauge": [],
           "setup": {"panel": "p", "target": "u_over_n", "eps": "1/4", "cells": len(data), "sources": 8, "heads": 8,
                     "families": ["fa", "fb"], "folds": 4, "replicates": 0, "permutations": 1, "seed": 1,
                     "seconds": 0.0, "caution": []}}
    md = StudyResults.from_dict(doc).to_markdown()
    assert "power at rho 0.08" in md
    for f in ("fa", "fb"):
        assert f"| G | {f} | {r['G']['families'][f]['verdict']} |" in md


def test_table_round_trip_and_a_table_run_carries_the_banner(tmp_path, capsys):
    """``--write-table``'s format read back gives the same table bit for bit; ``--table`` runs the study
    from it, and stdout, study.md and study.json all say the brackets were not re-verified."""
    from numeric.study.cli import main
    from numeric.study.table import BANNER, from_csv, to_csv, write_table

    data = _synthetic()
    back, target = from_csv(to_csv(data, "u_over_n"))
    assert target == "u_over_n" and np.array_equal(back.y, data.y) and list(back.heads) == list(data.heads)
    for k, v in data.numeric.items():
        assert np.array_equal(back.numeric[k], v, equal_nan=True), k
    f = tmp_path / "t.csv"
    write_table(f, data, "u_over_n")
    capsys.readouterr()
    assert main(["--table", str(f), "--out", str(tmp_path / "st"), "--permutations", "1"]) == 0
    out = capsys.readouterr().out
    assert BANNER in out
    assert BANNER in (tmp_path / "st" / "study.md").read_text()
    assert json.loads((tmp_path / "st" / "study.json").read_text())["setup"]["banner"] == BANNER


@pytest.mark.parametrize("text,needle", [
    ("", "empty"),
    ("a,b\n1,2\n", "not a study table"),
    ("cell_id,family,head,source,domain,target:u_over_n,num:x\nc,f,h,s,,0.1\n", "fields"),
    ("cell_id,family,head,source,domain,target:u_over_n,num:x\nc,f,h,s,,0.1,abc\n", "bad number"),
    ("cell_id,family,head,source,domain,target:pi,num:x\nc,f,h,s,,0.1,1\n", "unknown target"),
    ("cell_id,family,head,source,domain,target:u_over_n,num:x\nc,f,h,s,,0.1,1\nc,f,h,s,,0.1,1\n", "twice"),
])
def test_a_malformed_table_is_one_line_bad_input(tmp_path, capsys, text, needle):
    from numeric.study.cli import main

    f = tmp_path / "t.csv"
    f.write_text(text)
    capsys.readouterr()
    assert main(["--table", str(f), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    with pytest.raises(StudyError):
        from numeric.study.table import from_csv
        from_csv(text)

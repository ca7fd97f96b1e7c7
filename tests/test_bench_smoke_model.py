"""The benchmark suites that run the float tier's search (torch), at their ``smoke`` size on a tiny input."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from bench.runner import load, read_results, run_suite


def _smoke(name: str, tmp_path) -> list[dict]:
    suite = load(name)
    run_suite(suite, "smoke", tmp_path, log=lambda s: None)
    results = read_results(tmp_path, name)
    assert results and suite.tables(results)
    return results


def test_scaling_smoke(tmp_path):
    (r,) = _smoke("scaling", tmp_path)
    rec = r["record"]
    assert rec["rc"] == 0 and rec["verified"] and rec["upper_units"] > 0
    assert 0 < rec["lower_cpu_s"] < rec["cpu_s"]                     # the lower search's CPU, inside the run's
    (cell,) = rec["cells"]
    assert 1 <= cell["L"] <= cell["U"] <= 16
    assert "n^" not in load("scaling").tables([r])["growth"]       # one n: no exponent is fitted


def test_quality_smoke(tmp_path):
    (r,) = _smoke("quality", tmp_path)
    (cell,) = r["record"]["cells"]
    assert cell["verified"] and cell["L"] == cell["U"] == 8        # the grid's r_eps = n (G.1)
    assert cell["attack_success"] is not True


def test_report_time_smoke(tmp_path):
    run_suite(load("commands"), "smoke", tmp_path, log=lambda s: None, only=["smoke-report"])
    (r,) = read_results(tmp_path, "commands")
    rec = r["record"]
    assert rec["bracket_files"] == 1
    assert [x["rc"] for x in rec["reports"].values()] == [0, 0] and all(x["cpu_s"] > 0 for x in rec["reports"].values())
    assert "numeric report" in load("commands").tables([r])["times"]


def test_lower_smoke(tmp_path):
    """The lower side beside the plain row-side LP: every L is exactly verified (a banded 12 x 12 head has
    L >= 1 at every tolerance), non-increasing in eps, and the table counts the cells behind the LP."""
    (r,) = _smoke("lower", tmp_path)
    rec = r["record"]
    for key in ("default", "thorough", "reference"):
        assert all(1 <= x <= 12 for x in rec[key]) and rec[key] == sorted(rec[key])
    assert all(s >= 0 for s in rec["spread"])
    tables = load("lower").tables([r])
    assert "plain row-side LP" in tables["side_by_side"] and "below the plain row-side LP" in tables["behind"]

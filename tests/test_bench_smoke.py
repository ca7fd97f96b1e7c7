"""Each benchmark suite that needs no torch, run at its ``smoke`` size on a tiny input, and its tables rendered.

The runner's contract is checked on the way: one result file per case with the machine's facts, a rerun
keeps a case whose result file exists (resume), ``--force`` measures it again, an unknown suite is a
one-line error with exit 2. The torch suites' smoke runs are in ``tests/test_bench_smoke_model.py``.
"""
from __future__ import annotations

import json

import pytest

from bench.cli import main
from bench.runner import SIZES, load, read_results, run_suite, suite_names


def _smoke(name: str, tmp_path, only=None) -> list[dict]:
    suite = load(name)
    written = run_suite(suite, "smoke", tmp_path, log=lambda s: None, only=only)
    assert [p.stem for p in written] == [c.name for c in suite.cases("smoke") if only is None or c.name in only]
    results = read_results(tmp_path, name)
    for r in results:
        m = r["machine"]
        assert m["cores"] >= 1 and m["cpu_model"] and m["python"] and m["numpy"] and m["python_flint"]
        assert len(m["load_average"]) == 3 and "commit" in m
    tables = suite.tables(results)
    assert tables and all(t.startswith("| ") and "\n|---" in t for t in tables.values())
    return results


def test_exact_speed_smoke(tmp_path):
    (r,) = _smoke("exact_speed", tmp_path)
    cells = r["record"]["cells"]
    assert [c["cell"] for c in cells] == ["column-side", "row-side"]
    assert all(c["exact_lower"] and c["exact_upper"] and c["float"] for c in cells)
    assert all(c["exact_ms"] > 0 and c["float64_ms"] > 0 for c in cells)


def test_exact_work_smoke(tmp_path):
    (r,) = _smoke("exact_work", tmp_path)
    rows = r["record"]["rows"]
    assert len(rows) == 7 and all(x["units"] > 0 and x["ns_per_unit"] > 0 for x in rows)
    assert "work limit" in load("exact_work").tables([r])["units"]


def test_crosscheck_smoke(tmp_path):
    (r,) = _smoke("crosscheck", tmp_path)
    rec = r["record"]
    assert rec["agree"] and rec["exact_verified"] == rec["crosscheck_verified"] == rec["cells"] > 0


def test_study_time_smoke(tmp_path):
    (r,) = _smoke("commands", tmp_path, only=["smoke-study"])
    (run,) = r["record"]["runs"]
    assert run["rows_run"] > 0 and run["cpu_s"] > 0


def test_a_rerun_keeps_results_and_force_measures_again(tmp_path):
    suite = load("exact_speed")
    (path,) = run_suite(suite, "smoke", tmp_path, log=lambda s: None)
    doc = json.loads(path.read_text())
    doc["record"]["marker"] = "kept"
    path.write_text(json.dumps(doc))
    assert run_suite(suite, "smoke", tmp_path, log=lambda s: None) == []
    assert json.loads(path.read_text())["record"]["marker"] == "kept"
    assert run_suite(suite, "smoke", tmp_path, force=True, log=lambda s: None) == [path]
    assert "marker" not in json.loads(path.read_text())["record"]


def test_every_suite_lists_cases_at_every_size_and_full_within_large():
    for name in suite_names():
        suite = load(name)
        sizes = {s: [c.name for c in suite.cases(s)] for s in SIZES}
        assert sizes["smoke"] and sizes["full"], name
        assert set(sizes["full"]) <= set(sizes["large"]), name
        assert not set(sizes["smoke"]) & set(sizes["full"]), name     # a smoke run never passes for a shipped one


def test_unknown_suite_and_size_are_refused(tmp_path, capsys):
    assert main(["run", "no_such_suite", "--results", str(tmp_path)]) == 2
    assert "unknown suite" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["run", "exact_speed", "--size", "huge", "--results", str(tmp_path)])
    assert exc.value.code == 2
    assert not any(tmp_path.iterdir())


def test_cluster_smoke_and_its_tables(tmp_path):
    """The cluster suite's smoke case: empty tasks through a one-worker Dask LocalCluster; its tables render
    from the shipped full result (the runs and the projection), and a record without runs renders none."""
    suite = load("cluster")
    run_suite(suite, "smoke", tmp_path, log=lambda s: None)
    (r,) = read_results(tmp_path, "cluster")
    assert r["record"]["noop_task_ms"] > 0
    assert suite.tables([r]) == {}
    from bench.runner import RESULTS

    shipped = read_results(RESULTS, "cluster")
    tables = suite.tables(shipped)
    assert set(tables) == {"runs", "projection"}
    assert "Dask LocalCluster" in tables["runs"] and "| 128 | Dask |" in tables["projection"]


def test_import_time_smoke(tmp_path):
    """The front door's suite: one fresh interpreter per case, and the table says within or OVER the limit."""
    (r,) = _smoke("import_time", tmp_path)
    rec = r["record"]
    assert set(rec["cases"]) == {"python (nothing)", "import softrank", "softrank --help",
                                 "softrank.bracket (first use)"}
    assert all(c["min_s"] > 0 for c in rec["cases"].values())
    over = {**r, "record": {**rec, "limit_s": 0.0}}              # negative control: a limit nothing meets
    assert "OVER 0.0 s" in load("import_time").tables([over])["times"]

"""The panel report (numeric.panel.report): it re-verifies every bracket file and
believes no record it did not check (the report's own re-verification).

A small panel directory is built from real bracket files (three random 8 x 8
softmax matrices searched by ``search_brackets``) and records written beside
them; copies of it are then damaged one way each (a record that lies, a file
missing, truncated or unnamed, a record unreadable or of another run, no
``panel.json``), and the report must list each damage as an error and exit 1.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from numeric.panel.report import main, summarise, write_report
from numeric.panel.schema import PanelRow
from tests.report_panel import EPS, IDENTITY, N_CELLS, build_panel, row

ROOT = Path(__file__).resolve().parents[1]


def report_cli(path):
    return subprocess.run([sys.executable, "-m", "numeric", "report", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def panel_dir(tmp_path_factory):
    return build_panel(tmp_path_factory.mktemp("panel"))


def damaged(panel_dir, tmp_path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(panel_dir, out)
    return out


def assert_error(out, *needles):
    """The in-process report (one verification process) lists an error with every needle and exits 1."""
    assert main([str(out), "--workers", "1"]) == 1
    text = (out / "report.md").read_text()
    assert "## Errors" in text
    errors = [line for line in text.splitlines() if line.startswith("- ")]
    assert any(all(n in line for n in needles) for line in errors), (needles, errors)
    return text


def test_clean_panel_reverified(panel_dir):
    proc = report_cli(panel_dir)
    assert proc.returncode == 0, proc.stderr
    text = (panel_dir / "report.md").read_text()
    n = N_CELLS * len(EPS)
    assert f"| brackets re-verified exactly (both sides) | {n} | {n} |" in text
    assert "## Errors" not in text
    # the report says what produced the run
    assert "effort preset `quick`" in text and f"numpy {np.__version__}" in text and "commit c0ffee" in text
    assert "Every bracket file (3) was re-verified" in text.splitlines()[2]
    for png in ("brackets_per_head.png", "u_over_l.png", "resolved_per_layer.png", "u_over_n.png"):
        assert (panel_dir / "figures" / png).stat().st_size > 1000
        assert f"figures/{png}" in text


def test_record_that_disagrees(panel_dir, tmp_path):
    out = damaged(panel_dir, tmp_path)
    rec = out / "cells" / "L0H1_s00.json"
    doc = json.loads(rec.read_text())
    doc["rows"][0]["U"] += 1           # the record claims a rank the file does not
    rec.write_text(json.dumps(doc))
    text = assert_error(out, doc["rows"][0]["cell_id"], "U =", "exact pass")
    n = N_CELLS * len(EPS) - 1          # the lying row is not counted
    assert f"| brackets re-verified exactly (both sides) | {n} | {n} |" in text


def test_missing_and_truncated_files(panel_dir, tmp_path):
    out = damaged(panel_dir, tmp_path)
    (out / "brackets" / "L0H0_s00.safetensors").unlink()
    f = out / "brackets" / "L0H2_s00.safetensors"
    f.write_bytes(f.read_bytes()[:100])
    text = assert_error(out, "L0H0_s00", "missing")
    assert any("L0H2_s00" in line and "unreadable" in line for line in text.splitlines())
    assert "| brackets re-verified exactly (both sides) | 2 | 2 |" in text


def test_file_no_record_names(panel_dir, tmp_path):
    out = damaged(panel_dir, tmp_path)
    (out / "cells" / "L0H1_s00.json").unlink()
    assert_error(out, "L0H1_s00/eps=1/4", "no record names")


def test_unreadable_and_foreign_records(panel_dir, tmp_path):
    out = damaged(panel_dir, tmp_path)
    (out / "cells" / "L0H0_s00.json").write_text("{not json")
    rec = out / "cells" / "L0H1_s00.json"
    doc = json.loads(rec.read_text())
    doc["signature"]["identity"] = dict(IDENTITY, effort="thorough")
    rec.write_text(json.dumps(doc))
    text = assert_error(out, "L0H0_s00.json", "unreadable cell record")
    assert any("L0H1_s00.json" in line and "another run identity" in line for line in text.splitlines())


def test_missing_panel_json(panel_dir, tmp_path):
    out = damaged(panel_dir, tmp_path)
    (out / "panel.json").unlink()
    text = assert_error(out, "panel.json", "missing")
    assert "effort preset `unknown`" in text


def test_summarise_counts_and_medians():
    rows = [row(0, 1, 0, "1/4", 4, 4), row(0, 1, 1, "1/4", 3, 6), row(1, 2, 0, "1/4", 2, 5),
            row(1, 2, 1, "1/4", 7, 9, verified=False, capped=True),  # excluded from the medians
            row(0, 1, 0, "1/2", 1, 1), row(1, 2, 0, "1/2", 1, 2),
            row(2, 0, 0, "1/4", None, None, status="dropped_mass", family="decoder", mass=0.01)]
    s = summarise([PanelRow.from_json(r) for r in rows])
    assert s.brackets == 6 and s.verified == 5 and len(s.unverified) == 1 and len(s.dropped) == 1
    assert [r.cell_id for r in s.capped] == ["L1H2-1/4"]
    q = s.per_eps[Fraction(1, 4)]
    assert q.brackets == 3 and q.closed == 1
    assert q.median_U_over_L == 2.0          # ratios 1, 2, 2.5
    assert q.median_L == 3 and q.median_U == 5
    assert s.attacks_run == 4 and s.attack_successes == 0   # L >= 2 among the ok rows
    assert s.direct_checked == 6 and s.direct_passed == 6
    doc = json.loads(s.to_json())               # the record renders its own JSON, from the same figures
    assert doc["brackets"] == 6 and doc["per_eps"]["1/4"]["median_U_over_L"] == 2.0
    assert [r["cell_id"] for r in doc["capped"]] == ["L1H2-1/4"] and len(doc["verified_rows"]) == 5
    md = s.to_markdown()
    assert "| brackets re-verified exactly (both sides) | 5 | 6 |" in md
    assert "| 1/4 | 3 | 1 | 3 | 5 | 2.00 |" in md and "- L1H2-1/4 (" in md


def test_report_cli_errors(tmp_path):
    proc = report_cli(tmp_path / "missing")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    (tmp_path / "cells").mkdir()
    proc = report_cli(tmp_path)
    assert proc.returncode == 2 and "no finished cells" in proc.stderr


def test_write_report_in_process(panel_dir, tmp_path):
    out = damaged(panel_dir, tmp_path)
    rep = write_report(out, workers=1)
    assert rep.ok and rep.brackets == rep.verified == N_CELLS * len(EPS) and rep.errors == []


def test_record_with_another_tolerance(panel_dir, tmp_path):
    out = damaged(panel_dir, tmp_path)
    rec = out / "cells" / "L0H2_s00.json"
    doc = json.loads(rec.read_text())
    doc["rows"][0]["eps"] = "1/3"
    rec.write_text(json.dumps(doc))
    assert_error(out, doc["rows"][0]["cell_id"], "not bound to its head", "eps=1/3")


def test_capped_cells_listed(panel_dir, tmp_path):
    """A capped search is not an error (its bracket is verified) but the report names it."""
    out = damaged(panel_dir, tmp_path)
    rec = out / "cells" / "L0H0_s00.json"
    doc = json.loads(rec.read_text())
    doc["rows"][1]["capped"] = True
    rec.write_text(json.dumps(doc))
    assert main([str(out), "--workers", "1"]) == 0
    text = (out / "report.md").read_text()
    n = N_CELLS * len(EPS)
    assert f"| searches within their work budgets (not ended by a stop request) | {n - 1} | {n} |" in text
    listed = text[text.index("Capped searches"):].split("\n\n")[1].splitlines()
    assert listed == [f"- {doc['rows'][1]['cell_id']} (brackets/L0H0_s00.safetensors): lower verified True, "
                      "upper verified True"]


def test_second_checker_counts_in_report(panel_dir, tmp_path):
    """The report re-derives every bracket with the second checker (crosscheck) and states both counts."""
    out = damaged(panel_dir, tmp_path)
    rep = write_report(out, workers=1)
    text = (out / "report.md").read_text()
    n = N_CELLS * len(EPS)
    assert rep.ok
    assert (f"{n} brackets in {N_CELLS} file(s): the exact tier verified {n}, the second checker verified {n}; "
            "0 disagreements.") in text


def test_second_checker_disagreement_exits_1(panel_dir, tmp_path, monkeypatch):
    """An exact pass that says more than the files prove (an injected bug: every lower rank one higher and
    verified) is caught by the second checker, and the report exits 1; with the second checker off the
    same bug passes, so the disagreement comes from the second checker alone (negative control)."""
    import numeric.panel.audit as audit_mod

    out = damaged(panel_dir, tmp_path)
    real = audit_mod.verify_files

    def buggy(paths, workers=None):
        res = real(paths, workers)
        for v in res.values():
            for c in v.get("cells", {}).values():
                c["lower"] = (c.get("lower") or 0) + 1
        return res

    monkeypatch.setattr(audit_mod, "verify_files", buggy)
    rep = write_report(out, workers=1)
    assert not rep.ok
    assert any(e.startswith("independent checker:") and "lower rank" in e for e in rep.errors), rep.errors
    assert "DISAGREEMENT" in (out / "report.md").read_text()
    off = write_report(out, workers=1, independent=False)
    assert not any(e.startswith("independent checker:") for e in off.errors)

"""The panel report (numeric.panel.report) on hand-made cell records.

The records stand in for a panel directory; what is tested is the
aggregation (integrity counts, medians, exclusion of unverified brackets) and
that every figure is written."""
from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from numeric.panel.report import summarise, write_report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def row(layer, head, source, eps, L, U, *, verified=True, family="encoder", n=16, status="ok", **kw):
    r = {"family": family, "model": "m", "layer": layer, "head": head, "source": f"text:{source}",
         "eps": str(Fraction(eps)), "n_rows": n, "n_cols": n, "L": L, "U": U, "lower_witness": "row_reconstruction",
         "upper_witness": "factors", "seconds": 1.5, "slack": 1e-12, "mass": 1.0, "min_mass": 1.0,
         "local_mass": None, "status": status, "verified": verified, "lower_verified": verified,
         "upper_verified": True, "attack_run": L is not None and L >= 2, "attack_success": False, "direct_checked": True,
         "direct_passed": True, "hf_max_abs_diff": 1e-7, "cell_id": f"L{layer}H{head}-{eps}",
         "file": f"brackets/L{layer}H{head}.safetensors"}
    r.update(kw)
    return r


def make_dir(tmp_path, rows) -> Path:
    (tmp_path / "cells").mkdir(parents=True)
    (tmp_path / "cells" / "all.json").write_text(json.dumps({"signature": {}, "rows": rows}))
    return tmp_path


ROWS = [
    row(0, 1, 0, "1/4", 4, 4), row(0, 1, 1, "1/4", 3, 6), row(1, 2, 0, "1/4", 2, 5),
    row(1, 2, 1, "1/4", 7, 9, verified=False),  # excluded from the figures and medians
    row(0, 1, 0, "1/2", 1, 1), row(1, 2, 0, "1/2", 1, 2),
    row(2, 0, 0, "1/4", None, None, status="dropped_mass", family="decoder", mass=0.01),
]


def test_summarise_counts_and_medians():
    s = summarise(ROWS)
    assert s["brackets"] == 6 and s["verified"] == 5 and len(s["unverified"]) == 1 and len(s["dropped"]) == 1
    q = s["per_eps"][Fraction(1, 4)]
    assert q["brackets"] == 3 and q["closed"] == 1
    assert q["median_U_over_L"] == 2.0          # ratios 1, 2, 2.5
    assert q["median_L"] == 3 and q["median_U"] == 5
    assert s["attacks_run"] == 4 and s["attack_successes"] == 0   # L >= 2 among the ok rows
    assert s["direct_checked"] == 6 and s["direct_passed"] == 6


def test_report_files(tmp_path):
    out = make_dir(tmp_path / "run", ROWS)
    path = write_report(out)
    text = path.read_text()
    assert "| brackets re-verified exactly (both sides) | 5 | 6 |" in text
    assert "Unverified brackets" in text and "L1H2-1/4" in text
    assert "dropped_mass" in text
    for png in ("brackets_per_head.png", "u_over_l.png", "resolved_per_layer.png", "u_over_n.png"):
        assert (out / "figures" / png).stat().st_size > 1000
        assert f"figures/{png}" in text


def test_report_cli_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "numeric", "report", str(tmp_path / "missing")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    (tmp_path / "cells").mkdir()
    proc = subprocess.run([sys.executable, "-m", "numeric", "report", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no finished cells" in proc.stderr

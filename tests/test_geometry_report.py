"""The geometry report section: plots, tables, and degenerate input."""
from __future__ import annotations

import numpy as np

from numeric.panel.report_geometry import geometry_section, spearman
from numeric.panel.schema import PanelRow
from tests.report_panel import geometry_rows as _rows


def test_section_writes_plots_and_tables(tmp_path):
    md = geometry_section(_rows(), tmp_path)
    assert md.startswith("## Interaction geometry")
    assert "eps = 0.25" in md
    assert (tmp_path / "geometry_intrinsic.png").stat().st_size > 1000
    assert (tmp_path / "geometry_native.png").stat().st_size > 1000
    assert (tmp_path / "geometry_family.png").stat().st_size > 1000
    assert "| bert | 2 |" in md and "| vit | 2 |" in md
    # the gauge audit table: logits and intrinsic descriptors unchanged
    audit = [line for line in md.splitlines() if line.startswith("| 4 |") or line.startswith("| 16 |")]
    assert len(audit) == 2
    assert all(line.split("|")[2].strip() == "0" and line.split("|")[3].strip() == "0" for line in audit)


def test_section_without_geometry_columns(tmp_path):
    md = geometry_section([PanelRow("bert", "bert", 0, 0, "text:0", "1/4", "ok", L=1, U=2)], tmp_path)
    assert "nothing to plot" in md
    assert not list(tmp_path.glob("*.png"))


def test_spearman():
    assert spearman([1, 2, 3], [3, 2, 1]) == -1.0
    assert np.isnan(spearman([1, 2], [1, 2]))
    assert spearman(["1", "2", "3", "x"], [1.0, 2.0, 3.0, 4.0]) == 1.0

"""The float tier's odd-map search (``numeric/search/oddmap.py``) and its export, judged by ``python -m exact``."""
from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np
import pytest

from numeric.search import oddmap

from tests.data import make_oddmap

ROOT = Path(__file__).resolve().parents[1]


def verify_json(path) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", str(path), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, json.loads(proc.stdout)


def test_cycle5_found_exported_and_verified_as_a_closed_bracket(tmp_path):
    """docs/oddmap.md: the odd map proves r_{99/100} >= 3 on the 5-cycle, the rank-3 SVD closes it."""
    pytest.importorskip("pysat")
    A = make_oddmap.CYCLE5
    path = oddmap.export_odd_map(tmp_path / "c5.safetensors", A, Fr(99, 100), 3, upper=make_oddmap.svd_factors(A, 3))
    rc, out = verify_json(path)
    cell = out["cells"][0]
    assert rc == 0 and out["all_verified"]
    assert (cell["lower"], cell["upper"], cell["lower_witness"], cell["eps"]) == (3, 3, "odd_map", "99/100")


def test_math_example_and_a_tolerance_where_no_certificate_exists(tmp_path):
    pytest.importorskip("pysat")
    A = make_oddmap.EXAMPLE4
    rc, out = verify_json(oddmap.export_odd_map(tmp_path / "e.safetensors", A, Fr(9, 20), 3))
    assert rc == 0 and out["cells"][0]["lower"] == 3 and out["cells"][0]["lower_verified"]
    # at eps = 1/2 a rank-2 B is within eps, so no odd map from S^2 exists: the SAT problem is unsatisfiable
    assert oddmap.find_odd_map(A, 0.5, 3) is None
    assert oddmap.export_odd_map(tmp_path / "none.safetensors", A, Fr(1, 2), 3) is None


def test_the_data_file_is_regenerated_byte_for_byte(tmp_path):
    pytest.importorskip("pysat")
    assert make_oddmap.main([str(tmp_path / "o.safetensors")]) == 0
    assert (tmp_path / "o.safetensors").read_bytes() == (ROOT / "tests" / "data" / "oddmap.safetensors").read_bytes()


def test_the_grid_factors_write_zero_as_positive_zero():
    """An SVD entry of about 1e-17 rounds to a zero whose sign is the CPU's last bits; written as +0.0,
    the file is the same bytes everywhere (the control: the raw rounding gives -0.0 for -1e-17)."""
    f = make_oddmap.svd_factors(make_oddmap.CYCLE5, 3)
    zeros = np.concatenate([f["P"][f["P"] == 0], f["Q"][f["Q"] == 0]])
    assert zeros.size and not np.signbit(zeros).any()
    assert np.signbit(np.round(-1e-17 * 2.0 ** make_oddmap.GRID_BITS) / 2.0 ** make_oddmap.GRID_BITS)


def test_the_triangulation_matches_the_checker():
    from exact.oddmap import label_sets
    for d in (1, 2, 3):
        V = oddmap.vertices(d)
        assert len(V) == 3**d - 1 and all(V[-1 - k] == tuple(-c for c in v) for k, v in enumerate(V))
        chains = oddmap.facets(d)
        assert len(chains) == 2**d * [1, 1, 2, 6][d]
        lab = tuple((k % 3, 1) if k < len(V) // 2 else ((len(V) - 1 - k) % 3, -1) for k in range(len(V)))
        assert label_sets(lab, d) == sorted({tuple(sorted({lab[v] for v in F})) for F in chains})


def test_bad_dimension_and_missing_python_sat(monkeypatch):
    with pytest.raises(ValueError):
        oddmap.find_odd_map(np.eye(2), 0.5, 3)
    with pytest.raises(ValueError):
        oddmap.find_odd_map(np.eye(2), 0.5, 0)
    monkeypatch.setitem(sys.modules, "pysat.solvers", None)
    with pytest.raises(RuntimeError, match="python-sat"):
        oddmap.find_odd_map(np.eye(2), 0.5, 2)

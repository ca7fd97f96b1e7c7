"""``research/oddmap_real.py``'s per-cell route (pool, l1 fit, nerve, height filter, lazy SAT, export) on the 5-cycle.

The real cells need the MiniLM weights and minutes; here the route runs on
the 5-cycle of docs/oddmap.md, where it must find r_{99/100} >= 3 and have it
verified exactly (and as a softmax target with slack), and rule out d = 4 by
the rank-3 l1 fit (r_{99/100} = 3).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
from research import oddmap_real

CYCLE5 = np.array([[.5, .5, 0, 0, 0], [0, .5, .5, 0, 0], [0, 0, .5, .5, 0], [0, 0, 0, .5, .5], [.5, 0, 0, 0, .5]])
ARGS = argparse.Namespace(pool=5, fit_rounds=3, max_lps=3000, nerve_lps=1500, max_rows=6000,
                          max_clauses=8_000_000, conflicts=20_000, max_rounds=50)


def cell(L: int, slack=None) -> dict:
    return {"name": "cycle5", "eps": "99/100", "L": L, "U": 3, "rows": [0, 2], "slack": slack, "upper": None}


def test_cycle5_found_and_verified(tmp_path):
    pytest.importorskip("pysat")
    rec = oddmap_real.try_cell(CYCLE5, None, cell(2), ARGS, str(tmp_path))
    assert rec["outcome"] == "found and exactly verified" and rec["margin"] == "1/100"
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", rec["file"], "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    c = json.loads(proc.stdout)["cells"][0]
    assert c["lower"] == 3 and c["lower_verified"] and c["lower_witness"] == "odd_map"


def test_cycle5_as_softmax_target_judged_with_slack(tmp_path):
    """Logits whose float softmax is near the 5-cycle: the file carries them and the slack."""
    pytest.importorskip("pysat")
    from numeric.heads.extract import softmax_rows
    from numeric.search.slack import target_slack
    from exact.rational import format_rational

    H = np.where(CYCLE5 > 0, 0.0, -40.0)
    A = softmax_rows(H)
    q, _ = target_slack(H, A)
    rec = oddmap_real.try_cell(A, H, cell(2, format_rational(q)), ARGS, str(tmp_path))
    assert rec["outcome"] == "found and exactly verified"


def test_cycle5_d4_ruled_out_by_the_l1_fit(tmp_path):
    rec = oddmap_real.try_cell(CYCLE5, None, cell(3), ARGS, str(tmp_path))
    assert rec["outcome"] == "ruled out by l1 fit" and rec["fit_err"] <= 0.99


def test_pool_keeps_witness_rows_and_is_sorted():
    A = np.random.default_rng(0).dirichlet(np.ones(6), size=10)
    pool = oddmap_real.make_pool(A, [7, 3], 5)
    assert len(pool) == 5 and {3, 7} <= set(pool) and pool == sorted(pool)


def test_bad_part_is_one_line_exit_2():
    proc = subprocess.run([sys.executable, "-m", "research.oddmap_real", "--part", "2/1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--part" in proc.stderr

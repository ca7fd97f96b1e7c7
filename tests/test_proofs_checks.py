"""Tests for proofs_checks: every appendix check is a test, plus the CLI
and checks that the machinery can fail (a check that cannot fail proves nothing)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from flint import arb, fmpq

from proofs_checks import all_checks
from proofs_checks._core import Recorder, _Entry, arb_precision, run_check
from proofs_checks._export import neumann_cell, write_and_verify
from proofs_checks._residual import contrast_bound, residual, row_osc_bound
from proofs_checks.geometry import compress_factorisation, meb_sq
from proofs_checks.grid import grid_points, neumann_gap

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = all_checks()
EXPECTED_LABELS = {"G.1", "H.1", "H.2", "G.2", "(7)", "E.2", "F.1", "D.1", "K.2", "K.3",
                   "E.3", "E.4", "H.3", "H.4", "I.1", "I.2", "I.3", "J.1", "J.2",
                   "I.4", "G.3", "G.1-all", "A.1", "A.2", "A.3", "D.3", "F.2"}


@pytest.fixture(autouse=True)
def _export_to_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFS_CHECKS_OUT", str(tmp_path))


def test_every_label_of_the_issue_has_a_check():
    assert {e.label for e in ENTRIES} == EXPECTED_LABELS


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.label for e in ENTRIES])
def test_check_passes(entry):
    result = run_check(entry)
    assert result.passed, result.failures
    assert result.label == entry.label and result.numbers


def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "proofs_checks", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_json_only():
    proc = _cli("--json", "--only", "H.2", "--only", "E.3")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [d["label"] for d in doc] == ["E.3", "H.2"]
    for d in doc:
        assert d["passed"] is True and isinstance(d["name"], str) and d["numbers"]
    h2 = doc[1]["numbers"]
    assert h2["tau(0)"] == "2/3" and h2["lower_margin"] == "1/6" and h2["bracket"] == "[2, 2]"


def test_cli_table_and_g1_numbers():
    proc = _cli("--only", "G.1")
    assert proc.returncode == 0, proc.stderr
    assert "G.1" in proc.stdout and "PASS" in proc.stdout and "r_eps/kappa^(r/2)" in proc.stdout
    assert "[125, 125]" in proc.stdout


def test_cli_unknown_label_is_a_one_line_error():
    proc = _cli("--only", "Z.9")
    assert proc.returncode == 2
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_cli_only_matches_exactly():
    # no case folding, no Unicode folding: a dotless i must not select I.1, e.3 is not E.3
    for bad in ("\u0131.1", "e.3", " G.1", "I.1\u0307"):
        proc = _cli("--only", bad)
        assert proc.returncode == 2, bad
        err = proc.stderr.strip()
        assert len(err.splitlines()) == 1 and "unknown label" in err and "I.4" in err
        assert err.isascii() and ascii(bad) in err          # echoed escaped


def test_cli_export_names_files_by_label_and_exact_accepts_them(tmp_path):
    out = tmp_path / "out"
    proc = _cli("--only", "G.3", "--only", "H.1", "--only", "A.1", "--export", str(out), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    files = sorted(p.name for p in out.iterdir())
    assert files == ["G.3.safetensors", "H.1.safetensors"]          # A.1 exports nothing
    ver = subprocess.run([sys.executable, "-m", "exact", "verify", *(str(out / f) for f in files), "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ver.returncode == 0, ver.stdout[-2000:] + ver.stderr


def test_cli_export_to_a_file_is_a_one_line_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    proc = _cli("--only", "A.1", "--export", str(f))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_cli_list():
    proc = _cli("--list")
    assert proc.returncode == 0 and "G.1" in proc.stdout and "K.3" in proc.stdout


# ---------------------------------------------------------------- the machinery can fail

def test_crash_is_a_failure():
    def boom():
        raise RuntimeError("broken mathematics")
    r = run_check(_Entry("X.0", "crash", boom))
    assert not r.passed and "broken mathematics" in r.failures[0]


def test_check_that_checks_nothing_fails():
    r = run_check(_Entry("X.1", "empty", lambda: ("nothing", {}, Recorder())))
    assert not r.passed


def test_undecided_interval_is_a_failure():
    rec = Recorder()
    with arb_precision(64):
        a = arb(1) / 3
    rec.require(a < a, "undecided")
    rec.require(a <= a, "undecided too")      # overlapping balls: not certainly <=
    assert len(rec.failures) == 2


def test_neumann_condition_fails_at_small_beta():
    # beta = 1 on a 4 x 4 grid: rows spread, ||A - I|| exceeds (1 - eps)/2 = 3/8.
    assert not (neumann_gap(grid_points(4, 2), 1) < fmpq(3, 8))


def test_false_full_rank_claim_is_refuted_by_the_exact_tier():
    # beta = 1/4: A is far from I, so the R = X = L = I witness must not verify rank n.
    pts = grid_points(6, 1)
    H = -0.25 * np.array([[(a[0] - b[0]) ** 2 for b in pts] for a in pts], dtype=np.float64)
    tensors = {}
    cell = neumann_cell("weak", H, fmpq(1, 4), tensors, {"test": True})
    _, doc = write_and_verify("weak", [cell], tensors)
    assert doc["returncode"] == 1 and doc["all_verified"] is False
    assert doc["cells"][0]["lower_verified"] is False and doc["cells"][0]["upper_verified"] is True


# ---------------------------------------------------------------- exact helpers

def test_residual_known_values():
    assert residual([[0, 0], [0, 0]]).q == 0
    assert residual([[1, -1], [-1, 1]]).q == 2
    stair = residual([[0, 0, 0], [0, 0, 1], [0, 1, 1]])
    assert stair.q == fmpq(2, 3) and len(stair.cycle) == 3


def test_residual_certificates_are_consistent():
    import random
    rng = random.Random(0)
    for _ in range(100):
        m, n = rng.randint(1, 4), rng.randint(1, 5)
        M = [[fmpq(rng.randint(-9, 9), rng.randint(1, 3)) for _ in range(n)] for _ in range(m)]
        cert = residual(M)
        assert contrast_bound(M) <= cert.q <= row_osc_bound(M)
        assert row_osc_bound(M, list(cert.shift)) == cert.q


def test_meb_exact():
    square = [[fmpq(0), fmpq(0)], [fmpq(1), fmpq(0)], [fmpq(0), fmpq(1)], [fmpq(1), fmpq(1)]]
    assert meb_sq(square) == fmpq(1, 2)
    obtuse = [[fmpq(0), fmpq(0)], [fmpq(4), fmpq(0)], [fmpq(2), fmpq(1)]]
    assert meb_sq(obtuse) == 4                  # half the long side, not the circumradius
    assert meb_sq([[fmpq(3), fmpq(3)]]) == 0


def test_compression_reproduces_the_product():
    from proofs_checks._core import qmat
    X = qmat([[1, 2, 3], [2, 4, 6]])            # rank 1 queries in R^3
    Y = qmat([[1, 0, 1], [0, 1, 0], [1, 1, 1]])
    X1, Y1 = compress_factorisation(X, Y)
    assert X1 * Y1.transpose() == X * Y.transpose()
    assert X1.rank() == Y1.rank() == 1


# ---------------------------------------------------------------- consistency tests (not controls)

def test_consistency_i4_kronecker_bound_matches_full_computation():
    # r = 2: the channel bound from the 1-d factors agrees with the directly computed
    # ||A X - I|| of the 2-d instance (float comparison of the formula, small case)
    from proofs_checks import hardcore
    core = hardcore.hard_core(2 ** 6, 3)
    H = hardcore.logits_nd(core, 2)
    A = np.exp(H - H.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    X = hardcore.cells_nd(3, hardcore.CELLS, 2)
    direct = np.abs(A @ X - np.eye(9)).sum(axis=1).max()
    bound = hardcore.channel_bound(core, 2)
    assert abs(direct - float(bound.mid())) < 1e-9


def test_consistency_growth_law_matches_the_search():
    # the law's closed-form M at beta = 2^12 (r = 1) is the binary search's M, and M_lo = M_hi
    from proofs_checks import growth, hardcore
    law, facts = growth.prove_law(1, hardcore.leakage_budget(hardcore.I4_EPS))
    assert all(ok is True for ok, _ in facts)
    assert growth.m_bounds(law, 2 ** 12) == (35, 35) == (hardcore.largest_m(2 ** 12, 1, hardcore.I4_EPS),) * 2
    # the recurrence M(4 beta) = 2 M(beta) is not a theorem: the law's bracket at 2^18 excludes 280
    assert growth.m_bounds(law, 2 ** 18) == (281, 281)


def test_consistency_theta_upper_bounds_a_long_sum():
    from proofs_checks import identities
    t = identities.theta_upper(fmpq(1, 2), terms=2)
    long = 1 + 2 * sum((arb(-fmpq(k * k, 2)).exp() for k in range(1, 60)), arb(0))
    assert long < t and t - long < 1e-2


def test_consistency_leaky_decoders_are_refused_on_false_claims():
    from exact.certificates import check_lower
    from exact.matrix import ExactMatrix
    from proofs_checks._core import qmat, row1
    from proofs_checks.soundness import leaky_decoders
    A = qmat([["3/4", "1/4"], ["1/4", "3/4"]])
    EA = ExactMatrix.from_fmpq_mat(A)
    pool = [(w, d, lab) for w, d, lab in leaky_decoders(A) if d == 2]
    assert any("mutant" in lab for _, _, lab in pool)
    # rank 1 B = J/2 has error 1/2: no witness may prove rank 2 at eps = 1/2
    assert row1(A - qmat([["1/2", "1/2"]] * 2)) == fmpq(1, 2)
    for w, d, lab in pool:
        assert not check_lower(EA, w, fmpq(1, 2), d).verified, lab
    # and the leaky witnesses do verify somewhere (nonzero defect, eps small)
    assert any(check_lower(EA, w, fmpq(1, 100), d).verified for w, d, lab in pool if lab.startswith("leaky"))

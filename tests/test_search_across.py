"""Witnesses across tolerances : brackets are monotone in eps (L and U non-increasing),
a side carried from another tolerance is re-verified at its own (``python -m exact verify``
accepts the file), upper searches are warm-started from smaller tolerances, and the result is
still a function of input, code, seed and effort."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from exact.verify import verify_file
from numeric.search import driver, search_brackets
from numeric.search.budget import Budget
from numeric.search.export import write_bracket_file
from numeric.search.upper import search_upper, svd_baseline

EPS = [0.1, 0.25, 0.5]


def softmax_rows(h):
    z = np.exp(h - h.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def head(seed: int, n: int = 24, d: int = 6, scale: float = 2.0):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    H = scale * q @ k.T
    return softmax_rows(H), H


def _export_and_verify(tmp_path, out, name: str):
    path = write_bracket_file(tmp_path / f"{name}.safetensors", out.cells, out.tensors)
    reports = verify_file(path)
    assert len(reports) == len(out.cells) and all(r.verified for r in reports)
    return path


def _monotone(out):
    """L and U non-increasing in eps (cells sorted by eps)."""
    rs = sorted(out.results, key=lambda r: float(r.eps))
    return all(a.lower >= b.lower and a.upper >= b.upper for a, b in zip(rs, rs[1:]))


@pytest.mark.parametrize("seed, scale", [(5, 0.7), (11, 4.0)])
def test_brackets_are_monotone_across_tolerances(tmp_path, seed, scale):
    A, H = head(seed, n=16, scale=scale)
    out = search_brackets(A, EPS, logits=H, effort="quick", attack=False)
    _export_and_verify(tmp_path, out, f"m{seed}")
    assert _monotone(out)


def test_a_larger_tolerance_takes_a_smaller_ones_upper_witness(tmp_path, monkeypatch):
    """With the upper search at eps = 1/2 finding nothing (trivial U = n), the factors verified at
    1/4 are carried up, re-verified at 1/2, and the exported file verifies by the CLI."""
    A, H = head(3)
    real = driver.search_upper

    def blind_at_half(A_, eps, *a, **kw):
        return [] if eps > 0.4 else real(A_, eps, *a, **kw)

    monkeypatch.setattr(driver, "search_upper", blind_at_half)
    out = search_brackets(A, [0.25, 0.5], logits=H, effort="quick", attack=False)
    quarter, half = out.results
    assert half.upper == quarter.upper < A.shape[0]
    assert out.cells[1].provenance["search"]["upper_from_eps"] == "1/4"
    assert out.cells[0].provenance["search"]["upper_from_eps"] is None
    path = _export_and_verify(tmp_path, out, "carried-upper")
    cli = subprocess.run([sys.executable, "-m", "exact", "verify", str(path)], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stdout + cli.stderr


def test_a_smaller_tolerance_takes_a_larger_ones_lower_witness(tmp_path, monkeypatch):
    """With every lower family but the trivial one silenced at eps = 1/10, the witness verified
    at 1/4 is carried down and re-verified at 1/10 (any family, not only row sets)."""
    A, H = head(3)
    real = driver.lower_candidates

    def blind_at_tenth(A_, eps, *a, **kw):
        out = real(A_, eps, *a, **kw)
        return [c for c in out if c.kind == "trivial"] if eps < 0.2 else out

    monkeypatch.setattr(driver, "lower_candidates", blind_at_tenth)
    out = search_brackets(A, [0.1, 0.25], logits=H, effort="quick", attack=False)
    tenth, quarter = out.results
    assert quarter.lower >= 2 and tenth.lower == quarter.lower
    assert out.cells[0].provenance["search"]["lower_from_eps"] == "1/4"
    assert tenth.lower_witness == quarter.lower_witness
    path = _export_and_verify(tmp_path, out, "carried-lower")
    cli = subprocess.run([sys.executable, "-m", "exact", "verify", str(path)], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stdout + cli.stderr


def test_search_upper_offers_warm_factors_below_the_svd_rank():
    """Factors feasible at a smaller tolerance, of rank below the SVD rank here, are the search's
    first best (``factors/warm``); factors that miss eps are not offered."""
    A, _ = head(3)
    svd = svd_baseline(A)
    small = search_upper(A, 0.2, Budget(200000), svd=svd)[0]
    k_svd = int(np.nonzero(svd[1] <= 0.3)[0][0])
    assert small.rank < k_svd
    found = search_upper(A, 0.3, Budget(0), svd=svd, warm=(small.P, small.Q))
    assert found[0].family == "factors/warm" and found[0].rank == small.rank
    assert [u.rank for u in found] == [small.rank, k_svd]
    far = search_upper(A, 0.05, Budget(0), svd=svd, warm=(small.P, small.Q))
    assert all(u.family != "factors/warm" for u in far)


def test_same_brackets_twice():
    """Determinism: with the cross-tolerance passes the cells still depend on input, code, seed and
    effort only (timing fields aside)."""
    A, H = head(5, n=16)

    def strip(out):
        return [{**c.to_json(), "provenance": {k: v for k, v in c.provenance["search"].items() if k != "seconds"}}
                for c in out.cells]

    a = search_brackets(A, [0.25, 0.5], logits=H, effort="quick", seed=4, attack=False)
    b = search_brackets(A, [0.25, 0.5], logits=H, effort="quick", seed=4, attack=False)
    assert strip(a) == strip(b)
    assert all(np.array_equal(a.tensors[k], b.tensors[k]) for k in a.tensors)

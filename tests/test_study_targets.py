"""The study's other targets (paper L.6): the attention-SVD constructive budget and the native-causal
cells of the decoders (``numeric.study.targets``)."""
from __future__ import annotations

import json
import shutil
from fractions import Fraction

import numpy as np
import pytest

from numeric.search.driver import svd_budget


def _softmax(H: np.ndarray) -> np.ndarray:
    A = np.exp(H - H.max(axis=1, keepdims=True))
    return A / A.sum(axis=1, keepdims=True)


def _brute(A: np.ndarray, eps: Fraction) -> tuple[int, list]:
    """The smallest k whose balanced truncated SVD is within eps of A in max row-l1, the error computed in
    Fractions from the float64 factors (min(m, n) when none is: the trivial upper); and the exact errors."""
    U, S, Vt = np.linalg.svd(A, full_matrices=False)
    p = min(A.shape)
    errs = []
    for k in range(p + 1):
        r = np.sqrt(S[:k])
        P, Q = U[:, :k] * r, Vt[:k].T * r
        err = max(sum(abs(Fraction(float(A[i, j])) - sum((Fraction(float(P[i, t])) * Fraction(float(Q[j, t]))
                                                          for t in range(k)), Fraction(0)))
                      for j in range(A.shape[1])) for i in range(A.shape[0]))
        errs.append(err)
    ok = [k for k in range(p) if errs[k] <= eps]
    return (ok[0] if ok else p), errs


@pytest.mark.parametrize("shape,scale", [((4, 5), 2.0), ((6, 6), 3.0), ((5, 4), 1.0)])
def test_svd_budget_is_the_brute_force_smallest_rank(shape, scale):
    rng = np.random.default_rng(sum(shape))
    A = _softmax(scale * rng.standard_normal(shape))
    grid = [Fraction(i, 32) for i in range(1, 33)]
    seen = set()
    for eps in grid:
        want, errs = _brute(A, eps)
        if any(abs(e - eps) <= eps * Fraction(1, 10**4) for e in errs):
            continue   # within the upper side's float safety margin of a truncation error: not decided here
        assert svd_budget(A, eps) == want, eps
        seen.add(want)
    assert len(seen) >= 2   # the grid crosses at least one truncation error (the check can fail)


def test_svd_budget_is_monotone_in_eps_and_takes_the_logit_slack():
    rng = np.random.default_rng(7)
    H = 3.0 * rng.standard_normal((12, 12))
    A = _softmax(H)
    ks = [svd_budget(A, Fraction(i, 64), logits=H) for i in range(1, 65)]
    assert all(a >= b for a, b in zip(ks, ks[1:])) and ks[0] > ks[-1]
    assert ks[0] <= 12 and ks[-1] >= 1
    # the logit target's slack (K.5) only ever asks for more rank than the matrix alone
    assert all(svd_budget(A, Fraction(i, 64)) <= k for i, k in zip(range(1, 65, 7), ks[::7]))
    # no truncation below the trivial rank reaches a tiny eps: the trivial upper min(m, n)
    assert svd_budget(A[:, :5] / A[:, :5].sum(axis=1, keepdims=True), "1/1000000") == 5


def test_svd_budget_is_the_upper_sides_own_svd_rank():
    """The search's recorded truncated-SVD rank is the budget wherever a truncation below the trivial rank
    reaches eps (one code path: ``driver._svd_rank``)."""
    from numeric.search.driver import search_brackets

    rng = np.random.default_rng(3)
    H = 2.0 * rng.standard_normal((6, 6))
    res = search_brackets(_softmax(H), ["1/8", "1/2"], logits=H, effort="quick", attack=False)
    for r in res.results:
        k = svd_budget(_softmax(H), r.eps, logits=H)
        assert r.svd_rank is not None and k == min(r.svd_rank, 6) and r.upper <= k


# ---- the study on a tiny decoder panel with native-causal cells ---------------------------------------

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.panel_helpers import save_tiny

PANEL = ["--heads", "1.2", "--native", "--sources", "4", "--prefix", "8", "--block", "8", "--eps", "1/4",
         "--effort", "quick", "--no-screen", "--min-mass", "0", "--no-attack", "--workers", "1", "--quiet"]


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    from numeric.panel.cli import main

    model = save_tiny(tmp_path_factory.mktemp("gpt2"), "gpt2")
    out = tmp_path_factory.mktemp("panel")
    assert main(["--model", str(model), "--out", str(out), *PANEL]) == 0
    return out


def _study(capsys, *args):
    from numeric.study.cli import main

    capsys.readouterr()
    rc = main([str(a) for a in args] + ["--workers", "1", "--jobs", "1", "--permutations", "2"])
    return rc, capsys.readouterr().err


def test_native_cells_verify_exactly(panel):
    """The native-causal cells are bracketed and re-verified by the exact tier like every cell; their
    ranks are the exact pass's."""
    from exact.verify import verify_file
    from numeric.panel.audit import audit

    a = audit(panel, workers=1)
    assert not a.errors
    native = [r for r in a.rows if r.native]
    assert len(native) == 4 and all(r.verified and r.n_rows == r.n_cols == 16 for r in native)
    for r in native:
        rep = {x.id: x for x in verify_file(panel / r.file)}[r.cell_id]
        assert rep.verified and (rep.lower.rank, rep.upper.rank) == (r.L, r.U)


def test_study_reports_both_targets(panel, tmp_path, capsys):
    rc, err = _study(capsys, panel, "--out", tmp_path)
    assert rc == 0, err
    doc = json.loads((tmp_path / "study.json").read_text())
    svd, native = doc["targets"]
    assert svd["cells"] == 4 and native["cells"] == 4 and "4 native-causal cells paired" in native["note"]
    names = [c["name"] for c in svd["comparisons"]] + [c["name"] for c in native["comparisons"]]
    assert "attention-SVD budget: B1 vs B1+G" in names and "attention-SVD budget: B1 vs B1+I" in names
    assert "native-causal: B1 vs B1+G" in names and "native-causal: B1 vs B1+attention spectra (B2)" in names
    for c in svd["comparisons"] + native["comparisons"]:
        e = c["estimates"]["aggregate"]
        assert c["reason"] is None and e["delta_ci"][0] <= e["delta"] <= e["delta_ci"][1]
    md = (tmp_path / "study.md").read_text()
    assert "## Other target: k_svd / n" in md and "| native-causal: B2 vs B2+G |" in md
    # the main table keeps only the common-prefix cells
    assert doc["setup"]["cells"] == 4


def test_svd_targets_are_recomputed_and_checked_against_the_table(panel):
    """The study's k_svd is the recomputation from the bound head files and equals the table's column."""
    from numeric.study.load import load_study
    from numeric.study.svd_target import recorded_svd_budget, svd_data

    audited: list = []
    data = load_study(panel, workers=1, audited=audited)
    got = svd_data(data, audited, "1/4")
    rows = {r.cell_id: r for _, r in audited}
    for cid, y in zip(got.cell_ids, got.y):
        k = recorded_svd_budget(rows[cid])
        assert k is not None and y == k / rows[cid].n_cols


def _copy(panel, dst, edit=None, drop=None):
    shutil.copytree(panel, dst)
    for sub in ("cells", "brackets", "heads"):
        for p in (dst / sub).iterdir():
            if drop and drop(p.stem):
                p.unlink()
    for p in sorted((dst / "cells").glob("*.json")):
        if edit:
            doc = json.loads(p.read_text())
            if edit(p.stem, doc):
                p.write_text(json.dumps(doc))
    return dst


def test_a_tampered_table_value_exits_1(panel, tmp_path, capsys):
    def bump(key, doc):
        if key.endswith("_s01"):
            doc["rows"][0]["svd_budget"] += 1
            return True
        return False

    forged = _copy(panel, tmp_path / "f", edit=bump)
    rc, err = _study(capsys, forged, "--out", tmp_path / "fs")
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1 and "svd_budget" in lines[0] and "_s01" in lines[0], err
    # a panel written before the column existed gets the target recomputed, nothing to disagree with
    def strip(key, doc):
        for r in doc["rows"]:
            r.pop("svd_budget", None)
        return True

    old = _copy(panel, tmp_path / "o", edit=strip)
    from numeric.study.load import load_study
    from numeric.study.svd_target import svd_data

    audited: list = []
    data = load_study(old, workers=1, audited=audited)
    ref: list = []
    assert np.array_equal(svd_data(data, audited, "1/4").y, svd_data(load_study(panel, workers=1, audited=ref), ref,
                                                                         "1/4").y)


def test_a_head_file_changed_after_the_audit_is_refused(panel, tmp_path):
    from numeric.study.data import StudyError
    from numeric.study.load import load_study
    from numeric.study.svd_target import svd_data

    copy = _copy(panel, tmp_path / "h")
    audited: list = []
    data = load_study(copy, workers=1, audited=audited)
    a, b = sorted((copy / "heads").glob("*_s00.safetensors"))[0], sorted((copy / "heads").glob("*_s01.safetensors"))[0]
    shutil.copy(b, a)     # after the audit: the study reads the head file again and binds it by hash
    with pytest.raises(StudyError, match="sha256 differs"):
        svd_data(data, audited, "1/4")


def test_a_panel_without_native_cells_skips_those_rows(panel, tmp_path, capsys):
    plain = _copy(panel, tmp_path / "p", drop=lambda k: k.endswith("_nc"))
    rc, err = _study(capsys, plain, "--out", tmp_path / "ps")
    assert rc == 0, err
    doc = json.loads((tmp_path / "ps" / "study.json").read_text())
    svd, native = doc["targets"]
    assert all(c["reason"] is None for c in svd["comparisons"])
    assert native["cells"] == 0 and len(native["comparisons"]) == 3
    assert all(c["reason"].startswith("skipped: the panel has no native-causal cells") and "\n" not in c["reason"]
               for c in native["comparisons"])
    assert "| native-causal: B1 vs B1+G | - | skipped: the panel has no native-causal cells" in \
        (tmp_path / "ps" / "study.md").read_text()
    # native cells whose common-prefix partner is not a study row: counted, and the rows skipped with the reason
    lone = _copy(panel, tmp_path / "l", drop=lambda k: not k.endswith("_nc") and k.endswith(("_s00", "_s01")))
    from numeric.study.load import load_study, target_values
    from numeric.study.native_target import native_data

    audited: list = []
    data = load_study(lone, workers=1, audited=audited)
    sub, note = native_data(data, audited, lambda rows: target_values(rows, "u_over_n"))
    assert sub is not None and len(sub) == 2 and "2 without a common-prefix study cell" in note

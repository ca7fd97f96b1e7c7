"""The convex cap of a cell (``exact.cap``, ``crosscheck._cap``, ``numeric.search.cap``).

Known answers (near-uniform rows: cap 1; a diagonal-heavy matrix: cap n; a
hand-made witness with its exact margin, with and without a common row),
every condition of the lemma violated once and refused by both checkers,
malformed fields refused as malformed by both readers, a failed cap that
leaves the verdicts on L and U alone, and the two checkers agreeing on
searched witnesses and their exact margins.
"""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import crosscheck
from crosscheck._errors import Malformed
from exact.cap import CapTarget, check_cap
from exact.matrix import ExactMatrix
from exact.errors import MalformedInput
from exact.verify import verify_file
from flint import fmpq
from fileio.bracketwriter import write_bracket_file
from numeric.search.cap import cap_claim, convex_cap

HALF = np.full((2, 2), 0.5)


def _softmax(H: np.ndarray) -> np.ndarray:
    E = np.exp(H - H.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _cell(A, eps, rank, labels, mu, e, kind="column_blocks"):
    """A raw cell with trivial sides and a convex cap, and its tensors."""
    A = np.asarray(A, dtype=np.float64)
    tensors = {"A": A, "b": np.asarray(labels, dtype=np.float64).reshape(1, -1),
               "mu": np.asarray(mu, dtype=np.float64).reshape(1, -1), "e": np.asarray(e, dtype=np.float64)}
    cell = {"id": "c", "eps": eps, "target": {"matrix": "A"}, "lower": {"rank": 0, "witness": {"kind": "trivial"}},
            "upper": {"rank": min(A.shape), "witness": {"kind": "trivial"}},
            "convex_cap": {"rank": rank, "witness": {"kind": kind, "blocks": "b", "mu": "mu", "e": "e"}}}
    return cell, tensors


def _both(tmp_path, cell, tensors):
    """(exact report, crosscheck result) of a one-cell file."""
    path = tmp_path / "cap.safetensors"
    write_bracket_file(path, [cell], tensors)
    (exact,) = verify_file(path)
    (second,) = crosscheck.verify_file(path)
    return exact, second


def _claimed(tmp_path, A, eps, claim, tensors):
    """(exact report, crosscheck result) of a one-cell file whose cap is ``claim`` with ``tensors``."""
    from exact.cellspec import CellSpec, Claim, TargetSpec

    cell = CellSpec("c", eps, TargetSpec("A"), Claim.of(0, "trivial"), Claim.of(min(A.shape), "trivial"), None,
                    claim)
    path = tmp_path / "claimed.safetensors"
    write_bracket_file(path, [cell], {"A": np.asarray(A, dtype=np.float64), **tensors})
    (exact,) = verify_file(path)
    (second,) = crosscheck.verify_file(path)
    return exact, second


def _check(A, labels, mu, e, eps, delta, rank):
    """``exact.cap.check_cap`` on a block witness."""
    return check_cap(CapTarget(ExactMatrix.from_float64(A)), "column_blocks", {"blocks": labels, "mu": mu, "e": e},
                     eps, delta, rank)


def _judge(A, labels, mu, e, eps, slack, rank, meter):
    """``crosscheck._cap.judge_cap`` on a block witness."""
    from crosscheck._cap import judge_cap

    return judge_cap(A.ravel().tolist(), A.shape, "column_blocks", labels.ravel().tolist(), 0, mu.ravel().tolist(),
                     e=e.ravel().tolist(), k=e.shape[1], eps=eps, slack=slack, rank=rank, meter=meter)


def _margins(exact, second):
    return Fraction(str(exact.convex_cap.margin)), second.cap.margin


def test_a_hand_made_witness_has_its_exact_margin(tmp_path):
    exact, second = _both(tmp_path, *_cell(HALF, "1/4", 1, [0, 1], [0, 0], np.zeros((2, 2))))
    assert exact.convex_cap.verified and second.cap.verified
    assert _margins(exact, second) == (Fraction(1, 4), Fraction(1, 4))      # R = 1 + 1/4, sum_J c_J = 1
    assert exact.verified and second.verified                                  # the sides are judged as before


def test_a_common_row_takes_one_column_of_each_block(tmp_path):
    ok = _both(tmp_path, *_cell(HALF, "1/4", 2, [0, 1], [0.5, 0.5], np.zeros((2, 2))))
    assert ok[0].convex_cap.verified and ok[1].cap.verified
    assert _margins(*ok) == (Fraction(1, 4), Fraction(1, 4))                  # ||mu||_1 = 1, every p_iJ = 0
    wide = _both(tmp_path, *_cell(HALF, "1/4", 1, [0, 1], [0.5, 0.5], np.zeros((2, 2))))
    assert not wide[0].convex_cap.verified and not wide[1].cap.verified
    assert "nonzero mu" in wide[0].convex_cap.reason


def test_near_uniform_rows_have_cap_one(tmp_path):
    A = _softmax(np.random.default_rng(0).normal(size=(12, 12)) * 0.05)
    found = convex_cap(A, Fraction(1, 4))
    assert found is not None and found.rank == 1
    claim, tensors = cap_claim(A, "1/4", None, "c", 0, 12)
    assert claim is not None and claim.rank == 1
    exact, second = _claimed(tmp_path, A, "1/4", claim, tensors)
    assert exact.convex_cap.verified and second.cap.verified
    assert _margins(exact, second)[0] == _margins(exact, second)[1] > 0


def test_the_identity_has_the_trace_bound_as_its_cap(tmp_path):
    """On I_8 at eps 1/10 the trace certificate proves r_eps >= 8 (9/10) / (11/10) > 6, so no cap below 7
    exists; cyclic windows of 7 columns reach 7, where a partition needs one block of all 8 columns."""
    n, A = 8, np.eye(8)
    found = convex_cap(A, Fraction(1, 10))
    assert found is not None and (found.rank, found.kind) == (7, "cyclic_windows")
    claim, tensors = cap_claim(A, "1/10", None, "c", 0, n)
    exact, second = _claimed(tmp_path, A, "1/10", claim, tensors)
    assert exact.convex_cap.verified and second.cap.verified and _margins(exact, second)[0] == found.margin
    assert convex_cap(A, Fraction(0)).rank == n                      # one block always works, even at eps = 0
    # blocks of 4: each block's largest row mass is 1, at most 1/10 shaved: sum_J c_J >= 1.8 > R = 1.1
    labels = (np.arange(n) // 4).astype(np.float64)[None, :]
    e = np.zeros((n, 2))
    e[np.arange(n), np.arange(n) // 4] = 1 / 32                        # each row shaves its own block
    verdict = _check(A, labels, np.zeros((1, n)), e, fmpq(1, 10), fmpq(0), 4)
    assert not verdict.verified and "sum_J c_J" in verdict.reason


def test_a_window_witness_with_a_wrong_width_or_order_is_refused(tmp_path):
    from exact.cellspec import Claim

    A = np.eye(8)
    claim, tensors = cap_claim(A, "1/10", None, "c", 0, 8)
    narrow = Claim.of(7, claim.kind, **{**claim.fields, "width": 6})
    exact, second = _claimed(tmp_path, A, "1/10", narrow, tensors)
    assert not exact.convex_cap.verified and not second.cap.verified
    low = Claim.of(6, claim.kind, **claim.fields)                     # width 7 > rank 6
    exact, second = _claimed(tmp_path, A, "1/10", low, tensors)
    assert not exact.convex_cap.verified and "columns" in exact.convex_cap.reason and not second.cap.verified
    for bad in (np.array([[0.0, 1, 2, 3, 4, 5, 6, 6]]), np.array([[0.0, 1, 2, 3, 4, 5, 6, 7.5]])):
        path = tmp_path / "bad.safetensors"
        from exact.cellspec import CellSpec, TargetSpec
        cell = CellSpec("c", "1/10", TargetSpec("A"), Claim.of(0, "trivial"), Claim.of(8, "trivial"), None, claim)
        write_bracket_file(path, [cell], {"A": A, **tensors, claim.fields["order"]: bad})
        with pytest.raises(MalformedInput):
            verify_file(path)
        with pytest.raises(Malformed):
            crosscheck.verify_file(path)
    for width in (0, 9):
        cell = CellSpec("c", "1/10", TargetSpec("A"), Claim.of(0, "trivial"), Claim.of(8, "trivial"), None,
                        Claim.of(7, claim.kind, **{**claim.fields, "width": width}))
        write_bracket_file(path, [cell], {"A": A, **tensors})
        with pytest.raises(MalformedInput):
            verify_file(path)
        with pytest.raises(Malformed):
            crosscheck.verify_file(path)


def test_cap_claim_is_none_on_closed_cells():
    assert cap_claim(np.eye(3), "1/4", None, "c", 3, 3) == (None, {})


# one violation per condition: (rank, labels, mu, e, eps, a word of the exact reason)
VIOLATIONS = {
    "rank 0": (0, [0, 1], [0, 0], [[0, 0], [0, 0]], "1/4", "rank >= 1"),
    "block too wide": (1, [0, 0], [0, 0], [[0], [0]], "1/4", "columns"),
    "negative amount": (1, [0, 1], [0, 0], [[-1 / 64, 0], [0, 0]], "1/4", "negative"),
    "amount above p": (1, [0, 1], [0, 0], [[0.75, 0], [0, 0]], "3/4", "p_iJ"),
    "row above eps": (1, [0, 1], [0, 0], [[0.125, 0.125 + 1 / 64], [0, 0]], "1/4", "eps - slack"),
    "norm above R": (1, [0, 1], [0, 0], [[0, 0], [0, 0]], "1/4", "sum_J c_J"),
}


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_each_condition_violated_once_is_refused_by_both(name, tmp_path):
    rank, labels, mu, e, eps, word = VIOLATIONS[name]
    A = np.eye(2) if name == "norm above R" else HALF
    exact, second = _both(tmp_path, *_cell(A, eps, rank, labels, mu, np.array(e, dtype=np.float64)))
    assert not exact.convex_cap.verified and word in exact.convex_cap.reason
    assert not second.cap.verified
    assert exact.verified and second.verified                   # a failed cap changes neither side


def test_huge_and_tiny_numbers_are_judged_not_crashed(tmp_path):
    e = np.array([[1e-300, 0.0], [0.0, 5e-324]])
    exact, second = _both(tmp_path, *_cell(HALF, "1/4", 2, [0, 1], [1e300, 0.0], e))
    assert not exact.convex_cap.verified and not second.cap.verified
    exact, second = _both(tmp_path, *_cell(HALF, "1/4", 1, [0, 1], [0, 0], e))
    assert exact.convex_cap.verified and second.cap.verified
    assert _margins(exact, second)[0] == _margins(exact, second)[1]


def _malformed(cell, tensors):
    """Each mutation of a valid cell (a raw change of the JSON or the tensors) that both readers refuse."""
    def mut(change):
        c, t = copy.deepcopy(cell), dict(tensors)
        change(c, t)
        return c, t
    cap = lambda c: c["convex_cap"]
    yield "labels too long", mut(lambda c, t: t.update(b=np.zeros((1, 3))))
    yield "mu a column", mut(lambda c, t: t.update(mu=np.zeros((2, 1))))
    yield "e of another height", mut(lambda c, t: t.update(e=np.zeros((3, 2))))
    yield "e without columns", mut(lambda c, t: t.update(e=np.zeros((2, 0))))
    yield "fractional label", mut(lambda c, t: t.update(b=np.array([[0.0, 0.5]])))
    yield "label out of range", mut(lambda c, t: t.update(b=np.array([[0.0, 2.0]])))
    yield "negative label", mut(lambda c, t: t.update(b=np.array([[-1.0, 0.0]])))
    yield "rank a string", mut(lambda c, t: cap(c).update(rank="1"))
    yield "negative rank", mut(lambda c, t: cap(c).update(rank=-1))
    yield "unknown kind", mut(lambda c, t: cap(c)["witness"].update(kind="gamma2"))
    yield "missing field", mut(lambda c, t: cap(c)["witness"].pop("mu"))
    yield "extra key", mut(lambda c, t: cap(c).update(margin="1/4"))
    yield "missing tensor", mut(lambda c, t: cap(c)["witness"].update(e="nope"))
    yield "not an object", mut(lambda c, t: c.update(convex_cap=[1]))


@pytest.mark.parametrize("name", [n for n, _ in _malformed(*_cell(HALF, "1/4", 1, [0, 1], [0, 0], np.zeros((2, 2))))])
def test_malformed_cap_fields_are_refused_by_both_readers(name, tmp_path):
    cell, tensors = dict(_malformed(*_cell(HALF, "1/4", 1, [0, 1], [0, 0], np.zeros((2, 2)))))[name]
    path = tmp_path / "bad.safetensors"
    write_bracket_file(path, [cell], tensors)
    with pytest.raises(MalformedInput):
        verify_file(path)
    with pytest.raises(Malformed):
        crosscheck.verify_file(path)


def test_the_command_line_prints_the_cap_and_its_json(tmp_path):
    path = tmp_path / "cap.safetensors"
    good = _cell(HALF, "1/4", 1, [0, 1], [0, 0], np.zeros((2, 2)))
    write_bracket_file(path, [good[0]], good[1])
    run = subprocess.run([sys.executable, "-m", "exact", "verify", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "convex cap 1 (verified" in run.stdout and "no convex certificate can prove r_eps > 1" in run.stdout
    run = subprocess.run([sys.executable, "-m", "exact", "verify", str(path), "--json"], capture_output=True, text=True)
    (cell,) = json.loads(run.stdout)["cells"]
    assert cell["convex_cap"] == 1 and cell["convex_cap_verified"] is True and cell["convex_cap_margin"] == "1/4"


def test_a_failed_cap_is_printed_as_not_verified_and_keeps_exit_zero(tmp_path):
    path = tmp_path / "cap.safetensors"
    cell, tensors = _cell(np.eye(2), "1/4", 1, [0, 1], [0, 0], np.zeros((2, 2)))
    write_bracket_file(path, [cell], tensors)
    run = subprocess.run([sys.executable, "-m", "exact", "verify", str(path)], capture_output=True, text=True)
    assert run.returncode == 0
    assert "convex cap 1 NOT verified" in run.stdout and "no convex certificate" not in run.stdout


def test_files_without_a_cap_report_none(tmp_path):
    cell, tensors = _cell(HALF, "1/4", 1, [0, 1], [0, 0], np.zeros((2, 2)))
    del cell["convex_cap"]
    exact, second = _both(tmp_path, cell, {"A": tensors["A"]})
    assert exact.convex_cap is None and second.cap is None and exact.verified and second.verified
    assert exact.to_json()["convex_cap"] is None and second.to_json()["convex_cap"] is None


@pytest.mark.parametrize("seed", range(4))
def test_searched_witnesses_agree_between_the_checkers(seed, tmp_path):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 14))
    A = _softmax(rng.normal(size=(n, n)) * rng.uniform(0.2, 3.0))
    eps = Fraction(int(rng.integers(1, 6)), 10)
    found = convex_cap(A, eps, max_lps=4)
    assert found is not None                       # one block of n columns always works
    from exact.cellspec import Claim
    from numeric.search.cap import _claim

    claim, tensors = _claim(found, "c")
    exact, second = _claimed(tmp_path, A, str(eps), claim, tensors)
    assert exact.convex_cap.verified and second.cap.verified
    assert _margins(exact, second)[0] == _margins(exact, second)[1] == found.margin
    if found.rank > 1:                             # one rank less with the same sets: refused by both
        lower = Claim.of(found.rank - 1, claim.kind, **claim.fields)
        exact, second = _claimed(tmp_path, A, str(eps), lower, tensors)
        assert not exact.convex_cap.verified and not second.cap.verified


def test_the_report_section_counts_how_l_stands_to_the_cap():
    from types import SimpleNamespace

    from numeric.panel.report_cap import cap_section

    def row(cid, L, U, eps="1/4", verified=True):
        return SimpleNamespace(file="f", cell_id=cid, L=L, U=U, eps=eps, verified=verified)
    rows = [row("a", 5, 9), row("b", 2, 9), row("c", 3, 9), row("d", 4, 9), row("e", 4, 4), row("f", 1, 3, "1/2"),
            row("g", 1, 8, verified=False)]
    cap = lambda r0, ok=True: {"convex_cap": r0, "convex_cap_verified": ok}
    caps = {("f", "a"): cap(3), ("f", "b"): cap(3), ("f", "c"): cap(3), ("f", "d"): cap(1, False), ("f", "f"): {}}
    lines = cap_section(rows, caps)
    assert lines[0].startswith("## Why brackets stay open")
    quarter = next(line for line in lines if line.startswith("| 1/4 "))
    # open: a b c d; verified caps a b c; one not verified; L > cap (a), = cap (c), < cap (b); L - cap 2, -1, 0
    assert quarter == "| 1/4 | 4 | 3 | 1 | 0 | 1 | 1 | 1 | 0 | 0 | 6 |"
    half = next(line for line in lines if line.startswith("| 1/2 "))
    assert half == "| 1/2 | 1 | 0 | 0 | 1 | 0 | 0 | 0 | 0 | - | - |"
    high = cap_section([row("h", 2, 5)], {("f", "h"): cap(7)})
    (line,) = [line for line in high if line.startswith("| 1/4 ")]
    assert line == "| 1/4 | 1 | 1 | 0 | 0 | 0 | 0 | 0 | 1 | -5 | -2 |"          # a cap above U counts apart
    assert cap_section([row("e", 4, 4)], caps) == []


def test_caps_are_carried_to_larger_tolerances(tmp_path):
    from exact.cellspec import CellSpec, Claim, TargetSpec
    from numeric.search.cap import open_cell_caps

    A = _softmax(np.random.default_rng(5).normal(size=(10, 10)) * 2)
    (cb, tb), (ca, ta), (cc, tc) = open_cell_caps(A, [("1/2", "b", 0, 10), ("1/10", "a", 0, 10), ("1/4", "c", 5, 5)],
                                                  None, max_lps=2)
    assert cc is None and tc == {}                                   # a closed cell has no cap
    assert ca is not None and cb is not None and cb.rank <= ca.rank    # a witness at 1/10 holds at 1/2
    cells = [CellSpec(cid, eps, TargetSpec("A"), Claim.of(0, "trivial"), Claim.of(10, "trivial"), None, cap)
             for cid, eps, cap in (("a", "1/10", ca), ("b", "1/2", cb))]
    path = tmp_path / "carried.safetensors"
    write_bracket_file(path, cells, {"A": A, **ta, **tb})
    assert all(r.convex_cap.verified for r in verify_file(path))
    assert all(r.cap.verified for r in crosscheck.verify_file(path))


def test_agreement_compares_the_caps(tmp_path):
    from crosscheck import agreement

    path = tmp_path / "cap.safetensors"
    write_bracket_file(path, [_cell(HALF, "1/4", 1, [0, 1], [0, 0], np.zeros((2, 2)))[0]],
                       _cell(HALF, "1/4", 1, [0, 1], [0, 0], np.zeros((2, 2)))[1])
    exact = {"cells": {r.id: r.to_json() for r in verify_file(path)}}
    assert agreement(path, exact).disagreements == ()
    changed = copy.deepcopy(exact)
    changed["cells"]["c"]["convex_cap_verified"] = False
    (line,) = agreement(path, changed).disagreements
    assert "convex cap" in line
    dropped = copy.deepcopy(exact)
    dropped["cells"]["c"]["convex_cap"] = None
    assert len(agreement(path, dropped).disagreements) == 1


def test_the_block_sums_are_charged_to_the_work_limit():
    from crosscheck._errors import LimitReached
    from crosscheck._limits import Meter
    from exact.errors import LimitExceeded
    from exact.limits import work_limit

    A = np.full((16, 16), 1 / 16)
    labels, mu, e = np.arange(16.0)[None, :], np.zeros((1, 16)), np.zeros((16, 16))
    with pytest.raises(LimitExceeded), work_limit(100):
        _check(A, labels, mu, e, fmpq(1, 4), fmpq(0), 1)
    with pytest.raises(LimitReached):
        _judge(A, labels, mu, e, Fraction(1, 4), Fraction(0), 1, Meter(100))


@pytest.mark.parametrize("seed", range(12))
def test_random_witnesses_near_the_threshold_agree(seed, tmp_path):
    """Random dyadic targets, blocks, rows mu and amounts, with eps put near where condition 4 flips."""
    from crosscheck._limits import Meter

    rng = np.random.default_rng(100 + seed)
    m, n = int(rng.integers(1, 5)), int(rng.integers(1, 6))
    k = int(rng.integers(1, n + 1))
    A = rng.integers(-8, 9, size=(m, n)) / 16
    labels = rng.integers(0, k, size=(1, n)).astype(np.float64)
    mu = (rng.integers(-4, 5, size=(1, n)) / 16) * (rng.random() < 0.5)
    e = rng.integers(0, 3, size=(m, k)) / 64
    rank = int(rng.integers(0, n + 2))
    for eps in (fmpq(int(rng.integers(0, 40)), 32), fmpq(int(rng.integers(0, 40)) * 2 + 1, 64)):
        mine = _check(A, labels, mu, e, eps, fmpq(1, 64), rank)
        theirs = _judge(A, labels, mu, e, Fraction(int(eps.p), int(eps.q)), Fraction(1, 64), rank, Meter())
        assert mine.verified == theirs.verified
        if mine.margin is not None and theirs.margin is not None:
            assert Fraction(int(mine.margin.p), int(mine.margin.q)) == theirs.margin

"""The odd-map lower certificate (``exact/oddmap.py``, MATH.md section 2): known answers, mutants, bad files.

Known answers: the 5-cycle's edge matrix at eps = 99/100 (``r_eps = 3``, both
Bernstein widths 2, docs/oddmap.md) and the 4 x 4 example of MATH.md at
eps = 9/20, from ``tests/data/oddmap.safetensors`` (``tests/data/make_oddmap.py``,
the float tier's search). Every mutated certificate is refused; malformed
witnesses refuse the file (exit 2, one line); an old checker refuses the new kind.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np
import pytest
from flint import fmpq

from exact.bracketfile import read_bracket_file
from exact.certificates import OddMapWitness, check_lower
from exact.cli import main
from exact.errors import LimitExceeded
from exact.matrix import ExactMatrix
from exact.oddmap import FACET_UNITS, MAX_ODDMAP_DIM, check_odd_map, dimension, label_sets, labels_of
from exact.verify import judge_file
from fileio.bracketwriter import write_bracket_file
from tests.bracket_files import bracket_bytes, doc

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "oddmap.safetensors"
#: The last commit of exact/ before the odd-map kind.
OLD_COMMIT = "12124686424b7eef6568281c419af0e61840e92d"
BF = read_bracket_file(DATA)
CELLS = {c.id: c for c in BF.cells}


def q(x) -> fmpq:
    x = Fr(x)
    return fmpq(x.numerator, x.denominator)


def case(name: str):
    """(A, witness, eps, rank, cell) of a data cell, exact."""
    c = CELLS[name]
    f = c.lower.fields
    A = ExactMatrix.from_float64(BF.tensors[c.target.matrix])
    w = OddMapWitness(labels_of(BF.tensors[f["labels"]]), ExactMatrix.from_float64(BF.tensors[f["points"]]))
    return A, w, c.eps, c.lower.rank, c


def with_label(w: OddMapWitness, k: int, label, keep_odd: bool = True) -> OddMapWitness:
    labels = list(w.labels)
    labels[k] = label
    if keep_odd:
        labels[len(labels) - 1 - k] = (label[0], -label[1])
    return OddMapWitness(tuple(labels), w.points)


def with_points(w: OddMapWitness, rows) -> OddMapWitness:
    return OddMapWitness(w.labels, ExactMatrix.from_rationals(rows))


# ---------------------------------------------------------------- known answers
def test_cycle5_and_the_math_example_verify_with_their_exact_margins():
    for name, eps, low in (("cycle5", Fr(99, 100), Fr(1)), ("example4x4", Fr(9, 20), Fr(1, 2))):
        A, w, e, rank, _ = case(name)
        assert e == q(eps) and rank == 3
        v = check_lower(A, w, e, 3)
        assert v.verified and v.kind == "odd_map" and v.margin == q(low - eps), (name, v)
        assert len(w.labels) == 26 and w.points.nrows == len(label_sets(w.labels, 3))


def test_the_file_closes_the_cycle5_bracket():
    reports, _ = judge_file(BF)
    got = {r.id: (r.lower.rank, r.upper.rank, r.lower.verified, r.upper.verified) for r in reports}
    assert got == {"cycle5": (3, 3, True, True), "example4x4": (3, 4, True, True)}
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", str(DATA), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["all_verified"] and [c["lower_witness"] for c in out["cells"]] == ["odd_map", "odd_map"]
    assert out["cells"][0]["lower_margin"] == "1/100"


def test_the_triangulation_counts():
    """sd(boundary of the d-cross-polytope): 3^d - 1 vertices; d = 3 has 48 facets (MATH.md)."""
    assert [dimension(v) for v in (2, 8, 26, 80, 0, 1, 3, 25, 27)] == [1, 2, 3, 4, None, None, None, None, None]
    lab = tuple((k, 1) for k in range(13)) + tuple((12 - k, -1) for k in range(13))   # all labels distinct
    assert len(label_sets(lab, 3)) == 48
    lab1 = ((0, 1), (0, -1))
    assert label_sets(lab1, 1) == [((0, -1),), ((0, 1),)]


def test_dimension_one_is_the_trivial_lower_bound():
    A = ExactMatrix.from_rationals([["1/2", "1/4"]])
    w = OddMapWitness(((0, -1), (0, 1)), ExactMatrix.from_rationals([[-1, -1], [1, 1]]))
    assert check_odd_map(A, w, q(Fr(1, 2)), 1).margin == q(Fr(1, 4))
    assert not check_odd_map(A, w, q(Fr(3, 4)), 1).verified          # margin 0: strict


# ---------------------------------------------------------------- mutants
@pytest.mark.parametrize("name", ["cycle5", "example4x4"])
def test_every_label_flip_and_row_change_is_refused(name):
    A, w, eps, rank, _ = case(name)
    V = len(w.labels)
    for k in range(V // 2):
        i, s = w.labels[k]
        flip = check_lower(A, with_label(w, k, (i, -s), keep_odd=False), eps, rank)
        assert not flip.verified and "not odd" in flip.reason
        both = check_lower(A, with_label(w, k, (i, -s)), eps, rank)          # still odd, facets changed
        assert not both.verified, (k, both)
        same = check_lower(A, with_label(w, k, w.labels[V - 1 - k], keep_odd=False), eps, rank)
        assert not same.verified and "not odd" in same.reason
    for k in range(V):
        i, s = w.labels[k]
        for j in range(A.nrows):
            if j != i:
                v = check_lower(A, with_label(w, k, (j, s)), eps, rank)
                if v.verified:        # a relabelling may stay a certificate: then it is one, by the independent check
                    from tests import independent_checker as ind
                    lab = with_label(w, k, (j, s)).labels
                    checked = ind.check_odd_map(A.to_fractions(), lab, w.points.to_fractions(), Fr(str(eps)), rank)
                    assert checked.verified


def test_a_changed_row_that_breaks_a_facet_is_refused():
    A, w, eps, rank, _ = case("cycle5")
    refused = [k for k in range(13) if not check_lower(A, with_label(w, k, ((w.labels[k][0] + 2) % 5, w.labels[k][1])),
                                                       eps, rank).verified]
    assert refused


def test_labels_out_of_range_or_with_a_bad_sign_are_refused():
    A, w, eps, rank, _ = case("cycle5")
    for bad in ((5, 1), (6, 1), (-1, 1), (-2, -1), (0, 0), (0, 2)):
        v = check_lower(A, with_label(w, 0, bad, keep_odd=False), eps, rank)
        assert not v.verified and "is not (row" in v.reason, bad
    assert "is not (row" not in check_lower(A, with_label(w, 0, (4, 1)), eps, rank).reason     # row m - 1 is a row
    assert "is not (row" not in check_lower(A, with_label(w, 0, (0, -1)), eps, rank).reason


@pytest.mark.parametrize("name", ["cycle5", "example4x4"])
def test_the_strict_inequality_at_its_boundary(name):
    """eps = min s a_i . x is refused (margin 0), a hair below it is verified; eps = 1 is refused."""
    A, w, eps, rank, _ = case(name)
    low = check_lower(A, w, eps, rank).margin + eps
    assert not check_lower(A, w, low, rank).verified
    assert check_lower(A, w, low, rank).margin == 0
    tiny = fmpq(1, 2**80)
    assert check_lower(A, w, low - tiny, rank).margin == tiny
    assert not check_lower(A, w, low + tiny, rank).verified
    assert not check_lower(A, w, fmpq(1), rank).verified


def test_a_point_moved_onto_the_boundary_is_refused():
    A, w, eps, rank, _ = case("cycle5")
    sets = label_sets(w.labels, 3)
    X = w.points.to_fractions()
    a = A.to_fractions()
    j, S = next((j, S) for j, S in enumerate(sets) if len(S) == 1)
    i, s = S[0]
    value = s * sum(x * y for x, y in zip(a[i], X[j]))
    norm2 = sum(x * x for x in a[i])
    for target, ok in ((Fr(99, 100), False), (Fr(99, 100) - Fr(1, 10**30), False), (Fr(99, 100) + Fr(1, 10**30), True)):
        moved = [r[:] for r in X]
        moved[j] = [x + (target - value) * s * y / norm2 for x, y in zip(X[j], a[i])]
        assert all(abs(x) <= 1 for x in moved[j])
        v = check_lower(A, with_points(w, moved), eps, rank)
        assert v.verified is ok, (target, v)


def test_points_outside_the_cube_are_refused():
    A, w, eps, rank, _ = case("cycle5")
    X = w.points.to_fractions()
    k = max(range(5), key=lambda c: abs(X[0][c]))
    assert abs(X[0][k]) == 1                                   # at the cube's face: allowed
    for out in (Fr(1) + Fr(1, 2**52), Fr(-1) - Fr(1, 2**52)):
        moved = [r[:] for r in X]
        moved[0][k] = out if (out > 0) == (X[0][k] > 0) else -out
        v = check_lower(A, with_points(w, moved), eps, rank)
        assert not v.verified and "outside [-1, 1]" in v.reason
    for fewer in (X[:-1], [r[:-1] for r in X]):                          # one point, one column missing
        v = check_lower(A, with_points(w, fewer), eps, rank)
        assert not v.verified and "need" in v.reason, v
    assert "need" in check_lower(A, with_points(w, [r + [0] for r in X]), eps, rank).reason


def test_the_claimed_rank_must_be_d():
    A, w, eps, rank, _ = case("cycle5")
    for claim in (2, 4, 5):
        v = check_lower(A, w, eps, claim)
        assert not v.verified and v.derived == "3" and v.claimed == str(claim)
    v = check_lower(A, OddMapWitness(w.labels[:25], w.points), eps, 3)
    assert not v.verified and "3^d - 1" in v.reason


def test_the_dimension_limit_and_the_work_are_charged():
    from exact.limits import work_limit
    V = 3 ** (MAX_ODDMAP_DIM + 1) - 1
    A = ExactMatrix.identity(MAX_ODDMAP_DIM + 1)
    with pytest.raises(LimitExceeded):
        check_odd_map(A, OddMapWitness(((0, 1),) * V, A), fmpq(0), MAX_ODDMAP_DIM + 1)
    A, w, eps, rank, _ = case("cycle5")
    with pytest.raises(LimitExceeded, match="facets"):
        with work_limit(2**3 * 6 * 3 - 1):
            check_odd_map(A, w, eps, rank)
    with work_limit(2**20) as meter:
        check_odd_map(A, w, eps, rank)
    assert meter.used >= FACET_UNITS * 3 * 48


def test_softmax_target_charges_the_slack_to_the_odd_map(tmp_path):
    """K.5: the lower side is judged at eps + slack."""
    c = CELLS["cycle5"]
    A = BF.tensors[c.target.matrix]
    H = np.where(A > 0, 0.0, -80.0)
    e = np.exp(H - H.max(axis=1, keepdims=True))
    M = e / e.sum(axis=1, keepdims=True)
    f = c.lower.fields
    tensors = {"H": H, "M": M, "labels": BF.tensors[f["labels"]], "points": BF.tensors[f["points"]]}
    cells = [{"id": f"s{k}", "eps": "99/100", "target": {"matrix": "M", "logits": "H", "slack": slack},
              "lower": {"rank": 3, "witness": {"kind": "odd_map", "labels": "labels", "points": "points"}},
              "upper": {"rank": 5, "witness": {"kind": "trivial"}}} for k, slack in enumerate(["1e-12", "2/100"])]
    path = write_bracket_file(tmp_path / "s.safetensors", cells, tensors)
    reports, _ = judge_file(read_bracket_file(path))
    Mx = ExactMatrix.from_float64(M)
    w = OddMapWitness(labels_of(tensors["labels"]), ExactMatrix.from_float64(tensors["points"]))
    for r, slack in zip(reports, (fmpq(1, 10**12), fmpq(2, 100))):
        assert r.lower.margin == check_odd_map(Mx, w, fmpq(99, 100) + slack, 3).margin
    assert reports[0].lower.verified and not reports[1].lower.verified


# ---------------------------------------------------------------- files
def _file(tmp_path, name, labels=None, points=None, rank=3, target=None):
    c = CELLS["cycle5"]
    f = c.lower.fields
    tensors = {"A": BF.tensors[c.target.matrix] if target is None else target,
               "labels": BF.tensors[f["labels"]] if labels is None else labels,
               "points": BF.tensors[f["points"]] if points is None else points}
    cell = {"id": "c", "eps": "99/100", "target": {"matrix": "A"},
            "lower": {"rank": rank, "witness": {"kind": "odd_map", "labels": "labels", "points": "points"}},
            "upper": {"rank": min(tensors["A"].shape), "witness": {"kind": "trivial"}}}
    p = tmp_path / f"{name}.safetensors"
    p.write_bytes(bracket_bytes(doc([cell]), tensors=tensors))
    return p


def _malformed(tmp_path) -> dict:
    L = BF.tensors[CELLS["cycle5"].lower.fields["labels"]]
    P = BF.tensors[CELLS["cycle5"].lower.fields["points"]]

    def lab(k, value, col=0):
        out = L.copy()
        out[k, col] = value
        return out
    d8 = np.array([[0, 1]] * (3**8 - 1), dtype=np.float64)
    return {
        "labels-three-columns": (_file(tmp_path, "a", labels=np.hstack([L, L[:, :1]])), "labels have shape"),
        "labels-one-column": (_file(tmp_path, "a1", labels=L[:, :1]), "labels have shape"),
        "labels-25-rows": (_file(tmp_path, "b", labels=L[:25]), "3^d - 1"),
        "labels-empty": (_file(tmp_path, "b0", labels=L[:0]), "3^d - 1"),
        "label-non-integer": (_file(tmp_path, "c", labels=lab(3, 2.5)), "integer row"),
        "label-sign-zero": (_file(tmp_path, "d", labels=lab(3, 0.0, 1)), "+1 or -1"),
        "label-sign-two": (_file(tmp_path, "d2", labels=lab(3, 2.0, 1)), "+1 or -1"),
        "label-row-5": (_file(tmp_path, "e", labels=lab(4, 5.0)), "names row 5"),
        "label-row-minus-1": (_file(tmp_path, "f", labels=lab(4, -1.0)), "names row -1"),
        "label-row-huge": (_file(tmp_path, "g", labels=lab(4, 1e300)), "integer row"),
        "label-row-2^53": (_file(tmp_path, "g2", labels=lab(4, 2.0**53)), "integer row"),
        "label-row-2^53-1": (_file(tmp_path, "g3", labels=lab(4, 2.0**53 - 1)), "names row 9007199254740991"),
        "points-four-columns": (_file(tmp_path, "h", points=P[:, :4]), "columns"),
        "points-six-columns": (_file(tmp_path, "h6", points=np.hstack([P, P[:, :1]])), "columns"),
        "dimension-8": (_file(tmp_path, "i", labels=d8, rank=8), "limit"),
    }


def test_malformed_odd_map_witnesses_exit_2_with_one_line(tmp_path, capsys):
    cases = _malformed(tmp_path)
    for name, (path, word) in cases.items():
        assert main(["verify", str(path)]) == 2, name
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (name, err)
        assert word.lower() in err.lower(), (name, err)
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", *(str(p) for p, _ in cases.values())],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == len(cases)


def test_the_dimension_limit_itself_is_read_and_refuted(tmp_path, capsys):
    """d = MAX_ODDMAP_DIM is read; on a 7 x 7 target non-odd labels are refuted (exit 1), not refused."""
    d = MAX_ODDMAP_DIM
    labels = np.array([[0, 1]] * (3**d - 1), dtype=np.float64)
    path = _file(tmp_path, "d7", labels=labels, points=np.zeros((1, d)), rank=d, target=np.eye(d))
    assert main(["verify", str(path)]) == 1
    assert "not odd" in capsys.readouterr().out


def test_wrong_point_count_and_mutated_files_are_refuted_exit_1(tmp_path, capsys):
    L = BF.tensors[CELLS["cycle5"].lower.fields["labels"]]
    P = BF.tensors[CELLS["cycle5"].lower.fields["points"]]
    flipped = L.copy()
    flipped[0, 1] *= -1
    bumped = P.copy()
    bumped[0, int(np.argmax(np.abs(P[0])))] *= 1 + 2**-52
    for path in (_file(tmp_path, "a", points=P[:-1]), _file(tmp_path, "b", labels=flipped),
                 _file(tmp_path, "c", points=bumped), _file(tmp_path, "d", rank=4)):
        assert main(["verify", str(path)]) == 1, path
    assert main(["verify", str(_file(tmp_path, "ok"))]) == 0
    capsys.readouterr()


def test_the_work_limit_refuses_the_file(tmp_path, capsys):
    assert main(["verify", "--max-work", "100", str(DATA)]) == 2
    assert "work limit" in capsys.readouterr().err


def test_labels_shared_by_cells_are_read_once(tmp_path, monkeypatch):
    import exact.bracketfile
    import exact.verify
    calls = []
    for module in (exact.bracketfile, exact.verify):
        real = module.labels_of
        monkeypatch.setattr(module, "labels_of", lambda a, real=real: calls.append(1) or real(a))
    c = CELLS["cycle5"]
    f = c.lower.fields
    tensors = {"A": BF.tensors[c.target.matrix], "labels": BF.tensors[f["labels"]], "points": BF.tensors[f["points"]]}
    cells = [{"id": f"c{k}", "eps": eps, "target": {"matrix": "A"},
              "lower": {"rank": 3, "witness": {"kind": "odd_map", "labels": "labels", "points": "points"}},
              "upper": {"rank": 5, "witness": {"kind": "trivial"}}} for k, eps in enumerate(["1/2", "9/10", "99/100"])]
    reports, _ = judge_file(read_bracket_file(write_bracket_file(tmp_path / "m.safetensors", cells, tensors)))
    assert all(r.lower.verified for r in reports) and len(calls) == 2            # once in the reader, once in verify
    assert [str(r.lower.margin) for r in reports] == ["1/2", "1/10", "1/100"]


def test_an_old_checker_refuses_the_new_kind(tmp_path):
    """exact/ before this kind: the file is refused (exit 2, one line naming the unknown kind), never verified."""
    archive = subprocess.run(["git", "archive", OLD_COMMIT, "exact"], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"commit {OLD_COMMIT} not in this checkout")
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    assert not (tmp_path / "exact" / "oddmap.py").exists()
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", str(DATA)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown witness kind 'odd_map'" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "verified" not in proc.stdout.replace("0 cells", "")


def test_labels_of_refuses_non_integers():
    assert labels_of(np.array([[3.0, -1.0], [-0.0, 1.0]])) == ((3, -1), (0, 1))
    for bad in ([[0.5, 1.0]], [[1.0, 0.5]], [[1.0, math.inf]], [[math.nan, 1.0]], [[1.0, -0.0]], [[2.0**53, 1.0]],
                [[1.0, 1.0, 1.0]], [[1.0]], [1.0, 1.0]):
        with pytest.raises(ValueError):
            labels_of(np.array(bad))
    with pytest.raises(ValueError):
        labels_of(np.ones((2, 2, 2)))                                # 3-D

"""Mutation tests: valid certificates, broken one change at a time, never accepted when false.

Each base cell below is a valid certificate on a matrix whose r_eps is known.
Every mutant changes one thing: one entry of one tensor (target or witness)
nudged by one ulp up or down (``np.nextafter``), one sign flipped, a whole
tensor negated, two rows or columns swapped, one row or column dropped, a
claimed rank moved by one, eps moved by one ulp or halved or doubled, the
Frobenius k moved. All mutants of a base go into one bracket file, judged by
the API (``verify_file``) and by the CLI (one subprocess for all files).

A mutant may leave its claim true (a nudge in the harmless direction), so the
tests never assume refusal: truth is decided independently, by the
Fraction-only checker on the very float64 values in the file (it must agree
with ``exact`` on every side, margins included) and, where the mutation only
moves a claim, by the known r_eps. For tight witnesses (margin exactly 0),
one of the two one-ulp directions must break them, and does.
"""
from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np
import pytest

from exact.verify import verify_file
from fileio.bracketwriter import rational_string, write_bracket_file
from tests import independent_checker as ind

ROOT = Path(__file__).resolve().parents[1]


def f64(rows) -> np.ndarray:
    return np.array([[float(x) for x in row] for row in rows], dtype=np.float64)


def r_channel(t):
    """r_eps(K(t)) = 2 for eps < t, 1 for t <= eps < 1, 0 for eps >= 1 (2 x 2 closed form)."""
    return lambda eps: 2 if eps < t else (1 if eps < 1 else 0)


def r_full(n):
    """r_eps = n for eps < 1 and 0 for eps >= 1 (identity; diag(J/2, J/2) with n = 2)."""
    return lambda eps: n if eps < 1 else 0


def r_wide(eps):
    """A = [[1/2, 1/2, 0], [0, 1/2, 1/2]]: gamma_row = 1/2 and a rank-one B of error 1/2."""
    return 2 if eps < Fr(1, 2) else (1 if eps < 1 else 0)


def r_twobit_34(eps):
    """A(3/4, 3/4): r = 3 at eps = 5/8 and r = 1 on [3/4, 1) (MATH.md section 4); unknown elsewhere."""
    if eps == Fr(5, 8):
        return 3
    if Fr(3, 4) <= eps < 1:
        return 1
    return 0 if eps >= 1 else None


def _bases():
    """(id, eps, tensors, lower, upper, r_of_eps, tight upper) of valid certificates."""
    K12, K34 = f64(ind.bsc(Fr(1, 2))), f64(ind.bsc(Fr(3, 4)))
    K12inv = np.array([[1.5, -0.5], [-0.5, 1.5]])
    I2, I3 = np.eye(2), np.eye(3)
    ones2, half2 = np.ones((2, 1)), np.full((2, 1), 0.5)
    A34 = ind.two_bit(Fr(3, 4), Fr(3, 4))
    X3 = ind.walsh_basis("1", "t", "s")
    lam = (Fr(1), Fr(3, 4), Fr(3, 4))
    P3 = [[x * l / 4 for x, l in zip(row, lam)] for row in X3]
    W = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    half = [[Fr(1, 2)] * 2] * 2
    BD = [[*half[0], 0, 0], [*half[1], 0, 0], [0, 0, *half[0]], [0, 0, *half[1]]]
    Xb = np.array([[1.0, 0], [1, 0], [0, 1], [0, 1]])
    Rb = np.array([[1.0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]])
    trivial = lambda r: {"rank": r, "witness": {"kind": "trivial"}}
    return [
        ("channel-tight", Fr(3, 4), {"A": K34, "P": ones2, "Q": half2},
         trivial(1), {"rank": 1, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}, r_channel(Fr(3, 4)), True),
        ("channel-rec", Fr(7, 16), {"A": K12, "R": K12inv, "X": I2, "L": I2},
         {"rank": 2, "witness": {"kind": "reconstruction", "R": "R", "X": "X", "L": "L"}}, trivial(2),
         r_channel(Fr(1, 2)), False),
        ("channel-row-near-tight", Fr(1, 2) - Fr(1, 2**20), {"A": K12, "G": K12inv, "Z": I2, "M": I2},
         {"rank": 2, "witness": {"kind": "row_reconstruction", "G": "G", "Z": "Z", "M": "M"}}, trivial(2),
         r_channel(Fr(1, 2)), False),
        ("identity", Fr(1, 2), {"A": I3, "R": I3, "X": I3, "L": I3},
         {"rank": 3, "witness": {"kind": "reconstruction", "R": "R", "X": "X", "L": "L"}},
         {"rank": 3, "witness": {"kind": "factors", "P": "R", "Q": "X"}}, r_full(3), False),
        ("identity-frobenius", Fr(1, 2), {"A": I3},
         {"rank": 3, "witness": {"kind": "frobenius", "k": 2}}, trivial(3), r_full(3), False),
        ("twobit-5/8", Fr(5, 8), {"A": f64(A34), "R": f64(ind.lp_optimal_R(A34, X3)), "X": f64(X3),
                                  "L": f64(ind.pseudo_inverse(X3)), "P": f64(P3), "Q": f64(X3)},
         {"rank": 3, "witness": {"kind": "reconstruction", "R": "R", "X": "X", "L": "L"}},
         {"rank": 3, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}, r_twobit_34, False),
        ("twobit-3/4-tight", Fr(3, 4), {"A": f64(A34), "P": np.ones((4, 1)), "Q": np.full((4, 1), 7 / 64)},
         trivial(1), {"rank": 1, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}, r_twobit_34, True),
        ("wide-row", Fr(1, 2) - Fr(1, 1024), {"A": W, "G": np.array([[2.0, 0], [0, 0], [0, 2]]), "Z": I2, "M": I2},
         {"rank": 2, "witness": {"kind": "row_reconstruction", "G": "G", "Z": "Z", "M": "M"}}, trivial(2),
         r_wide, False),
        ("wide-rank-one-tight", Fr(1, 2), {"A": W, "P": ones2, "Q": np.array([[0.25], [0.5], [0.25]])},
         trivial(1), {"rank": 1, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}, r_wide, True),
        ("block-diagonal", Fr(3, 4), {"A": f64(BD), "R": Rb, "X": Xb,
                                      "L": f64(ind.pseudo_inverse(ind.fractions_of(Xb))), "Q": Xb / 2},
         {"rank": 2, "witness": {"kind": "reconstruction", "R": "R", "X": "X", "L": "L"}},
         {"rank": 2, "witness": {"kind": "factors", "P": "X", "Q": "Q"}}, r_full(2), False),
    ]


BASES = _bases()


# ---------------------------------------------------------------- mutants
def _tensor_mutations(arr: np.ndarray):
    """(label, mutated array) for one tensor."""
    m, n = arr.shape
    for i in range(m):
        for j in range(n):
            for direction, to in (("up", np.inf), ("down", -np.inf)):
                b = arr.copy()
                b[i, j] = np.nextafter(b[i, j], to)
                yield f"ulp-{direction}[{i},{j}]", b
            if arr[i, j] != 0:
                b = arr.copy()
                b[i, j] = -b[i, j]
                yield f"sign[{i},{j}]", b
    yield "negated", -arr
    for i in range(m):
        for k in range(i + 1, m):
            b = arr.copy()
            b[[i, k]] = b[[k, i]]
            yield f"swap-rows[{i},{k}]", b
        if m > 1:
            yield f"drop-row[{i}]", np.delete(arr, i, axis=0)
    for j in range(n):
        for k in range(j + 1, n):
            b = arr.copy()
            b[:, [j, k]] = b[:, [k, j]]
            yield f"swap-cols[{j},{k}]", b
        if n > 1:
            yield f"drop-col[{j}]", np.delete(arr, j, axis=1)


def _claim_mutations(eps: Fr, lower: dict, upper: dict):
    """(label, eps, lower, upper) with one claim moved."""
    def moved(side, delta):
        return dict(side, rank=side["rank"] + delta)
    for delta in (-1, 1):
        if lower["rank"] + delta >= 0:
            yield f"lower-rank{delta:+d}", eps, moved(lower, delta), upper
        if upper["rank"] + delta >= 0:
            yield f"upper-rank{delta:+d}", eps, lower, moved(upper, delta)
    e = float(eps)
    assert Fr(e) == eps
    for label, new in (("eps-ulp-up", Fr(np.nextafter(e, np.inf))), ("eps-ulp-down", Fr(np.nextafter(e, -np.inf))),
                       ("eps-half", eps / 2), ("eps-double", eps * 2), ("eps-zero", Fr(0)),
                       ("eps-plus-2^-30", eps + Fr(1, 2**30)), ("eps-one", Fr(1))):
        if new >= 0:
            yield label, new, lower, upper
    if lower["witness"]["kind"] == "frobenius":
        k = lower["witness"]["k"]
        for dk, dr in ((1, 0), (-1, 0), (1, 1), (-1, -1)):
            if k + dk >= 0:
                w = dict(lower["witness"], k=k + dk)
                yield f"frobenius-k{dk:+d}-rank{dr:+d}", eps, {"rank": lower["rank"] + dr, "witness": w}, upper


def _mutants(base):
    """Cells and tensors of every mutant of one base, plus (label, mutated names, eps changed?) per cell."""
    bid, eps, tensors, lower, upper, _, _ = base
    tensors = dict(tensors)
    cells, meta = [], []

    def add(label, eps_, target, low, up, mutated):
        cells.append({"id": f"{bid}:{label}", "eps": rational_string(eps_), "target": {"matrix": target},
                      "lower": low, "upper": up})
        meta.append({"label": label, "mutated": mutated, "eps": eps_})

    add("original", eps, "A", lower, upper, None)
    used = sorted(set(tensors))
    for name in used:
        for label, arr in _tensor_mutations(tensors[name]):
            new = f"{name}~{label}"
            tensors[new] = arr
            rename = lambda side: {"rank": side["rank"], "witness": {
                k: (new if v == name else v) for k, v in side["witness"].items()}}
            add(f"{name}:{label}", eps, new if name == "A" else "A", rename(lower), rename(upper), name)
    for label, eps_, low, up in _claim_mutations(eps, lower, upper):
        add(label, eps_, "A", low, up, None)
    return cells, tensors, meta


# ---------------------------------------------------------------- independent judgement
def _judge_side(side: str, claim: dict, A, T, eps: Fr):
    """(verified or None when undecidable here, margin) by the Fraction-only checker."""
    w, r = claim["witness"], claim["rank"]
    p = min(len(A), len(A[0]))
    if r > p:
        return False, None
    if w["kind"] == "trivial":
        j = ind.check_trivial_upper(A, eps, r) if side == "upper" else ind.check_trivial_lower(A, eps, r)
    elif w["kind"] == "factors":
        j = ind.check_factors(A, T(w["P"]), T(w["Q"]), eps, r)
    elif w["kind"] == "reconstruction":
        j = ind.check_reconstruction(A, T(w["R"]), T(w["X"]), T(w["L"]), eps, r)
    elif w["kind"] == "row_reconstruction":
        j = ind.check_row_reconstruction(A, T(w["G"]), T(w["Z"]), T(w["M"]), eps, r)
    else:                                    # Frobenius: exact uses a float hint; only soundness is decided
        if w["k"] + 1 != r:
            return False, None
        surely_true, surely_false = ind.frobenius_judgement(A, w["k"], eps)
        return (False if surely_false else None), "frobenius"
    return j.verified, j.margin


def _margin(v):
    return None if v.margin is None else Fr(int(v.margin.p), int(v.margin.q))


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """Every base's mutant file, judged by the API and (all files in one call) by the CLI."""
    d = tmp_path_factory.mktemp("mutants")
    out = []
    for base in BASES:
        cells, tensors, meta = _mutants(base)
        path = write_bracket_file(d / f"{base[0].replace('/', '_')}.safetensors", cells, tensors)
        out.append((base, cells, tensors, meta, path, verify_file(path)))
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", "--json", *(str(o[4]) for o in out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    cli = {(c["file"], c["id"]): c for c in json.loads(proc.stdout)["cells"]}
    return out, cli


def test_originals_are_valid(judged):
    out, _ = judged
    for base, cells, tensors, meta, path, reports in out:
        assert reports[0].id.endswith(":original")
        assert reports[0].lower.verified and reports[0].upper.verified, (base[0], reports[0])


def test_cli_agrees_with_api(judged):
    out, cli = judged
    for base, cells, tensors, meta, path, reports in out:
        for rep in reports:
            c = cli[(str(path), rep.id)]
            assert (c["lower_verified"], c["upper_verified"]) == (rep.lower.verified, rep.upper.verified), rep.id


def test_no_mutant_is_accepted_unless_independently_true(judged):
    """exact agrees with the Fraction checker on every side of every mutant (margins too); a Frobenius
    side is never verified where the rigorous enclosure shows it false."""
    out, _ = judged
    total = refused = 0
    for base, cells, tensors, meta, path, reports in out:
        frac = {name: ind.fractions_of(arr.tolist()) for name, arr in tensors.items()}
        for cell, rep in zip(cells, reports):
            A, eps = frac[cell["target"]["matrix"]], Fr(cell["eps"])
            inconsistent = cell["lower"]["rank"] > cell["upper"]["rank"]
            for side, verdict, eps_side in (("lower", rep.lower, eps), ("upper", rep.upper, eps)):
                expected, margin = _judge_side(side, cell[side], A, frac.__getitem__, eps_side)
                if inconsistent:
                    expected = False
                total += 1
                refused += not verdict.verified
                if expected is None:                      # Frobenius, undecided independently
                    continue
                assert verdict.verified == expected, (cell["id"], side, verdict)
                if margin != "frobenius" and not inconsistent and margin is not None and verdict.margin is not None:
                    assert _margin(verdict) == margin, (cell["id"], side)
    assert total > 2000 and refused > total // 4


def test_claim_mutations_respect_the_known_rank(judged):
    """Where only a claim moved (ranks, eps), a verified side must be true of the known r_eps."""
    out, _ = judged
    checked = 0
    for base, cells, tensors, meta, path, reports in out:
        r_of = base[5]
        for cell, m, rep in zip(cells, meta, reports):
            if m["mutated"] is not None:
                continue
            r = r_of(m["eps"])
            if r is None:
                continue
            checked += 1
            if rep.lower.verified:
                assert cell["lower"]["rank"] <= r, cell["id"]
            if rep.upper.verified:
                assert cell["upper"]["rank"] >= r, cell["id"]
            if cell["lower"]["rank"] > r:
                assert not rep.lower.verified
            if cell["upper"]["rank"] < r:
                assert not rep.upper.verified
    assert checked > 60


def test_tight_witnesses_break_at_one_ulp(judged):
    """A margin-0 upper witness: eps one ulp lower refutes it, one ulp higher keeps it, and one-ulp
    nudges of the factors and of the target A each refute it somewhere (the entries along which the error is
    flat keep it: the differential test above decides those independently)."""
    out, _ = judged
    for base, cells, tensors, meta, path, reports in out:
        if not base[6]:
            continue
        by_label = {m["label"]: rep for m, rep in zip(meta, reports)}
        assert _margin(by_label["original"].upper) == 0
        assert not by_label["eps-ulp-down"].upper.verified
        assert by_label["eps-ulp-up"].upper.verified
        for names in (("P", "Q"), ("A",)):     # (for K(3/4) the error is flat along every entry of P)
            nudged = [rep for label, rep in by_label.items() if label.split(":")[0] in names and ":ulp-" in label]
            assert nudged and any(not rep.upper.verified for rep in nudged), (base[0], names)


def test_softmax_slack_mutations(tmp_path):
    """A softmax target: slack below the proved bound, logits nudged by one ulp, or eps at the edge."""
    import math
    h = -math.log(3.0)
    H = np.array([[0.0, h], [h, 0.0]])
    Z = np.exp(H)
    A0 = Z / Z.sum(axis=1, keepdims=True)
    Kinv = np.array([[1.5, -0.5], [-0.5, 1.5]])
    slack = Fr(1, 2**40)
    H2 = H.copy()
    H2[0, 1] = np.nextafter(H2[0, 1], np.inf)          # the stored matrix no longer is its softmax image
    cells = []
    for cid, logits, sl in (("ok", "H", slack), ("zero-slack", "H", Fr(0)), ("logits-ulp", "H2", Fr(0)),
                            ("logits-ulp-slack", "H2", slack)):
        cells.append({"id": cid, "eps": "1/4", "target": {"matrix": "A", "logits": logits,
                                                          "slack": rational_string(sl)},
                      "lower": {"rank": 2, "witness": {"kind": "reconstruction", "R": "Kinv", "X": "I", "L": "I"}},
                      "upper": {"rank": 2, "witness": {"kind": "trivial"}}})
    path = write_bracket_file(tmp_path / "s.safetensors", cells,
                              {"A": A0, "H": H, "H2": H2, "Kinv": Kinv, "I": np.eye(2)})
    rep = {r.id: r for r in verify_file(path)}
    assert rep["ok"].lower.verified and rep["ok"].upper.verified
    for cid in ("zero-slack", "logits-ulp"):
        assert not rep[cid].lower.verified and not rep[cid].upper.verified, cid
    # one ulp in a logit moves softmax by ~1e-16, far below the 2^-40 slack: still proved
    assert rep["logits-ulp-slack"].lower.verified

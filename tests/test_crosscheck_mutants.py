"""The second checker the way the exact tier is tested: mutated certificates and an exact tier with bugs.

* Every mutation of a certificate of the worked examples (a claimed rank
  moved, a witness tensor zeroed, a tolerance the witness cannot meet, a
  slack not proved, non-odd labels, another target) is refused by the second
  checker on the mutated side, and the two checkers agree on every verdict.
* An exact tier with an injected bug (a residual halved, a slack taken on
  trust, an energy bound dropped) verifies a false claim; ``agreement``
  reports the disagreement. A copy of the exact tier's verdicts with one
  field changed is reported too.
* On random small cells near their thresholds the two checkers agree.
"""
from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crosscheck
from fileio.bracketwriter import write_bracket_file

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "data" / "example.safetensors"
ODDMAP = ROOT / "tests" / "data" / "oddmap.safetensors"


def load(path):
    from safetensors import safe_open
    from safetensors.numpy import load_file

    with safe_open(str(path), "np") as f:
        cells = json.loads(f.metadata()["softrank"])["cells"]
    return cells, load_file(str(path))


def exact_verdicts(path) -> dict:
    from exact.verify import verify_file

    return {"cells": {r.id: r.to_json() for r in verify_file(path)}}


def _witness_tensors(side: dict) -> list:
    return [v for k, v in side["witness"].items() if k != "kind" and isinstance(v, str)]


def mutations(cells: list, tensors: dict):
    """(name, side that must be refused, cells, tensors) for every applicable mutation of every cell."""
    for i, cell in enumerate(cells):
        def mutant(change, cells=cells, i=i):
            cs = copy.deepcopy(cells)
            ts = dict(tensors)
            change(cs[i], ts)
            return [cs[i]], ts                        # the mutated cell alone

        cid = cell["id"]
        yield f"{cid}/lower-rank+1", "lower", *mutant(lambda c, t: c["lower"].update(rank=c["lower"]["rank"] + 1))
        if cell["upper"]["rank"] > 0:
            yield f"{cid}/upper-rank-1", "upper", *mutant(lambda c, t: c["upper"].update(rank=c["upper"]["rank"] - 1))
        if cell["lower"]["rank"] > 0:
            yield f"{cid}/eps-1000", "lower", *mutant(lambda c, t: c.update(eps="1000"))
        if cell["upper"]["witness"]["kind"] == "factors":
            w = cell["upper"]["witness"]
            if np.abs(tensors[cell["target"]["matrix"]] - tensors[w["P"]] @ tensors[w["Q"]].T).max() > 0:
                yield f"{cid}/eps-0", "upper", *mutant(lambda c, t: c.update(eps="0"))     # B != A: error > 0
            yield f"{cid}/P-zero", "upper", *mutant(
                lambda c, t: (t.__setitem__("Pz", np.zeros_like(t[c["upper"]["witness"]["P"]])),
                              c["upper"]["witness"].update(P="Pz")))
        for name in _witness_tensors(cell["lower"]):
            key = [k for k, v in cell["lower"]["witness"].items() if v == name][0]
            if key == "labels":
                def flip(c, t, name=name):
                    labels = t[name].copy()
                    labels[0, 1] = -labels[0, 1]          # vertex 0 and its antipode no longer opposite
                    t["flipped"] = labels
                    c["lower"]["witness"]["labels"] = "flipped"
                yield f"{cid}/labels-not-odd", "lower", *mutant(flip)
                continue

            def zero(c, t, name=name, key=key):
                t[f"zero-{key}"] = np.zeros_like(t[name])
                c["lower"]["witness"][key] = f"zero-{key}"
            yield f"{cid}/{key}-zero", "lower", *mutant(zero)
        if "logits" in cell["target"]:
            yield f"{cid}/slack-0", "both", *mutant(lambda c, t: c["target"].update(slack="0"))
            yield f"{cid}/logits-shifted", "both", *mutant(
                lambda c, t: (t.__setitem__("H2", t[c["target"]["logits"]] * 1.01), c["target"].update(logits="H2")))


@pytest.mark.parametrize("source", [EXAMPLE, ODDMAP])
def test_every_mutated_certificate_is_refused_and_both_checkers_agree(source, tmp_path):
    cells, tensors = load(source)
    count = 0
    for k, (name, side, mcells, mtensors) in enumerate(mutations(cells, tensors)):
        used = {v for c in mcells for part in (c["target"], c["lower"]["witness"], c["upper"]["witness"])
                for v in part.values() if isinstance(v, str) and v in mtensors}
        path = write_bracket_file(tmp_path / f"m{k}.safetensors", mcells, {n: mtensors[n] for n in used})
        (r,) = crosscheck.verify_file(path)
        sides = ("lower", "upper") if side == "both" else (side,)
        assert all(not getattr(r, s).verified for s in sides), (name, r)
        for s in sides:                 # decided, not given up on (a Frobenius tail can only be "not proved")
            side_result = getattr(r, s)
            assert side_result.status is crosscheck.Status.REFUTED or side_result.kind == "frobenius", (name, r)
        a = crosscheck.agreement(path, exact_verdicts(path), results=(r,))
        assert a.ok, (name, a.disagreements)
        count += 1
    assert count >= (40 if source == EXAMPLE else 8)


def test_the_unmutated_cells_alone_are_verified(tmp_path):
    """The control of the test above: the same pipeline without a mutation verifies every cell."""
    cells, tensors = load(EXAMPLE)
    for k, cell in enumerate(cells):
        used = {v for part in (cell["target"], cell["lower"]["witness"], cell["upper"]["witness"])
                for v in part.values() if isinstance(v, str) and v in tensors}
        path = write_bracket_file(tmp_path / f"c{k}.safetensors", [cell], {n: tensors[n] for n in used})
        assert crosscheck.verify_file(path)[0].verified, cell["id"]


# ---------------------------------------------------------------- an exact tier with a bug
def _false_claims(tmp_path) -> dict:
    """Three files whose claim is false: an upper side below its error, a slack below the distance,
    a Frobenius tail that does not hold."""
    A = np.array([[0.75, 0.25], [0.25, 0.75]])
    up = {"rank": 1, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}
    low0 = {"rank": 0, "witness": {"kind": "trivial"}}
    files = {}
    files["residual"] = write_bracket_file(
        tmp_path / "residual.safetensors",
        [{"id": "c", "eps": "3/8", "target": {"matrix": "A"}, "lower": low0, "upper": up}],   # error 1/2 > 3/8
        {"A": A, "P": np.ones((2, 1)), "Q": np.full((2, 1), 0.5)})
    H = np.array([[0.0, -1.0], [0.3, 0.0]])
    E = np.exp(H - H.max(axis=1, keepdims=True))
    files["slack"] = write_bracket_file(
        tmp_path / "slack.safetensors",
        [{"id": "c", "eps": "1/4", "target": {"matrix": "A", "logits": "H", "slack": "1/1000"}, "lower": low0,
          "upper": {"rank": 2, "witness": {"kind": "trivial"}}}],
        {"A": np.full((2, 2), 0.5), "H": H})                                                   # distance ~ 0.46
    files["frobenius"] = write_bracket_file(
        tmp_path / "frobenius.safetensors",
        [{"id": "c", "eps": "1/4", "target": {"matrix": "A"},
          "lower": {"rank": 2, "witness": {"kind": "frobenius", "k": 1}},
          "upper": {"rank": 2, "witness": {"kind": "trivial"}}}],
        {"A": np.array([[1.0, 0.0], [1.0, 0.0]])})                                             # rank 1: F_1 = 0
    assert E is not None
    return files


BUGS = {
    # the residual of K.1 halved
    "residual": ("exact.factors.residual_row_l1", lambda real: (lambda C, fs: real(C, fs) / 2)),
    # every slack taken on trust (K.5)
    "slack": ("exact.verify._Exact.slack_bound", lambda real: (lambda self, logits, matrix, slack: slack)),
    # the top-k energy bound dropped to 0 (K.2)
    "frobenius": ("exact.frobenius.top_energy_upper_bound", lambda real: (lambda A, k: 0)),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_an_exact_tier_with_an_injected_bug_is_caught(bug, tmp_path, monkeypatch):
    import importlib

    path = _false_claims(tmp_path)[bug]
    honest = exact_verdicts(path)
    assert crosscheck.agreement(path, honest).ok                 # without the bug both refuse the claim
    assert not all(c["lower_verified"] and c["upper_verified"] for c in honest["cells"].values())
    target, make = BUGS[bug]
    module, _, attr = target.rpartition(".")
    owner = importlib.import_module(module) if module != "exact.verify._Exact" else \
        importlib.import_module("exact.verify")._Exact
    monkeypatch.setattr(owner, attr, make(getattr(owner, attr)))
    buggy = exact_verdicts(path)
    assert all(c["lower_verified"] and c["upper_verified"] for c in buggy["cells"].values()), buggy
    a = crosscheck.agreement(path, buggy)
    assert not a.ok and a.exact_verified == 1 and a.crosscheck_verified == 0
    assert any("verified by the exact tier" in line for line in a.disagreements), a.disagreements


CHANGES = {
    "lower flipped": lambda c: c.update(lower_verified=not c["lower_verified"]),
    "upper flipped": lambda c: c.update(upper_verified=not c["upper_verified"]),
    "lower rank": lambda c: c.update(lower=c["lower"] + 1),
    "upper rank": lambda c: c.update(upper=c["upper"] - 1),
    "eps": lambda c: c.update(eps="1/3"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_copy_of_the_exact_verdicts_is_a_disagreement(change):
    results = crosscheck.verify_file(EXAMPLE)
    honest = exact_verdicts(EXAMPLE)
    assert crosscheck.agreement(EXAMPLE, honest, results=results).ok
    for cid in honest["cells"]:
        copied = copy.deepcopy(honest)
        CHANGES[change](copied["cells"][cid])
        a = crosscheck.agreement(EXAMPLE, copied, results=results)
        assert len(a.disagreements) == 1 and ascii(cid) in a.disagreements[0], (change, a.disagreements)


def test_missing_extra_and_refused_files_are_disagreements():
    results = crosscheck.verify_file(EXAMPLE)
    honest = exact_verdicts(EXAMPLE)
    fewer = copy.deepcopy(honest)
    fewer["cells"].pop(next(iter(fewer["cells"])))
    assert "second checker only" in crosscheck.agreement(EXAMPLE, fewer, results=results).disagreements[0]
    more = copy.deepcopy(honest)
    more["cells"]["ghost"] = dict(next(iter(honest["cells"].values())), id="ghost")
    assert "exact tier only" in crosscheck.agreement(EXAMPLE, more, results=results).disagreements[0]
    refused = crosscheck.agreement(EXAMPLE, {"error": "malformed: something"}, results=results)
    assert not refused.ok and "refused by the exact tier" in refused.disagreements[0]
    as_list = crosscheck.agreement(EXAMPLE, list(honest["cells"].values()), results=results)
    assert as_list.ok and as_list.cells == 11
    with pytest.raises(ValueError):
        crosscheck.agreement(EXAMPLE, {"nonsense": 1}, results=results)


def test_agree_all_and_summary(tmp_path):
    verdicts = {str(EXAMPLE): exact_verdicts(EXAMPLE), str(ODDMAP): exact_verdicts(ODDMAP)}
    agreements = crosscheck.agree_all(verdicts, workers=1)
    s = crosscheck.summary(agreements)
    assert s == {"files": 2, "brackets": 13, "exact_verified": 13, "crosscheck_verified": 13,
                 "disagreements": [], "agree": True}


# ---------------------------------------------------------------- differential, near the thresholds
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_random_cells_near_their_thresholds_agree(tmp_path_factory, seed):
    """A random stochastic A, SVD factors, a pseudo-inverse reconstruction, a row-side selection and a
    Frobenius tail, each at a tolerance drawn around its own threshold: verdicts agree cell by cell."""
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(2, 7)), int(rng.integers(2, 7))
    A = rng.random((m, n)) ** 3 + 1e-3
    A /= A.sum(axis=1, keepdims=True)
    U, s, Vt = np.linalg.svd(A)
    p = min(m, n)
    k = int(rng.integers(1, p + 1))
    P, Q = U[:, :k] * s[:k], Vt[:k].T
    err = np.abs(A - P @ Q.T).sum(axis=1).max()
    d = int(rng.integers(1, p + 1))
    X = Vt[:d].T
    R = X @ np.diag(1 / s[:d]) @ U[:, :d].T
    rows = sorted(rng.choice(m, size=min(d, m), replace=False).tolist())
    Z = np.zeros((m, len(rows)))
    Z[rows, range(len(rows))] = 1.0
    G = np.linalg.pinv(A)[:, :]                               # n x m
    tail = float(np.sqrt((s[k - 1:] ** 2).sum() / m)) if k - 1 < len(s) else 0.0

    def near(x):
        return str(Fraction(max(x * (1 + rng.uniform(-0.02, 0.02)), 0.0)).limit_denominator(10**6))

    gamma = 1 / np.abs(R).sum(axis=1).max()
    trivial_up = {"rank": p, "witness": {"kind": "trivial"}}
    low0 = {"rank": 0, "witness": {"kind": "trivial"}}
    cells = [
        {"id": "factors", "eps": near(err), "target": {"matrix": "A"}, "lower": low0,
         "upper": {"rank": k, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}},
        {"id": "reconstruction", "eps": near(gamma), "target": {"matrix": "A"}, "upper": trivial_up,
         "lower": {"rank": d, "witness": {"kind": "reconstruction", "R": "R", "X": "X", "L": "XT"}}},
        {"id": "row", "eps": near(0.5), "target": {"matrix": "A"}, "upper": trivial_up,
         "lower": {"rank": len(rows), "witness": {"kind": "row_reconstruction", "G": "G", "Z": "Z", "M": "ZT"}}},
        {"id": "frobenius", "eps": near(tail), "target": {"matrix": "A"}, "upper": trivial_up,
         "lower": {"rank": k, "witness": {"kind": "frobenius", "k": k - 1}}},
        {"id": "trivial", "eps": near(1.0), "target": {"matrix": "A"}, "upper": trivial_up,
         "lower": {"rank": 1, "witness": {"kind": "trivial"}}},
    ]
    path = write_bracket_file(tmp_path_factory.mktemp("diff") / "c.safetensors", cells,
                              {"A": A, "P": P, "Q": Q, "R": R, "X": X, "XT": X.T.copy(), "G": G, "Z": Z,
                               "ZT": Z.T.copy()})
    a = crosscheck.agreement(path, exact_verdicts(path))
    assert a.ok, a.disagreements

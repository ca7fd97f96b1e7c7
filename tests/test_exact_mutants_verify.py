"""The per-cell logic of ``exact.verify`` at its exact boundaries (mutation-run survivors).

Each test pins one decision of ``verify_cell`` that the mutation run
(``bench/mutation.py --only verify.py``) showed no other test pinned: the
hashes printed beside a verdict, the reason given for logits of another
shape, a slack claimed exactly at its proved bound (K.5: ``bound <= slack``
is enough), the claimed and derived values of a refused slack, and the
refusal of every non-trivial upper witness when ``eps - slack < 0``.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np
from flint import fmpq

from exact.verify import verify_file
from fileio.bracketwriter import write_bracket_file


def _cell(name, eps, slack, upper, lower=None, logits="H"):
    return {"id": name, "eps": eps, "target": {"matrix": "A", "logits": logits, "slack": slack},
            "lower": lower or {"rank": 0, "witness": {"kind": "trivial"}}, "upper": upper}


TRIVIAL_UPPER = {"rank": 2, "witness": {"kind": "trivial"}}
FACTORS_UPPER = {"rank": 1, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}
#: softmax of a zero row of length 2 is (1/2, 1/2) exactly: the slack of this target is exactly 0
HALF = {"A": np.full((2, 2), 0.5), "H": np.zeros((2, 2)), "P": np.ones((2, 1)), "Q": np.full((2, 1), 0.5)}


def _reports(tmp_path, cells, tensors):
    return {r.id: r for r in verify_file(write_bracket_file(tmp_path / "b.safetensors", cells, tensors))}


def test_reports_carry_the_sha256_of_their_tensors(tmp_path):
    """The hashes beside a verdict are those of the little-endian float64 bytes of target and logits."""
    rep = _reports(tmp_path, [_cell("c", "1/4", "0", TRIVIAL_UPPER)], HALF)["c"]
    assert rep.target_sha256 == hashlib.sha256(np.full((2, 2), 0.5).astype("<f8").tobytes()).hexdigest()
    assert rep.logits_sha256 == hashlib.sha256(np.zeros((2, 2)).astype("<f8").tobytes()).hexdigest()
    assert rep.to_json()["target_sha256"] == rep.target_sha256


def test_logits_of_another_shape_are_refused_as_such(tmp_path):
    """Logits 2 x 3 against a 3 x 2 matrix, and 3 x 2 against 2 x 3: both refused, the shapes named."""
    tensors = {"A": np.full((3, 2), 0.5), "H": np.zeros((2, 3)), "B": np.full((2, 3), 1 / 3), "G": np.zeros((3, 2))}
    cells = [_cell("wide logits", "1/4", "1", {"rank": 2, "witness": {"kind": "trivial"}}),
             {**_cell("tall logits", "1/4", "1", {"rank": 2, "witness": {"kind": "trivial"}}, logits="G"),
              "target": {"matrix": "B", "logits": "G", "slack": "1"}}]
    rep = _reports(tmp_path, cells, tensors)
    for name in ("wide logits", "tall logits"):
        for side in (rep[name].lower, rep[name].upper):
            assert not side.verified and "differ in shape" in side.reason, (name, side)


def test_logits_shared_by_matrices_of_other_shapes_prove_the_one_that_fits(tmp_path):
    """Logits H (2 x 2) paired with the 2 x 2 target A, a larger (3 x 2) and a smaller (2 x 1) matrix: the
    slacks of H are proved for A only, whatever the order of the shapes; the others are refused by shape."""
    tensors = {**HALF, "big": np.full((3, 2), 0.5), "small": np.ones((2, 1))}
    cells = [{**_cell(name, "1/4", "0", {"rank": 1, "witness": {"kind": "trivial"}}),
              "target": {"matrix": name, "logits": "H", "slack": "0"}} for name in ("big", "A", "small")]
    rep = _reports(tmp_path, cells, tensors)
    assert rep["A"].lower.verified and rep["A"].slack_bound == 0
    for name in ("big", "small"):
        assert not rep[name].lower.verified and "differ in shape" in rep[name].lower.reason


def test_slack_claimed_exactly_at_its_proved_bound_is_proved(tmp_path):
    """A slack of exactly 0 on a target that is exactly softmax(logits): the proved bound is 0, and
    ``bound <= slack`` proves it (both sides verified at eps itself)."""
    rep = _reports(tmp_path, [_cell("c", "1/4", "0", TRIVIAL_UPPER)], HALF)["c"]
    assert rep.slack_bound == 0 and rep.slack == 0
    assert rep.lower.verified and rep.upper.verified


def test_refused_slack_shows_the_claimed_slack_and_the_proved_bound(tmp_path):
    """softmax((0, -log 3)) is about (3/4, 1/4); the matrix (1/2, 1/2) lies about 1/2 away in row l1.
    A claimed slack of 1/10 is refused, and the verdict names the claim; no bound is proved (the arb pass
    stops as soon as a row's distance exceeds the slack), so none is shown."""
    h = -math.log(3.0)
    tensors = {"A": np.full((2, 2), 0.5), "H": np.array([[0.0, h], [h, 0.0]])}
    rep = _reports(tmp_path, [_cell("c", "1/4", "1/10", TRIVIAL_UPPER)], tensors)["c"]
    assert rep.slack_bound is None
    for side in (rep.lower, rep.upper):
        assert not side.verified and side.reason == "target slack not proved"
        assert side.claimed == f"slack = {fmpq(1, 10)}" and side.derived is None


def test_eps_below_the_slack_refuses_every_upper_witness_but_the_trivial_one(tmp_path):
    """eps = 1/10, slack = 1/5: the upper side would be judged at eps - slack < 0. The exact rank-1
    factorisation of the target proves nothing about a matrix 1/5 away (refused); the trivial witness
    (rank p, error 0 for every matrix) still holds."""
    cells = [_cell("factors", "1/10", "1/5", FACTORS_UPPER, lower={"rank": 1, "witness": {"kind": "trivial"}}),
             _cell("trivial", "1/10", "1/5", TRIVIAL_UPPER, lower={"rank": 1, "witness": {"kind": "trivial"}})]
    rep = _reports(tmp_path, cells, HALF)
    assert rep["factors"].lower.verified and rep["trivial"].lower.verified
    assert not rep["factors"].upper.verified and rep["factors"].upper.reason == "eps - slack < 0"
    assert rep["trivial"].upper.verified
    at_zero = _reports(tmp_path, [_cell("factors", "1/5", "1/5", FACTORS_UPPER)], HALF)["factors"]
    assert at_zero.upper.verified                         # eps - slack = 0 exactly: the factorisation is exact


def test_a_verdict_in_json_carries_its_exact_margin():
    """``Verdict.to_json``: the margin as canonical ``p/q`` text, None when there is none."""
    from exact.verdict import refuted, verified
    assert verified("factors", 1, fmpq(1, 3)).to_json()["margin"] == "1/3"
    assert verified("factors", 1, fmpq(-2, 1)).to_json()["margin"] == "-2"
    assert refuted("trivial", 1, "why").to_json() == {"verified": False, "kind": "trivial", "rank": 1, "margin": None,
                                                       "reason": "why", "claimed": None, "derived": None}

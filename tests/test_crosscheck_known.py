"""The second checker on known answers, and its enclosures against exact values.

Known answers: the worked example and odd-map files (every witness kind), the
two-bit oracle's six cells, hand-made cells that hold at equality and fail
just past it. Enclosures: the exponentials of the slack (including the point
where mpmath's own ``iv.exp`` is wrong), the slack against the exact tier's
arb bound, the top-k energy against the singular values.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crosscheck
from crosscheck._dyadic import Dyadic, residual
from crosscheck._slack import SlackBound, _context, _exp_neg, _fast_entries, FAST_BITS
from crosscheck._spectral import Energies
from fileio.bracketwriter import write_bracket_file

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "data" / "example.safetensors"
ODDMAP = ROOT / "tests" / "data" / "oddmap.safetensors"


def exact_verdicts(path) -> dict:
    """The exact tier's verdicts on ``path`` in the form ``numeric.panel.audit`` keeps."""
    from exact.verify import verify_file

    return {"cells": {r.id: r.to_json() for r in verify_file(path)}}


def run(*args):
    return subprocess.run([sys.executable, "-m", "crosscheck", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.parametrize("path", [EXAMPLE, ODDMAP])
def test_every_witness_kind_of_the_worked_examples_is_verified_and_agrees(path):
    results = crosscheck.verify_file(path)
    kinds = {r.lower.kind for r in results} | {r.upper.kind for r in results}
    assert all(r.verified for r in results), [(r.id, r.lower.reason, r.upper.reason) for r in results]
    a = crosscheck.agreement(path, exact_verdicts(path), results=results)
    assert a.ok and a.exact_verified == a.crosscheck_verified == len(results)
    if path == EXAMPLE:
        assert kinds == {"trivial", "factors", "reconstruction", "row_reconstruction", "frobenius"}


def test_exact_margins_agree_where_the_mathematics_is_the_same():
    """Margins are exact rationals; every kind but the Frobenius tail has one definition."""
    theirs = exact_verdicts(EXAMPLE)["cells"]
    for r in crosscheck.verify_file(EXAMPLE):
        for side in ("lower", "upper"):
            mine = getattr(r, side)
            if mine.kind != "frobenius" and mine.margin is not None:
                assert Fraction(theirs[r.id][f"{side}_margin"]) == mine.margin, (r.id, side)


def test_the_two_bit_oracle_cells(tmp_path):
    from oracles.twobit import main

    out = tmp_path / "twobit.safetensors"
    assert main(["--export", str(out)]) == 0
    results = crosscheck.verify_file(out)
    assert len(results) == 6 and all(r.verified for r in results)
    assert [(r.lower.rank, r.upper.rank) for r in results] == [(4, 4), (3, 3), (2, 2), (1, 1), (3, 3), (1, 1)]
    assert crosscheck.agreement(out, exact_verdicts(out), results=results).ok


def _file(tmp_path, cells, tensors, name="f.safetensors"):
    return write_bracket_file(tmp_path / name, cells, tensors)


def _cell(cid, eps, lower, upper, target=None):
    return {"id": cid, "eps": eps, "target": target or {"matrix": "A"}, "lower": lower, "upper": upper}


TRIVIAL0 = {"rank": 0, "witness": {"kind": "trivial"}}


def test_equality_holds_and_just_past_it_fails(tmp_path):
    """Upper factors verify at error == eps and not below; rank 1 needs eps < ||A||_row1 strictly."""
    A = np.array([[0.75, 0.25], [0.25, 0.75]])
    P, Q = np.ones((2, 1)), np.full((2, 1), 0.5)
    up = {"rank": 1, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}
    cells = [_cell("at", "1/2", TRIVIAL0, up), _cell("below", "0.4999999", TRIVIAL0, up),
             _cell("rank1", "0.99", {"rank": 1, "witness": {"kind": "trivial"}}, up),
             _cell("rank1-at-norm", "1", {"rank": 1, "witness": {"kind": "trivial"}}, up)]
    got = {r.id: r for r in crosscheck.verify_file(_file(tmp_path, cells, {"A": A, "P": P, "Q": Q}))}
    assert got["at"].upper.verified and got["at"].upper.margin == 0
    assert not got["below"].upper.verified and got["below"].upper.status is crosscheck.Status.REFUTED
    assert got["rank1"].lower.verified and got["rank1"].lower.margin == Fraction(1, 100)
    assert not got["rank1-at-norm"].lower.verified


def test_inconsistent_and_oversized_claims_are_refuted(tmp_path):
    A = np.eye(3)
    cells = [_cell("L>U", "1/4", {"rank": 2, "witness": {"kind": "trivial"}},
                   {"rank": 1, "witness": {"kind": "trivial"}}),
             _cell("too-big", "1/4", TRIVIAL0, {"rank": 4, "witness": {"kind": "trivial"}}),
             _cell("frob-k", "1/4", {"rank": 3, "witness": {"kind": "frobenius", "k": 1}},
                   {"rank": 3, "witness": {"kind": "trivial"}})]
    got = {r.id: r for r in crosscheck.verify_file(_file(tmp_path, cells, {"A": A}))}
    assert not got["L>U"].lower.verified and not got["L>U"].upper.verified
    assert "inconsistent" in got["L>U"].upper.reason
    assert not got["too-big"].upper.verified and "exceeds" in got["too-big"].upper.reason
    assert not got["frob-k"].lower.verified and "proves rank 2" in got["frob-k"].lower.reason


def test_zero_witness_tensors_are_judged_not_failed(tmp_path):
    """A zero P (B = 0) is a valid witness of error ||A||_row1: refuted with that margin at a smaller eps."""
    A = np.array([[0.75, 0.25], [0.25, 0.75]])
    up = {"rank": 1, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}
    cells = [_cell("small", "1/2", TRIVIAL0, up), _cell("large", "1", TRIVIAL0, up)]
    path = _file(tmp_path, cells, {"A": A, "P": np.zeros((2, 1)), "Q": np.full((2, 1), 1e300)})
    got = {r.id: r for r in crosscheck.verify_file(path)}
    assert got["small"].upper.status is crosscheck.Status.REFUTED and got["small"].upper.margin == Fraction(-1, 2)
    assert got["large"].upper.verified and got["large"].upper.margin == 0


def test_rank_zero_factors(tmp_path):
    """P and Q of shape m x 0 and n x 0 prove r_eps(A) = 0 when ||A||_row1 <= eps."""
    A = np.array([[0.5, 0.25]])
    up = {"rank": 0, "witness": {"kind": "factors", "P": "P", "Q": "Q"}}
    cells = [_cell("ok", "3/4", TRIVIAL0, up), _cell("no", "1/2", TRIVIAL0, up)]
    got = {r.id: r for r in crosscheck.verify_file(_file(tmp_path, cells, {"A": A, "P": np.zeros((1, 0)),
                                                                          "Q": np.zeros((2, 0))}))}
    assert got["ok"].verified and got["ok"].upper.margin == 0 and not got["no"].upper.verified


# ---------------------------------------------------------------- exact integer matrices
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 5), st.integers(0, 2**32 - 1))
def test_packed_products_are_exact(m, k, n, seed):
    rng = np.random.default_rng(seed)
    scale = 2.0 ** rng.integers(-60, 60, size=(m, k))
    X = rng.standard_normal((m, k)) * scale
    Y = rng.standard_normal((k, n)) * 2.0 ** rng.integers(-300, 300)
    C = rng.standard_normal((m, n))
    fx = [[Fraction(v) for v in r] for r in X.tolist()]
    fy = [[Fraction(v) for v in r] for r in Y.tolist()]
    fc = [[Fraction(v) for v in r] for r in C.tolist()]
    want = [[sum((fx[i][t] * fy[t][j] for t in range(k)), Fraction(0)) - fc[i][j] for j in range(n)] for i in range(m)]
    D = residual(Dyadic.of_floats(C.ravel().tolist(), (m, n)),
                 [Dyadic.of_floats(X.ravel().tolist(), (m, k)), Dyadic.of_floats(Y.ravel().tolist(), (k, n))])
    assert [[Fraction(v, 1 << D.shift) for v in r] for r in D.rows] == want


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(0, 7), st.integers(1, 9), st.integers(0, 2**32 - 1), st.sampled_from(
    ["plain", "ties", "spread", "huge-c", "tiny-c", "dyadic-left"]))
def test_the_row_filter_finds_the_exact_norm(m, k, n, seed, kind):
    """``residual_norm`` (int64 bounds, then exact rows) equals the fully exact norm, near-ties included."""
    from crosscheck._dyadic import FloatMatrix
    from crosscheck._rows import residual_norm, residual_norm_bound

    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    C = X @ Y + rng.standard_normal((m, n)) * 1e-3
    if kind == "ties":                                   # every row the same residual sums up to the last bits
        C = np.tile(C[:1], (m, 1))
        X = np.tile(X[:1], (m, 1))
        C[:, 0] += rng.integers(-2, 3, m) * 2.0**-50
    elif kind == "spread":
        X *= 2.0 ** rng.integers(-200, 200, (m, 1))
        C = X @ Y
    elif kind == "huge-c":
        C[0] *= 2.0**300
    elif kind == "tiny-c":
        C *= 2.0**-300
    Xm, Ym, Cm = FloatMatrix(X), FloatMatrix(Y), FloatMatrix(C)
    left = residual(None, [Xm, FloatMatrix(np.eye(k))]) if kind == "dyadic-left" else Xm
    want = residual(Cm, [Xm, Ym]).norm()
    assert residual_norm(Cm, left, Ym) == want
    bound, exact = residual_norm_bound(Cm, left, Ym)
    assert bound == want if exact else bound >= want
    assert residual_norm(None, Cm, None) == Cm.norm()


def test_the_row_filter_keeps_few_rows():
    """The control of the test above: on an ordinary residual the filter leaves one row or a few."""
    from crosscheck._dyadic import FloatMatrix
    from crosscheck._rows import candidates

    rng = np.random.default_rng(7)
    X, Y = rng.random((64, 12)), rng.random((12, 64))
    C = X @ Y + rng.standard_normal((64, 64)) * 1e-2
    assert 1 <= len(candidates(FloatMatrix(C), FloatMatrix(X), FloatMatrix(Y))) <= 4


def test_a_cancelling_defect_is_proved_from_its_bound_and_refuted_exactly(tmp_path):
    """``Z^T A G - Z^T`` cancels to rounding level: every row survives the filter, the bound proves the
    verified claim, and the exact norm decides the refuted one; both agree with the exact tier."""
    rng = np.random.default_rng(11)
    A = rng.random((12, 12)) ** 4 + np.eye(12)
    A /= A.sum(axis=1, keepdims=True)
    G = np.linalg.inv(A)
    Z = np.eye(12)[:, :8]
    low = {"rank": 8, "witness": {"kind": "row_reconstruction", "G": "G", "Z": "Z", "M": "ZT"}}
    up = {"rank": 12, "witness": {"kind": "trivial"}}
    gamma = 1 / np.abs(G).sum(axis=1).max()
    cells = [_cell("in", str(Fraction(gamma * 0.99).limit_denominator(10**9)), low, up),
             _cell("out", str(Fraction(gamma * 1.01).limit_denominator(10**9)), low, up)]
    path = _file(tmp_path, cells, {"A": A, "G": G, "Z": Z, "ZT": Z.T.copy()})
    from crosscheck._dyadic import FloatMatrix, residual as exact_residual
    from crosscheck._rows import candidates
    Zt = FloatMatrix(Z.T)
    T = exact_residual(None, [Zt, FloatMatrix(A)])
    assert len(candidates(Zt, T, FloatMatrix(G))) > 4                  # the bound path is taken
    got = {r.id: r for r in crosscheck.verify_file(path)}
    assert got["in"].lower.verified and not got["out"].lower.verified
    assert got["out"].lower.status is crosscheck.Status.REFUTED
    assert crosscheck.agreement(path, exact_verdicts(path)).ok


# ---------------------------------------------------------------- exponentials and the slack
def test_mpmath_iv_exp_is_not_an_enclosure_but_ours_is():
    """mpmath documents only + - * / sqrt as correctly rounded; ``iv.exp(-2^-170)`` at 272 bits returns the
    point ``1 - 2^-170``, below ``exp(-2^-170) > 1 - 2^-170``. ``_exp_neg`` uses + - * / only."""
    from mpmath.ctx_iv import MPIntervalContext

    y = Fraction(1, 2**170)
    s3 = 1 - y + y**2 / 2 - y**3 / 6            # S_3 <= exp(-y) <= S_4 (alternating, decreasing terms)
    s4 = s3 + y**4 / 24
    iv = MPIntervalContext()
    iv.prec = 272
    point = iv.exp(-iv.ldexp(iv.mpf(1), -170))
    assert point.a == point.b == iv.mpf(1) - iv.ldexp(iv.mpf(1), -170)          # the wrong "enclosure"
    ctx = _context(224)
    mine = _exp_neg(ctx, ctx.ldexp(ctx.mpf(1), -170))
    lo, hi = (Fraction(int(ctx.ldexp(e, 400)), 2**400) for e in (mine.a, mine.b))   # exact: 2^400 e is an integer
    assert lo <= s3 and s4 <= hi


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.floats(0, 80), st.floats(0, 2**-10), st.integers(0, 70).map(float)))
def test_fast_exponentials_enclose(t):
    import mpmath

    n, d = t.as_integer_ratio()
    s = d.bit_length() - 1
    (lo,), (hi,) = _fast_entries([n], s)
    with mpmath.workprec(400):
        e = mpmath.exp(-mpmath.mpf(n) / 2**s) * 2**FAST_BITS
        assert lo <= e <= hi                      # the width (> 2^-80) dwarfs mpmath's error at 400 bits
    assert hi - lo <= 2**12


def _logits(seed, n=24, scale=6.0):
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((n, n)) * scale
    E = np.exp(H - H.max(axis=1, keepdims=True))
    return H, E / E.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_slack_bound_is_as_tight_as_the_exact_tiers(seed):
    from exact.slack import softmax_slack_bound

    H, A = _logits(seed)
    arb = softmax_slack_bound(H, A)
    arb = Fraction(int(arb.p), int(arb.q))
    proof = SlackBound(H.tolist(), A.tolist(), None)
    vector = proof.bound(Fraction(1))                       # the int64 pass: units of 2^-56
    fast = max(proof._fast(i) for i in range(len(H)))       # the Python pass: units of 2^-80
    assert abs(fast - arb) < Fraction(1, 10**17)           # arb's 64-bit balls are the looser (about 2^-60)
    assert fast <= vector <= fast + len(H) * Fraction(8, 2**56)
    assert proof.proves(arb)                                # a producer claiming the arb bound itself
    true = max(float(np.abs(a - np.exp(h - h.max()) / np.exp(h - h.max()).sum()).sum()) for h, a in zip(H, A))
    assert not proof.proves(Fraction(true) / 2)             # negative control: below the distance


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 2**56 + 2), st.sampled_from([0, 1, 2**28, 2**56, 2**56 + 2])),
                min_size=2, max_size=2))
def test_split_products_round_outward(pair):
    from crosscheck._slack import _mul_down, _mul_up

    a, b = (np.array([v], dtype=np.int64) for v in pair)
    exact = pair[0] * pair[1]
    assert int(_mul_down(a, b)[0]) == exact >> 56
    assert int(_mul_up(a, b)[0]) >= -((-exact) >> 56)


def test_a_tight_slack_takes_the_fallback_rows():
    H, A = _logits(3)
    proof = SlackBound(H.tolist(), A.tolist(), None)
    fast = max(proof._fast(i) for i in range(len(H)))
    import mpmath

    with mpmath.workprec(300):                              # the true distance, to about 2^-290
        def distance(h, a):
            e = [mpmath.exp(mpmath.mpf(x) - mpmath.mpf(max(h))) for x in h]
            z = mpmath.fsum(e)
            return mpmath.fsum(abs(x / z - mpmath.mpf(y)) for x, y in zip(e, a))
        true = Fraction(mpmath.nstr(max(distance(h, a) for h, a in zip(H.tolist(), A.tolist())), 60))
    tight = (true + fast) / 2                               # between the true distance and the fast bound
    assert proof.bound(Fraction(1)) >= fast > true          # the int64 pass encloses too, a little looser
    assert fast - true > Fraction(1, 10**25)
    assert proof.bound(tight) <= tight and proof.slow      # proved, by the per-entry enclosures


def test_softmax_cells_and_a_slack_not_proved(tmp_path):
    H, A = _logits(4, n=8)
    lower = {"rank": 0, "witness": {"kind": "trivial"}}
    upper = {"rank": 8, "witness": {"kind": "trivial"}}
    cells = [_cell("proved", "1/4", lower, upper, {"matrix": "A", "logits": "H", "slack": "1e-12"}),
             _cell("zero", "1/4", lower, upper, {"matrix": "A", "logits": "H", "slack": "0"})]
    path = _file(tmp_path, cells, {"A": A, "H": H})
    got = {r.id: r for r in crosscheck.verify_file(path)}
    assert got["proved"].verified and got["proved"].slack_bound < Fraction(1, 10**15)
    assert not got["zero"].lower.verified and not got["zero"].upper.verified
    assert "slack not proved" in got["zero"].upper.reason
    assert crosscheck.agreement(path, exact_verdicts(path)).ok


# ---------------------------------------------------------------- true claims: both checkers decide them alike
def _slack_cell(cid, slack, n):
    return _cell(cid, "1/4", {"rank": 0, "witness": {"kind": "trivial"}}, {"rank": n, "witness": {"kind": "trivial"}},
                 {"matrix": "A", "logits": "H", "slack": slack})


def _true_distance(H, A, bits=400):
    import mpmath

    with mpmath.workprec(bits):
        def row(h, a):
            e = [mpmath.exp(mpmath.mpf(x) - mpmath.mpf(max(h))) for x in h]
            z = mpmath.fsum(e)
            return mpmath.fsum(abs(x / z - mpmath.mpf(y)) for x, y in zip(e, a))
        return max(row(h, a) for h, a in zip(H.tolist(), A.tolist()))


def _both(path):
    from exact.verify import verify_file as exact_verify

    return exact_verify(path), crosscheck.verify_file(path)


def test_logits_of_1e50_through_the_arb_path_are_verified_by_both(tmp_path):
    """A row of logits at 1e50 with a slack too tight for the float bound: the exact tier's arb pass
    subtracts the row maximum (exp(1e50) alone is no finite enclosure); both verify."""
    H, A = np.full((1, 3), 1e50), np.full((1, 3), 1 / 3)
    true = 3 * (Fraction(1, 3) - Fraction(1 / 3))          # softmax is exactly 1/3: the distance is rational
    slack = true * (1 + Fraction(1, 2**56))                # above arb's 64-bit width, below the float bound's
    path = _file(tmp_path, [_slack_cell("big", f"{slack.numerator}/{slack.denominator}", 1)], {"A": A, "H": H})
    (e,), (c,) = _both(path)
    assert e.lower.verified and e.upper.verified and c.verified, (e.lower.reason, c.lower.reason)
    assert crosscheck.agreement(path, exact_verdicts(path)).ok
    below = _file(tmp_path, [_slack_cell("below", f"{true.numerator}/{true.denominator * 2}", 1)],
                  {"A": A, "H": H}, "below.safetensors")             # negative control: half the distance
    (e,), (c,) = _both(below)
    assert not e.lower.verified and not c.lower.verified


def test_a_slack_a_relative_1e16_above_the_distance_is_verified_by_both(tmp_path):
    """64-bit balls cannot decide a slack 1e-16 (relative) above the distance: the exact tier encloses the
    row again at 256 bits, as the second checker (192 bits) does; both verify, and below it both refuse."""
    import mpmath

    H = np.random.default_rng(5).normal(size=(4, 4)) * 2
    E = np.exp(H - H.max(axis=1, keepdims=True))
    A = E / E.sum(axis=1, keepdims=True)
    A[0, 0] += 1e-3
    d = _true_distance(H, A)
    with mpmath.workprec(400):
        above = Fraction(mpmath.nstr(d * (1 + mpmath.mpf(10) ** -16), 100, strip_zeros=False))
        below = Fraction(mpmath.nstr(d * (1 - mpmath.mpf(10) ** -16), 100, strip_zeros=False))
    cells = [_slack_cell("above", f"{above.numerator}/{above.denominator}", 4),
             _slack_cell("below", f"{below.numerator}/{below.denominator}", 4)]
    path = _file(tmp_path, cells, {"A": A, "H": H})
    exact, second = _both(path)
    assert [r.lower.verified and r.upper.verified for r in exact] == [True, False]
    assert [r.verified for r in second] == [True, False]
    assert "above it" in second[1].lower.reason                             # the margin is named
    assert crosscheck.agreement(path, exact_verdicts(path)).ok


def test_a_number_beyond_float_range_in_provenance_is_refused_by_both(tmp_path):
    """``1e400`` reads as infinity: both checkers refuse the file (format section 1), so they agree."""
    from exact.bracketfile import read_bracket_file as exact_read
    from exact.errors import MalformedInput
    from tests.bracket_files import bracket_bytes, doc

    d = doc()
    d["cells"][0]["provenance"] = {"x": "@"}
    p = tmp_path / "big.safetensors"
    p.write_bytes(bracket_bytes(softrank_text=json.dumps(d).replace('"@"', "1e400")))
    with pytest.raises(MalformedInput, match="beyond float range"):
        exact_read(p)
    with pytest.raises(crosscheck.Malformed, match="beyond float range"):
        crosscheck.verify_file(p)
    agreed = crosscheck.agreement(p, {"error": "JSON number 1e400 is beyond float range"})
    assert agreed.ok and agreed.error is not None


def test_agreement_names_a_side_not_decided_apart_from_a_refuted_one(tmp_path):
    """A side one checker verified and the other could not decide (an enclosure too wide) reads "not
    decided by ...", never "refuted"; with the reason that names the margin."""
    from crosscheck._results import SideResult

    H, A = _logits(4, n=8)
    path = _file(tmp_path, [_slack_cell("c", "1e-12", 8)], {"A": A, "H": H})
    (r,) = crosscheck.verify_file(path)
    assert r.verified
    wide = "F_k(A)^2 > m eps^2 not proved (margin -1.0e-20)"
    undecided = dataclasses.replace(r, lower=SideResult(crosscheck.Status.NOT_CHECKED, "trivial", 0, None, wide))
    (line,) = crosscheck.agreement(path, exact_verdicts(path), results=(undecided,)).disagreements
    assert "verified by the exact tier" in line and "not decided by the second checker" in line
    assert "refuted" not in line and "margin -1.0e-20" in line
    theirs = exact_verdicts(path)
    theirs["cells"]["c"].update(lower_verified=False, lower_reason="target slack not proved")
    (line,) = crosscheck.agreement(path, theirs, results=(r,)).disagreements
    assert "not decided by the exact tier" in line and "verified by the second checker" in line
    theirs["cells"]["c"].update(lower_reason="rank 1 needs eps < ||A||_row1")
    (line,) = crosscheck.agreement(path, theirs, results=(r,)).disagreements
    assert "refuted by the exact tier" in line


# ---------------------------------------------------------------- the Frobenius tail
@pytest.mark.parametrize("shape", [(6, 6), (5, 9), (9, 4)])
def test_top_energy_bound_encloses_and_is_tight(shape):
    rng = np.random.default_rng(sum(shape))
    A = rng.random(shape) ** 3
    A /= A.sum(axis=1, keepdims=True)
    e = Energies(Dyadic.of_floats(A.ravel().tolist(), shape), None)
    sigma = np.linalg.svd(A, compute_uv=False)
    for k in range(1, min(shape) + 1):
        top = e.top_upper_bound(k)
        true = float((sigma[:k] ** 2).sum())
        assert true * (1 - 1e-12) <= top <= true + 1e-9, k


def test_frobenius_known_answer_and_its_negative_control(tmp_path):
    """I_3: F_2^2 = 1 > 3 eps^2 iff eps < 1/sqrt(3) = 0.577...; past it the tail is not proved."""
    up = {"rank": 3, "witness": {"kind": "trivial"}}
    low = {"rank": 3, "witness": {"kind": "frobenius", "k": 2}}
    cells = [_cell("in", "0.57", low, up), _cell("out", "0.58", low, up)]
    got = {r.id: r for r in crosscheck.verify_file(_file(tmp_path, cells, {"A": np.eye(3)}))}
    assert got["in"].lower.verified
    assert got["out"].lower.status is crosscheck.Status.NOT_CHECKED and not got["out"].verified


# ---------------------------------------------------------------- the command
def test_cli_exit_codes_and_json(tmp_path):
    ok = run(EXAMPLE, ODDMAP, "--json")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["all_verified"] and len(doc["cells"]) == 13
    keys = {"id", "eps", "lower", "upper", "lower_status", "upper_verified", "slack_bound", "file"}
    assert keys <= doc["cells"][0].keys()
    A = np.eye(2)
    bad = _file(tmp_path, [_cell("c", "1/4", {"rank": 2, "witness": {"kind": "frobenius", "k": 1}},
                                 {"rank": 1, "witness": {"kind": "trivial"}})], {"A": A})
    refuted = run(bad)
    assert refuted.returncode == 1 and "REFUTED" not in refuted.stderr
    assert "0/1 cells verified" in refuted.stdout


def test_cli_compare_with_the_exact_tier(tmp_path):
    from exact.cli import main as exact_main

    exact_json = tmp_path / "exact.json"
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", "--json", str(EXAMPLE)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0
    exact_json.write_text(proc.stdout)
    agree = run(EXAMPLE, "--compare", exact_json)
    assert agree.returncode == 0 and "0 disagreement(s)" in agree.stdout
    doc = json.loads(proc.stdout)
    doc["cells"][3]["upper_verified"] = False                # an exact tier that refuses a true claim
    exact_json.write_text(json.dumps(doc))
    disagree = run(EXAMPLE, "--compare", exact_json, "--json")
    assert disagree.returncode == 1
    out = json.loads(disagree.stdout)
    assert out["all_verified"] and not out["agreement"]["agree"]
    assert len(out["agreement"]["disagreements"]) == 1 and "upper side" in out["agreement"]["disagreements"][0]
    assert exact_main is not None

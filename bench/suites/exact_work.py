"""What a work unit of the exact tier costs, per kind of work, and so what the work limit allows.

The exact tier meters its work in units (``exact/limits.py``) and refuses a
file past ``MAX_WORK`` units, so the worst case of any file is the limit
times the slowest cost per unit that any kind of work reaches. Each case
below is a file (or, for FLINT's products, an operation) chosen so that one
kind of work dominates; the script prints the units it was charged, the CPU
time it took (``time.process_time``: the load of other jobs does not count)
and their ratio, ns per unit, and that ratio times ``MAX_WORK``: the time of
a file that does only that kind of work up to the limit.

Cases: FLINT products of 1- and 4-word integers (the reference the unit is
named after); the float64 softmax bound; the arb fallback of the slack, on
every row in full (a slack claimed at the arb bound) and on the attack of a
slack of "0" on k logits times k matrices (one pair per cell); the same
one logits tensor and k matrices, each slack claimed at its arb bound (the
sharing of ``exp(h)`` and ``Z`` across matrices); a conversion of widely
spread exponents.

CPU time: smallest and largest of the repeats; ns per unit from the largest.
"""
from __future__ import annotations

import os
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from flint import fmpz_mat

from bench.common import fmt, table
from bench.runner import Case, Suite

from exact.bracketfile import read_bracket_file
from exact.limits import MAX_WORK, work_limit
from exact.matrix import ExactMatrix
from exact.cellspec import CellSpec, Claim, TargetSpec
from exact.slack import softmax_slack_bound
from exact.verify import judge_file
from fileio.bracketwriter import rational_string, write_bracket_file



def _softmax(H):
    E = np.exp(H - H.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _cell(i, target, n, eps="1/4"):
    return CellSpec(f"c{i}", eps, target, Claim.of(0, "trivial"), Claim.of(n, "trivial"))


def _file(tmp, name, cells, tensors):
    path = os.path.join(tmp, name + ".safetensors")
    write_bracket_file(path, cells, tensors)
    return path


def _judge(path):
    """(units, CPU seconds, cells verified / cells) of judge_file on one file."""
    bf = read_bracket_file(path)
    t0 = time.process_time()
    reports, units = judge_file(bf, max_work=2**60)
    return units, time.process_time() - t0, f"{sum(r.verified for r in reports)}/{len(reports)}"


def _flint(n: int, bits: int):
    rng = np.random.default_rng(bits)
    words = [int(x) for x in rng.integers(0, 2**62, size=(n * n))]
    entries = [w >> (62 - bits) if bits < 62 else w << (bits - 62) for w in words]
    A = ExactMatrix(fmpz_mat(n, n, entries), 1, bits)
    with work_limit(2**60) as meter:
        t0 = time.process_time()
        A @ A
        seconds = time.process_time() - t0
    return meter.used, seconds, "-"


def cases(quick: bool):
    """(name, what, thunk) of each case; ``quick`` makes them smaller."""
    s = 2 if quick else 1
    rng = np.random.default_rng(0)
    tmp = tempfile.mkdtemp()
    out = [("flint 1 word", f"{384 // s}^3 product, 40-bit entries", lambda: _flint(384 // s, 40)),
           ("flint 4 words", f"{256 // s}^3 product, 250-bit entries", lambda: _flint(256 // s, 125))]

    m, n = 1024 // s, 1024
    H = rng.normal(scale=3.0, size=(m, n))
    A = _softmax(H)
    path = _file(tmp, "float", [_cell(0, TargetSpec("A", "H", "1/1000000000000"), m)],
                 {"A": A, "H": H})
    out.append(("float slack", f"{m} x {n}, slack 1e-12 (float bound only)", lambda: _judge(path)))

    m2 = 64 // s
    H2, A2 = H[:m2], np.nextafter(A[:m2], 1.0)
    q = softmax_slack_bound(H2, A2)
    tight = _file(tmp, "arb", [_cell(0, TargetSpec("A", "H", rational_string(Fraction(int(q.p), int(q.q)))), m2)],
                  {"A": A2, "H": H2})
    out.append(("arb slack", f"{m2} x {n}, slack at the arb bound (every row by arb)", lambda: _judge(tight)))

    k, mk, nk = 16 // s, 64, 128
    Hs = [rng.normal(scale=3.0, size=(mk, nk)) for _ in range(k)]
    As = [_softmax(h) for h in Hs]
    tensors = {**{f"H{i}": h for i, h in enumerate(Hs)}, **{f"A{j}": a for j, a in enumerate(As)}}
    zero = [_cell(i * k + j, TargetSpec(f"A{j}", f"H{i}", "0"), mk) for i in range(k) for j in range(k)]
    attack = _file(tmp, "zero", zero, tensors)
    out.append(("slack 0, k x k", f"{k} logits x {k} matrices of {mk} x {nk}, {k * k} cells, slack 0",
                lambda: _judge(attack)))

    k3, hrow = 8 // s, rng.normal(scale=3.0, size=(1, 256))
    Hk = np.repeat(hrow, 32, axis=0)                  # equal rows: every row's float bound is above the arb bound
    Ak, nudged = [], _softmax(Hk)
    for _ in range(k3):
        nudged = np.nextafter(nudged, 1.0)            # matrix j: the softmax moved j + 1 ulps up
        Ak.append(nudged)
    pairs = []
    for j, a in enumerate(Ak):
        b = softmax_slack_bound(Hk, a)
        pairs.append(_cell(j, TargetSpec(f"A{j}", "H", rational_string(Fraction(int(b.p), int(b.q)))), 32))
    shared = _file(tmp, "shared", pairs, {"H": Hk, **{f"A{j}": a for j, a in enumerate(Ak)}})
    out.append(("arb, 1 x k", f"1 logits x {k3} matrices of 32 x 256, {k3} cells at their arb bounds (every row by arb)",
                lambda: _judge(shared)))

    ns = 96 // s
    As_ = np.full((ns, ns), 1.0 / ns)
    As_[0, 0] = 5e-324
    R = np.eye(ns)
    R[0, 1] = 1e300
    spread = _file(tmp, "spread", [CellSpec("s", "1/4", TargetSpec("A"), Claim.of(ns, "reconstruction", R="R", X="I", L="I"),
                                            Claim.of(ns, "trivial"))],
                   {"A": As_, "R": R, "I": np.eye(ns)})
    out.append(("exponent spread", f"{ns} x {ns} reconstruction, a subnormal in A and 1e300 in R", lambda: _judge(spread)))
    return out


def measure(quick: bool, repeat: int) -> list:
    """One row per case: its units, and its CPU time and ns per unit, smallest and largest of ``repeat`` runs."""
    rows = []
    for name, what, thunk in cases(quick):
        runs = [thunk() for _ in range(repeat)]
        units = runs[0][0]
        seconds = sorted(r[1] for r in runs)
        rows.append({"case": name, "what": what, "units": units, "cpu_s": seconds[0], "cpu_s_max": seconds[-1],
                     "ns_per_unit": 1e9 * seconds[-1] / max(units, 1), "verified": runs[0][2]})
    return rows


def cases_(size: str) -> list[Case]:
    if size == "smoke":
        return [Case("smoke", {"quick": True, "repeat": 1})]
    return [Case("all", {"quick": False, "repeat": 3})]


def run(case: Case, tmp: Path) -> dict:
    return {"max_work": MAX_WORK, "rows": measure(case.params["quick"], case.params["repeat"])}


def tables(results: list[dict]) -> dict[str, str]:
    rows = []
    for r in results:
        for c in r["record"]["rows"]:
            rows.append([c["what"], f"{c['units']:,}", f"{c['cpu_s']:.3f} to {c['cpu_s_max']:.3f}",
                         fmt(c["ns_per_unit"]), f"{c['ns_per_unit'] * r['record']['max_work'] / 1e9:,.0f}",
                         c["verified"]])
    return {"units": table(["case", "units", "CPU s", "ns per unit", "s at the work limit", "verified"], rows,
                           "lrrrrr")}


SUITE = Suite("exact_work", "what a work unit of the exact tier costs, per kind of work", cases_, run, tables,
              "python -m bench run exact_work")

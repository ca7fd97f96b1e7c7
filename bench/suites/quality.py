"""Bracket quality of the float tier's search on a fixed set of matrices, every bracket verified exactly.

Each case searches brackets (``numeric.search.search_brackets``) at one preset, writes the bracket file,
re-verifies it with ``exact.verify`` (only verified brackets count), and records per tolerance L, U, the
truncated-SVD rank, the winning lower family, the attack's outcome and, on closed cells, whether the
attack machinery reaches U (a control that the attacks have teeth); and the CPU seconds of the case.

Groups: ``grid`` (G.1 finite-grid Gaussians, n = 32 and 64, beta 2: r_eps = n), ``twobit`` (the two-bit
cells of MATH.md section 4, known ranks), ``random`` (random softmax heads 128 x 128, logits
``beta q k^T / 4`` at beta 0.5, 1, 2), ``minilm`` (all-MiniLM-L6-v2 heads at 256 tokens on text source 0:
the heads the search was tuned on) and ``heldout`` (MiniLM heads that no tuning run used, on text
source 2, which no tuning run read either).
"""
from __future__ import annotations

import functools
import os
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from bench.common import fmt, median, table
from bench.runner import Case, Suite

EPS = ("1/10", "1/4", "1/2")
#: The MiniLM heads the search's presets were tuned on (layer, head), text source 0.
TUNED = ((0, 0), (1, 3), (2, 5), (3, 7), (4, 2), (5, 9), (2, 0), (4, 11))
#: The order the runner measures the tuned heads in: the small brackets first (l1h3 and l2h0 cost most).
TUNED_ORDER = (0, 4, 2, 3, 5, 1, 7, 6)
#: Held out: in no tuning roster (neither the heads above nor the demo panel's), on a source no tuning run read.
HELDOUT = ((0, 3), (1, 6), (2, 9), (3, 2), (4, 7), (5, 1), (1, 10), (3, 11))
HELDOUT_SOURCE = 2
GROUPS = ("grid", "twobit", "random", "minilm", "heldout")


def _softmax(H):
    E = np.exp(H - H.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def grid(n: int):
    x = np.arange(float(n))
    H = -2.0 * (x[:, None] - x[None, :]) ** 2
    return _softmax(H), H


def twobit(t: Fraction, s: Fraction):
    k = lambda t: float(t) * np.eye(2) + (1 - float(t)) * np.ones((2, 2)) / 2
    return np.kron(k(t), k(s)), None


def random_head(beta: float):
    rng = np.random.default_rng({0.5: 0, 1.0: 1, 2.0: 2}[beta] + 2024)
    q, kk = rng.normal(size=(128, 16)), rng.normal(size=(128, 16))
    H = beta * q @ kk.T / 4.0
    return _softmax(H), H


@functools.lru_cache(maxsize=1)
def _model():
    from numeric.heads.models import load_model

    return load_model("minilm")


def minilm_head(layer: int, head: int, source: int, n: int = 256):
    from numeric.heads.extract import extract_heads, source_for

    lm = _model()
    cap = next(iter(extract_heads(lm, source_for(lm, source, length=n), [(layer, head)])))
    return cap.matrix, cap.logits


TWOBIT_CELLS = {"t=3/4,s=1/2": (Fraction(3, 4), Fraction(1, 2), ("1/4", "7/16", "5/8", "7/8")),
                "t=3/4,s=3/4": (Fraction(3, 4), Fraction(3, 4), ("5/8", "3/4"))}


def _safe(key: str) -> str:
    """A two-bit cell's key as a file name: ``t=3/4,s=1/2`` -> ``t3_4-s1_2``."""
    return key.replace("=", "").replace("/", "_").replace(",", "-")


def _cases(effort: str, heads: int) -> list[Case]:
    out = [Case(f"{effort}-grid-n{n}", {"group": "grid", "n": n, "eps": list(EPS), "effort": effort}) for n in (32, 64)]
    out += [Case(f"{effort}-twobit-{_safe(k)}", {"group": "twobit", "cell": k, "eps": list(v[2]), "effort": effort})
            for k, v in TWOBIT_CELLS.items()]
    out += [Case(f"{effort}-random-beta0.5", {"group": "random", "beta": 0.5, "eps": list(EPS), "effort": effort})]
    for i in range(heads):                   # held-out and tuned heads alternately: a cut run keeps both kinds
        for group, roster, source in (("heldout", HELDOUT, HELDOUT_SOURCE),
                                      ("minilm", tuple(TUNED[j] for j in TUNED_ORDER), 0)):
            la, he = roster[i]
            out.append(Case(f"{effort}-{group}-l{la}h{he}", {"group": group, "layer": la, "head": he,
                                                             "source": source, "eps": list(EPS), "effort": effort}))
    out += [Case(f"{effort}-random-beta{b}", {"group": "random", "beta": b, "eps": list(EPS), "effort": effort})
            for b in (1.0, 2.0)]
    return out


#: The cases of ``full``: what the shared 2-core machine afforded for the shipped results.
FULL = ('default-grid-n32', 'default-grid-n64', 'default-heldout-l0h3', 'default-minilm-l0h0', 'default-random-beta0.5', 'default-twobit-t3_4-s1_2', 'default-twobit-t3_4-s3_4',)


def cases(size: str) -> list[Case]:
    """``full``: the cases of :data:`FULL` (default); ``large``: the controls, the random heads and eight tuned
    and eight held-out MiniLM heads, at default and thorough."""
    if size == "smoke":
        return [Case("smoke-grid-n8", {"group": "grid", "n": 8, "eps": ["1/2"], "effort": "quick"})]
    if size == "large":
        return _cases("default", 8) + _cases("thorough", 8)
    return [c for c in _cases("default", 8) if c.name in FULL]


def _matrix(p: dict):
    g = p["group"]
    if g == "grid":
        return grid(p["n"])
    if g == "twobit":
        t, s, _ = TWOBIT_CELLS[p["cell"]]
        return twobit(t, s)
    if g == "random":
        return random_head(p["beta"])
    return minilm_head(p["layer"], p["head"], p["source"])


def run(case: Case, tmp: Path) -> dict:
    from exact.verify import verify_file
    from numeric.search import search_brackets
    from numeric.search.attack import attack_rank
    from numeric.search.export import write_bracket_file
    from numeric.search.upper import svd_baseline

    p = case.params
    A, H = _matrix(p)
    eps = [Fraction(e) for e in p["eps"]]
    t0 = time.process_time()
    out = search_brackets(A, eps, logits=H, id_prefix=case.name, device="cpu", effort=p["effort"])
    search_cpu = time.process_time() - t0
    path = write_bracket_file(os.path.join(tmp, "case.safetensors"), out.cells, out.tensors)
    reports = {r.id: r for r in verify_file(path)}
    svd = svd_baseline(A)[0]
    cells = []
    for cell, rec in zip(out.cells, out.results):
        control = None
        if rec.lower == rec.upper and rec.upper_witness.startswith("factors"):
            # closed control: the attack machinery (fresh, from the SVD) at rank U and eps - slack
            e = float(Fraction(cell.eps)) - (rec.slack or 0.0)
            control = bool(attack_rank(A, rec.upper, e * (1 - 1e-6), svd, device="cpu").success)
        rep = reports[cell.id]
        cells.append({"eps": str(Fraction(cell.eps)), "L": rep.lower.rank if rep.verified else None,
                      "U": rep.upper.rank if rep.verified else None, "svd": rec.svd_rank,
                      "lower_witness": rec.lower_witness, "capped": rec.capped, "attack_success": rec.attack_success,
                      "control_reached_U": control, "verified": bool(rep.verified)})
    return {"shape": list(A.shape), "search_cpu_s": round(search_cpu, 2), "cells": cells}


def _label(group: str) -> str:
    return {"grid": "grid (G.1, n = 32, 64)", "twobit": "two-bit (MATH.md 4)", "random": "random softmax 128 x 128",
            "minilm": "MiniLM 256 x 256, tuned heads", "heldout": "MiniLM 256 x 256, held-out heads"}[group]


def tables(results: list[dict]) -> dict[str, str]:
    out = {}
    for effort in ("quick", "default", "thorough"):
        rs = [r for r in results if r["params"]["effort"] == effort]
        if not rs:
            continue
        rows = []
        for g in GROUPS:
            gr = [r for r in rs if r["params"]["group"] == g]
            if not gr:
                continue
            epss = list(dict.fromkeys(c["eps"] for r in gr for c in r["record"]["cells"]))
            for e in (epss if g != "twobit" else [None]):
                cs = [c for r in gr for c in r["record"]["cells"] if e is None or c["eps"] == e]
                ok = [c for c in cs if c["verified"]]
                ratios = [c["U"] / c["L"] for c in ok if c["L"]]
                rel = [c["U"] / c["svd"] for c in ok if c["svd"]]
                attacks = [c for c in cs if c["attack_success"] is not None]
                controls = [c for c in cs if c["control_reached_U"] is not None]
                cpu = sum(r["record"]["search_cpu_s"] for r in gr) / len(gr)
                rows.append([_label(g), e or ", ".join(epss), len(cs), fmt(median(ratios)),
                             f"{sum(c['L'] == c['U'] for c in ok)}/{len(cs)}", fmt(median(rel)),
                             fmt(median(c["L"] for c in ok), 1), fmt(median(c["U"] for c in ok), 1),
                             f"{sum(bool(c['attack_success']) for c in attacks)}/{len(attacks)}",
                             f"{sum(bool(c['control_reached_U']) for c in controls)}/{len(controls)}",
                             f"{len(ok)}/{len(cs)}", fmt(cpu, 1)])
        out[f"summary_{effort}"] = table(
            ["group", "eps", "cells", "median U/L", "closed", "median U / SVD rank", "median L", "median U",
             "attack successes", "closed controls reaching U", "verified", "CPU s per case"], rows, "llrrrrrrrrrr")
        heads = []
        for r in rs:
            p = r["params"]
            if p["group"] in ("minilm", "heldout"):
                br = [f"[{c['L']}, {c['U']}]" if c["verified"] else "unverified" for c in r["record"]["cells"]]
                heads.append([("held out " if p["group"] == "heldout" else "") + f"l{p['layer']}h{p['head']}",
                              *br, fmt(r["record"]["search_cpu_s"], 1)])
        heads.sort(key=lambda h: (h[0].startswith("held"), h[0]))
        if heads:
            out[f"heads_{effort}"] = table(["head", "eps 1/10", "eps 1/4", "eps 1/2", "CPU s (3 tolerances)"],
                                           heads, "llllr")
    return out


SUITE = Suite("quality", "bracket quality on controls, random heads, tuned and held-out MiniLM heads", cases, run,
              tables, "python -m bench run quality")

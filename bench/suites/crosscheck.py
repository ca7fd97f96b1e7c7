"""The second checker (``crosscheck``) against ``exact verify`` on realistic bracket files, side by side.

One case per file: the two-bit oracle's six cells (``python -m oracles.twobit --export``); synthetic
attention logits of 128 x 128 and 256 x 256 (``make_logits``: a scaled ``Q K^T / sqrt(32)`` plus noise,
seeds 0 and 1) bracketed with ``python -m numeric bracket --logits ... --eps 0.1,0.25,0.5 --effort
default --device cpu --no-attack``; one Frobenius-tail cell (K.2) on a random stochastic 128 x 128 and
256 x 256 matrix (``write_frobenius``); the worked examples of ``tests/data``.

Timing: CPU time of this process (``time.process_time``), one BLAS thread, best of the repeats per file
and checker, after one warm-up run of each (imports, the second checker's exponential tables). The exact
side is ``exact.verify.verify_file`` (read, validate, prove the slack, re-derive every claim), the second
side ``crosscheck.verify_file`` (the same, with its own reader and arithmetic); both verdicts are
recorded, and whether they agree.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from bench.common import ROOT, fmt, python, run_child, table
from bench.runner import Case, Suite


def make_logits(n: int, seed: int) -> np.ndarray:
    """Attention-like logits: ``2.5 Q K^T / sqrt(32) + 0.3 noise``, Q and K standard normal (n x 32)."""
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((n, 32)), rng.standard_normal((n, 32))
    return 2.5 * Q @ K.T / np.sqrt(32) + 0.3 * rng.standard_normal((n, n))


def write_frobenius(path: Path, n: int) -> None:
    """One Frobenius-tail cell (K.2) on an n x n random stochastic matrix: k = n/4, eps 0.9 of the threshold."""
    from exact.cellspec import CellSpec, Claim, TargetSpec
    from fileio.bracketwriter import write_bracket_file

    rng = np.random.default_rng(n)
    A = rng.random((n, n)) ** 3
    A /= A.sum(axis=1, keepdims=True)
    s = np.linalg.svd(A, compute_uv=False)
    k = n // 4
    eps = 0.9 * np.sqrt((s[k:] ** 2).sum() / n)
    write_bracket_file(path, [CellSpec(f"frobenius{n}", repr(float(eps)), TargetSpec("A"),
                                       Claim.of(k + 1, "frobenius", k=k), Claim.of(n, "trivial"))], {"A": A})


def make(name: str, out: Path, n: int = 0) -> Path:
    """The file of one case under ``out``."""
    path = out / f"{name}.safetensors"
    if name == "twobit":
        res = run_child(python("-m", "oracles.twobit", "--export", str(path)))
    elif name.startswith("synthetic"):
        logits = out / f"logits{n}.npy"
        np.save(logits, make_logits(n, {128: 0, 256: 1}.get(n, 2)))
        res = run_child(python("-m", "numeric", "bracket", "--logits", str(logits), "--eps", "0.1,0.25,0.5",
                               "--effort", "default", "--device", "cpu", "--no-attack", "--id-prefix", name,
                               "--out", str(path)))
    elif name.startswith("frobenius"):
        write_frobenius(path, n)
        return path
    else:
        shutil.copy(ROOT / "tests" / "data" / f"{name}.safetensors", path)
        return path
    if res["rc"] != 0:
        raise RuntimeError(f"making {name}: exit {res['rc']}: {res['stderr_tail']}")
    return path


def _best(fn, repeat: int):
    best, result = None, None
    for _ in range(repeat):
        t = time.process_time()
        result = fn()
        dt = time.process_time() - t
        best = dt if best is None else min(best, dt)
    return best, result


def measure(paths, repeat: int) -> list:
    import crosscheck
    from exact.verify import verify_file as exact_verify

    rows = []
    for p in paths:
        exact_verify(p), crosscheck.verify_file(p)                         # warm-up
        te, theirs = _best(lambda: exact_verify(p), repeat)
        tc, mine = _best(lambda: crosscheck.verify_file(p), repeat)
        a = crosscheck.agreement(p, {"cells": {r.id: r.to_json() for r in theirs}}, results=mine)
        kinds = sorted({f"{r.lower.kind}/{r.upper.kind}" for r in mine})
        rows.append({"file": Path(p).name, "shape": "x".join(map(str, mine[0].shape)), "cells": len(mine),
                     "kinds": kinds, "exact_ms": 1e3 * te, "crosscheck_ms": 1e3 * tc, "ratio": tc / te,
                     "exact_verified": a.exact_verified, "crosscheck_verified": a.crosscheck_verified,
                     "agree": a.ok, "disagreements": list(a.disagreements)})
    return rows


#: The files, the cheap ones first (the synthetic ones are bracket searches at default effort).
FILES = (("twobit", 0), ("example", 0), ("oddmap", 0), ("frobenius128", 128), ("frobenius256", 256),
         ("synthetic128", 128), ("synthetic256", 256))


#: The files of ``full``: what the shared 2-core machine afforded for the shipped results.
FULL = ('example', 'frobenius128', 'frobenius256', 'oddmap', 'synthetic128', 'twobit',)


def cases(size: str) -> list[Case]:
    if size == "smoke":
        return [Case("smoke-example", {"file": "example", "n": 0, "repeat": 1})]
    every = [Case(name, {"file": name, "n": n, "repeat": 3}) for name, n in FILES]
    return every if size == "large" else [c for c in every if c.name in FULL]


def run(case: Case, tmp: Path) -> dict:
    path = make(case.params["file"], tmp, case.params["n"])
    (row,) = measure([str(path)], case.params["repeat"])
    return row


def tables(results: list[dict]) -> dict[str, str]:
    order = [name for name, _ in FILES]
    rs = sorted(results, key=lambda r: order.index(r["params"]["file"]) if r["params"]["file"] in order else 99)
    rows = []
    for r in rs:
        c = r["record"]
        rows.append([r["params"]["file"], c["shape"].replace("x", " x "), c["cells"], ", ".join(c["kinds"]),
                     fmt(c["exact_ms"], 1), fmt(c["crosscheck_ms"], 1), fmt(c["ratio"]),
                     f"{c['exact_verified']} / {c['crosscheck_verified']}" + ("" if c["agree"] else ", DISAGREE")])
    te, tc = sum(r["record"]["exact_ms"] for r in rs), sum(r["record"]["crosscheck_ms"] for r in rs)
    rows.append(["**total**", "", sum(r["record"]["cells"] for r in rs), "", fmt(te, 1), fmt(tc, 1),
                 f"**{tc / te:.2f}**", ""])
    return {"cost": table(["file", "shape", "cells", "witnesses (lower/upper)", "exact ms", "crosscheck ms",
                           "ratio", "verified (exact / crosscheck)"], rows, "llrlrrrl")}


SUITE = Suite("crosscheck", "the second checker's cost against exact verify", cases, run, tables,
              "python -m bench run crosscheck")

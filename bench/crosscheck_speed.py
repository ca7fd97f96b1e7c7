"""The second checker (``crosscheck``) against ``exact verify`` on realistic bracket files, side by side.

    python bench/crosscheck_speed.py --make DIR [--minilm]     # write the files (minutes)
    python bench/crosscheck_speed.py DIR/*.safetensors [--repeat 3] [--json]

``--make DIR`` writes: the two-bit oracle's six cells (``python -m oracles.twobit
--export``); synthetic attention logits of 128 x 128 and 256 x 256 (``make_logits``:
a scaled ``Q K^T / sqrt(32)`` plus noise, seeds 0 and 1) bracketed with
``python -m numeric bracket --logits ... --eps 0.1,0.25,0.5 --effort default
--device cpu --no-attack``; one Frobenius-tail cell (K.2) on a random stochastic
128 x 128 and 256 x 256 matrix (``write_frobenius``); with ``--minilm``, two heads of all-MiniLM-L6-v2
(``python -m numeric panel --model minilm --heads 3.8,1.3 --sources 1 --effort
default --no-attack``), whose files go to ``DIR/panel/brackets``.

Timing: CPU time of this process (``time.process_time``), one BLAS thread, best
of ``--repeat`` runs per file and checker, after one warm-up run of each (imports,
the second checker's exponential tables). The exact side is ``exact.verify.verify_file``
(read, validate, prove the slack, re-derive every claim), the second side
``crosscheck.verify_file`` (the same, with its own reader and arithmetic); both
verdicts are printed, and the run fails if they disagree.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_logits(n: int, seed: int) -> np.ndarray:
    """Attention-like logits: ``2.5 Q K^T / sqrt(32) + 0.3 noise``, Q and K standard normal (n x 32)."""
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((n, 32)), rng.standard_normal((n, 32))
    return 2.5 * Q @ K.T / np.sqrt(32) + 0.3 * rng.standard_normal((n, n))


def write_frobenius(path: Path, n: int) -> None:
    """One Frobenius-tail cell (K.2) on an n x n random stochastic matrix: k = n/4, eps 0.9 of the threshold."""
    from exact.cellspec import CellSpec, Claim, TargetSpec
    from numeric.bracketwriter import write_bracket_file

    rng = np.random.default_rng(n)
    A = rng.random((n, n)) ** 3
    A /= A.sum(axis=1, keepdims=True)
    s = np.linalg.svd(A, compute_uv=False)
    k = n // 4
    eps = 0.9 * np.sqrt((s[k:] ** 2).sum() / n)
    write_bracket_file(path, [CellSpec(f"frobenius{n}", repr(float(eps)), TargetSpec("A"),
                                       Claim.of(k + 1, "frobenius", k=k), Claim.of(n, "trivial"))], {"A": A})


def make(out: Path, minilm: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = lambda *args: subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, check=True)
    run("oracles.twobit", "--export", str(out / "twobit.safetensors"))
    for n, seed in ((128, 0), (256, 1)):
        logits = out / f"logits{n}.npy"
        np.save(logits, make_logits(n, seed))
        run("numeric", "bracket", "--logits", str(logits), "--eps", "0.1,0.25,0.5", "--effort", "default",
            "--device", "cpu", "--no-attack", "--id-prefix", f"synthetic{n}", "--out", str(out / f"synthetic{n}.safetensors"))
    for n in (128, 256):
        write_frobenius(out / f"frobenius{n}.safetensors", n)
    if minilm:
        run("numeric", "panel", "--model", "minilm", "--heads", "3.8,1.3", "--sources", "1", "--effort", "default",
            "--no-attack", "--no-report", "--quiet", "--workers", "1", "--out", str(out / "panel"))


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*")
    parser.add_argument("--make", metavar="DIR", help="write the benchmark files into DIR and stop")
    parser.add_argument("--minilm", action="store_true", help="with --make: also two MiniLM heads (panel)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.make:
        make(Path(args.make), args.minilm)
        return 0
    if not args.files:
        parser.error("give bracket files, or --make DIR")
    rows = measure(args.files, args.repeat)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'file':28} {'shape':>8} {'cells':>5} {'exact ms':>9} {'cross ms':>9} {'ratio':>6}  verified (exact, cross)  kinds")
        for r in rows:
            print(f"{r['file']:28} {r['shape']:>8} {r['cells']:>5} {r['exact_ms']:9.1f} {r['crosscheck_ms']:9.1f} "
                  f"{r['ratio']:6.2f}  {r['exact_verified']:>3}, {r['crosscheck_verified']:<3} {'agree' if r['agree'] else 'DISAGREE'}"
                  f"  {', '.join(r['kinds'])}")
        te, tc = sum(r["exact_ms"] for r in rows), sum(r["crosscheck_ms"] for r in rows)
        print(f"{'total':28} {'':>8} {sum(r['cells'] for r in rows):>5} {te:9.1f} {tc:9.1f} {tc / te:6.2f}")
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

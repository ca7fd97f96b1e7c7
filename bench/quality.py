"""Quality of the float tier's bracket search.

On a fixed set of matrices, search brackets with ``numeric.search``, write
one bracket file per matrix, re-verify every file with ``exact.verify``, and
report per group and tolerance: median U/L, fraction closed (L = U), median
U relative to the truncated-SVD baseline rank, seconds per cell (one CPU
core unless --device says otherwise), attack successes, and on closed
cells whether the attack machinery reaches the upper rank (a control that
the attacks have teeth).

Groups:
  grid      G.1 finite-grid Gaussians (1-D, n = 32 and 64, beta = 2): r_eps = n.
  twobit    the six two-bit oracle cells of MATH.md section 4 (known ranks).
  random    random softmax heads 128 x 128, logits beta q k^T / sqrt(16) at beta 0.5, 1, 2.
  minilm    real all-MiniLM-L6-v2 heads, 256 x 256 (numeric.heads.extract, source 0, offline).

    python bench/quality.py [--groups grid,twobit,random,minilm] [--heads 8] [--out DIR] [--json]
                            [--effort quick|default|thorough]

Budgets count work (``numeric.search.effort``), so the brackets do not
depend on the machine's load; the seconds do.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from fractions import Fraction

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")          # one core, before numpy loads
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from exact.verify import verify_file
from numeric.search.attack import attack_rank
from numeric.search.export import write_bracket_file
from numeric.heads.extract import softmax_rows
from numeric.search import search_brackets
from numeric.search.upper import svd_baseline

EPS = (0.1, 0.25, 0.5)
#: Heads of all-MiniLM-L6-v2 (6 layers x 12 heads), spread over layers; --heads takes a prefix.
MINILM_HEADS = [(0, 0), (1, 3), (2, 5), (3, 7), (4, 2), (5, 9), (2, 0), (4, 11), (1, 8), (3, 1), (5, 4), (0, 6)]


def grid_cases():
    for n in (32, 64):
        x = np.arange(float(n))
        H = -2.0 * (x[:, None] - x[None, :]) ** 2
        yield f"grid/n={n}", softmax_rows(H), H, list(EPS)


def twobit_cases():
    k = lambda t: t * np.eye(2) + (1 - t) * np.ones((2, 2)) / 2
    yield "twobit/t=3/4,s=1/2", np.kron(k(0.75), k(0.5)), None, [Fraction(1, 4), Fraction(7, 16), Fraction(5, 8),
                                                                  Fraction(7, 8)]
    yield "twobit/t=3/4,s=3/4", np.kron(k(0.75), k(0.75)), None, [Fraction(5, 8), Fraction(3, 4)]


def random_cases():
    rng = np.random.default_rng(2024)
    for beta in (0.5, 1.0, 2.0):
        q, kk = rng.normal(size=(128, 16)), rng.normal(size=(128, 16))
        H = beta * q @ kk.T / 4.0
        yield f"random/beta={beta}", softmax_rows(H), H, list(EPS)


def minilm_cases(heads):
    from numeric.heads.extract import extract_heads, source_for
    from numeric.heads.models import load_model

    lm = load_model("minilm")
    src = source_for(lm, 0, length=256)
    for cap, (layer, head) in zip(extract_heads(lm, src, MINILM_HEADS[:heads]), MINILM_HEADS[:heads]):
        yield f"minilm/l{layer}h{head}", cap.matrix, cap.logits, list(EPS)


def run_case(name, A, H, eps, out_dir, device, effort="default"):
    t0 = time.perf_counter()
    out = search_brackets(A, eps, logits=H, id_prefix=name, device=device, effort=effort)
    seconds = time.perf_counter() - t0
    path = write_bracket_file(os.path.join(out_dir, name.replace("/", "_") + ".safetensors"), out.cells, out.tensors)
    reports = {r.id: r for r in verify_file(path)}
    svd = svd_baseline(A)[0]
    rows = []
    for cell, rec in zip(out.cells, out.results):
        control = None
        if rec.lower == rec.upper and rec.upper_witness.startswith("factors"):
            # closed control: the attack machinery (fresh, from the SVD) at rank U and eps - slack
            e = float(Fraction(cell.eps)) - (rec.slack or 0.0)
            control = bool(attack_rank(A, rec.upper, e * (1 - 1e-6), svd, device=device).success)
        rows.append({"case": name, "group": name.split("/")[0], "eps": cell.eps, "L": rec.lower,
                     "U": rec.upper, "svd": rec.svd_rank, "lower_witness": rec.lower_witness,
                     "upper_witness": rec.upper_witness, "seconds": rec.seconds, "capped": rec.capped,
                     "attack_success": rec.attack_success, "control_reached_U": control,
                     "verified": bool(reports[cell.id].verified)})
    return rows, seconds


def summarise(rows):
    out = []
    for group in dict.fromkeys(r["group"] for r in rows):
        for eps in dict.fromkeys(r["eps"] for r in rows if r["group"] == group):
            rs = [r for r in rows if r["group"] == group and r["eps"] == eps]
            ratios = [r["U"] / r["L"] for r in rs if r["L"] > 0]
            rel = [r["U"] / r["svd"] for r in rs if r["svd"]]
            fams = {}
            for r in rs:
                fams[r["lower_witness"]] = fams.get(r["lower_witness"], 0) + 1
            out.append({"group": group, "eps": eps, "cells": len(rs),
                        "median_U_over_L": float(np.median(ratios)) if ratios else None,
                        "closed": sum(r["L"] == r["U"] for r in rs),
                        "median_U_over_svd": float(np.median(rel)) if rel else None,
                        "median_L": float(np.median([r["L"] for r in rs])),
                        "median_U": float(np.median([r["U"] for r in rs])),
                        "seconds_per_cell": float(np.mean([r["seconds"] for r in rs])),
                        "attack_runs": sum(r["attack_success"] is not None for r in rs),
                        "attack_successes": sum(bool(r["attack_success"]) for r in rs),
                        "controls": sum(r["control_reached_U"] is not None for r in rs),
                        "controls_reached_U": sum(bool(r["control_reached_U"]) for r in rs),
                        "verified": sum(r["verified"] for r in rs),
                        "lower_families": fams})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/quality.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", default="grid,twobit,random,minilm")
    ap.add_argument("--heads", type=int, default=8, help="MiniLM heads (at most 12)")
    ap.add_argument("--out", help="directory for the bracket files (default: a temporary one)")
    ap.add_argument("--device", help="torch device for the descent (default: cpu)", default="cpu")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--effort", default="default", choices=("quick", "default", "thorough"),
                    help="budget preset of the search (default: default)")
    args = ap.parse_args(argv)
    makers = {"grid": grid_cases, "twobit": twobit_cases, "random": random_cases,
              "minilm": lambda: minilm_cases(args.heads)}
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    bad = [g for g in groups if g not in makers]
    if bad:
        print(f"python bench/quality.py: error: unknown group(s) {bad}", file=sys.stderr)
        return 2
    out_dir = args.out or tempfile.mkdtemp(prefix="softrank-quality-")
    os.makedirs(out_dir, exist_ok=True)
    rows, per_case = [], []
    for g in groups:
        for name, A, H, eps in makers[g]():
            r, s = run_case(name, A, H, eps, out_dir, args.device, args.effort)
            rows += r
            per_case.append({"case": name, "shape": list(A.shape), "seconds": s})
            if not args.json:
                print(f"{name:<24} {A.shape[0]}x{A.shape[1]} {s:6.1f}s  "
                      + "  ".join(f"eps={x['eps']}:[{x['L']},{x['U']}] svd={x['svd']}" for x in r), flush=True)
    summary = summarise(rows)
    if args.json:
        print(json.dumps({"summary": summary, "cases": per_case, "rows": rows, "out": out_dir}))
    else:
        print()
        print(f"{'group':<8} {'eps':>6} {'cells':>5} {'med U/L':>8} {'closed':>7} {'med U/SVD':>9} "
              f"{'med L':>6} {'med U':>6} {'s/cell':>7} {'attacks':>8} {'controls':>9} {'verified':>8}")
        for s in summary:
            f = lambda v: "-" if v is None else f"{v:.2f}"
            print(f"{s['group']:<8} {s['eps']:>6} {s['cells']:>5} {f(s['median_U_over_L']):>8} "
                  f"{s['closed']:>3}/{s['cells']:<3} {f(s['median_U_over_svd']):>9} {s['median_L']:>6.1f} "
                  f"{s['median_U']:>6.1f} {s['seconds_per_cell']:>7.1f} "
                  f"{s['attack_successes']:>3}/{s['attack_runs']:<4} {s['controls_reached_U']:>4}/{s['controls']:<4} "
                  f"{s['verified']:>4}/{s['cells']:<3}")
        print("lower families:", "; ".join(f"{s['group']} {s['eps']}: {s['lower_families']}" for s in summary))
        heads = [c for c in per_case if c["case"].startswith("minilm")]
        if heads:
            print(f"MiniLM: {np.mean([c['seconds'] for c in heads]):.1f} s per head for {len(EPS)} tolerances "
                  f"(max {max(c['seconds'] for c in heads):.1f} s)")
        capped = [f"{r['case']} eps={r['eps']}" for r in rows if r["capped"]]
        print(f"effort: {args.effort}; cells stopped by the safety cap: {', '.join(capped) or 'none'}")
        print(f"bracket files: {out_dir}")
    all_ok = all(r["verified"] for r in rows) and not any(r["attack_success"] for r in rows)
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

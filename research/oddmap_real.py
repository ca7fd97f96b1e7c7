"""Odd-map certificates on real attention cells: do they prove more than the verified L?

Cells: the MiniLM heads of the quality heads (``research/heads.py``) (source 0) and the demo roster (``DEMO_HEADS`` x
``DEMO_SOURCES``), 256 x 256 softmax targets, eps 1/10, 1/4, 1/2 (``--eps``); a (head, source) in
both is one matrix. ``search_brackets`` (seed 0, ``--effort``) gives each verified bracket [L, U];
open cells with 1 <= L <= 7 are kept. Per kept cell an odd-map certificate (MATH.md section 2, the
kind of ``exact/oddmap.py``) for ``r_eps(A) >= d = L + 1`` is sought at ``eps + slack``
(K.5, as every softmax lower witness), by the route of the reference search:

1. a pool of ``--pool`` rows: the verified row-side witness's rows, then
   farthest-first in l1 (``far_order``), sorted by index;
2. a rank-(d-1) l1 fit of the pool (per-row l1 LPs given Q, one LP for Q given P, from the
   pool's SVD); float error <= eps + slack rules the pool out;
3. the nerve of the ``C(i, s)`` on the pool, sets of size <= d, by LP (at most
   ``--nerve-lps``; "partial" when that ends first);
4. on a full nerve, the mod-2 height filter (Yang's chain criterion,
   ``research/oddmap_geom.py``, <= ``--max-rows`` faces): fails -> no odd map
   S^{d-1} -> U on any triangulation;
5. SAT (python-sat, CaDiCaL, ``--conflicts`` per round) for a vertex labelling
   of the first barycentric subdivision of the d-cross-polytope (the exact
   kind, d <= 7; at most ``--max-clauses``) whose facet label sets avoid every
   known minimal non-face; lazily: a set a model uses and the nerve has not
   settled is tested by LP, a non-face is shrunk to a minimal one and added,
   and the solver runs again (``--max-rounds``, LPs within ``--max-lps``);
6. a found labelling is written by ``numeric.search.oddmap.odd_map_cell``
   (logits and slack in the target, the search's factors as upper side) and
   judged by ``exact.verify`` (the code of ``python -m exact verify``).

Budgets are work (effort units, LPs, GF(2) rows, clauses, conflicts), seconds information only.
Only step 6 proves anything; every other outcome is a float search result, never a bound.

    nice -n 15 python -m research.oddmap_real [--part I/K] [--out DIR] [--json]; --merge A.json B.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from fractions import Fraction

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog


from research.heads import MINILM_HEADS
from research import oddmap_geom as geom
from exact.cellspec import TargetSpec
from exact.oddmap import MAX_ODDMAP_DIM, label_sets
from fileio.bracketwriter import write_bracket_file
from numeric.search.driver import LOWER_SAFETY
from numeric.search.far_rows import far_order
from numeric.search.l1fit import l1_row_fit
from numeric.search.oddmap import FACE_TOL, _pair, budgeted_nerve, face_point, facets, odd_map_cell

MAX_L = 7
QUALITY_HEADS = MINILM_HEADS[:8]          # the former quality script's default --heads 8


def roster(demo_sources: int, quality_heads: int) -> list[tuple]:
    """(layer, head, source) triples: the quality heads on source 0, then the demo roster, no repeats."""
    from numeric.panel.presets import DEMO_HEADS

    out = [(l, h, 0) for l, h in QUALITY_HEADS[:quality_heads]]
    out += [(l, h, s) for s in range(demo_sources) for l, h in DEMO_HEADS]
    return list(dict.fromkeys(out))


def matrices(triples):
    """Yield (name, A, logits) per triple (all-MiniLM-L6-v2, 256 tokens, offline)."""
    from numeric.heads.extract import extract_heads, source_for
    from numeric.heads.models import load_model

    lm = load_model("minilm")
    for s in sorted({t[2] for t in triples}):
        heads = [(l, h) for l, h, src in triples if src == s]
        src = source_for(lm, s, length=256)
        for cap, (l, h) in zip(extract_heads(lm, src, heads), heads):
            yield f"l{l}h{h}/text:{s}", cap.matrix, cap.logits


def brackets(name: str, A, H, effort: str, eps: list[str]) -> list[dict]:
    """The search's verified bracket per eps, with the row-side witness rows, slack and upper factors."""
    from numeric.search import search_brackets

    out = search_brackets(A, eps, logits=H, id_prefix=name, effort=effort, seed=0)
    cells = []
    for cell, res in zip(out.cells, out.results):
        w = cell.lower.fields
        rows = [int(i) for i in np.argmax(out.tensors[w["Z"]], axis=0)] if "Z" in w else []
        up = cell.upper
        upper = ({"rank": res.upper, "P": out.tensors[up.fields["P"]], "Q": out.tensors[up.fields["Q"]]}
                 if up.kind == "factors" else None)
        cells.append({"name": name, "eps": cell.eps, "L": res.lower, "U": res.upper,
                      "lower_family": res.lower_witness, "rows": rows, "slack": cell.target.slack,
                      "upper": upper})
    return cells


def make_pool(A: np.ndarray, rows: list[int], size: int) -> list[int]:
    """The witness rows, then farthest-first rows in l1, ``size`` in all, sorted by index."""
    pool = list(dict.fromkeys(rows))
    return sorted(pool + [i for i in far_order(A) if i not in pool][:max(0, size - len(pool))])


def _q_step(Ap: np.ndarray, P: np.ndarray) -> np.ndarray:
    """LP: Q (m x k) minimising ``max_i ||a_i - P_i Q^T||_1`` for fixed P (sparse, one solve)."""
    n, m = Ap.shape
    k = P.shape[1]
    ne, (I, J) = n * m, np.divmod(np.arange(n * m), m)
    X = sp.csr_matrix((P[I].ravel(), (np.repeat(np.arange(ne), k), (J[:, None] * k + np.arange(k)).ravel())),
                      shape=(ne, m * k))                        # row (i, j): P_i . q_j
    E, zq, zt = sp.identity(ne, format="csr"), sp.csr_matrix((n, m * k)), sp.csr_matrix((ne, 1))
    S = sp.kron(sp.identity(n), np.ones((1, m)), format="csr")  # row i: sum_j e_ij
    M = sp.vstack([sp.hstack([X, -E, zt]), sp.hstack([-X, -E, zt]), sp.hstack([zq, S, -np.ones((n, 1))])])
    rhs = np.concatenate([Ap.ravel(), -Ap.ravel(), np.zeros(n)])
    cost = np.zeros(m * k + ne + 1)
    cost[-1] = 1.0
    res = linprog(cost, A_ub=M.tocsr(), b_ub=rhs, bounds=[(None, None)] * (m * k) + [(0, None)] * (ne + 1),
                  method="highs")
    if res.status != 0:
        raise RuntimeError(f"Q-step LP failed: {res.message}")
    return res.x[:m * k].reshape(m, k)


def l1_fit(Ap: np.ndarray, k: int, target: float, rounds: int) -> tuple[float, int]:
    """(best row-l1 error found of a rank-k fit of the pool, LPs spent); stops once <= target."""
    if k <= 0:
        return float(np.abs(Ap).sum(axis=1).max()), 0
    Q = np.linalg.svd(Ap)[2][:k].T
    best, lps = math.inf, 0
    for _ in range(rounds):
        fits = [l1_row_fit(a, Q) for a in Ap]
        lps += len(Ap)
        best = min(best, max(f[1] for f in fits))
        if best <= target:
            break
        Q = _q_step(Ap, np.array([f[0] for f in fits]))
        lps += 1
    return best, lps


def export_and_verify(A, H, cell: dict, d: int, pool: list[int], codes, faces, out_dir: str) -> dict:
    """Write the found labelling as a one-cell bracket file (softmax target with slack) and judge it exactly."""
    from exact.verify import verify_file

    local = tuple(_pair(l) for l in codes)
    points = np.array([faces[tuple(sorted(2 * i + (s < 0) for i, s in S))] for S in label_sets(local, d)])
    labels = np.array([(pool[i], s) for i, s in local], dtype=np.float64)
    cid = f"{cell['name']}/eps={cell['eps']}/oddmap"
    c, tensors = odd_map_cell(cid, A, Fraction(cell["eps"]), d, labels, points, upper=cell["upper"])
    if H is not None:
        tensors["logits"] = H
        c = replace(c, target=TargetSpec(c.target.matrix, "logits", cell["slack"]))
    path = os.path.join(out_dir, f"{cell['name']}_eps{cell['eps']}.st".replace("/", "_").replace(":", ""))
    write_bracket_file(path, [c], tensors)
    rep = verify_file(path)[0]
    return {"file": path, "verified": bool(rep.lower.verified), "reason": rep.lower.reason,
            "margin": str(rep.lower.margin) if rep.lower.margin is not None else None}


def _shrink(Ap: np.ndarray, eps: float, S: tuple, budget: list) -> tuple:
    """A minimal non-face inside the non-face S (drop labels while the LP stays infeasible)."""
    S = list(S)
    for l in list(S):
        if len(S) > 1 and budget[0] > 0:
            T = [c for c in S if c != l]
            budget[0] -= 1
            if face_point(Ap, eps, [_pair(c) for c in T])[0] <= FACE_TOL:
                S = T
    return tuple(S)


def lazy_sat(Ap: np.ndarray, eps: float, d: int, faces: dict, mnf: list, args, rec: dict):
    """Odd labelling of sd(cross_d) whose facet label sets are faces: codes, None (unsat) or 'unknown'.

    ``numeric.search.oddmap._sat_labels``'s encoding on one incremental solver; a facet label set a model
    uses and the nerve lacks is tested by LP, a non-face is shrunk and added on every facet.
    """
    from pysat.solvers import Solver

    nlab, V = 2 * Ap.shape[0], 3**d - 1
    half, chains = V // 2, facets(d)
    x = lambda v, l: 1 + v * nlab + l if v < half else 1 + (V - 1 - v) * nlab + (l ^ 1)
    z = lambda a, l: 1 + half * nlab + a * nlab + l
    budget = [args.max_lps - rec["lps"]]
    with Solver(name="cadical195") as s:
        s.append_formula([x(v, l) for l in range(nlab)] for v in range(half))
        s.append_formula([-x(v, l), z(a, l)] for a, F in enumerate(chains) for v in F for l in range(nlab))
        new = [N for N in mnf if len(N) <= d]
        for rnd in range(args.max_rounds):
            s.append_formula([-z(a, l) for l in N] for N in new for a in range(len(chains)))
            rec["clauses"] += len(new) * len(chains)
            s.conf_budget(args.conflicts)
            ok = s.solve_limited()
            rec["conflicts"], rec["sat_rounds"] = int(s.accum_stats().get("conflicts", 0)), rnd + 1
            if not ok:
                rec["stop"] = "conflicts" if ok is None else None
                return "unknown" if ok is None else None
            model = set(v for v in s.get_model() if v > 0)
            codes = [next(l for l in range(nlab) if x(v, l) in model) for v in range(V)]
            new = []
            for S in {tuple(sorted({codes[v] for v in F})) for F in chains} - set(faces):
                if budget[0] <= 0:
                    rec["lps"], rec["stop"] = args.max_lps, "lps"
                    return "unknown"
                t, pt = face_point(Ap, eps, [_pair(c) for c in S])
                budget[0] -= 1
                if t > FACE_TOL:
                    faces[S] = pt
                else:
                    new.append(_shrink(Ap, eps, S, budget))
            rec["lps"] = args.max_lps - budget[0]
            if not new:
                return codes
    rec["stop"] = "rounds"
    return "unknown"


def try_cell(A: np.ndarray, H, cell: dict, args, out_dir: str) -> dict:
    """One kept cell: the route of the module docstring at d = L + 1; the outcome and the work spent."""
    d = cell["L"] + 1
    eps_lo = (float(Fraction(cell["eps"])) + float(Fraction(cell["slack"] or 0))) * (1 + LOWER_SAFETY)
    pool = make_pool(A, cell["rows"], args.pool)
    Ap = A[pool]
    rec = {"d": d, "pool": len(pool), "witness_rows": len(cell["rows"]), "lps": 0, "gf2_rows": 0,
           "clauses": 0, "conflicts": 0, "nerve": "-"}
    err, rec["lps"] = l1_fit(Ap, d - 1, eps_lo, args.fit_rounds)
    rec["fit_err"] = round(err, 6)
    if err <= eps_lo:
        return {**rec, "outcome": "ruled out by l1 fit"}
    faces, mnf, lps, complete = budgeted_nerve(Ap, eps_lo, d, args.nerve_lps)
    rec.update(lps=rec["lps"] + lps, faces=len(faces), non_faces=len(mnf), nerve="full" if complete else "partial")
    if complete and len(faces) <= args.max_rows:
        rec["gf2_rows"] = len(faces)
        if not geom.height_at_least(faces, d - 1):
            return {**rec, "outcome": "height filter fails"}
    if d > MAX_ODDMAP_DIM:
        return {**rec, "outcome": f"SAT not tried (d > {MAX_ODDMAP_DIM})"}
    n_small = sum(len(N) <= d for N in mnf)   # clauses of numeric.search.oddmap's encoding:
    n_cl = (3**d - 1) // 2 + 2**d * math.factorial(d) * (d * 2 * len(pool) + n_small)
    if n_cl > args.max_clauses:
        return {**rec, "clauses": n_cl, "outcome": "SAT encoding over clause budget"}
    codes = lazy_sat(Ap, eps_lo, d, faces, mnf, args, rec)
    rec["clauses"] += n_cl - n_small * 2**d * math.factorial(d)
    if codes is None:
        return {**rec, "outcome": "SAT unsat"}
    if codes == "unknown":
        return {**rec, "outcome": f"SAT budget exhausted ({rec['stop']})"}
    rec.update(export_and_verify(A, H, cell, d, pool, codes, faces, out_dir))
    rec["outcome"] = "found and exactly verified" if rec["verified"] else "found, exact check refused"
    return rec


def run(args) -> dict:
    """Brackets of every matrix, then the odd-map attempt on each kept cell (roster order, eps ascending)."""
    out_dir = args.out or tempfile.mkdtemp(prefix="softrank-oddreal-")
    os.makedirs(out_dir, exist_ok=True)
    triples = [t for t in roster(args.demo_sources, args.quality_heads)[args.part[0]::args.part[1]]
               if not args.only or "l{}h{}/text:{}".format(*t) in args.only.split(",")]
    all_cells, kept, t0 = [], [], time.monotonic()
    for name, A, H in matrices(triples):
        t1 = time.monotonic()
        cells = brackets(name, A, H, args.effort, args.eps.split(","))
        search_s = round(time.monotonic() - t1, 1)
        all_cells += cells
        print("BRACKETS " + json.dumps([[c["eps"], c["L"], c["U"]] for c in cells]), name, file=sys.stderr, flush=True)
        for cell in sorted(cells, key=lambda c: Fraction(c["eps"])):
            if 1 <= cell["L"] <= min(MAX_L, args.max_d - 1) and cell["L"] < cell["U"]:
                t1 = time.monotonic()
                rec = try_cell(A, H, cell, args, out_dir)
                rec.update(seconds=round(time.monotonic() - t1, 1), search_seconds=search_s)
                kept.append({k: v for k, v in cell.items() if k not in ("upper", "rows")} | rec)
                print("CELL " + json.dumps(kept[-1], default=str), file=sys.stderr, flush=True)
    summary = dict(Counter(r["outcome"] for r in kept))
    return {"matrices": len(triples), "brackets": len(all_cells),
            "open_le7": sum(1 <= c["L"] <= MAX_L and c["L"] < c["U"] for c in all_cells),
            "brackets_all": [{k: v for k, v in c.items() if k not in ("upper", "rows")} for c in all_cells],
            "cells": kept, "summary": summary, "seconds": round(time.monotonic() - t0, 1), "out": out_dir,
            "settings": {k: v for k, v in vars(args).items() if k not in ("json", "out", "merge")}}


def _print(res: dict) -> None:
    print(f"{'cell':<16}{'eps':>5}{'L':>3}{'U':>4}{'d':>3}{'pool':>5}{'fit':>8}{'faces':>7}{'nerve':>8}{'LPs':>6}"
          f"{'clauses':>10}{'confl':>8}{'s':>6}  outcome")
    for r in res["cells"]:
        print(f"{r['name']:<16}{r['eps']:>5}{r['L']:>3}{r['U']:>4}{r['d']:>3}{r['pool']:>5}{r['fit_err']:>8.4f}"
              f"{r.get('faces', '-'):>7}{r['nerve']:>8}{r['lps']:>6}{r['clauses']:>10}{r['conflicts']:>8}"
              f"{r['seconds']:>6}  {r['outcome']}"
              + (f" (margin {r['margin']})" if r.get("margin") else ""))
    print(f"{res['matrices']} matrices, {res['brackets']} brackets, {res['open_le7']} open with L <= {MAX_L}, "
          f"{len(res['cells'])} tried; outcomes: {res['summary']}; {res['seconds']} s; files: {res['out']}")


def _bad(args) -> str | None:
    """The first problem with the arguments (``args.part`` parsed in place), or None."""
    try:
        part = tuple(int(t) for t in args.part.split("/"))
        assert len(part) == 2 and 0 <= part[0] < part[1]
    except (ValueError, AssertionError):
        return f"--part {args.part!r} is not I/K with 0 <= I < K"
    args.part = part
    counts = (args.fit_rounds, args.max_lps, args.max_rows, args.max_clauses, args.conflicts, args.nerve_lps,
              args.max_rounds)
    if not all(0 < Fraction(e) <= 1 for e in args.eps.split(",")):
        return f"--eps {args.eps!r}: tolerances in (0, 1]"
    if not (0 <= args.quality_heads <= 8 and 0 <= args.demo_sources <= 2 and args.pool >= 2 and min(counts) >= 1
            and args.max_d >= 2):
        return "a count is out of range"
    if importlib.util.find_spec("pysat") is None:
        return "python-sat is not installed (pip install python-sat)"
    return None


def merge(paths: list[str]) -> dict:
    """One result from the --json outputs of several --part runs (roster order kept per part)."""
    parts = [json.loads(open(p).read()) for p in paths]
    res = {k: sum(r[k] for r in parts) for k in ("matrices", "brackets", "open_le7", "seconds")}
    res.update(cells=[c for r in parts for c in r["cells"]], out=", ".join(r["out"] for r in parts))
    res["summary"] = dict(Counter(c["outcome"] for c in res["cells"]))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.oddmap_real", description=__doc__.splitlines()[0])
    ap.add_argument("--eps", default="1/10,1/4,1/2", help="tolerances (searched largest first, each seeded alone)")
    ap.add_argument("--effort", default="default", choices=("quick", "default"), help="bracket search preset")
    ap.add_argument("--quality-heads", type=int, default=8, help="MiniLM heads of the former quality script (0..8)")
    ap.add_argument("--demo-sources", type=int, default=2, help="sources of the demo roster (0..2)")
    ap.add_argument("--pool", type=int, default=12, help="rows in the pool (at least the witness rows)")
    ap.add_argument("--fit-rounds", type=int, default=3, help="alternating rounds of the l1 fit")
    ap.add_argument("--max-lps", type=int, default=3000, help="LPs per cell (fit, nerve, lazy SAT)")
    ap.add_argument("--nerve-lps", type=int, default=1500, help="LPs of the up-front nerve (then lazy)")
    ap.add_argument("--max-rounds", type=int, default=200, help="lazy SAT rounds per cell")
    ap.add_argument("--max-rows", type=int, default=6000, help="faces (GF(2) unknowns) for the height filter")
    ap.add_argument("--max-clauses", type=int, default=8_000_000, help="SAT clauses per cell")
    ap.add_argument("--conflicts", type=int, default=20_000, help="SAT conflicts per lazy round")
    ap.add_argument("--only", help="matrices by name, e.g. l0h1/text:1,l4h2/text:0 (default: all)")
    ap.add_argument("--max-d", type=int, default=MAX_L + 1, help="try only cells with d = L + 1 <= this")
    ap.add_argument("--part", default="0/1", help="I/K: only matrices I, I+K, ... of the roster (parallel runs)")
    ap.add_argument("--out", help="directory for certificate files (default: a temporary one)")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="print the table of saved --json outputs and stop")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        err = _bad(args)
    except (ValueError, ZeroDivisionError):
        err = f"--eps {args.eps!r} is not a list of fractions"
    if err:
        print(f"python -m research.oddmap_real: error: {err}", file=sys.stderr)
        return 2
    try:
        res = merge(args.merge) if args.merge else None
    except (OSError, ValueError, KeyError) as e:
        print(f"python -m research.oddmap_real: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    res = res or run(args)
    _print(res) if not args.json else print(json.dumps(res, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

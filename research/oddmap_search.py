"""Do odd-map certificates beat the best Bernstein width of both sides? A search on small matrices.

For each random or structured row-stochastic n x m matrix (n, m <= 6) and each
d = 3..min(n, m):

1. ``low``: the best Bernstein value found at dimension d, the larger of the
   row side (every row subset, then local search over general Z) and the
   column side (every coordinate subspace, the SVD subspace, local search over
   general W); the widths are >= d exactly when eps < that side's best gamma;
2. ``high``: an upper estimate of ``min_{rank B <= d-1} ||A - B||_row1``
   (alternating LPs); ``r_eps(A) >= d`` needs eps < high;
3. if ``high <= low`` no certificate can beat the widths at d (closed);
   otherwise, at ``eps = low + 1% (high - low)`` (rounded up to 1e-6): the nerve
   of the cover by the C(i, s) (LP), the w1-height filter (GF(2)), and SAT
   searches for an odd map proving d: vertex-labelled on the barycentric
   subdivision of the d-cross-polytope boundary (``VLsd``), facet-labelled on
   the cross-polytope (``FLx``) and on its subdivision (``FLsd``). The
   vertex-labelled form on the cross-polytope itself is the row side.

Certificates only get easier as eps decreases (the C's grow), so a failure at
the bottom of the window (low, high) is a failure on all of it above that eps.
A found certificate is re-checked in rationals and the row subsets of size d
are refuted exactly; the general-subspace widths stay search estimates.

    nice -n 15 python -m research.oddmap_search [--count 12] [--seed 0] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from fractions import Fraction

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np


from research import oddmap_families as fam
from research import oddmap_geom as geom
from research import oddmap_widths as wid

FORMS = ("VLsd", "FLx", "FLsd")
#: A found case counts as a beat when the certificate still works this far above the best width found
#: by the longer Bernstein search (smaller margins are within the reach of a better subspace search).
BEAT_MARGIN = 1e-3


class Complexes:
    """The cross-polytope boundary and its subdivision per d, built once."""

    def __init__(self):
        self.cache = {}

    def get(self, d: int):
        if d not in self.cache:
            cx = geom.cross(d)
            self.cache[d] = (cx, geom.subdivide(cx))
        return self.cache[d]


def _odd_search(A, Aq, eps_q: Fraction, d: int, cxs: Complexes, args) -> dict:
    """Nerve, height filter and the three SAT forms at eps; exact re-check of what is found."""
    eps = float(eps_q)
    faces, mnf = geom.primal_nerve(A, eps)
    out = {"faces": len(faces), "height_ok": geom.height_at_least(faces, d - 1)}
    if not out["height_ok"]:
        return out
    cx, sd = cxs.get(d)
    nlab = 2 * A.shape[0]
    runs = {"VLsd": (geom.sat_vertex, geom.exact_check_vertex, sd),
            "FLx": (geom.sat_facet, geom.exact_check_facet, cx),
            "FLsd": (geom.sat_facet, geom.exact_check_facet, sd)}
    for form, (solve, check, complex_) in runs.items():
        if form == "FLsd" and d > args.max_sd_facet_d or form == "VLsd" and d > args.max_sd_vertex_d:
            out[form] = "skipped"
            continue
        lab = solve(complex_, nlab, mnf, conflicts=args.conflicts)
        if lab is None:
            out[form] = "unsat"
        elif lab == "unknown":
            out[form] = "unknown"
        else:
            ok = check(geom.primal_holds(Aq, eps_q), complex_, lab, faces)
            out[form] = "found" if ok else "found-not-exact"
            out[form + "_labels"] = {str(k): v for k, v in lab.items()}
    return out


def _window(A, d, err, rng, args):
    """(row-subset gamma, row gamma, column gamma, high) at dimension d."""
    g_row, g_sub = wid.best_row(A, d, rng, steps=args.steps, starts=args.starts)
    g_col, _ = wid.best_col(A, d, rng, steps=args.steps, starts=args.starts)
    return g_sub, g_row, g_col, err[d - 1]


def _odd_top(A, d, lo: float, hi: float, cxs, steps: int) -> float:
    """The largest eps in [lo, hi) (bisection, float) at which VLsd or FLsd still finds a certificate."""
    _, sd = cxs.get(d)
    for _ in range(steps):
        mid = (lo + hi) / 2
        _, mnf = geom.primal_nerve(A, mid)
        if any(isinstance(f(sd, 2 * A.shape[0], mnf), dict) for f in (geom.sat_vertex, geom.sat_facet)):
            lo = mid
        else:
            hi = mid
    return lo


def _confirm(A, Aq, d, case, high, rng, cxs, args) -> None:
    """A found case: exact refutation of every row subset of size d, the geometric row-side
    value (orthant LPs, not the certificate LP), a 4x longer column search, and how far up the
    odd-map certificate reaches (``eps_odd``)."""
    eps_q = Fraction(case["eps"])
    case["row_subsets_refuted"] = all(wid.row_subset_refuted(Aq, S, eps_q, A)
                                      for S in fam.subsets(A.shape[0], d))
    g_row, g_sub = wid.best_row_geo(A, d, rng, steps=args.steps, starts=args.starts)
    g_col, _ = wid.best_col(A, d, rng, steps=4 * args.steps, starts=2 * args.starts)
    case["g_row2"], case["g_rowsub2"], case["g_col2"] = g_row, g_sub, g_col
    case["eps_odd"] = _odd_top(A, d, float(eps_q), high, cxs, args.bisect)
    case["margin"] = case["eps_odd"] - max(g_row, g_sub, g_col, case["g_row"], case["g_col"])


def study_matrix(name, A, Aq, rng, cxs, args) -> list[dict]:
    """Every d = 3..min(n, m) of one matrix: the window and, where open, the odd-map search."""
    p = min(A.shape)
    err = {k: wid.err_rank(A, k, rng, rounds=args.rounds) for k in range(2, p)}
    cases = []
    for d in range(3, p + 1):
        g_sub, g_row, g_col, high = _window(A, d, err, rng, args)
        low = max(g_row, g_col, g_sub)
        case = {"matrix": name, "n": A.shape[0], "m": A.shape[1], "d": d, "g_rowsub": g_sub,
                "g_row": g_row, "g_col": g_col, "high": high}
        if high <= low + 1e-7:
            case["status"] = "closed"
            cases.append(case)
            continue
        eps_q = Fraction(int(np.ceil((low + 0.01 * (high - low)) * 1e6)), 10 ** 6)
        case["eps"] = str(eps_q)
        case.update(_odd_search(A, Aq, eps_q, d, cxs, args))
        found = [f for f in FORMS if case.get(f) == "found"]
        case["status"] = "found" if found else ("no-odd-map" if not case["height_ok"] else "open")
        if found:
            _confirm(A, Aq, d, case, high, rng, cxs, args)
        cases.append(case)
    return cases


def summarise(cases: list[dict]) -> dict:
    """Counts per category."""
    table = {}
    for c in cases:
        t = table.setdefault(c["category"], {"matrices": set(), "pairs": 0, "closed": 0, "window": 0,
                                             "no-odd-map": 0, "found": 0, "beat": 0,
                                             **{f: {} for f in FORMS}})
        t["matrices"].add(c["matrix"])
        t["pairs"] += 1
        t["closed"] += c["status"] == "closed"
        t["window"] += c["status"] != "closed"
        t["no-odd-map"] += c["status"] == "no-odd-map"
        t["found"] += c["status"] == "found"
        t["beat"] += c["status"] == "found" and c["margin"] > BEAT_MARGIN
        for f in FORMS:
            if f in c:
                t[f][c[f]] = t[f].get(c[f], 0) + 1
    for t in table.values():
        t["matrices"] = len(t["matrices"])
    return table


def _print(table: dict, cases: list[dict], seconds: float, verbose: bool) -> None:
    if verbose:
        for c in cases:
            print(f"{c['matrix']:<22} {c['n']}x{c['m']} d={c['d']} sub={c['g_rowsub']:.4f} row={c['g_row']:.4f} "
                  f"col={c['g_col']:.4f} high={c['high']:.4f} eps={c.get('eps', '-'):>9} "
                  + " ".join(f"{f}={c[f]}" for f in FORMS if f in c) + f" -> {c['status']}"
                  + (f" eps_odd={c['eps_odd']:.4f} rowZ={c['g_row2']:.4f} colW={c['g_col2']:.4f} "
                     f"margin={c['margin']:+.4f} subsets_refuted={c['row_subsets_refuted']}" if "eps_odd" in c else ""))
    print(f"{'category':<14}{'mats':>5}{'(A,d)':>7}{'closed':>7}{'window':>7}{'h<d-1':>7}{'found':>6}{'beat':>5}  SAT VLsd | FLx | FLsd")
    for cat, t in table.items():
        sat = " | ".join(",".join(f"{k}:{v}" for k, v in sorted(t[f].items())) or "-" for f in FORMS)
        print(f"{cat:<14}{t['matrices']:>5}{t['pairs']:>7}{t['closed']:>7}{t['window']:>7}{t['no-odd-map']:>7}"
              f"{t['found']:>6}{t['beat']:>5}  {sat}")
    print(f"wall {seconds:.1f} s")


def show(name: str, eps_q: Fraction, d: int, cxs) -> int:
    """Print the vertex-labelled certificate on sd(cross_d) for a named fixed matrix, re-checked exactly."""
    mats = {nm: (A, Aq) for nm, A, Aq in fam.generate("graph", 0, None)}
    if name not in mats:
        print(f"error: unknown matrix {name!r}; one of {', '.join(mats)}", file=sys.stderr)
        return 2
    A, Aq = mats[name]
    faces, mnf = geom.primal_nerve(A, float(eps_q))
    cx, sd = cxs.get(d)
    lab = geom.sat_vertex(sd, 2 * A.shape[0], mnf)
    print(f"{name} ({A.shape[0]}x{A.shape[1]}), eps = {eps_q}, d = {d}: {len(faces)} faces")
    if not isinstance(lab, dict):
        print(f"no vertex-labelled certificate on sd(cross_{d}) found: {lab}")
        return 1
    base = cx[0]
    for v in sorted(range(len(sd[0])), key=lambda v: (len(sd[0][v]), sorted(sd[0][v]))):
        sv = [0] * d
        for b in sd[0][v]:
            sv[base[b][0]] = base[b][1]
        if sd[2][v] > v:
            print(f"  vertex {sv}: row {lab[v] >> 1}, sign {'+' if geom.sign(lab[v]) > 0 else '-'}"
                  f"   (antipode: row {lab[v] >> 1}, opposite sign)")
    ok = geom.exact_check_vertex(geom.primal_holds(Aq, eps_q), sd, lab, faces)
    refuted = all(wid.row_subset_refuted(Aq, S, eps_q, A) for S in fam.subsets(A.shape[0], d))
    U, S, Vt = np.linalg.svd(A)
    B = [[Fraction(float(t)).limit_denominator(10 ** 6) for t in row] for row in (U[:, :d] * S[:d])]
    C = [[Fraction(float(t)).limit_denominator(10 ** 6) for t in row] for row in Vt[:d]]
    err = max(sum(abs(Aq[i][j] - sum(B[i][k] * C[k][j] for k in range(d))) for j in range(A.shape[1]))
              for i in range(A.shape[0]))
    print(f"rank-{d} factors (rounded truncated SVD), exact ||A - P Q^T||_row1 = {float(err):.6f}"
          f" {'<=' if err <= eps_q else '>'} eps, so r_eps(A) {'<=' if err <= eps_q else 'not shown <='} {d}")
    print(f"exact re-check of the certificate (fractions): {ok}")
    print(f"every row subset of size {d} refuted exactly at eps: {refuted}")
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=5, help="random matrices per random category")
    ap.add_argument("--categories", default=",".join(fam.CATEGORIES),
                    help="comma-separated subset of " + ",".join(fam.CATEGORIES))
    ap.add_argument("--steps", type=int, default=40, help="local-search moves per start (widths)")
    ap.add_argument("--starts", type=int, default=3, help="local-search starts per side and d")
    ap.add_argument("--rounds", type=int, default=6, help="alternating-LP rounds per start (upper)")
    ap.add_argument("--conflicts", type=int, default=100000, help="SAT conflict budget per search")
    ap.add_argument("--bisect", type=int, default=6, help="bisection steps for eps_odd of a found case")
    ap.add_argument("--max-sd-vertex-d", type=int, default=5)
    ap.add_argument("--max-sd-facet-d", type=int, default=5)
    ap.add_argument("--show", metavar="NAME", help="print the certificate of one fixed matrix (e.g. cycle5) and stop")
    ap.add_argument("--eps", default="99/100", help="eps for --show (a fraction)")
    ap.add_argument("--d", type=int, default=3, help="d for --show")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cats = [c for c in args.categories.split(",") if c]
    bad = [c for c in cats if c not in fam.CATEGORIES]
    if bad or args.count < 0:
        print(f"error: unknown category {bad} or negative count", file=sys.stderr)
        return 2
    try:
        import pysat  # noqa: F401
    except ImportError:
        print("error: python-sat is not installed (pip install python-sat)", file=sys.stderr)
        return 2
    if args.show:
        try:
            eps_q = Fraction(args.eps)
        except (ValueError, ZeroDivisionError):
            print(f"error: --eps {args.eps!r} is not a fraction", file=sys.stderr)
            return 2
        if not 0 < eps_q < 1 or not 2 <= args.d <= 5:
            print("error: --eps must lie in (0, 1) and --d in 2..5", file=sys.stderr)
            return 2
        return show(args.show, eps_q, args.d, Complexes())
    rng = np.random.default_rng(args.seed)
    cxs, cases, t0 = Complexes(), [], time.monotonic()
    for cat in cats:
        for name, A, Aq in fam.generate(cat, args.count, rng):
            for c in study_matrix(name, A, Aq, rng, cxs, args):
                c["category"] = cat
                cases.append(c)
    table = summarise(cases)
    seconds = time.monotonic() - t0
    if args.json:
        print(json.dumps({"summary": table, "cases": cases, "seconds": round(seconds, 1)}, default=str))
    else:
        _print(table, cases, seconds, args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Two code versions (or two effort presets) side by side in CPU time and work units.

Runs ``search_brackets`` of a git ref (extracted with ``git archive``) and of the working tree
on the same heads (logits saved with ``np.savez``, read without pickle), each side in its own
process pinned to its own core (``taskset``) with one BLAS thread, at the same time. Each side
reports per head the process CPU time of the search (``time.process_time``: the machine is
shared, so wall time measures the load, not the code) and the Adam work units its upper
searches spent (``refine.step_work``, counted by wrapping ``driver.search_upper``). Every
bracket file is then re-verified with the working tree's exact tier; only verified brackets
are compared. Prints per head and tolerance both brackets, per head CPU seconds and upper
units with their ratio, and per group (the head name's prefix up to ``_``) the median U/L.

    python -m bench.cpu_compare --ref 5d20121 --heads-npz HEADS.npz --heads q256_l0h0,q256_l1h3 --out DIR
    python -m bench.cpu_compare --ref HEAD --before-effort default --after-effort thorough ...
    python -m bench.cpu_compare --ref 5d20121 ... --swap-cores      # the same, the sides' cores swapped
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.common import add_heads_args, extract_ref, medians, start, verified_brackets

ROOT = Path(__file__).resolve().parents[1]

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cpu_compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_heads_args(ap)
    ap.add_argument("--before-effort", default="default")
    ap.add_argument("--after-effort", default="default")
    ap.add_argument("--swap-cores", action="store_true",
                    help="run the before side on core 1 and the after side on core 0 (a control for a core's bias)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    tree = extract_ref(args.ref, out / "before_tree")
    cores = (1, 0) if args.swap_cores else (0, 1)
    sides = {"before": (tree, cores[0], args.before_effort), "after": (ROOT, cores[1], args.after_effort)}
    procs = {s: start(t, c, args, e, out / s) for s, (t, c, e) in sides.items()}
    runs = {}
    for s, p in procs.items():
        text, _ = p.communicate()
        if p.returncode != 0:
            print(f"{s}: exited {p.returncode} (see {out / s}.log)", file=sys.stderr)
            return 1
        runs[s] = {r["head"]: r for r in map(json.loads, text.splitlines())}
        (out / f"{s}.jsonl").write_text(text)      # the run records (bench/effort_compare.py --reuse)
    got = {s: verified_brackets(out / s) for s in sides}
    heads = args.heads.split(",")
    rows = []
    for (h, e) in sorted(set(got["before"]) | set(got["after"]), key=lambda k: (heads.index(k[0]), k[1])):
        rows.append({"head": h, "eps": e, "before": got["before"].get((h, e)), "after": got["after"].get((h, e))})
    both = [r for r in rows if r["before"] and r["after"]]
    wider = [r for r in both if r["after"][0] < r["before"][0] or r["after"][1] > r["before"][1]]
    tighter = [r for r in both if r not in wider and r["after"] != r["before"]]
    cost = [{"head": h, "cpu_before": runs["before"][h]["cpu"], "cpu_after": runs["after"][h]["cpu"],
             "units_before": runs["before"][h]["upper_units"], "units_after": runs["after"][h]["upper_units"]}
            for h in heads]
    med = {s: {f"{g} {e}": v for (g, e), v in medians(got[s]).items()} for s in sides}
    result = {"ref": args.ref, "efforts": [args.before_effort, args.after_effort], "cells": rows, "cost": cost,
              "medians": med, "wider": len(wider), "tighter": len(tighter), "compared": len(both)}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"before = {args.ref} ({args.before_effort}), after = working tree ({args.after_effort})")
    fmt = lambda b: f"[{b[0]}, {b[1]}]" if b else "unverified"
    for r in rows:
        print(f"{r['head']:<14} {r['eps']:>5} {fmt(r['before']):>12} {fmt(r['after']):>12}")
    print(f"\n{'head':<14} {'CPU s before':>12} {'after':>8} {'ratio':>6} {'upper units before':>19} {'after':>11}")
    for c in cost:
        print(f"{c['head']:<14} {c['cpu_before']:>12.1f} {c['cpu_after']:>8.1f} {c['cpu_after'] / c['cpu_before']:>6.2f} "
              f"{c['units_before']:>19,} {c['units_after']:>11,}")
    tb, ta = sum(c["cpu_before"] for c in cost), sum(c["cpu_after"] for c in cost)
    print(f"{'total':<14} {tb:>12.1f} {ta:>8.1f} {ta / tb:>6.2f} {sum(c['units_before'] for c in cost):>19,} "
          f"{sum(c['units_after'] for c in cost):>11,}")
    print("\nmedian U/L (group eps: before / after):")
    for k in sorted(set(med["before"]) | set(med["after"])):
        print(f"  {k}: {med['before'].get(k, float('nan')):.3f} / {med['after'].get(k, float('nan')):.3f}")
    print(f"\nof {len(both)} cells verified on both sides: {len(tighter)} tighter after, {len(wider)} wider after")
    return 0


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

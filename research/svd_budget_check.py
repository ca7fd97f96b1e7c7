"""The attention-SVD constructive budget on a panel directory's head files, read-only (docs/study.md,
"Other targets").

For every ok row of ``DIR/cells/*.json`` at ``--eps``: ``numeric.search.driver.svd_budget`` recomputed
from ``DIR/heads/<key>.safetensors`` (the study's recomputation), against the row's ``svd_budget``
column where the panel wrote one and against the search's own truncated-SVD rank ``svd_rank``
(which the budget equals wherever that rank is below min(m, n) and the exact tier accepts its
factors); the CPU time of the recomputation per cell. A local measurement: it trusts the directory
(the study binds each head file to the exact pass by hash first).

    python -m research.svd_budget_check DIR [--eps 1/4] [--limit N]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--eps", default="1/4")
    p.add_argument("--limit", type=int, default=0, help="at most N cells (0: all)")
    args = p.parse_args(argv)
    from safetensors.numpy import load_file

    from numeric.search.driver import svd_budget

    out, eps = Path(args.dir), Fraction(args.eps)
    rows = []
    for rec in sorted((out / "cells").glob("*.json")):
        for r in json.loads(rec.read_text())["rows"]:
            if r.get("status") == "ok" and Fraction(r["eps"]) == eps:
                rows.append((rec.stem, r))
    if args.limit:
        rows = rows[:args.limit]
    agree_rank = differ_rank = agree_col = differ_col = no_col = 0
    cpu, budgets = [], []
    for key, r in rows:
        t = load_file(str(out / "heads" / f"{key}.safetensors"))
        t0 = time.process_time()
        k = svd_budget(t["matrix"], eps, logits=t["logits"])
        cpu.append(time.process_time() - t0)
        budgets.append(k / r["n_cols"])
        p_ = min(r["n_rows"], r["n_cols"])
        if r.get("svd_rank") is not None and r["svd_rank"] < p_:
            agree_rank += k == r["svd_rank"]
            differ_rank += k != r["svd_rank"]
        if r.get("svd_budget") is None:
            no_col += 1
        else:
            agree_col += k == r["svd_budget"]
            differ_col += k != r["svd_budget"]
        if k < r["U"]:
            print(f"{key}: budget {k} below the certified U {r['U']}", file=sys.stderr)
    print(f"{out}: {len(rows)} cells at eps {eps}; k_svd/n median {statistics.median(budgets):.4f} "
          f"[{min(budgets):.4f}, {max(budgets):.4f}]; U <= k_svd on every cell: "
          f"{all(b * r['n_cols'] >= r['U'] for b, (_, r) in zip(budgets, rows))}")
    print(f"against the search's svd_rank (below min(m, n)): {agree_rank} equal, {differ_rank} differ; "
          f"against the table's svd_budget: {agree_col} equal, {differ_col} differ, {no_col} rows without it")
    print(f"recomputation CPU per cell: median {statistics.median(cpu):.3f} s, max {max(cpu):.3f} s, "
          f"total {sum(cpu):.1f} s")
    return 1 if differ_rank or differ_col else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Upper-search work per tolerance: Adam work units spent (``refine.step_work``), not seconds.

Reads the targets (matrix and logits) of bracket files that the quality heads (``research/heads.py``) wrote, runs
``search_brackets`` on each with the code of ``--tree`` (default: this checkout; another tree,
e.g. a ``git archive`` of an older ref such as ``bench/compare_versions.py`` extracts, compares
the work of two code versions without the noise of the machine's load), and prints, per case
and tolerance, the bracket and the units the upper search spent out of its budget.

    python -m research.upper_work --from /work/runs/cmp-warm-default8/after --cases l1h3,l0h0,l2h5
    python -m research.upper_work --tree /work/runs/cmp-warm-default8/before_tree --from ... --cases ...
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EPS = ["1/10", "1/4", "1/2"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.upper_work", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]), help="source tree of the code")
    ap.add_argument("--from", dest="src", required=True, help="directory of the former quality script bracket files")
    ap.add_argument("--cases", required=True, help="comma-separated names, e.g. l1h3,l0h0 (minilm_NAME.safetensors)")
    ap.add_argument("--effort", default="default")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, args.tree)
    from safetensors import safe_open

    import numeric.search.driver as drv

    used = []
    real = drv.search_upper

    def counted(A, eps, budget, **kw):
        out = real(A, eps, budget, **kw)
        used.append({"eps": round(eps, 6), "units": budget.units, "used": budget.used})
        return out

    drv.search_upper = counted
    rows = []
    for case in args.cases.split(","):
        path = Path(args.src) / f"minilm_{case}.safetensors"
        if not path.is_file():
            print(f"python -m research.upper_work: no file {path}", file=sys.stderr)
            return 2
        with safe_open(str(path), "np") as h:
            target = json.loads(h.metadata()["softrank"])["cells"][0]["target"]
            A, H = h.get_tensor(target["matrix"]), h.get_tensor(target["logits"])
        used.clear()
        out = drv.search_brackets(A, EPS, logits=H, effort=args.effort, attack=False)
        rows.append({"case": case, "brackets": {str(r.eps): [r.lower, r.upper] for r in out.results},
                     "upper_work": list(used), "total": sum(u["used"] for u in used)})
        if not args.json:
            per = {}
            for u in sorted(used, key=lambda u: u["eps"]):
                per.setdefault(u["eps"], []).append(u["used"])
            print(case, rows[-1]["brackets"], "upper units used by eps - slack:", per,
                  "total", rows[-1]["total"], flush=True)
    if args.json:
        print(json.dumps({"tree": args.tree, "effort": args.effort, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

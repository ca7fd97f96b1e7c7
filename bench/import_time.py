"""CPU time of the front door: ``import softrank``, ``softrank --help``, and the first ``softrank.bracket``.

Each case runs in fresh interpreters (user + system CPU of the child, from ``resource``); the
minimum over the repeats is the number (the machine's other load only adds to it). The first two
must stay under ``--limit`` seconds (exit 1 otherwise): the front door imports the tiers, and the
float tier's heavy packages, only where a call uses them.

    python bench/import_time.py [--repeat 5] [--limit 0.5] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: case -> (program, whether it is held to --limit)
CASES = {
    "python (nothing)": ("pass", False),
    "import softrank": ("import softrank", True),
    "softrank --help": ("import sys; sys.argv = ['softrank', '--help']; from softrank.cli import run; run()", True),
    "softrank.bracket (first use)": ("import softrank; softrank.bracket", False),
}


def cpu_seconds(program: str) -> float:
    """User + system CPU seconds of one fresh interpreter running ``program`` from the repository root."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--limit", type=float, default=0.5, help="CPU seconds allowed to the light cases")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = {}
    for name, (program, held) in CASES.items():
        runs = [cpu_seconds(program) for _ in range(args.repeat)]
        rows[name] = {"min_s": min(runs), "median_s": statistics.median(runs), "held": held}
    over = [name for name, r in rows.items() if r["held"] and r["min_s"] > args.limit]
    if args.json:
        print(json.dumps({"cases": rows, "limit_s": args.limit, "over": over}))
    else:
        print(f"{'case':30s} {'min CPU s':>10s} {'median':>8s}  limit")
        for name, r in rows.items():
            print(f"{name:30s} {r['min_s']:10.2f} {r['median_s']:8.2f}  {args.limit if r['held'] else '-'}")
        print("over the limit: " + (", ".join(over) or "none"))
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())

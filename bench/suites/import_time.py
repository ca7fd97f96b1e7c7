"""The ``import_time`` suite: CPU time of the front door, ``import softrank``, ``softrank --help``, and the first
``softrank.bracket``.

Each case runs in fresh interpreters (user + system CPU of the child, from ``resource``); the minimum over the
repeats is the figure (the machine's other load only adds to it). The first two are held to
:data:`LIMIT_S`: the front door imports the tiers, and the float tier's heavy packages, only where a call
uses them; the table says whether each held case is within it.
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from bench.common import fmt, table
from bench.runner import ROOT, Case, Suite

#: CPU seconds the light cases may take.
LIMIT_S = 0.5

#: case -> (program, whether it is held to LIMIT_S)
PROGRAMS = {
    "python (nothing)": ("pass", False),
    "import softrank": ("import softrank", True),
    "softrank --help": ("import sys; sys.argv = ['softrank', '--help']; from softrank.cli import run; run()", True),
    "softrank.bracket (first use)": ("import softrank; softrank.bracket", False),
}


def cpu_seconds(program: str) -> float:
    """User + system CPU seconds of one fresh interpreter running ``program`` from the repository root."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cases(size: str) -> list[Case]:
    if size == "smoke":
        return [Case("smoke-front-door", {"repeat": 1})]
    return [Case("front-door", {"repeat": 5})]


def run(case: Case, workdir: Path) -> dict:
    rows = {}
    for name, (program, held) in PROGRAMS.items():
        runs = [cpu_seconds(program) for _ in range(case.params["repeat"])]
        rows[name] = {"min_s": round(min(runs), 3), "median_s": round(statistics.median(runs), 3), "held": held}
    return {"cases": rows, "limit_s": LIMIT_S}


def tables(results: list[dict]) -> dict[str, str]:
    rec = results[-1]["record"]
    rows = [[f"`{name}`", fmt(r["min_s"], 2), fmt(r["median_s"], 2),
             (("within" if r["min_s"] <= rec["limit_s"] else "OVER") + f" {rec['limit_s']} s") if r["held"] else "-"]
            for name, r in rec["cases"].items()]
    return {"times": table(["fresh interpreter running", "min CPU s", "median CPU s", "limit"], rows, "lrrl")}


SUITE = Suite("import_time", "CPU time of the front door", cases, run, tables, "python -m bench run import_time")

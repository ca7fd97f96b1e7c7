"""How the bracket command's cost and brackets grow with n, per effort preset.

Each case is the bracket command (``numeric.search.cli.main``: search, export, exact re-check) on one
n x n head at one preset and one tolerance, in its own process with one BLAS thread: its CPU seconds
(user + system of that process, imports included: about 3 s), the CPU seconds of the lower families
(``lower.lower_candidates``, timed by wrapping it) and their share, the upper search's Adam work units
(``refine.step_work``, counted by wrapping ``driver.search_upper``), its peak RSS, and the verified
bracket. Heads: ``sharp`` (softmax of ``8 q k^T / 4``, q and k standard normal with 16 columns:
near-one-hot rows), ``diffuse`` (the same at 0.5: rows near uniform) and ``minilm`` (all-MiniLM-L6-v2
layer 0 head 0 on text source 0, n <= 512: the model's limit). The growth exponent of CPU time in n is
a least-squares fit on log-log per head and preset.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from bench.common import COUNT_UPPER, fmt, python, run_child, table
from bench.runner import Case, Suite

#: The bracket command in a child process, its upper-search work counted: argv = bracket args.
CHILD = COUNT_UPPER + r"""
import json, sys
from numeric.search import cli
rc = cli.main(sys.argv[1:])
print(json.dumps({"rc": rc, "upper_units": sum(used), "lower_cpu_s": sum(lower_cpu)}))
"""
EPS = "1/2"
FAMILIES = ("sharp", "diffuse", "minilm")
SIZES_N = (128, 256, 512, 1024)


def synthetic(kind: str, n: int) -> np.ndarray:
    """Logits of a synthetic head: ``beta q k^T / 4`` with beta 8 (sharp) or 0.5 (diffuse)."""
    rng = np.random.default_rng(n)
    q, k = rng.normal(size=(n, 16)), rng.normal(size=(n, 16))
    return {"sharp": 8.0, "diffuse": 0.5}[kind] * q @ k.T / 4.0


@functools.lru_cache(maxsize=1)
def _model():
    from numeric.heads.models import load_model

    return load_model("minilm")


def minilm(n: int) -> np.ndarray:
    from numeric.heads.extract import extract_heads, source_for

    lm = _model()
    return next(iter(extract_heads(lm, source_for(lm, 0, length=n), [(0, 0)]))).logits


def _case(effort: str, family: str, n: int, eps: str = EPS) -> Case:
    return Case(f"{effort}-{family}-n{n:04d}", {"effort": effort, "family": family, "n": n, "eps": eps})


#: ``full``: the cases the shared 2-core machine afforded for the shipped results (under a load average far
#: above its core count); ``large`` adds the rest up to n = 1024 at every preset.
FULL = [('default', 'sharp', 128), ('default', 'diffuse', 128), ('default', 'minilm', 128), ('default', 'sharp', 256), ('default', 'diffuse', 256), ('default', 'minilm', 256), ('quick', 'sharp', 128), ('quick', 'diffuse', 128), ('thorough', 'sharp', 128), ('thorough', 'diffuse', 128)]


def cases(size: str) -> list[Case]:
    if size == "smoke":
        return [Case("smoke-quick-sharp-n0016", {"effort": "quick", "family": "sharp", "n": 16, "eps": EPS,
                                                 "in_process": True})]
    todo = list(FULL)
    if size == "large":
        todo += [(e, f, n) for e in ("default", "quick", "thorough") for f in FAMILIES for n in SIZES_N
                 if (e, f, n) not in FULL and not (f == "minilm" and n > 512)]
    return [_case(*x) for x in todo]


def _in_process(args: list[str]) -> dict:
    """The bracket command in this process (the smoke size: no interpreter start, CPU of this process)."""
    import contextlib
    import io
    import time

    import numeric.search.driver as drv
    from numeric.search import cli

    real, real_lower = drv.search_upper, drv.lower_candidates
    counter: dict = {}
    exec(COUNT_UPPER, counter)               # the child's counters, in this process (they wrap the driver's two searches)
    out = io.StringIO()
    t0 = time.process_time()
    try:
        with contextlib.redirect_stdout(out):
            rc = cli.main(args)
    finally:
        drv.search_upper, drv.lower_candidates = real, real_lower
    return {"rc": rc, "cpu_s": time.process_time() - t0, "peak_rss_bytes": 0, "stderr_tail": [],
            "stdout": out.getvalue() + "\n" + json.dumps({"rc": rc, "upper_units": sum(counter["used"]),
                                                           "lower_cpu_s": sum(counter["lower_cpu"])})}


def run(case: Case, tmp: Path) -> dict:
    p = case.params
    H = minilm(p["n"]) if p["family"] == "minilm" else synthetic(p["family"], p["n"])
    np.save(tmp / "logits.npy", H)
    args = ["--logits", str(tmp / "logits.npy"), "--eps", p["eps"], "--out", str(tmp / "out.safetensors"), "--json",
            "--effort", p["effort"]]
    if p.get("in_process"):
        res = _in_process(args)
    else:
        res = run_child(python("-c", CHILD, *args), stdout_path=tmp / "stdout.txt")
    lines = [json.loads(x) for x in res["stdout"].splitlines() if x.startswith("{")]
    cells = [x for x in lines if "eps" in x]
    units = lines[-1].get("upper_units") if lines else None
    lower = lines[-1].get("lower_cpu_s") if lines else None
    return {"rc": res["rc"], "cpu_s": round(res["cpu_s"], 2), "peak_rss_gib": round(res["peak_rss_bytes"] / 2**30, 3),
            "upper_units": units, "lower_cpu_s": None if lower is None else round(lower, 2), "verified": bool(cells) and all(c["verified"] for c in cells),
            "cells": [{"eps": c["eps"], "L": c["lower"], "U": c["upper"]} for c in cells],
            "error": res["stderr_tail"] if res["rc"] not in (0,) else None}


def exponent(points: list[tuple[int, float]]) -> float | None:
    if len(points) < 2:
        return None
    x, y = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    return float(np.polyfit(x, y, 1)[0])


def tables(results: list[dict]) -> dict[str, str]:
    order = {"quick": 0, "default": 1, "thorough": 2}
    rs = sorted(results, key=lambda r: (order[r["params"]["effort"]], FAMILIES.index(r["params"]["family"]),
                                        r["params"]["n"]))
    rows = []
    for r in rs:
        p, rec = r["params"], r["record"]
        br = "; ".join(f"[{c['L']}, {c['U']}]" for c in rec["cells"]) or "none"
        ratio = "; ".join(fmt(c["U"] / c["L"]) if c["L"] else "-" for c in rec["cells"]) or "-"
        share = (f"{100 * rec['lower_cpu_s'] / rec['cpu_s']:.0f}%" if rec.get("lower_cpu_s") is not None
                 and rec["cpu_s"] else "-")
        rows.append([p["effort"], p["family"], p["n"], fmt(rec["cpu_s"], 1), share, f"{rec['upper_units'] or 0:,}",
                     fmt(rec["peak_rss_gib"]), "yes" if rec["verified"] else f"no (exit {rec['rc']})", br, ratio])
    cost = table(["preset", "head", "n", "CPU s", "lower search's share", "upper units", "peak RSS GiB", "verified",
                  "[L, U]", "U/L"], rows, "llrrrrrlll")
    fits = []
    for effort in order:
        for fam in FAMILIES:
            pts = [(r["params"]["n"], r["record"]["cpu_s"]) for r in rs
                   if r["params"]["effort"] == effort and r["params"]["family"] == fam and r["record"]["verified"]]
            k = exponent(pts)
            if k is not None:
                fits.append([effort, fam, f"{min(p[0] for p in pts)} to {max(p[0] for p in pts)}", f"n^{k:.2f}"])
    return {"cost": cost, "growth": table(["preset", "head", "n", "CPU time grows as"], fits, "llll")}


SUITE = Suite("scaling", "bracket time and quality per preset, n = 128 to 1024", cases, run, tables,
              "python -m bench run scaling")

"""How the bracket search's cost grows with n.

Runs the bracket command (``numeric.search.cli.main``: search, export, exact re-check) at
an effort preset on n x n heads, each case in its own process, and prints per case:
CPU seconds per tolerance (user + system of that process, from ``os.wait4``: the machine
is shared, so wall time measures the load), the upper search's Adam work units
(``refine.step_work``, counted by wrapping ``driver.search_upper``), L, U and U/L per
tolerance, whether every cell verified, and peak RSS. Then, per family, the growth
exponent of CPU time per tolerance in n (least squares on log-log).

Families: ``minilm`` (all-MiniLM-L6-v2 layer 0 head 0, source 0, at 128, 256 and 512
tokens: the model's limit), ``sharp`` (softmax of 8 q k^T / 4, q, k standard normal with
16 columns: near-one-hot rows) and ``diffuse`` (the same at 0.5: rows near uniform, entries
near 1/n), the synthetic ones at every n.

    python bench/scaling.py [--sizes 128,256,512,1024] [--families minilm,sharp,diffuse]
                            [--effort default] [--eps 1/10,1/4,1/2] [--heads-npz FILE]

``--heads-npz``: MiniLM logits saved with ``np.savez`` under ``q{n}_l0h0`` (read without
pickle); without it they are extracted from the packaged model (offline).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.side_by_side import COUNT_UPPER

#: The bracket command in a child process, its upper-search work counted: argv = bracket args.
CHILD = COUNT_UPPER + r"""
import json, sys
from numeric.search import cli
rc = cli.main(sys.argv[1:])
print(json.dumps({"rc": rc, "upper_units": sum(used)}))
"""


def synthetic(kind: str, n: int) -> np.ndarray:
    """Logits of a synthetic head: ``beta q k^T / 4`` with beta 8 (sharp) or 0.5 (diffuse)."""
    rng = np.random.default_rng(n)
    q, k = rng.normal(size=(n, 16)), rng.normal(size=(n, 16))
    return {"sharp": 8.0, "diffuse": 0.5}[kind] * q @ k.T / 4.0


def minilm(n: int, npz: str | None) -> np.ndarray | None:
    if n > 512:
        return None
    if npz:
        with np.load(npz, allow_pickle=False) as data:
            key = f"q{n}_l0h0"
            return np.asarray(data[key], dtype=np.float64) if key in data.files else None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    from numeric.heads.extract import extract_heads, source_for
    from numeric.heads.models import load_model

    lm = load_model("minilm")
    return next(iter(extract_heads(lm, source_for(lm, 0, length=n), [(0, 0)]))).logits


def run_case(name: str, H: np.ndarray, eps: str, effort: str, tmp: Path) -> dict:
    """The bracket command on logits H in a child process: its JSON rows, CPU seconds, peak RSS."""
    src = tmp / f"{name}.npy"
    np.save(src, H)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(ROOT))
    args = ["--logits", str(src), "--eps", eps, "--out", str(tmp / f"{name}.safetensors"), "--json",
            "--effort", effort]
    with open(tmp / f"{name}.out", "w+") as out, open(tmp / f"{name}.err", "w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, *args], cwd=ROOT, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)          # this child's own CPU time and peak RSS
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"stdout": out.read(), "stderr": err.read(), "rc": proc.returncode,
                "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss * 1024}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/scaling.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="128,256,512,1024")
    ap.add_argument("--families", default="minilm,sharp,diffuse")
    ap.add_argument("--effort", default="default")
    ap.add_argument("--eps", default="1/10,1/4,1/2")
    ap.add_argument("--heads-npz")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    neps = len(args.eps.split(","))
    rows = []
    if not args.json:
        print(f"{'case':<16} {'n':>5} {'CPU s/eps':>9} {'upper units':>12} {'peak RSS GiB':>12} verified  [L, U] U/L per eps")
    with tempfile.TemporaryDirectory() as tmp:
        for fam in args.families.split(","):
            for n in sizes:
                H = minilm(n, args.heads_npz) if fam == "minilm" else synthetic(fam, n)
                if H is None:
                    continue
                res = run_case(f"{fam}{n}", H, args.eps, args.effort, Path(tmp))
                cpu = res["cpu"]
                lines = [json.loads(x) for x in res["stdout"].splitlines() if x.startswith("{")]
                cells = [x for x in lines if "eps" in x]
                units = lines[-1]["upper_units"] if lines and "upper_units" in lines[-1] else None
                row = {"family": fam, "n": n, "cpu_per_eps": cpu / neps, "upper_units": units,
                       "peak_rss_gib": res["rss"] / 2**30, "rc": res["rc"],
                       "verified": all(c["verified"] for c in cells) and len(cells) == neps,
                       "cells": [{"eps": c["eps"], "L": c["lower"], "U": c["upper"],
                                  "U/L": c["upper"] / c["lower"] if c["lower"] else None} for c in cells],
                       "error": res["stderr"].strip().splitlines()[-1:] if res["rc"] else None}
                rows.append(row)
                if not args.json:
                    br = "  ".join(f"[{c['L']}, {c['U']}] {c['U/L'] or 0:.2f}" for c in row["cells"])
                    print(f"{fam:<16} {n:>5} {row['cpu_per_eps']:>9.1f} {units or 0:>12,} {row['peak_rss_gib']:>12.2f} "
                          f"{str(row['verified']):>8}  {br}" + (f"  rc={res['rc']} {row['error']}" if res["rc"] else ""),
                          flush=True)
    fits = {}
    for fam in args.families.split(","):
        pts = [(r["n"], r["cpu_per_eps"]) for r in rows if r["family"] == fam and r["rc"] in (0, 1)]
        if len(pts) >= 2:
            x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
            fits[fam] = float(np.polyfit(x, y, 1)[0])
    if args.json:
        print(json.dumps({"effort": args.effort, "eps": args.eps, "rows": rows, "exponents": fits}))
    else:
        for fam, k in fits.items():
            print(f"{fam}: CPU time per tolerance grows as n^{k:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

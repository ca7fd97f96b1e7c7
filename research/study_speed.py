"""The held-out study's run time, two code versions side by side in one run.

Runs ``python -m numeric study`` of a git ref (extracted with ``git archive``)
and of the working tree on the same panel directory at the same time, each
pinned to its own core with ``taskset`` and one worker (``--jobs 1``), so
both see the same load; then prints each side's wall and CPU seconds, their
ratio, and the largest difference between the two sides' estimates and
interval ends (same seed: the same draws). Then, alone, the working tree with
every core (the default ``--jobs``), which is what a user waits for.

    python -m research.study_speed --ref 06ae275 --panel /work/runs/study16 --out /tmp/study-speed
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from bench.common import extract_ref


def start(tree: Path, panel: Path, out: Path, core: int | None, replicates: int) -> tuple:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    cmd = [sys.executable, "-m", "numeric", "study", str(panel), "--out", str(out), "--json",
           "--replicates", str(replicates)]
    if core is not None:
        cmd = ["taskset", "-c", str(core)] + cmd + ["--jobs", "1"]
    return subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True), time.perf_counter()


def finish(proc, t0) -> float:
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"study failed: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}")
    return time.perf_counter() - t0


def cpu_seconds(usage) -> float:
    return usage.ru_utime + usage.ru_stime


def estimates(out: Path) -> dict:
    doc = json.loads((out / "study.json").read_text())
    return {(c["name"], f): [e["delta"], e["rho"], *e["delta_ci"], *e["rho_ci"]]
            for c in doc["comparisons"] for f, e in c["estimates"].items()}


def largest_difference(a: dict, b: dict) -> float:
    if a.keys() != b.keys():
        return float("inf")
    return max(abs(x - y) for k in a for x, y in zip(a[k], b[k]))


def side_by_side(ref_tree: Path, panel: Path, out: Path, replicates: int) -> dict:
    """Both versions at once, one core each: each side's wall seconds (its own end, waited for
    in its own thread) and CPU seconds (``os.wait4``'s usage of that process)."""
    runs = {}

    def run(name, tree, core):
        proc, t0 = start(tree, panel, out / name, core, replicates)
        err = proc.stderr.read()
        proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        if status != 0:
            runs[name] = {"error": err.strip().splitlines()[-1] if err.strip() else str(status)}
            return
        runs[name] = {"wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(cpu_seconds(usage), 1)}

    threads = [threading.Thread(target=run, args=a) for a in (("before", ref_tree, 0), ("after", ROOT, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, r in runs.items():
        if "error" in r:
            raise SystemExit(f"{name}: study failed: {r['error']}")
    return runs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ref", required=True, help="git ref of the 'before' side")
    p.add_argument("--panel", required=True, type=Path, help="panel directory (its exact pass recorded)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--replicates", type=int, default=1000)
    args = p.parse_args(argv)
    ref_tree = extract_ref(args.ref, args.out / "ref")
    runs = side_by_side(ref_tree, args.panel, args.out, args.replicates)
    diff = largest_difference(estimates(args.out / "before"), estimates(args.out / "after"))
    proc, t0 = start(ROOT, args.panel, args.out / "all-cores", None, args.replicates)
    wall_all = finish(proc, t0)
    print(f"{args.replicates} resamples, {args.panel}; one core each, side by side:")
    for name, label in (("before", args.ref), ("after", "working tree")):
        print(f"  {name} ({label}): {runs[name]['wall_s']} s wall, {runs[name]['cpu_s']} s CPU")
    print(f"  ratio before/after: wall {runs['before']['wall_s'] / runs['after']['wall_s']:.2f}, "
          f"CPU {runs['before']['cpu_s'] / runs['after']['cpu_s']:.2f}")
    print(f"  largest difference of an estimate or interval end: {diff:.2e}")
    print(f"after, every core ({os.cpu_count()}): {wall_all:.1f} s wall, load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

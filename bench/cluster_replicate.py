"""A replicate slice on the local worker pool and on a Dask LocalCluster: cells per hour and the scheduler's cost.

    python bench/cluster_replicate.py NAME --slice K --workers 2 --out DIR [--json bench/results/cluster.json]

Runs ``python -m numeric replicate NAME --slice K`` twice from scratch, each in its own directory under DIR:
once on the local pool (``--workers W``), once on a ``distributed.LocalCluster`` of W single-threaded worker
processes (``--scheduler ADDRESS``); then checks both rebuilds against the shipped manifest
(``replicate NAME --check DIR --slice K``: the same brackets, or the numbers are not comparable). Measured:
wall seconds of the replicate command, CPU seconds of every process involved (the command and its
workers; for Dask also the scheduler, in this process, and the cluster's worker processes), cells per hour
(cells / wall), and the scheduler's overhead per cell two ways: the difference of the two runs per cell
(wall and CPU; on a loaded machine within its noise), and the round trip of ``--noop`` empty tasks
through the same cluster (submit, run, gather), which is the scheduler's own cost per task.

The JSON file (``suite`` "cluster", ``rows``, ``machine``) is read by the benchmark runner that renders
``docs/benchmarks.md``. Exit 0 when both checks pass, 1 otherwise.

    python bench/cluster_replicate.py --recheck bench/results/cluster.json --out DIR

runs the two checks again (for a run measured before its manifest was recorded) and updates the file.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def _replicate(*args) -> tuple[int, float, float, str]:
    """(exit, wall s, CPU s of the command and its workers, output) of ``python -m numeric replicate ARGS``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    c0, t0 = _cpu_children(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "numeric", "replicate", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    return proc.returncode, time.perf_counter() - t0, _cpu_children() - c0, proc.stdout + proc.stderr


def _noop(x):
    return x


def _noop_round_trip(client, n: int) -> float:
    """Seconds per task of ``n`` empty tasks through the cluster (submit, run, gather)."""
    client.gather(client.map(_noop, range(8), pure=False))          # warm
    t0 = time.perf_counter()
    client.gather(client.map(_noop, range(n), pure=False))
    return (time.perf_counter() - t0) / n


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.machine())
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "system": f"{platform.system()} {platform.release()}"}


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


#: The paper's certificate pass: 3,326 cells at three tolerances (9,978 brackets); cluster sizes projected.
PAPER_CELLS = 3326
PROJECTED_WORKERS = (2, 8, 32, 128)


def projection(doc: dict) -> dict:
    """The paper's pass projected from the local pool's CPU seconds per cell (this slice's cells, at its
    tolerances) and the Dask run's overhead per cell: hours of wall time on W single-threaded workers, each on
    a core of its own, with nothing else running (CPU seconds / W; the slowest cell adds its own time)."""
    local, dask = doc["rows"]
    per_cell = local["cpu_s"] / local["cells"]
    overhead = max(doc["overhead_per_cell"]["cpu_s"], 0.0) + doc["overhead_per_cell"]["scheduler_round_trip_ms"] / 1000
    return {"cells": PAPER_CELLS, "cpu_s_per_cell": round(per_cell, 1), "dask_overhead_s_per_cell": round(overhead, 3),
            "cpu_hours": round(PAPER_CELLS * per_cell / 3600, 1),
            "wall_hours": [{"workers": w, "backend": "local pool" if w == 2 else "Dask",
                            "hours": round(PAPER_CELLS * (per_cell + (0 if w == 2 else overhead)) / w / 3600, 2)}
                           for w in PROJECTED_WORKERS]}


def recheck(path: Path, out: Path) -> int:
    """Check the two rebuilds under ``out`` against the manifest again; update ``path``."""
    doc = json.loads(path.read_text())
    for row, folder in zip(doc["rows"], ("local", "dask")):
        row["check_exit"], *_ = _replicate(doc["replicate"], "--check", out / folder, "--slice", row["cells"])
    doc["checks_passed"] = all(r["exit"] == 0 and r["check_exit"] == 0 for r in doc["rows"])
    doc["projection"] = projection(doc)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
    return 0 if doc["checks_passed"] else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?")
    p.add_argument("--recheck", help="check the rebuilds of this results file again")
    p.add_argument("--slice", type=int)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", required=True)
    p.add_argument("--noop", type=int, default=2000, help="empty tasks for the scheduler's round trip")
    p.add_argument("--json", help="write the results file here")
    args = p.parse_args(argv)
    if args.recheck:
        return recheck(Path(args.recheck), Path(args.out))
    if not args.name or not args.slice:
        p.error("give NAME and --slice K")
    from distributed import Client, LocalCluster

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, ok = [], True
    load0 = _load()
    rc, wall, cpu, text = _replicate(args.name, "--out", out / "local", "--slice", args.slice,
                                     "--workers", args.workers)
    check, *_ = _replicate(args.name, "--check", out / "local", "--slice", args.slice)
    ok = ok and rc == 0 and check == 0
    rows.append({"backend": f"local pool, {args.workers} worker processes", "cells": args.slice,
                 "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "cells_per_hour": round(3600 * args.slice / wall, 1),
                 "exit": rc, "check_exit": check, "load_average": [load0, _load()]})
    load0 = _load()
    c_self, c_kids, t_all = _cpu_self(), _cpu_children(), time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            Client(cl) as client:
        t_start = time.perf_counter() - t_all
        rc, wall, _, text = _replicate(args.name, "--out", out / "dask", "--slice", args.slice,
                                       "--scheduler", cl.scheduler_address)
        noop = _noop_round_trip(client, args.noop)
    cpu = (_cpu_self() - c_self) + (_cpu_children() - c_kids)      # scheduler, client command, worker processes
    check, *_ = _replicate(args.name, "--check", out / "dask", "--slice", args.slice)
    ok = ok and rc == 0 and check == 0
    rows.append({"backend": f"Dask LocalCluster, {args.workers} single-threaded worker processes", "cells": args.slice,
                 "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "cells_per_hour": round(3600 * args.slice / wall, 1),
                 "cluster_start_s": round(t_start, 1), "noop_task_ms": round(1000 * noop, 3),
                 "exit": rc, "check_exit": check, "load_average": [load0, _load()]})
    local, dask = rows
    result = {"suite": "cluster", "command": f"python bench/cluster_replicate.py {args.name} --slice {args.slice} "
              f"--workers {args.workers} --out DIR", "replicate": args.name, "commit": _commit(), "machine": machine(),
              "rows": rows,
              "overhead_per_cell": {"wall_s": round((dask["wall_s"] - local["wall_s"]) / args.slice, 2),
                                    "cpu_s": round((dask["cpu_s"] - local["cpu_s"]) / args.slice, 2),
                                    "scheduler_round_trip_ms": dask["noop_task_ms"]},
              "checks_passed": ok}
    result["projection"] = projection(result)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

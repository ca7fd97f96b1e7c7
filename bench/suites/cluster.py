"""The ``cluster`` suite: a replicate slice on the local worker pool and on a Dask ``LocalCluster``, cells per
hour and the scheduler's cost, and the paper's certificate pass projected from them.

``python -m bench run cluster`` runs ``python -m numeric replicate NAME --slice K`` twice from scratch: once
on the local pool (``--workers W``), once on a ``distributed.LocalCluster`` of W single-threaded worker
processes (``--scheduler ADDRESS``); then checks both rebuilds against the shipped manifest
(``replicate NAME --check DIR --slice K``: the same brackets, or the figures are not comparable). Measured:
wall seconds of the replicate command, CPU seconds of every process involved (the command and its workers;
for Dask also the scheduler in this process and the cluster's worker processes), cells per hour (cells /
wall), and the scheduler's overhead per cell two ways: the difference of the two runs per cell, and the round
trip of empty tasks through the same cluster (submit, run, gather), the scheduler's own cost per task.
The ``smoke`` size measures only the round trip on a cluster of one worker.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.common import fmt, table
from bench.runner import ROOT, Case, Suite

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


def _row(backend: str, k: int, rc: int, wall: float, cpu: float, check: int, loads: list, **extra) -> dict:
    return {"backend": backend, "cells": k, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "cells_per_hour": round(3600 * k / wall, 1), "exit": rc, "check_exit": check, "load_average": loads,
            **extra}


def _cluster(workers: int):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    return cluster, Client(cluster)


def measure(name: str, k: int, workers: int, out: Path, noop: int = 2000) -> dict:
    """Both runs of the slice and their checks (see the module docstring)."""
    load0 = _load()
    rc, wall, cpu, _ = _replicate(name, "--out", out / "local", "--slice", k, "--workers", workers)
    check, *_ = _replicate(name, "--check", out / "local", "--slice", k)
    local = _row(f"local pool, {workers} worker processes", k, rc, wall, cpu, check, [load0, _load()])
    load0 = _load()
    c_self, c_kids, t_all = _cpu_self(), _cpu_children(), time.perf_counter()
    cluster, client = _cluster(workers)
    try:
        t_start = time.perf_counter() - t_all
        rc, wall, _, _ = _replicate(name, "--out", out / "dask", "--slice", k, "--scheduler", cluster.scheduler_address)
        trip = _noop_round_trip(client, noop)
    finally:
        client.close()
        cluster.close()
    cpu = (_cpu_self() - c_self) + (_cpu_children() - c_kids)      # scheduler, client command, worker processes
    check, *_ = _replicate(name, "--check", out / "dask", "--slice", k)
    dask = _row(f"Dask LocalCluster, {workers} single-threaded worker processes", k, rc, wall, cpu, check,
                [load0, _load()], cluster_start_s=round(t_start, 1), noop_task_ms=round(1000 * trip, 3))
    doc = {"replicate": name, "rows": [local, dask],
           "overhead_per_cell": {"wall_s": round((dask["wall_s"] - local["wall_s"]) / k, 2),
                                 "cpu_s": round((dask["cpu_s"] - local["cpu_s"]) / k, 2),
                                 "scheduler_round_trip_ms": dask["noop_task_ms"]},
           "checks_passed": all(r["exit"] == 0 and r["check_exit"] == 0 for r in (local, dask))}
    doc["projection"] = projection(doc)
    return doc


def cases(size: str) -> list[Case]:
    if size == "smoke":
        return [Case("smoke-round-trip", {"workers": 1, "noop": 50})]
    return [Case("demo-slice2", {"replicate": "demo", "slice": 2, "workers": 2})]


def run(case: Case, workdir: Path) -> dict:
    p = case.params
    if "replicate" not in p:
        cluster, client = _cluster(p["workers"])
        try:
            return {"noop_task_ms": round(1000 * _noop_round_trip(client, p["noop"]), 3)}
        finally:
            client.close()
            cluster.close()
    return measure(p["replicate"], p["slice"], p["workers"], workdir)


def tables(results: list[dict]) -> dict[str, str]:
    full = [r for r in results if "rows" in r["record"]]
    if not full:
        return {}
    rec = full[-1]["record"]
    rows = [[r["backend"], r["cells"], fmt(r["wall_s"], 0), fmt(r["cpu_s"], 0), fmt(r["cells_per_hour"], 1),
             "passed" if r["exit"] == 0 and r["check_exit"] == 0 else "FAILED",
             f"{r['load_average'][0]:.0f} to {r['load_average'][1]:.0f}"] for r in rec["rows"]]
    o = rec["overhead_per_cell"]
    rows.append(["Dask minus local pool, per cell", "", fmt(o["wall_s"], 0), fmt(o["cpu_s"], 0), "",
                 f"scheduler round trip {o['scheduler_round_trip_ms']:.1f} ms per task", ""])
    runs = table(["backend", "cells", "wall s", "CPU s", "cells per hour", "`--check` against the manifest",
                  "load average"], rows, "lrrrrll")
    pr = rec["projection"]
    proj = table(["workers", "backend", "hours of wall time"],
                 [[w["workers"], w["backend"], fmt(w["hours"], 1)] for w in pr["wall_hours"]], "rlr")
    proj = (f"{pr['cells']:,} cells at three tolerances: {fmt(pr['cpu_s_per_cell'], 1)} CPU s per cell on the "
            f"local pool, {fmt(pr['cpu_hours'], 1)} CPU hours in all; Dask adds "
            f"{fmt(pr['dask_overhead_s_per_cell'], 1)} s per cell.\n\n" + proj)
    return {"runs": runs, "projection": proj}


SUITE = Suite("cluster", "a replicate slice on the local pool and on a Dask LocalCluster", cases, run, tables,
              "python -m bench run cluster")

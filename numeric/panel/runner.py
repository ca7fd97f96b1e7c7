"""Run the cells of a panel: serially, on local worker processes, or on Dask.

Resumable: a cell whose record (``numeric.panel.table``) carries the task's
signature and whose bracket file exists is not run again. Records are
written atomically, so a run killed at any point (a worker or the main
process, kill -9) resumes to the same table as an uninterrupted one.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

from tqdm import tqdm

from numeric.panel.cell import CellTask, finished_rows, run_cell
from numeric.panel.cluster import run_on_cluster
from numeric.runtime import worker_init

__all__ = ["run_panel"]


def _progress(total, desc, quiet):
    return tqdm(total=total, desc=desc, unit="cell", disable=quiet, file=sys.stderr, dynamic_ncols=True)


def _run_local(todo: list[CellTask], workers: int, progress) -> None:
    """Worker processes (spawned: no state inherited), each initialised by ``worker_init``."""
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx,
                             initializer=worker_init, initargs=(True, os.getpid())) as pool:
        futures = [pool.submit(run_cell, t) for t in todo]
        try:
            for fut in as_completed(futures):
                fut.result()
                progress(1)
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def run_panel(tasks: list[CellTask], *, workers: int = 1, scheduler: str | None = None,
              quiet: bool = False) -> dict:
    """Run the cells not finished yet; returns counts. Raises on the first failure.

    The serial path runs in this process with its thread state as it is: the
    caller (``python -m numeric``) pins it.
    """
    todo = [t for t in tasks if finished_rows(t) is None]
    skipped = len(tasks) - len(todo)
    bar = _progress(len(tasks), "panel", quiet)
    bar.update(skipped)
    try:
        if scheduler:
            run_on_cluster(todo, scheduler, bar.update)
        elif workers <= 1 or len(todo) <= 1:
            for t in todo:
                run_cell(t)
                bar.update(1)
        else:
            _run_local(todo, workers, bar.update)
    finally:
        bar.close()
    return {"cells": len(tasks), "run": len(todo), "skipped": skipped}

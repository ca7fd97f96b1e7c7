"""The Dask backend of the panel: cells on a cluster (``--scheduler ADDRESS``).

A worker plugin pins each worker's threads on setup and restores them on
teardown (``numeric.runtime``); the cells touch no process state, so a
worker may run several at once in threads.
"""
from __future__ import annotations

from distributed import Client, WorkerPlugin, as_completed

from numeric.panel.cell import run_cell
from numeric.runtime import pinned_threads

__all__ = ["PinnedThreads", "run_on_cluster"]


class PinnedThreads(WorkerPlugin):
    """``pinned_threads()`` for the life of a Dask worker."""

    name = "softrank-panel-threads"

    def __init__(self):
        self._ctx = None

    def setup(self, worker):
        self._ctx = pinned_threads()
        self._ctx.__enter__()

    def teardown(self, worker):
        if self._ctx is not None:
            self._ctx.__exit__(None, None, None)
            self._ctx = None


def run_on_cluster(tasks, scheduler: str, progress) -> None:
    """Run ``tasks`` on the cluster at ``scheduler``; ``progress(1)`` per finished cell."""
    with Client(scheduler) as client:
        client.register_plugin(PinnedThreads())
        futures = client.map(run_cell, tasks, pure=False)
        for fut in as_completed(futures):
            fut.result()
            progress(1)

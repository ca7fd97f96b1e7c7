"""Pinned threads for the search (issue 12 items 2 and 7).

BLAS reductions split over several threads add in a different order, so a
float result can change with the thread count. ``pinned_threads`` runs a
block with one BLAS/OpenMP thread (threadpoolctl) and one torch intra-op
thread, and restores both settings on exit: library code leaves no global
state changed. One thread is also the fastest setting for these small
products on a shared machine (``numeric.search.refine.CPU_THREADS``).
Thread counts are process-wide, so concurrent searches in one process (the
panel's Dask threads) share one pinning: the first to enter sets it, the
last to leave restores the setting found by the first.

>>> import torch
>>> before = torch.get_num_threads()
>>> with pinned_threads():
...     torch.get_num_threads()
1
>>> torch.get_num_threads() == before
True
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

__all__ = ["SEARCH_THREADS", "pinned_threads", "torch_threads"]

#: Threads the search uses: one, so that results do not depend on the machine's core count.
SEARCH_THREADS = 1


_LOCK = threading.Lock()
_STATE = {"depth": 0, "torch": None, "limits": None}


@contextmanager
def pinned_threads(n: int = SEARCH_THREADS):
    """Run the block with ``n`` BLAS/OpenMP threads and ``n`` torch threads; restore both afterwards."""
    import torch
    from threadpoolctl import threadpool_limits

    with _LOCK:
        if _STATE["depth"] == 0:
            _STATE["torch"] = torch.get_num_threads()
            _STATE["limits"] = threadpool_limits(limits=n)
            torch.set_num_threads(n)
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                torch.set_num_threads(_STATE["torch"])
                _STATE["limits"].restore_original_limits()


@contextmanager
def torch_threads(n: int = SEARCH_THREADS):
    """Run the block with ``n`` torch intra-op threads and restore the count (the descents' own guard:
    on a shared 2-core machine two threads ran the small products of a descent 20 times slower)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)

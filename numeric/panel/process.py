"""Process-wide state, set only at the edges (issue 12 item 7).

Library code of the panel never changes torch's thread count, environment
variables or file descriptors. Two places do, and only through this module:

- ``pinned_threads()``: the entry point ``python -m numeric ...`` runs its
  command inside it; it sets torch, the BLAS pools and the thread variables
  to ``WORKER_THREADS`` and restores all of them on exit, so that calling
  ``main()`` in-process leaves the caller as it was.
- ``worker_init()``: the initialiser of a local panel worker process sets
  the same state once for the worker's life; on a Dask cluster a worker
  plugin (``numeric.panel.cluster``) enters ``pinned_threads`` on setup and
  leaves it on teardown.

>>> import os
>>> before = os.environ.get("OMP_NUM_THREADS")
>>> with pinned_threads():
...     os.environ["OMP_NUM_THREADS"]
'1'
>>> os.environ.get("OMP_NUM_THREADS") == before
True
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

__all__ = ["WORKER_THREADS", "THREAD_VARIABLES", "pinned_threads", "worker_init"]

#: One torch/BLAS thread per worker: N workers fill N cores without
#: oversubscription, and a float result never depends on a thread count.
WORKER_THREADS = 1
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: How often a worker checks that its parent still lives: an orphan (parent
#: killed with kill -9) exits within this, instead of computing on unseen.
PARENT_POLL_S = 1.0
#: Exit status of a worker whose parent died.
ORPHAN_EXIT = 70


def _torch(load: bool = True):
    """torch, imported if ``load`` (else only if something already imported it), or None."""
    if not load:
        return sys.modules.get("torch")
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of the float tier
        return None
    return torch


@contextlib.contextmanager
def pinned_threads(threads: int = WORKER_THREADS, torch: bool = True):
    """Set the thread count of torch and the BLAS pools; restore everything on exit.

    ``torch=False``: a command that never uses torch (the study) does not import it just to
    pin it (about 1.5 s); a torch already imported is pinned all the same."""
    from threadpoolctl import threadpool_limits

    saved_env = {v: os.environ.get(v) for v in THREAD_VARIABLES}
    torch = _torch(torch)
    saved_torch = torch.get_num_threads() if torch is not None else None
    try:
        for v in THREAD_VARIABLES:
            os.environ[v] = str(threads)
        if torch is not None:
            torch.set_num_threads(threads)
        with threadpool_limits(limits=threads):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(saved_torch)
        for v, value in saved_env.items():
            if value is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = value


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(ORPHAN_EXIT)


def worker_init(silence_stdout: bool = False, parent: int | None = None) -> None:
    """Initialiser of a panel worker process: state for the worker's whole life.

    ``silence_stdout``: stdout belongs to the parent (tables, ``--json``), so
    progress bars are disabled and what C code prints (solver banners) goes to
    stderr instead. ``parent``: the parent's pid; the worker exits when that
    process dies (a record half-written is never left: records are atomic).
    """
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent,), daemon=True, name="panel-parent-watch").start()
    from threadpoolctl import threadpool_limits

    for v in THREAD_VARIABLES:
        os.environ[v] = str(WORKER_THREADS)
    threadpool_limits(limits=WORKER_THREADS)   # BLAS may already be loaded
    torch = _torch()
    if torch is not None:
        torch.set_num_threads(WORKER_THREADS)
    if silence_stdout:
        os.environ["TQDM_DISABLE"] = "1"
        sys.stdout.flush()
        os.dup2(2, 1)


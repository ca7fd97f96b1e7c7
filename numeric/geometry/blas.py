"""One BLAS thread for the duration of a descriptor computation.

The descriptors work on many small matrices, where a multi-threaded OpenBLAS
on a shared machine is 10 to 30 times slower than one thread; one thread also
makes the optimiser's floating-point path independent of the thread count.
The limit is scoped: the previous setting is restored on exit, so a library
call never leaves the process's BLAS state changed.
"""
from __future__ import annotations

import contextlib

from threadpoolctl import threadpool_limits

__all__ = ["one_blas_thread"]


@contextlib.contextmanager
def one_blas_thread():
    """Limit BLAS to one thread inside the ``with`` block (threadpoolctl).

    Nothing changes until the block is entered, and the previous limits are
    restored when it is left, also on an exception.

    >>> from threadpoolctl import threadpool_info
    >>> def blas_threads():
    ...     return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    >>> before = blas_threads()
    >>> with one_blas_thread():
    ...     inside = blas_threads()
    >>> set(inside) <= {1}, blas_threads() == before
    (True, True)
    """
    with threadpool_limits(limits=1, user_api="blas"):
        yield

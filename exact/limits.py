"""Resource limits of the exact tier, documented in ``docs/bracket-format.md``.

Each limit is checked before the work it bounds is done, and a test feeds
each one at the limit and at limit + 1. Work is counted in *units*, not
seconds: one unit is one multiply-add on one 64-bit word, so an exact
product of an m x k by a k x n integer matrix whose result needs L words
per entry costs ``m k n L``, a float64 product ``m k n``, and reading or
scanning a matrix one unit per word. ``work_limit`` meters one file.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import LimitExceeded

__all__ = [
    "MAX_FILE_BYTES", "MAX_HEADER_BYTES", "MAX_NUMBER_CHARS", "MAX_DECIMAL_EXPONENT",
    "MAX_MATRIX_SIDE", "MAX_MATRIX_ENTRIES", "MAX_CELLS", "MAX_TENSORS", "MAX_WORK",
    "MAX_TENSOR_BYTES", "Meter", "work_limit", "charge",
]

#: A bracket file: 4 GiB covers many 4096 x 4096 cells; beyond it, split the file.
MAX_FILE_BYTES = 4 * 2**30
#: The safetensors JSON header (tensor table and the ``softrank`` document): 16 MiB.
MAX_HEADER_BYTES = 16 * 2**20
#: Characters in one rational string ("1/4", "0.25", "1e-3"): 1,000.
MAX_NUMBER_CHARS = 1000
#: |exponent| of a decimal in scientific notation: 1,000 (1e-1000 is far below any tolerance).
MAX_DECIMAL_EXPONENT = 1000
#: Rows or columns of one tensor: 8,192 (a head on 8k tokens).
MAX_MATRIX_SIDE = 8192
#: Entries of one tensor: 2^24 (128 MiB of float64; a 4096 x 4096 target).
MAX_MATRIX_ENTRIES = 2**24
#: Bytes of the tensors that the cells name, summed from their declared shapes and checked before any
#: is read (they are kept in memory; other tensors are checked in chunks): 512 MiB, raised with
#: ``--max-tensor-bytes``. Four 4096 x 4096 targets fit; peak memory is this plus what the checks derive.
MAX_TENSOR_BYTES = 2**29
#: Cells in one file.
MAX_CELLS = 100_000
#: Tensors in one file.
MAX_TENSORS = 1_000_000
#: Work units per file (per worker with ``--workers``), raised with ``--max-work``: 2^35, at
#: most about 100 s of one core (bench/suites/exact_work.py: at most about 3 ns per unit for every
#: kind of work in a steady state, 5.5 for a process's first float64 slack pass). Ordinary
#: cells take far less: a 256 x 256 cell of bench/suites/exact_speed.py about 2^21, a full-rank
#: (d = 256) reconstruction witness checked with FLINT alone about 2^28.
MAX_WORK = 2**35


class Meter:
    """The work done inside one ``work_limit`` block: ``used`` units of at most ``limit``."""

    __slots__ = ("used", "limit")

    def __init__(self, limit: int):
        self.used, self.limit = 0, int(limit)

    def charge(self, units: int, what: str) -> None:
        self.used += int(units)
        if self.used > self.limit:
            raise LimitExceeded(f"work limit: {what} brings the work to {self.used} units, "
                                f"limit {self.limit} (raise it with --max-work)")


#: The meter of the innermost ``work_limit`` of this thread (or asyncio task); None outside one.
_current: ContextVar[Meter | None] = ContextVar("exact_work_meter", default=None)


@contextmanager
def work_limit(limit: int) -> Iterator[Meter]:
    """Meter the exact work done inside; ``charge`` raises ``LimitExceeded`` past ``limit`` units.

    Yields the ``Meter`` (read ``meter.used`` after the block). The meter lives in a
    ``ContextVar``: each thread meters its own work, and leaving the block restores the
    enclosing meter by its token (never by comparing meters).
    """
    meter = Meter(limit)
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def charge(units: int, what: str) -> None:
    """Count ``units`` of work before doing it (no-op outside ``work_limit``)."""
    meter = _current.get()
    if meter is not None:
        meter.charge(units, what)

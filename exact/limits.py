"""Resource limits of the exact tier, documented in ``docs/bracket-format.md``.

Each limit is checked before the work it bounds is done, and a test feeds
each one at the limit and at limit + 1. Work is counted in *units*, not
seconds: one unit is one multiply-add on one 64-bit word, so an exact
product of an m x k by a k x n integer matrix whose result needs L words
per entry costs ``m k n L``, a float64 product ``m k n``, and reading or
scanning a matrix one unit per word. ``work_limit`` meters one file.
"""
from __future__ import annotations

from contextlib import contextmanager

from .errors import LimitExceeded

__all__ = [
    "MAX_FILE_BYTES", "MAX_HEADER_BYTES", "MAX_NUMBER_CHARS", "MAX_DECIMAL_EXPONENT",
    "MAX_MATRIX_SIDE", "MAX_MATRIX_ENTRIES", "MAX_CELLS", "MAX_TENSORS", "MAX_WORK",
    "work_limit", "charge",
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
#: Cells in one file.
MAX_CELLS = 100_000
#: Tensors in one file.
MAX_TENSORS = 1_000_000
#: Work units per file (per worker with ``--workers``), raised with ``--max-work``: 2^35,
#: about 40 to 90 s of one core (measured: 2 to 3 ns per unit for FLINT products of any
#: width). Ordinary cells take far less: a 256 x 256 cell of bench/exact_speed.py about
#: 2^21, a full-rank (d = 256) reconstruction witness checked with FLINT alone about 2^28.
MAX_WORK = 2**35

_meter: list = []          # [used, limit] of the innermost work_limit, if any


@contextmanager
def work_limit(limit: int):
    """Meter the exact work done inside; ``charge`` raises ``LimitExceeded`` past ``limit`` units.

    Yields the meter ``[used, limit]`` (read ``meter[0]`` after the block).
    """
    meter = [0, limit]
    _meter.append(meter)
    try:
        yield meter
    finally:
        _meter.remove(meter)


def charge(units: int, what: str) -> None:
    """Count ``units`` of work before doing it (no-op outside ``work_limit``)."""
    if not _meter:
        return
    meter = _meter[-1]
    meter[0] += int(units)
    if meter[0] > meter[1]:
        raise LimitExceeded(f"work limit: {what} brings the work to {meter[0]} units, "
                            f"limit {meter[1]} (raise it with --max-work)")

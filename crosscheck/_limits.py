"""Resource limits of the second checker and its work meter.

The size limits are those of docs/bracket-format.md section 4 (the format
defines them; ``tests/test_crosscheck_reader.py`` checks that both checkers
use the same values). Two are the second checker's own: the nesting depth of
the JSON header (the format names none; Python's parser would otherwise stop
with a RecursionError somewhere near a thousand) and the work limit, whose
unit here is one multiply-add on one 64-bit word inside Python's integers
(the packed products of ``crosscheck._dyadic``), plus a fixed charge, in the
same time scale, per entry where the work is Python (converting a tensor, the
slack's exponentials) and per step of the odd map's facet walk.

There is no global meter: every check receives a ``Meter`` made for its file.
"""
from __future__ import annotations

from ._errors import LimitReached

__all__ = ["MAX_FILE_BYTES", "MAX_HEADER_BYTES", "MAX_NUMBER_CHARS", "MAX_DECIMAL_EXPONENT",
           "MAX_MATRIX_SIDE", "MAX_MATRIX_ENTRIES", "MAX_CELLS", "MAX_TENSORS", "MAX_JSON_DEPTH",
           "MAX_ODDMAP_DIM", "MAX_WORK", "Meter"]

#: docs/bracket-format.md section 4.
MAX_FILE_BYTES = 4 * 2**30
MAX_HEADER_BYTES = 16 * 2**20
MAX_NUMBER_CHARS = 1000
MAX_DECIMAL_EXPONENT = 1000
MAX_MATRIX_SIDE = 8192
MAX_MATRIX_ENTRIES = 2**24
MAX_CELLS = 100_000
MAX_TENSORS = 1_000_000
#: The largest dimension d of an ``odd_map`` witness (2^7 7! = 645,120 facets).
MAX_ODDMAP_DIM = 7
#: JSON nesting depth of the header (the claim document needs 6; provenance is free-form).
MAX_JSON_DEPTH = 256
#: Work units per file: 2^34. Measured (bench/suites/crosscheck.py, project machine under load): the
#: packed products take 4 to 6 ns per unit, so a file at the limit takes about 70 to 100 s of one core.
MAX_WORK = 2**34


class Meter:
    """Counts work units before the work is done; ``LimitReached`` past ``limit``."""

    __slots__ = ("used", "limit")

    def __init__(self, limit: int = MAX_WORK):
        self.used, self.limit = 0, int(limit)

    def charge(self, units: int, what: str) -> None:
        self.used += int(units)
        if self.used > self.limit:
            raise LimitReached(f"work limit: {what} brings the work to {self.used} units, "
                               f"limit {self.limit} (raise it with --max-work)")

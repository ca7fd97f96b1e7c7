"""arb's working precision, set for one block at a time.

FLINT keeps one working precision (``flint.ctx.prec``) for the whole process, shared by every
thread. ``arb_precision`` is the only code of the project that sets it
(``tests/test_precision.py`` greps the tree): it holds one process-wide re-entrant lock for the
block, so a thread never computes at a precision another thread chose, and nested blocks (one
thread) restore the outer precision when they end. A ball computed inside a block is an enclosure
at that block's precision; arithmetic outside every block runs at whatever precision is current,
so code whose result depends on the precision does it inside one.

>>> from flint import arb, ctx
>>> before = ctx.prec
>>> with arb_precision(200):
...     ctx.prec
200
>>> ctx.prec == before
True
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from flint import ctx

__all__ = ["arb_precision"]

#: Held by the block that set the precision; re-entrant, so one thread may nest blocks.
_LOCK = threading.RLock()


@contextmanager
def arb_precision(bits: int) -> Iterator[None]:
    """Run the block with arb's working precision at ``bits``; restore the precision found on entry
    when the block ends (also on an exception). Other threads entering a block wait until this one
    ends: FLINT's precision is process-global, and the lock keeps it the block's own."""
    if not isinstance(bits, int) or isinstance(bits, bool) or bits < 2:
        raise ValueError(f"arb precision must be an integer of at least 2 bits, not {bits!r}")
    with _LOCK:
        before = ctx.prec
        ctx.prec = bits
        try:
            yield
        finally:
            ctx.prec = before

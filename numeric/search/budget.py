"""Counted work, the outer safety cap and a clean stop (counted budgets; the clean stop).

A search stops when its ``Budget`` of work units (descent steps, LP work by size,
candidate rows) is spent, never on a clock, so a bracket does not depend
on the load of the machine. No clock is read anywhere: ``SafetyCap``, the
outer cap of a cell, fires only when its stop token is requested (the CLI's
first Ctrl-C; ``numeric.runtime.stop_scope``). Then every search ends with what
it has, ``fired`` turns true, the cell records ``"capped": true``, and the
driver starts no further tolerance (the upper sides of those started are cut
short), so a long run writes what it certified so far.

>>> b = Budget(3); b.spend(2); b.exhausted
False
>>> b.spend(); b.exhausted, b.used
(True, 3)
>>> Budget(-1)
Traceback (most recent call last):
ValueError: a budget counts work units: a non-negative integer, got -1
"""
from __future__ import annotations

import numpy as np

from numeric.runtime import StopToken, current_stop_token, note_work, stop_requested

__all__ = ["Budget", "SafetyCap", "stop_requested"]


class SafetyCap:
    """The outer cap of one cell: it fires when its stop token is requested and remembers that it did.

    ``token``: the stop token to watch; by default the current one (``numeric.runtime.stop_scope``)
    when the cap is made. Outside every stop scope, with no token, the cap never fires.

    >>> from numeric.runtime import stop_scope
    >>> with stop_scope() as t:
    ...     cap = SafetyCap()
    >>> cap.expired(); t.request(); cap.expired(), cap.fired
    False
    (True, True)
    """

    def __init__(self, token: StopToken | None = None):
        self.token = current_stop_token() if token is None else token
        self.fired = False

    def expired(self) -> bool:
        """True once a stop was requested (and from then on ``fired``)."""
        if self.token is not None and self.token.requested:
            self.fired = True
        return self.fired


class Budget:
    """A count of work units that a search spends, with an optional shared ``SafetyCap``.

    Mutable on purpose: one budget is handed down a search and its helpers,
    which all spend from it.
    """

    def __init__(self, units: int, cap: SafetyCap | None = None):
        if isinstance(units, bool) or not isinstance(units, (int, np.integer)) or units < 0:
            raise ValueError(f"a budget counts work units: a non-negative integer, got {units!r}")
        self.units = int(units)
        self.used = 0
        self.cap = cap

    def spend(self, n: int = 1) -> None:
        """Record ``n`` units of work (a non-negative count)."""
        if n < 0:
            raise ValueError(f"work spent is a non-negative count, got {n!r}")
        self.used += int(n)
        note_work(int(n))                 # a progress display's count; never read by a search

    def affords(self, n: int) -> bool:
        """``n`` more units fit in what is left (and the safety cap has not fired).

        A search asks before a piece of work whose cost it knows (an LP of known
        size), so the budget is never overrun by one large last piece.

        >>> b = Budget(10); b.spend(7); b.affords(3), b.affords(4)
        (True, False)
        """
        return self.used + int(n) <= self.units and not self.exhausted

    def top_up(self, n: int) -> None:
        """Raise the units so that ``n`` more are left (a grant, counted in work like the rest; a
        budget with ``n`` or more left is unchanged).

        >>> b = Budget(10); b.spend(7); b.top_up(5); b.units, b.affords(5), b.affords(6)
        (12, True, False)
        >>> b.top_up(2); b.units
        12
        """
        if n < 0:
            raise ValueError(f"a grant is a non-negative count, got {n!r}")
        self.units = max(self.units, self.used + int(n))

    def take(self, n: int) -> bool:
        """Spend ``n`` units if ``affords(n)``; False (nothing spent) otherwise."""
        if not self.affords(n):
            return False
        self.spend(n)
        return True

    @property
    def exhausted(self) -> bool:
        """No units left, or the safety cap fired."""
        return self.used >= self.units or (self.cap is not None and self.cap.expired())

"""The bracket command's progress line: the side of the tolerance it is on and the work spent in it.

On a terminal (and not under ``--json``) the command shows, at most once a second, which side of which
tolerance is running and how many work units its budgets have spent so far (``numeric.runtime
.work_observer``, told by every ``Budget.spend``), so a long cell is never silent. A display only: the
search never reads it, so a bracket is the same with or without it (``tests/test_progress.py``).
"""
from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from numeric.runtime import work_observer

__all__ = ["REFRESH_S", "SearchProgress", "search_progress"]

#: The line is redrawn at most this often (seconds; a display, never a budget).
REFRESH_S = 1.0


class SearchProgress:
    """A one-line status on ``stream``: ``PROG: side k of K (last finished: LABEL), N units``."""

    def __init__(self, prog: str, sides: int, stream: TextIO):
        self.prog, self.sides, self.stream = prog, sides, stream
        self.done, self.units, self.last, self.drawn = 0, 0, "", 0.0

    def work(self, units: int) -> None:
        self.units += units
        now = time.monotonic()
        if now - self.drawn >= REFRESH_S:
            self.draw(now)

    def step(self, index: int, label: str) -> None:
        """A side finished (``front.search_targets``' ``on_step``)."""
        self.done, self.last = self.done + 1, label
        self.draw(time.monotonic())

    def draw(self, now: float) -> None:
        self.drawn = now
        after = f" (finished: {self.last})" if self.last else ""
        side = min(self.done + 1, self.sides)
        self.stream.write(f"\r{self.prog}: side {side} of {self.sides}{after}, {self.units:,} work units\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


@contextlib.contextmanager
def search_progress(prog: str, tolerances: int, *, show: bool,
                    stream: TextIO | None = None) -> Iterator[SearchProgress | None]:
    """A ``SearchProgress`` for a run of ``tolerances`` (two sides each) while the block runs, or None
    when ``show`` is false (``--json``, or stderr not a terminal)."""
    if not show:
        yield None
        return
    bar = SearchProgress(prog, 2 * tolerances, stream or sys.stderr)
    try:
        with work_observer(bar.work):
            yield bar
    finally:
        bar.close()

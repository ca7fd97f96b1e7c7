"""The bracket command's path as functions: announce, search, write, re-check exactly.

``python -m numeric bracket`` and the Python front door ``softrank.bracket``
run the same three steps, in this module, so there is one path:

1. ``announce``: a search whose budgets could take long (``effort.expected_seconds``,
   every budget spent, one core), or a target of a million entries or more,
   says so on stderr before it starts;
2. ``search_targets``: ``search_brackets`` on each target (one matrix, or the
   heads of a batch, one after the other in this process, each with pinned
   threads and the same seed), every side re-checked by the exact API before
   it is kept;
3. ``write_checked``: the cells of every target in one bracket file (format
   v1), then the exact tier (``exact.verify.verify_file``) re-verifies that
   file as written, with the raised work limit ``OWN_FILE_WORK``.

Nothing here reads a clock or changes process state: the command line's Ctrl-C handler is
``numeric.runtime.sigint_stop``, entered by the command (``numeric.search.cli``).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from exact.errors import CertificateError
from exact.verify import CellReport, verify_file
from numeric.runtime import stop_requested
from numeric.search.candidate import LowerCandidate
from numeric.search.driver import SearchOutput, search_brackets
from numeric.search.effort import Effort, effort_budgets, expected_seconds
from numeric.search.export import write_bracket_file
from numeric.search.inputs import STOCHASTIC_TOL

__all__ = ["ANNOUNCE_SECONDS", "ANNOUNCE_ENTRIES", "OWN_FILE_WORK", "Target", "CheckedFile", "cost_notice",
           "announce", "search_targets", "write_checked"]

#: Runs whose budgets could take longer than this (seconds), or targets of at least
#: ``ANNOUNCE_ENTRIES`` entries, announce their expected cost first.
ANNOUNCE_SECONDS = 600.0
ANNOUNCE_ENTRIES = 1024 * 1024
#: Work limit of the re-check of the file a search has just written (``exact.limits``): the
#: file is its own, not a hostile one, so the default limit (2^35 units, about a minute) is raised
#: 32-fold, enough for rank-1000 factors of the largest legal target, 4096 x 4096.
OWN_FILE_WORK = 2**40


@dataclass(frozen=True)
class Target:
    """One matrix to bracket: m x n float64 ``matrix`` (row-stochastic within ``row_tol``), optional
    float64 ``logits`` (the claim is then about their exact row softmax, K.5), the prefix of its
    cell ids and tensor names, and provenance recorded in each of its cells."""

    matrix: np.ndarray
    logits: np.ndarray | None = None
    id_prefix: str = "cell"
    provenance: dict[str, Any] = field(default_factory=dict)
    row_tol: float = STOCHASTIC_TOL


@dataclass(frozen=True)
class CheckedFile:
    """A bracket file as written and the exact tier's reports on it.

    ``reports``: {cell id: ``exact.verify.CellReport``}, or None when the
    re-check stopped (``error`` says why: a resource limit, out of memory)."""

    path: Path
    reports: dict[str, CellReport] | None
    error: str | None = None


def cost_notice(prog: str, effort: str | Effort, shape: tuple[int, int], tolerances: int, count: int = 1,
                stop: str = "") -> str | None:
    """The announcement of a search of ``count`` m x n targets, or None when it is short.

    >>> cost_notice("x", "default", (24, 24), 3) is None
    True
    >>> "expected cost" in cost_notice("x", "thorough", (4096, 4096), 1)
    True
    """
    m, n = shape
    sec = count * expected_seconds(effort, m, n, tolerances)
    if sec <= ANNOUNCE_SECONDS and m * n < ANNOUNCE_ENTRIES:
        return None
    what = f"{m} x {n}" if count == 1 else f"{count} targets of {m} x {n}"
    return (f"{prog}: {what} at effort {effort_budgets(effort).name}, {tolerances} tolerance(s): expected cost "
            f"up to about {sec / 60:.0f} min on one core (every budget spent)" + (f"; {stop}" if stop else ""))


def announce(prog: str, effort: str | Effort, shape: tuple[int, int], tolerances: int, *, count: int = 1,
             stop: str = "", file: TextIO | None = None) -> bool:
    """Print ``cost_notice`` on stderr (or ``file``) when there is one; whether it printed."""
    text = cost_notice(prog, effort, shape, tolerances, count, stop)
    if text is not None:
        print(text, file=file or sys.stderr, flush=True)
    return text is not None


def search_targets(targets: Iterable[Target], eps_items: Sequence[object], *, effort: str | Effort, seed: int,
                   device: Any = None, attack: bool = True,
                   on_step: Callable[[int, str], object] | None = None,
                   hints: Sequence[LowerCandidate] = ()) -> list[SearchOutput]:
    """``search_brackets`` on each target in order, every one with the same ``seed`` (so a head's
    brackets in a batch are those of the head alone); after a stop request no further target starts.

    ``on_step(index, label)`` is called after each side of each tolerance (progress only); ``hints``:
    lower witnesses of an earlier file, re-checked exactly on each target they fit (``numeric.search.hints``).
    Raises ValueError on bad input."""
    outputs: list[SearchOutput] = []
    for i, t in enumerate(targets):
        if i and stop_requested():
            break
        step: Callable[[str], object] | None = None if on_step is None else \
            (lambda label, i=i: on_step(i, label))
        outputs.append(search_brackets(t.matrix, eps_items, logits=t.logits, id_prefix=t.id_prefix, device=device,
                                       attack=attack, provenance=t.provenance, effort=effort, seed=seed,
                                       row_tol=t.row_tol, on_step=step, hints=hints))
    return outputs


def write_checked(path: str | os.PathLike[str], outputs: list[SearchOutput],
                  max_work: int = OWN_FILE_WORK) -> CheckedFile:
    """Write the cells of ``outputs`` to one bracket file at ``path`` and re-verify it exactly."""
    cells = [c for out in outputs for c in out.cells]
    tensors = {k: v for out in outputs for k, v in out.tensors.items()}
    written = write_bracket_file(path, cells, tensors)
    try:
        return CheckedFile(written, {r.id: r for r in verify_file(written, max_work=max_work)})
    except (CertificateError, MemoryError) as exc:
        return CheckedFile(written, None, str(exc) or type(exc).__name__)

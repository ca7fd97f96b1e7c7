"""Agreement of the second checker with the exact tier's verdicts on the same bracket files.

The exact tier's verdicts come in as plain data (this package never imports
``exact``): for one file, either the mapping ``numeric.panel.audit`` keeps,
``{"cells": {cell id: CellReport.to_json()}}`` or ``{"error": message}``, or
the list of cell objects of ``python -m exact verify --json`` for that file.
A disagreement is anything that does not match: a cell one side has and the
other lacks, another eps or claimed rank, a side verified by one checker and
not by the other (whatever the reason: refuted, or not decided here), a
convex cap of another rank or verdict (a diagnostic, but both checkers judge
it), a file one checker refused and the other judged.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ._errors import Malformed
from ._limits import MAX_WORK
from ._numbers import show
from ._results import CellResult
from ._verify import verify_file

__all__ = ["Agreement", "agreement", "agree_all", "summary", "markdown"]


@dataclass(frozen=True)
class Agreement:
    """How the two checkers' verdicts on one file compare (counts are brackets: cells, both sides)."""

    file: str
    cells: int                      # cells the second checker judged
    exact_verified: int             # brackets the exact tier verified on both sides
    crosscheck_verified: int        # brackets the second checker verified on both sides
    disagreements: tuple[str, ...]  # one line each
    error: str | None = None        # the second checker's refusal of the file
    exact_error: str | None = None  # the exact tier's refusal of the file

    @property
    def ok(self) -> bool:
        return not self.disagreements

    def to_json(self) -> dict[str, object]:
        return {"file": self.file, "cells": self.cells, "exact_verified": self.exact_verified,
                "crosscheck_verified": self.crosscheck_verified, "disagreements": list(self.disagreements),
                "error": self.error, "exact_error": self.exact_error}


def _exact_cells(exact: object) -> tuple[dict[Any, Any], str | None]:
    """(cells by id, error) from either accepted form; ``ValueError`` on anything else."""
    if isinstance(exact, dict) and "error" in exact and "cells" not in exact:
        return {}, str(exact["error"])
    if isinstance(exact, dict) and isinstance(exact.get("cells"), dict):
        return dict(exact["cells"]), None
    if isinstance(exact, (list, tuple)) and all(isinstance(c, dict) and "id" in c for c in exact):
        return {c["id"]: c for c in exact}, None
    raise ValueError("exact verdicts must be {'cells': {id: cell}}, {'error': message} or a list of cells")


def _same_eps(text: object, eps: Fraction) -> bool:
    try:
        return Fraction(str(text)) == eps
    except (ValueError, ZeroDivisionError):
        return False


def agreement(path: str | os.PathLike[str], exact: object, max_work: int = MAX_WORK,
              results: tuple[CellResult, ...] | None = None, error: str | None = None) -> Agreement:
    """Judge ``path`` with the second checker (or take its ``results``, or its refusal ``error``) and
    compare with the exact tier's verdicts ``exact``."""
    path = os.fspath(path)
    theirs, their_error = _exact_cells(exact)
    exact_ok = sum(bool(c.get("lower_verified")) and bool(c.get("upper_verified")) for c in theirs.values())
    if results is None and error is None:
        try:
            results = verify_file(path, max_work)
        except Malformed as exc:
            error = str(exc)
        except MemoryError:
            error = "out of memory"
    if error is not None:
        why = () if their_error is not None else (
            f"{show(path)}: refused by the second checker ({error}), judged by the exact tier",)
        return Agreement(path, 0, exact_ok, 0, why, error, their_error)
    assert results is not None                 # judged above, or given: a refusal returned already
    ours = {r.id: r for r in results}
    lines: list[str] = []
    if their_error is not None:
        lines.append(f"{show(path)}: refused by the exact tier ({their_error}), judged by the second checker")
    for cid in sorted(set(theirs) - set(ours)):
        lines.append(f"{show(cid)}: judged by the exact tier only")
    for cid in sorted(set(ours) - set(theirs)):
        if their_error is None:
            lines.append(f"{show(cid)}: judged by the second checker only")
    for cid in sorted(set(ours) & set(theirs)):
        r, c = ours[cid], theirs[cid]
        if not _same_eps(c.get("eps"), r.eps):
            lines.append(f"{show(cid)}: eps {show(c.get('eps'))} for the exact tier, {r.eps} here")
        for name, side in (("lower", r.lower), ("upper", r.upper)):
            if c.get(name) != side.rank:
                lines.append(f"{show(cid)}: {name} rank {show(c.get(name))} for the exact tier, {side.rank} here")
            if bool(c.get(f"{name}_verified")) != side.verified:
                lines.append(f"{show(cid)}: {name} side {side.kind} rank {side.rank}: "
                             f"{_exact_says(c, name)}, {_second_says(side)}")
        cap = (None, None) if r.cap is None else (r.cap.rank, r.cap.verified)
        theirs_cap = (c.get("convex_cap"), None if c.get("convex_cap") is None else bool(c.get("convex_cap_verified")))
        if cap != theirs_cap:                   # a diagnostic, but the two checkers must still agree on it
            lines.append(f"{show(cid)}: convex cap (rank, verified) {show(list(theirs_cap))} for the exact tier, "
                         f"{list(cap)} here" + (f" ({r.cap.reason})" if r.cap is not None and r.cap.reason else ""))
    mine_ok = sum(r.verified for r in results)
    return Agreement(path, len(results), exact_ok, mine_ok, tuple(lines), None, their_error)


def _exact_says(cell: dict[str, Any], name: str) -> str:
    """The exact tier's verdict on one side in words: verified, not decided (an enclosure that neither
    proves nor disproves: the exact tier's reasons say "not proved"), or refuted; with its reason."""
    if cell.get(f"{name}_verified"):
        return "verified by the exact tier"
    why = str(cell.get(f"{name}_reason") or "")
    said = "not decided by the exact tier" if "not proved" in why else "refuted by the exact tier"
    return said + (f" ({show(why, 120)[1:-1]})" if why else "")


def _second_says(side: Any) -> str:
    """This checker's verdict on one side in words (refuted and not decided kept apart, with the reason)."""
    said = {"verified": "verified by the second checker", "refuted": "refuted by the second checker",
            "not checked": "not decided by the second checker"}[side.status.value]
    return said + (f" ({side.reason})" if side.reason else "")


def _one(task: tuple[str, object, int]) -> Agreement:
    path, exact, max_work = task
    return agreement(path, exact, max_work)


def agree_all(exact_results: dict[Any, object], workers: int | None = None,
              max_work: int = MAX_WORK) -> tuple[Agreement, ...]:
    """``agreement`` for every ``{path: exact verdicts}`` item, in processes (one per core by default)."""
    tasks = [(str(p), v, max_work) for p, v in exact_results.items()]
    workers = min(workers or os.cpu_count() or 1, max(len(tasks), 1))
    if workers <= 1:
        return tuple(map(_one, tasks))
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        return tuple(pool.map(_one, tasks))


def summary(agreements: Iterable[Agreement]) -> dict[str, Any]:
    """Totals over files: brackets, brackets verified by each checker, and every disagreement."""
    agreements = list(agreements)
    return {"files": len(agreements),
            "brackets": sum(a.cells for a in agreements),
            "exact_verified": sum(a.exact_verified for a in agreements),
            "crosscheck_verified": sum(a.crosscheck_verified for a in agreements),
            "disagreements": [line for a in agreements for line in a.disagreements],
            "agree": all(a.ok for a in agreements)}


def markdown(totals: dict[str, Any]) -> list[str]:
    """Report lines (Markdown) for ``summary``'s totals: the counts of both checkers and every disagreement.

    >>> markdown({"files": 1, "brackets": 3, "exact_verified": 3, "crosscheck_verified": 3, "disagreements": [],
    ...           "agree": True})[2]
    '3 brackets in 1 file(s): the exact tier verified 3, the second checker verified 3; 0 disagreements.'
    """
    lines = ["## Independent re-derivation (crosscheck)\n",
             "Every bracket re-derived by a second checker that shares no code with the exact tier "
             "(its own reader, Python integers and Fractions, Taylor enclosures; docs/crosscheck.md).\n",
             f"{totals['brackets']} brackets in {totals['files']} file(s): the exact tier verified "
             f"{totals['exact_verified']}, the second checker verified {totals['crosscheck_verified']}; "
             f"{len(totals['disagreements'])} disagreements."]
    lines += [f"- DISAGREEMENT: {line}" for line in totals["disagreements"]]
    return lines

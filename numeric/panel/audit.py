"""The report's source of truth: every bracket file of a panel re-verified (issue 12 item 4).

``audit(out)`` re-verifies every bracket file under ``DIR/brackets`` with the
exact tier (``exact.verify.verify_file``, one process per core) and checks
each cell record against that pass. The rows it returns carry the ranks and
verdicts of the exact pass, not those the panel wrote; everything that does
not add up is an error, never skipped:

- a record that is unreadable, or of another run identity than ``panel.json``;
- a missing ``panel.json``;
- a bracket file that is missing or unreadable (malformed);
- a row whose cell is not in its file, or whose L, U or verdict disagree
  with the exact pass; a row named twice;
- a bracket file, or a cell in one, that no record names.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from numeric.panel.table import CELLS_DIR, RecordError, read_record, sort_key
from numeric.panel.provenance import PanelError, read_run

__all__ = ["Audit", "audit", "verify_files", "verified_results", "run_summary"]

BRACKETS_DIR = "brackets"


@dataclass(frozen=True)
class Audit:
    """The checked rows (ranks and verdicts from the exact pass), the errors, and ``panel.json``."""

    rows: list
    errors: list
    run: dict | None


def _verify_one(path: str) -> dict:
    """``{cell id: CellReport.to_json()}`` or ``{"error": message}`` (run in a worker process)."""
    from exact.verify import verify_file

    try:
        return {"cells": {r.id: r.to_json() for r in verify_file(path)}}
    except Exception as e:  # noqa: BLE001 - an unreadable file is an error in the report, not a crash
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}


def verify_files(paths: list, workers: int | None = None) -> dict:
    """Re-verify ``paths`` in parallel (one process per core; in-process for one file)."""
    paths = [str(p) for p in paths]
    workers = min(workers or os.cpu_count() or 1, len(paths))
    if workers <= 1:
        return {p: _verify_one(p) for p in paths}
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        return dict(zip(paths, pool.map(_verify_one, paths)))


def verified_results(out: Path, files: list, workers: int | None = None, reverify: bool = False) -> dict:
    """The exact pass on every file: from its record (``numeric.panel.vcache``: same bytes, same checker)
    unless ``reverify``, else verified now and recorded."""
    from numeric.heads.zoo.common import file_sha256
    from numeric.panel import vcache

    digests = {str(p): file_sha256(p) for p in files}
    found = {} if reverify else {p: vcache.lookup(out, d) for p, d in digests.items()}
    missing = [p for p in digests if found.get(p) is None]
    for p, result in verify_files(missing, workers).items():
        vcache.store(out, digests[p], result)
        found[p] = result
    return {p: found[p] for p in digests}


def _records(out: Path, run: dict | None, errors: list) -> list:
    """All rows of the records whose identity is the run's; the others are errors."""
    identity = (run or {}).get("identity")
    rows = []
    for p in sorted((out / CELLS_DIR).glob("*.json")):
        try:
            doc = read_record(p)
        except RecordError as e:
            errors.append(str(e))
            continue
        if identity is not None and (doc.get("signature") or {}).get("identity") != identity:
            errors.append(f"{p.relative_to(out)}: record of another run identity than panel.json")
            continue
        rows.extend(doc["rows"])
    return rows


def _same_eps(a, b) -> bool:
    try:
        return Fraction(a) == Fraction(str(b))
    except (TypeError, ValueError, ZeroDivisionError):
        return False


def _check_row(r: dict, verdicts: dict, errors: list) -> dict | None:
    """The row with the exact pass's ranks and verdicts, or None (an error is recorded)."""
    cid, f = r.get("cell_id") or "?", r.get("file") or "?"
    result = verdicts.get(f)
    if result is None:
        errors.append(f"{cid}: bracket file {f} is missing")
        return None
    if "error" in result:
        errors.append(f"{cid}: bracket file {f} is unreadable: {result['error']}")
        return None
    rep = result["cells"].get(cid)
    if rep is None:
        errors.append(f"{cid}: no such cell in {f}")
        return None
    if not _same_eps(rep["eps"], r.get("eps")):
        errors.append(f"{cid}: the record says eps = {r.get('eps')}, the file {rep['eps']}")
        return None
    checked = dict(r, L=rep["lower"], U=rep["upper"], lower_verified=rep["lower_verified"],
                   upper_verified=rep["upper_verified"],
                   verified=bool(rep["lower_verified"] and rep["upper_verified"]))
    for k in ("L", "U", "verified", "lower_verified", "upper_verified"):
        if r.get(k) != checked[k]:
            errors.append(f"{cid}: the record says {k} = {r.get(k)!r}, the exact pass {checked[k]!r}")
            return None
    return checked


def audit(out, workers: int | None = None, reverify: bool = False) -> Audit:
    """Re-verify a panel directory (or read the records of that pass, ``verified_results``) and check
    its records against that pass."""
    out = Path(out)
    errors = []
    try:
        run = read_run(out)
        if run is None:
            errors.append(f"{out / 'panel.json'} is missing: the run identity is unknown")
    except PanelError as e:
        run = None
        errors.append(str(e))
    rows = _records(out, run, errors)
    files = sorted((out / BRACKETS_DIR).glob("*.safetensors"))
    results = verified_results(out, files, workers, reverify)
    verdicts = {p.relative_to(out).as_posix(): results[str(p)] for p in files}
    checked, named = [], set()
    for r in rows:
        if r.get("status") != "ok":
            checked.append(r)
            continue
        key = (r.get("file"), r.get("cell_id"))
        if key in named:
            errors.append(f"{r.get('cell_id')}: named by two rows")
            continue
        named.add(key)
        c = _check_row(r, verdicts, errors)
        if c is not None:
            checked.append(c)
    for f, v in sorted(verdicts.items()):
        for cid in sorted(v.get("cells", {})):
            if (f, cid) not in named:
                errors.append(f"{cid}: cell of {f} that no record names")
        if "error" in v and not any(k[0] == f for k in named):
            errors.append(f"{f}: unreadable bracket file that no record names: {v['error']}")
    checked.sort(key=sort_key)
    return Audit(checked, errors, run)


def run_summary(run: dict | None) -> dict:
    """Effort, versions and code of ``panel.json`` for the report's header (empty when unknown)."""
    ident = (run or {}).get("identity") or {}
    return {"effort": ident.get("effort"), "versions": ident.get("versions") or {},
            "code": dict((run or {}).get("code_version") or {}, **(ident.get("code") or {})), "eps": ident.get("eps"), "tolerances": ident.get("tolerances"),
            "summary": (run or {}).get("summary")}

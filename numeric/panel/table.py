"""The panel's records on disk: cell markers, the cell table, atomic writes.

A finished cell leaves ``DIR/cells/<key>.json`` (its signature, its rows, the
search provenance); ``DIR/cells.csv`` is the table of all rows. The runner
writes these files and the report reads them; both import this module and
nothing else of each other.

Every file is written atomically through ``fileio.safeio`` (a temporary
file in the same directory, then ``os.replace``), so a process killed at any
point leaves either the old file or the new one, never half of one; a target
that is not a regular file, or a symbolic link inside the panel directory, is
refused (``SafeIOError``; the trust model of docs/panel.md).

>>> sort_key(PanelRow("encoder", "m", 1, 2, "text:0", "1/4", "ok", cell_kind="full"))
('encoder', 'm', 'full', 1, 2, 'text:0', Fraction(1, 4))
"""
from __future__ import annotations

import csv
import io
import json
from fractions import Fraction
from pathlib import Path

from exact.errors import UserInputError
from numeric.panel.schema import TABLE_COLUMNS, PanelRow, SchemaError, check_record
from fileio.safeio import SafeIOError, read_json, write_bytes

__all__ = ["BASE_COLUMNS", "CELLS_DIR", "TABLE_NAME", "RUN_NAME", "RecordError", "atomic_write",
           "write_record", "read_record", "read_rows", "write_table", "sort_key", "jsonable"]

#: The typed columns of ``cells.csv``, in order (``numeric.panel.schema.PanelRow``'s fields, the audit's aside).
BASE_COLUMNS = list(TABLE_COLUMNS)
CELLS_DIR = "cells"
TABLE_NAME = "cells.csv"
RUN_NAME = "panel.json"
#: Largest cell record read (bytes).
RECORD_BYTES = 64 << 20


class RecordError(UserInputError):
    """A cell record that cannot be read."""


def atomic_write(path, data: bytes | str, root=None) -> Path:
    """Write ``data`` to ``path`` atomically (``fileio.safeio.write_bytes``; ``root``: no link followed below it)."""
    return write_bytes(Path(path), data.encode("utf-8") if isinstance(data, str) else data, root=root)


def jsonable(x):
    """JSON fallback for numpy scalars (``.item()``) and anything else (``str``)."""
    try:
        return x.item()
    except AttributeError:
        return str(x)


def record_path(out, key: str) -> Path:
    return Path(out) / CELLS_DIR / f"{key}.json"


def write_record(out, key: str, doc: dict) -> Path:
    return atomic_write(record_path(out, key), json.dumps(doc, default=jsonable, sort_keys=True), root=out)


def read_record(path) -> tuple[dict, list[PanelRow]]:
    """One cell record and its rows (``numeric.panel.schema.check_record``); ``RecordError`` when it is
    unreadable or not a record (the message names the first key that does not fit)."""
    try:
        doc = read_json(path, limit=RECORD_BYTES)
    except SafeIOError as e:
        raise RecordError(f"unreadable cell record: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise RecordError(f"{path}: not a cell record (no rows)")
    try:
        return doc, check_record(doc)
    except SchemaError as e:
        raise RecordError(f"{path}: not a cell record ({e})") from None


def sort_key(r: PanelRow) -> tuple:
    return (r.family, r.model, r.cell_kind or "", r.layer, r.head, r.source, Fraction(r.eps))


def read_rows(out, errors: list | None = None) -> list[PanelRow]:
    """All rows of a panel directory (from its cell records), sorted.

    An unreadable record raises ``RecordError``, or is appended to ``errors``
    when a list is given; it is never skipped silently.
    """
    rows = []
    for p in sorted((Path(out) / CELLS_DIR).glob("*.json")):
        try:
            rows.extend(read_record(p)[1])
        except RecordError as e:
            if errors is None:
                raise
            errors.append(str(e))
    rows.sort(key=sort_key)
    return rows


def table_text(rows: list[PanelRow]) -> str:
    """The CSV text of ``rows``: the base columns, then any extra ones sorted."""
    records = [r.to_json() for r in rows]
    extra = sorted({k for r in records for k in r} - set(BASE_COLUMNS))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=BASE_COLUMNS + extra, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in BASE_COLUMNS + extra})
    return buf.getvalue()


def write_table(out, rows: list[PanelRow]) -> Path:
    return atomic_write(Path(out) / TABLE_NAME, table_text(rows), root=out)

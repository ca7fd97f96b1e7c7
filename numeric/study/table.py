"""The study's cell table as a file: the statistics from a shipped table, without the panel.

``numeric study DIR --write-table FILE`` writes the study's internal table
(``numeric.study.data.StudyData``, built from the audited panel) as CSV;
``numeric study --table FILE`` runs the statistics from such a file alone. The
brackets behind its target were NOT re-verified on the machine that reads it:
every output of a table run carries ``BANNER``. The default input remains the
verified panel directory.

Format (UTF-8 CSV, one header row, one row per cell, comma separated, ``\\n``
line ends):

- ``cell_id``, ``family``, ``head``, ``source``, ``domain`` (text; ``domain``
  empty when the panel did not record one);
- ``target:NAME``: the study's target of the cell (NAME one of ``u_over_n``,
  ``l_over_n``, ``log_mid``), a float;
- ``num:COLUMN`` for every numeric study column (B0..B2, G, I and the gauge
  audit's columns, ``numeric.study.blocks``), a float; ``nan`` for a gap;
- ``cat:COLUMN`` for every categorical column (``family``, ``b0_domain``), text.

Floats are written with ``repr`` (shortest round-trip), so a table read back
gives the same statistics bit for bit. A file larger than ``MAX_BYTES``, a row
of another width, a missing key column, a bad float or a duplicated cell id is
bad input (``StudyError``: one line, exit 2).

>>> import numpy as np
>>> d = StudyData.build({"x": [1.0, float("nan")]}, {"family": ["a", "a"]}, [0.25, 0.5], ["s0", "s1"], ["h", "h"],
...                     ["a", "a"], cell_ids=["c0", "c1"])
>>> text = to_csv(d, "u_over_n"); text.splitlines()[0]
'cell_id,family,head,source,domain,target:u_over_n,num:x,cat:family'
>>> e, target = from_csv(text); target, e.y.tolist(), bool(np.isnan(e.numeric["x"][1]))
('u_over_n', [0.25, 0.5], True)
"""
from __future__ import annotations

import csv
import io
import math

import numpy as np

from fileio.safeio import SafeIOError, escape, read_bytes, write_text
from numeric.study.data import StudyData, StudyError

__all__ = ["BANNER", "MAX_BYTES", "KEYS", "to_csv", "from_csv", "read_table", "write_table"]

#: The line every output of a table run carries.
BANNER = ("statistics from a shipped cell table: the brackets behind its target were NOT re-verified on this "
          "machine (run the study on the panel directory for that)")
#: Largest table read (a few thousand cells of ~100 columns are ~5 MB).
MAX_BYTES = 64 * 1024 * 1024
#: The leading key columns.
KEYS = ("cell_id", "family", "head", "source", "domain")
TARGETS = ("u_over_n", "l_over_n", "log_mid")


def to_csv(data: StudyData, target: str) -> str:
    """The table as CSV text (module docstring)."""
    num, cat = sorted(data.numeric), sorted(data.categorical)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(KEYS) + [f"target:{target}"] + [f"num:{c}" for c in num] + [f"cat:{c}" for c in cat])
    doms = data.domains if data.domains is not None else np.full(len(data), "", dtype=str)
    for i in range(len(data)):
        w.writerow([data.cell_ids[i], data.families[i], data.heads[i], data.sources[i], doms[i], repr(float(data.y[i]))]
                   + [repr(float(data.numeric[c][i])) for c in num] + [data.categorical[c][i] for c in cat])
    return buf.getvalue()


def _float(text: str, where: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise StudyError(f"bad number {escape(text)!s} in {where}") from None
    if math.isinf(v):
        raise StudyError(f"infinite number in {where}")
    return v


def from_csv(text: str) -> tuple:
    """``(StudyData, target name)`` of CSV text; ``StudyError`` (one line) on anything malformed."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise StudyError("empty study table")
    head, body = rows[0], rows[1:]
    if tuple(head[:len(KEYS)]) != KEYS or len(head) <= len(KEYS) or not head[len(KEYS)].startswith("target:"):
        raise StudyError(f"not a study table: the header must start with {','.join(KEYS)},target:NAME")
    target = head[len(KEYS)].removeprefix("target:")
    if target not in TARGETS:
        raise StudyError(f"unknown target {escape(target)} in the table (one of {', '.join(TARGETS)})")
    rest = head[len(KEYS) + 1:]
    if len(set(head)) != len(head):
        raise StudyError("a column is named twice in the study table")
    bad = [c for c in rest if not c.startswith(("num:", "cat:")) or len(c) <= 4]
    if bad:
        raise StudyError(f"bad column {escape(bad[0])} in the study table (want num:NAME or cat:NAME)")
    if not body:
        raise StudyError("the study table has no cells")
    cols = list(zip(*[r if len(r) == len(head) else _width(r, i, len(head)) for i, r in enumerate(body, 2)]))
    ids = np.asarray(cols[0], dtype=str)
    if np.unique(ids).size != ids.size:
        raise StudyError("a cell id is in the study table twice")
    y = np.array([_float(v, f"column target:{target}") for v in cols[len(KEYS)]])
    numeric, categorical = {}, {}
    for j, c in enumerate(rest, len(KEYS) + 1):
        if c.startswith("num:"):
            numeric[c[4:]] = [_float(v, f"column {escape(c)}") for v in cols[j]]
        else:
            categorical[c[4:]] = list(cols[j])
    doms = list(cols[4])
    data = StudyData.build(numeric, categorical, y, cols[3], cols[2], cols[1], cell_ids=ids,
                           domains=None if all(d == "" for d in doms) else doms)
    return data, target


def _width(row, line: int, want: int):
    raise StudyError(f"line {line} of the study table has {len(row)} fields, the header {want}")


def read_table(path) -> tuple:
    """``(StudyData, target)`` of a table file (``fileio.safeio``: at most ``MAX_BYTES``, a regular file)."""
    try:
        raw = read_bytes(path, limit=MAX_BYTES)
    except SafeIOError as e:
        raise StudyError(f"cannot read the study table: {e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise StudyError(f"the study table {escape(path)} is not UTF-8 text") from None
    try:
        return from_csv(text)
    except csv.Error as e:
        raise StudyError(f"the study table {escape(path)} is not CSV ({e})") from None


def write_table(path, data: StudyData, target: str) -> None:
    """Write the table to ``path`` (``fileio.safeio``: atomically, never over a link)."""
    write_text(path, to_csv(data, target))

"""The schema of everything the report reads from a panel directory.

A panel directory is untrusted input. Its JSON documents are read through
``numeric.safeio.read_json`` (regular files only, size and depth limits) and
then checked here: types, lengths and ranges of every field the report,
the audit or the study uses. A document that fails is an error of the report
(listed, exit 1), never a traceback. Fields not named here pass through as
descriptive columns; the depth limit bounds them.

- a cell record (``cells/<key>.json``): :func:`check_record`, its rows :func:`check_row`;
- ``panel.json``: :func:`check_run`;
- a record of the exact pass (``verified/<sha256>.json``, only with ``--trust-records``): :func:`check_result`.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["SchemaError", "STATUSES", "MAX_LABEL", "MAX_ROWS", "check_record", "check_row", "check_run",
           "check_result", "record_key_ok"]

#: Longest label (ids, file names, model names, sources) accepted.
MAX_LABEL = 256
#: Longest eps text, and the largest rank or index accepted.
MAX_EPS_TEXT, MAX_INT = 64, 10**9
#: Rows of one record, and cells of one exact-pass result.
MAX_ROWS, MAX_CELLS = 10_000, 100_000
STATUSES = ("ok", "dropped_mass", "dropped_local")
_HEX64 = re.compile(r"[0-9a-f]{64}")
#: Longest record key (``numeric.panel.cell.CellTask.key``: letters, digits and ``._+=-``, no path separator).
MAX_KEY = 200


class SchemaError(ValueError):
    """A document of the panel directory that does not fit its schema (one line)."""


def record_key_ok(key: str) -> bool:
    """A record key: 1 to ``MAX_KEY`` letters, digits or ``._+=-``, not starting with a dot."""
    return 0 < len(key) <= MAX_KEY and key[0] != "." and all(c.isalnum() or c in "._+=-" for c in key)


def _is_int(x) -> bool:
    return type(x) is int


def _is_num(x) -> bool:
    return type(x) in (int, float)


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise SchemaError(what)


def _label(d: dict, k: str, optional: bool = False, limit: int = MAX_LABEL) -> None:
    v = d.get(k)
    if optional and v is None:
        return
    _need(isinstance(v, str) and 0 < len(v) <= limit, f"{k} is not a string of 1 to {limit} characters")


def _int(d: dict, k: str, optional: bool = False, low: int = 0) -> None:
    v = d.get(k)
    if optional and v is None:
        return
    _need(_is_int(v) and low <= v <= MAX_INT, f"{k} is not an integer in [{low}, {MAX_INT}]")


def _bool(d: dict, k: str, optional: bool = False) -> None:
    v = d.get(k)
    if optional and v is None:
        return
    _need(type(v) is bool, f"{k} is not true or false")


def _num(d: dict, k: str) -> None:
    v = d.get(k)
    _need(v is None or _is_num(v), f"{k} is not a number")


def _eps(d: dict, k: str = "eps") -> None:
    v = d.get(k)
    _need(isinstance(v, str) and 0 < len(v) <= MAX_EPS_TEXT, f"{k} is not a rational text")
    try:
        q = Fraction(v)
    except (ValueError, ZeroDivisionError):
        raise SchemaError(f"{k} is not a rational text") from None
    _need(0 < q <= 1, f"{k} is not in (0, 1]")


def check_row(r) -> None:
    """One row of a cell record (``numeric.panel.cell``): ``SchemaError`` on the first field that does not fit."""
    _need(isinstance(r, dict), "a row is not an object")
    _need(r.get("status") in STATUSES, f"status is not one of {', '.join(STATUSES)}")
    for k in ("family", "model", "source"):
        _label(r, k)
    _label(r, "cell_kind", optional=True)
    _int(r, "layer")
    _int(r, "head")
    _eps(r)
    for k in ("mass", "local_mass", "min_mass", "seconds", "slack"):
        _num(r, k)
    if r["status"] != "ok":
        return
    _label(r, "cell_id")
    _label(r, "file")
    _int(r, "L")
    _int(r, "U")
    _int(r, "n_rows", low=1)
    _int(r, "n_cols", low=1)
    _label(r, "lower_witness")
    _label(r, "upper_witness")
    _need(_is_num(r.get("seconds")) and math.isfinite(r["seconds"]) and r["seconds"] >= 0,
          "seconds is not a finite number >= 0")
    for k in ("verified", "lower_verified", "upper_verified", "attack_run", "attack_success", "direct_checked",
              "direct_passed"):
        _bool(r, k)
    _bool(r, "capped", optional=True)


def check_record(doc) -> list:
    """A cell record: an object with ``rows`` (a list of rows) and a ``signature`` object; its rows."""
    _need(isinstance(doc, dict), "not an object")
    _need(isinstance(doc.get("signature"), dict), "no signature object")
    rows = doc.get("rows")
    _need(isinstance(rows, list) and 0 < len(rows) <= MAX_ROWS, f"rows is not a list of 1 to {MAX_ROWS} rows")
    for i, r in enumerate(rows):
        try:
            check_row(r)
        except SchemaError as e:
            raise SchemaError(f"row {i}: {e}") from None
    return rows


def _opt_str_map(d, what: str) -> None:
    _need(isinstance(d, dict) and len(d) <= 1000 and all(isinstance(k, str) and len(k) <= MAX_LABEL for k in d)
          and all(v is None or (isinstance(v, str) and len(v) <= MAX_LABEL) for v in d.values()),
          f"{what} is not an object of strings")


def check_run(doc) -> None:
    """``panel.json`` (``numeric.panel.provenance.write_run``)."""
    _need(isinstance(doc, dict), "not an object")
    ident = doc.get("identity")
    _need(isinstance(ident, dict), "identity is not an object")
    _label(ident, "effort")
    _opt_str_map(ident.get("versions"), "identity.versions")
    code = ident.get("code")
    _need(isinstance(code, dict), "identity.code is not an object")
    _opt_str_map(code, "identity.code")
    eps = ident.get("eps")
    _need(isinstance(eps, list) and 0 < len(eps) <= 1000, "identity.eps is not a list of tolerances")
    for e in eps:
        _eps({"identity.eps": e}, "identity.eps")
    cv = doc.get("code_version")
    if cv is not None:
        _need(isinstance(cv, dict), "code_version is not an object")
        _label(cv, "version", optional=True)
        _label(cv, "commit", optional=True)
        _bool(cv, "dirty", optional=True)
    s = doc.get("summary")
    if s is not None:
        _need(isinstance(s, dict), "summary is not an object")
        if "run" in s:
            _int(s, "run")
            _int(s, "skipped")
            _need(_is_num(s.get("seconds")) and math.isfinite(s["seconds"]) and s["seconds"] >= 0,
                  "summary.seconds is not a finite number >= 0")


_REPORT_STR = ("id", "eps", "lower_witness", "upper_witness", "target_sha256")
_REPORT_INT = ("lower", "upper", "index")
_REPORT_BOOL = ("lower_verified", "upper_verified")


def check_result(result) -> None:
    """One file's exact pass (``numeric.panel.vcache``): ``{"cells": {id: report}}`` or ``{"error": text}``."""
    _need(isinstance(result, dict), "not an object")
    if "error" in result:
        _need(set(result) == {"error"} and isinstance(result["error"], str), "error is not a string")
        return
    cells = result.get("cells")
    _need(isinstance(cells, dict) and len(cells) <= MAX_CELLS, "cells is not an object")
    for cid, rep in cells.items():
        _need(isinstance(rep, dict), "a cell report is not an object")
        for k in _REPORT_STR:
            _label(rep, k)
        for k in _REPORT_INT:
            _int(rep, k)
        for k in _REPORT_BOOL:
            _bool(rep, k)
        _need(rep["id"] == cid, "a cell report under another id")
        _need(bool(_HEX64.fullmatch(rep["target_sha256"])), "target_sha256 is not a SHA-256")
        _need(rep.get("logits_sha256") is None or (isinstance(rep["logits_sha256"], str)
                                                    and bool(_HEX64.fullmatch(rep["logits_sha256"]))),
              "logits_sha256 is not a SHA-256")
        _label(rep, "slack", optional=True)
        shape = rep.get("shape")
        _need(isinstance(shape, list) and len(shape) == 2 and all(_is_int(n) and 0 < n <= MAX_INT for n in shape),
              "shape is not two positive integers")
        _need(isinstance(rep.get("provenance"), dict), "provenance is not an object")

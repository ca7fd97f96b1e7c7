"""The schema of everything the report reads from a panel directory.

A panel directory is untrusted input. Its JSON documents are read through
``fileio.safeio.read_json`` (regular files only, size and depth limits) and
then checked here: types, lengths and ranges of every field the report,
the audit or the study uses. A document that fails is an error of the report
(listed, exit 1), never a traceback.

A row of the panel's table is a :class:`PanelRow`: the typed columns every
reader uses by attribute, and the descriptor columns of the geometry and the
study (``numeric.geometry``, ``numeric.panel.features``) in ``descriptors``,
each named by one of :data:`DESCRIPTOR_PREFIXES`. A key that is neither is an
error naming it, and so is a column asked for by a name that is neither
(:meth:`PanelRow.column`): a misspelt key never reads as None. The rows of the
records written since the typed rows (and before them, by the code of commit
8cb9f0b: the same layout, without the record's ``schema`` key) are
:data:`ROW_SCHEMA` 1.

- a cell record (``cells/<key>.json``): :func:`check_record`, its rows :func:`check_row` and :meth:`PanelRow.from_json`;
- ``panel.json``: :func:`check_run`;
- a record of the exact pass (``verified/<sha256>.json``, only with ``--trust-records``): :func:`check_result`.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from fractions import Fraction
from typing import Any, Union

from exact.errors import UserInputError

__all__ = ["SchemaError", "STATUSES", "MAX_LABEL", "MAX_ROWS", "ROW_SCHEMA", "DESCRIPTOR_PREFIXES", "Scalar",
           "Check", "PanelRow", "COLUMNS", "TABLE_COLUMNS", "REQUIRED", "REQUIRED_OK",
           "check_record", "check_row", "check_run", "check_result", "record_key_ok"]

#: The layout of a row (``PanelRow``) and of its record; a record without a ``schema`` key is version 1
#: (every record written before the typed rows). Bump only with a reader of the older versions.
ROW_SCHEMA = 1
#: The descriptor columns: the geometry's (``numeric.geometry.cell_descriptors``, ``native_features``), the
#: study's (``numeric.panel.features``: b0/b1/b2 blocks and the gauge audit ``iaudit_*``) and their
#: ``*_error`` columns. A new descriptor family is one more prefix here.
DESCRIPTOR_PREFIXES = ("b0_", "b1_", "b2_", "c_", "canon_", "gamma_", "geom_", "geometry_", "iaudit_", "intrinsic_",
                       "kappa_", "log1p_", "logit_change_", "native_", "profile_", "q_residual",
                       "softmax_mismatch", "study_",
                       "svd_r", "svd_interaction_", "tau0", "width_spectrum_gap")
_DESCRIPTOR_NAME = re.compile(r"[a-z][a-z0-9_]{0,127}")
#: A JSON object, as read.
JSON = dict[str, Any]
#: A JSON scalar: the value of a descriptor column.
Scalar = Union[str, int, float, bool, None]

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


class SchemaError(UserInputError):
    """A document of the panel directory that does not fit its schema (one line)."""


def record_key_ok(key: str) -> bool:
    """A record key: 1 to ``MAX_KEY`` letters, digits or ``._+=-``, not starting with a dot."""
    return 0 < len(key) <= MAX_KEY and key[0] != "." and all(c.isalnum() or c in "._+=-" for c in key)


def _is_int(x: object) -> bool:
    return type(x) is int


def _is_num(x: object) -> bool:
    return type(x) in (int, float)


def _at(d: JSON, k: str) -> Any:
    """The value of key ``k`` of a JSON object, None when absent (a missing key reads as a missing value)."""
    return d[k] if k in d else None


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise SchemaError(what)


def _label(d: JSON, k: str, optional: bool = False, limit: int = MAX_LABEL) -> None:
    v: Any = d.get(k)
    if optional and v is None:
        return
    _need(isinstance(v, str) and 0 < len(v) <= limit, f"{k} is not a string of 1 to {limit} characters")


def _int(d: JSON, k: str, optional: bool = False, low: int = 0) -> None:
    v: Any = d.get(k)
    if optional and v is None:
        return
    _need(_is_int(v) and low <= v <= MAX_INT, f"{k} is not an integer in [{low}, {MAX_INT}]")


def _bool(d: JSON, k: str, optional: bool = False) -> None:
    v: Any = d.get(k)
    if optional and v is None:
        return
    _need(type(v) is bool, f"{k} is not true or false")


def _num(d: JSON, k: str) -> None:
    v: Any = d.get(k)
    _need(v is None or _is_num(v), f"{k} is not a number")


def _eps(d: JSON, k: str = "eps") -> None:
    v: Any = d.get(k)
    _need(isinstance(v, str) and 0 < len(v) <= MAX_EPS_TEXT, f"{k} is not a rational text")
    try:
        q = Fraction(v)
    except (ValueError, ZeroDivisionError):
        raise SchemaError(f"{k} is not a rational text") from None
    _need(0 < q <= 1, f"{k} is not in (0, 1]")


def _present(r: JSON, keys: tuple[str, ...]) -> None:
    missing = next((k for k in keys if k not in r), None)
    _need(missing is None, f"missing key {missing!r}")


def is_descriptor(name: str) -> bool:
    """A descriptor column's name: a lower-case identifier of a :data:`DESCRIPTOR_PREFIXES` family, or ``*_error``.

    >>> [is_descriptor(k) for k in ("kappa_upper", "b1_logit_rank", "study_error", "kapa_upper", "L")]
    [True, True, True, False, False]
    """
    return bool(_DESCRIPTOR_NAME.fullmatch(name)) and (name.startswith(DESCRIPTOR_PREFIXES) or name.endswith("_error"))


@dataclass(frozen=True)
class Check:
    """How a column of :class:`PanelRow` is checked in a record (``check_row``), and where it is shown.

    ``every``: the check of every row (``label``, ``label?`` optional, ``int``, ``eps``, ``num``: a number
    or null, ``status``; "" none); ``ok``: the check of a row of status ``ok`` (``label``, ``int``,
    ``int1``: at least 1, ``int?``, ``bool``, ``bool?``, ``seconds``; "" none); ``ok_required``: a row of
    status ``ok`` has the key; ``table``: a column of ``cells.csv`` (``numeric.panel.table.BASE_COLUMNS``).
    """

    every: str = ""
    ok: str = ""
    ok_required: bool = False
    table: bool = True


#: The key of a ``PanelRow`` field's metadata that holds its :class:`Check`.
CHECK = "panel_row_check"


def _key(every: str = "", **spec: Any) -> Any:
    """A column every row has: positional, no default."""
    return field(metadata={CHECK: Check(every, **spec)})


def _col(every: str = "", ok: str = "", *, required: bool = False, table: bool = True) -> Any:
    """An optional column (keyword-only, default None); ``required``: a row of status ``ok`` has it."""
    return field(default=None, kw_only=True, metadata={CHECK: Check(every, ok, required, table)})


@dataclass(frozen=True)
class PanelRow:
    """One row of the panel's table: a (head, source) cell at one tolerance (``numeric.panel.cell``).

    Every row has the cell's labels, its tolerance and its status; a row of status ``ok`` has its bracket
    (``L``, ``U``, witnesses, verdicts, checks, ``cell_id`` and ``file``). The audit
    (``numeric.panel.audit``) fills ``slack_exact``, ``logits_sha256`` and ``target_sha256`` from the exact
    pass. The one definition of the row: its fields, in the order of ``cells.csv``, carry their checks
    (:class:`Check`), from which ``check_row``, :data:`REQUIRED`, :data:`REQUIRED_OK`, :data:`COLUMNS` and
    :data:`TABLE_COLUMNS` are derived. A new optional column is one line here,
    ``name: type | None = _col(...)``.
    """

    family: str = _key("label")
    model: str = _key("label")
    cell_kind: str | None = _col("label?")
    layer: int = _key("int")
    head: int = _key("int")
    source: str = _key("label")
    domain: str | None = _col("label?")
    eps: str = _key("eps")
    n_rows: int | None = _col(ok="int1", required=True)
    n_cols: int | None = _col(ok="int1", required=True)
    L: int | None = _col(ok="int", required=True)
    U: int | None = _col(ok="int", required=True)
    lower_witness: str | None = _col(ok="label", required=True)
    upper_witness: str | None = _col(ok="label", required=True)
    seconds: float | None = _col("num", "seconds", required=True)
    slack: float | None = _col("num")
    mass: float | None = _col("num")
    min_mass: float | None = _col("num")
    local_mass: float | None = _col("num")
    status: str = _key("status")
    verified: bool | None = _col(ok="bool", required=True)
    lower_verified: bool | None = _col(ok="bool", required=True)
    upper_verified: bool | None = _col(ok="bool", required=True)
    attack_run: bool | None = _col(ok="bool", required=True)
    attack_success: bool | None = _col(ok="bool", required=True)
    direct_checked: bool | None = _col(ok="bool", required=True)
    direct_passed: bool | None = _col(ok="bool", required=True)
    hf_max_abs_diff: float | None = _col()
    svd_rank: int | None = _col()
    svd_budget: int | None = _col(ok="int?")     # the attention-SVD constructive budget (absent in older panels)
    effort: str | None = _col()
    seed: int | None = _col()
    capped: bool | None = _col(ok="bool?")
    cell_id: str | None = _col(ok="label", required=True)
    file: str | None = _col(ok="label", required=True)
    # from the audit's exact pass (never in a record)
    slack_exact: str | None = _col(table=False)
    logits_sha256: str | None = _col(table=False)
    target_sha256: str | None = _col(table=False)
    #: the descriptor columns (``is_descriptor``), as written
    descriptors: Mapping[str, Scalar] = field(default_factory=dict, kw_only=True)

    @property
    def ok(self) -> bool:
        """A row with a bracket (not dropped by the decoder screens)."""
        return self.status == "ok"

    @property
    def native(self) -> bool:
        return self.cell_kind == "native-causal"

    @classmethod
    def from_json(cls, row: object) -> PanelRow:
        """A row of a record, checked (``check_row``); ``SchemaError`` naming the first key that does not fit."""
        check_row(row)
        assert isinstance(row, dict)
        unknown = sorted(k for k in row if k not in COLUMNS and (not isinstance(k, str) or not is_descriptor(k)))
        if unknown:
            raise SchemaError(f"unknown key {unknown[0]!r}")
        for k, v in row.items():
            if k not in COLUMNS:
                _need(v is None or type(v) in (int, float, bool) or (isinstance(v, str) and len(v) <= MAX_LABEL),
                      f"{k} is not a number, a short string, true, false or null")
        typed = {k: v for k, v in row.items() if k in COLUMNS}
        return cls(**typed, descriptors={k: v for k, v in row.items() if k not in COLUMNS})

    def to_json(self) -> dict[str, Any]:
        """The row as a record holds it: the typed columns that are set, then the descriptor columns."""
        out = {k: v for k, v in asdict(self).items() if k != "descriptors" and v is not None}
        out.update(self.descriptors)
        return out

    def column(self, name: str) -> Any:
        """A column by name: a typed one, or a descriptor (None when this row has none of that name).
        ``SchemaError`` for a name that is neither (a misspelt column).

        >>> r = PanelRow("encoder", "m", 0, 1, "text:0", "1/4", "ok", descriptors={"kappa_upper": 2.5})
        >>> r.column("head"), r.column("kappa_upper"), r.column("kappa_lower")
        (1, 2.5, None)
        >>> r.column("kapa_upper")
        Traceback (most recent call last):
        ...
        numeric.panel.schema.SchemaError: unknown column 'kapa_upper'
        """
        if name in COLUMNS:
            return getattr(self, name)
        if not is_descriptor(name):
            raise SchemaError(f"unknown column {name!r}")
        return self.descriptors[name] if name in self.descriptors else None


#: The typed columns of a row and their checks (every field but ``descriptors``), in the order of ``cells.csv``.
_CHECKS = {f.name: f.metadata[CHECK] for f in fields(PanelRow) if CHECK in f.metadata}
#: The typed columns of a row.
COLUMNS = frozenset(_CHECKS)
#: The columns of ``cells.csv`` before the descriptors (the audit's are not in a record).
TABLE_COLUMNS = tuple(k for k, c in _CHECKS.items() if c.table)
#: The keys of every row, and those a row of status ``ok`` has besides.
REQUIRED = tuple(f.name for f in fields(PanelRow) if f.default is MISSING and f.default_factory is MISSING)
REQUIRED_OK = tuple(k for k, c in _CHECKS.items() if c.ok_required)


def _seconds(d: JSON, k: str) -> None:
    v = _at(d, k)
    _need(_is_num(v) and math.isfinite(v) and v >= 0, f"{k} is not a finite number >= 0")


def _status(d: JSON, k: str) -> None:
    _need(_at(d, k) in STATUSES, f"{k} is not one of {', '.join(STATUSES)}")


_CHECKERS: dict[str, Callable[[JSON, str], None]] = {
    "label": _label, "label?": lambda d, k: _label(d, k, optional=True), "int": _int,
    "int1": lambda d, k: _int(d, k, low=1), "int?": lambda d, k: _int(d, k, optional=True), "bool": _bool,
    "bool?": lambda d, k: _bool(d, k, optional=True), "num": _num, "eps": _eps, "seconds": _seconds,
    "status": _status}


def check_row(r: Any) -> None:
    """One row of a cell record (``numeric.panel.cell``): ``SchemaError`` on the first field that does not fit
    (the checks of :class:`PanelRow`'s fields, in its order)."""
    _need(isinstance(r, dict), "a row is not an object")
    _present(r, REQUIRED)
    for k, c in _CHECKS.items():
        if c.every:
            _CHECKERS[c.every](r, k)
    if _at(r, "status") != "ok":
        return
    _present(r, REQUIRED_OK)
    for k, c in _CHECKS.items():
        if c.ok:
            _CHECKERS[c.ok](r, k)


def check_record(doc: Any) -> list[PanelRow]:
    """A cell record: an object with ``rows`` (a list of rows) and a ``signature`` object; its rows
    (``PanelRow``), of a record of schema :data:`ROW_SCHEMA` (no ``schema`` key: version 1)."""
    _need(isinstance(doc, dict), "not an object")
    _need(isinstance(doc.get("signature"), dict), "no signature object")
    schema = doc["schema"] if "schema" in doc else 1
    _need(type(schema) is int and schema == ROW_SCHEMA, f"schema is not a row schema this reader knows ({ROW_SCHEMA})")
    rows = doc.get("rows")
    _need(isinstance(rows, list) and 0 < len(rows) <= MAX_ROWS, f"rows is not a list of 1 to {MAX_ROWS} rows")
    out = []
    for i, r in enumerate(rows):
        try:
            out.append(PanelRow.from_json(r))
        except SchemaError as e:
            raise SchemaError(f"row {i}: {e}") from None
    return out


def _opt_str_map(d: Any, what: str) -> None:
    _need(isinstance(d, dict) and len(d) <= 1000 and all(isinstance(k, str) and len(k) <= MAX_LABEL for k in d)
          and all(v is None or (isinstance(v, str) and len(v) <= MAX_LABEL) for v in d.values()),
          f"{what} is not an object of strings")


def check_run(doc: Any) -> None:
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


def check_result(result: Any) -> None:
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

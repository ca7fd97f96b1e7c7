"""Records of the exact pass, bound to the bytes of a bracket file and to the checker's code.

The exact re-verification of every bracket file is the audit's source of truth
(``numeric.panel.audit``) and the largest cost of a study (about 0.17 s of one
core per file). A record ``DIR/verified/<sha256 of the file>.json`` keeps the
result of that pass (``exact.verify.verify_file``'s reports as JSON, or the
file's error) with the SHA-256 of the ``exact`` sources and the python-flint
version that produced it. It is used only when the file's bytes hash to its
name and the checker is the same; anything else (a changed file, a changed
checker, an unreadable or foreign record) is re-verified and the record
rewritten. A record is as trustworthy as the directory it lies in: anyone who
can write the directory can forge one, since both hashes it carries are
public (docs/panel.md, trust model). So the report re-verifies every file by default and reads
these records only behind ``--trust-records``, saying so in its first lines;
a record is read like every other file of the directory (``fileio.safeio``:
regular file, size and depth limits) and checked against its schema
(``numeric.panel.schema.check_result``) before it is used.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from numeric.panel.provenance import CellProvenance, sources_sha256
import flint

from numeric.panel.schema import SchemaError, check_result
from numeric.panel.table import atomic_write
from fileio.safeio import SafeIOError, read_json

__all__ = ["VERIFIED_DIR", "RECORD_BYTES", "checker_digest", "lookup", "store", "result_of", "provenance_fields",
           "CellPass", "FilePass"]

VERIFIED_DIR = "verified"
_FORMAT = "softrank-verify exact pass record 2"
#: Largest record read.
RECORD_BYTES = 64 << 20


def provenance_fields(prov) -> dict:
    """The subset of a bracket cell's provenance the report uses, scalars only (JSON-safe):
    ``numeric.panel.provenance.CellProvenance`` as JSON."""
    return CellProvenance.from_json(prov).to_json()


def result_of(bf, reports) -> dict:
    """The JSON of one file's exact pass: ``exact.verify``'s reports with each cell's provenance fields."""
    return {"cells": {r.id: dict(r.to_json(), provenance=provenance_fields(bf.cells[r.index].provenance))
                      for r in reports}}


#: The convex cap's fields of a cell's exact report (``exact.verify``'s JSON), carried to the report.
CAP_KEYS = ("convex_cap", "convex_cap_verified", "convex_cap_margin", "convex_cap_reason")


@dataclass(frozen=True)
class CellPass:
    """One cell of a file's exact pass, read back from its JSON (``result_of``; a record's after
    ``numeric.panel.schema.check_result``): the judged ranks and verdicts, the witness kinds, the target's
    shape, the exact slack (rational text, None without a logit target), the hashes of the target and its
    logits, and the cell's provenance fields."""

    id: str
    eps: str
    lower: int
    upper: int
    lower_verified: bool
    upper_verified: bool
    lower_witness: str
    upper_witness: str
    shape: tuple[int, int]
    slack: str | None
    target_sha256: str
    logits_sha256: str | None
    provenance: CellProvenance
    #: The convex cap's report fields (``CAP_KEYS``; None where the cell has no cap).
    cap: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, rep: Mapping[str, Any]) -> CellPass:
        n_rows, n_cols = rep["shape"]
        return cls(rep["id"], rep["eps"], rep["lower"], rep["upper"], rep["lower_verified"], rep["upper_verified"],
                   rep["lower_witness"], rep["upper_witness"], (n_rows, n_cols), rep.get("slack"),
                   rep["target_sha256"], rep.get("logits_sha256"), CellProvenance.from_json(rep["provenance"]),
                   {k: rep.get(k) for k in CAP_KEYS})


@dataclass(frozen=True)
class FilePass:
    """One bracket file's exact pass (``{"cells": {id: report}}`` or ``{"error": text}``), read back:
    its cells by id, or why the file could not be judged."""

    cells: Mapping[str, CellPass] = field(default_factory=dict)
    error: str | None = None

    @classmethod
    def from_json(cls, result: Mapping[str, Any]) -> FilePass:
        if "error" in result:
            return cls(error=str(result["error"]))
        return cls({cid: CellPass.from_json(rep) for cid, rep in result["cells"].items()})


@lru_cache(maxsize=1)
def checker_digest() -> str:
    """SHA-256 of the ``exact`` package's Python sources (``provenance.sources_sha256``) and python-flint's version."""
    return sources_sha256(("exact",), prefix=f"python-flint {flint.__version__}\0".encode())


def _record_path(out, digest: str) -> Path:
    return Path(out) / VERIFIED_DIR / f"{digest}.json"


def lookup(out, digest: str) -> dict | None:
    """The recorded result of the exact pass on the file of this digest, by this checker (None: none)."""
    try:
        doc = read_json(_record_path(out, digest), limit=RECORD_BYTES, root=out)
    except SafeIOError:
        return None
    ok = (isinstance(doc, dict) and doc.get("format") == _FORMAT and doc.get("file_sha256") == digest
          and doc.get("checker_sha256") == checker_digest())
    if not ok:
        return None
    try:
        check_result(doc.get("result"))
    except SchemaError:
        return None
    return doc["result"]


def store(out, digest: str, result: dict) -> None:
    """Record ``result`` (``{"cells": {...}}`` or ``{"error": ...}``) for the file of this digest (atomic)."""
    doc = {"format": _FORMAT, "file_sha256": digest, "checker_sha256": checker_digest(), "result": result}
    atomic_write(_record_path(out, digest), json.dumps(doc, sort_keys=True), root=out)

"""Records of the exact pass, bound to the bytes of a bracket file and to the checker's code.

The exact re-verification of every bracket file is the audit's source of truth
(``numeric.panel.audit``) and the largest cost of a study (about 0.17 s of one
core per file). A record ``DIR/verified/<sha256 of the file>.json`` keeps the
result of that pass (``exact.verify.verify_file``'s reports as JSON, or the
file's error) with the SHA-256 of the ``exact`` sources and the python-flint
version that produced it. It is used only when the file's bytes hash to its
name and the checker is the same; anything else (a changed file, a changed
checker, an unreadable or foreign record) is re-verified and the record
rewritten. ``--reverify`` ignores every record. A record is as trustworthy as
the directory it lies in, like the cell records beside it: a reader who does
not trust the directory re-verifies.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from numeric.panel.provenance import sources_sha256
from numeric.panel.table import atomic_write

__all__ = ["VERIFIED_DIR", "checker_digest", "lookup", "store"]

VERIFIED_DIR = "verified"
_FORMAT = "softrank-verify exact pass record 1"


@lru_cache(maxsize=1)
def checker_digest() -> str:
    """SHA-256 of the ``exact`` package's Python sources (``provenance.sources_sha256``) and python-flint's version."""
    import flint

    return sources_sha256(("exact",), prefix=f"python-flint {flint.__version__}\0".encode())


def _record_path(out, digest: str) -> Path:
    return Path(out) / VERIFIED_DIR / f"{digest}.json"


def lookup(out, digest: str) -> dict | None:
    """The recorded result of the exact pass on the file of this digest, by this checker (None: none)."""
    try:
        doc = json.loads(_record_path(out, digest).read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(doc, dict) and doc.get("format") == _FORMAT and doc.get("file_sha256") == digest
          and doc.get("checker_sha256") == checker_digest() and isinstance(doc.get("result"), dict))
    return doc["result"] if ok else None


def store(out, digest: str, result: dict) -> None:
    """Record ``result`` (``{"cells": {...}}`` or ``{"error": ...}``) for the file of this digest (atomic)."""
    doc = {"format": _FORMAT, "file_sha256": digest, "checker_sha256": checker_digest(), "result": result}
    atomic_write(_record_path(out, digest), json.dumps(doc, sort_keys=True))

"""Exact regression checks of the paper's appendix constructions.

``python -m proofs_checks`` runs them all; ``all_checks()`` lists them in the
paper's order. See ``docs/proofs-checks.md`` for what each one proves.
"""
from __future__ import annotations

import importlib

__all__ = ["all_checks", "CheckResult", "run_check"]

from ._core import REGISTRY, CheckResult, _Entry, run_check

#: Modules whose import registers checks, in the order they are reported.
_MODULES = ("geometry", "grid", "examples", "hilbert", "soundness", "hardcore", "identities")

_ORDER = ("A.1", "A.2", "A.3", "D.1", "D.3", "E.2", "F.1", "F.2", "E.3", "E.4", "G.1", "G.1-all",
          "G.2", "G.3", "(7)", "H.1", "H.2", "H.3", "H.4", "I.1", "I.2", "I.3", "I.4", "J.1", "J.2",
          "K.2", "K.3")


def all_checks() -> list[_Entry]:
    """Every registered check, in the paper's appendix order."""
    for mod in _MODULES:
        importlib.import_module(f"{__name__}.{mod}")
    rank = {lab: i for i, lab in enumerate(_ORDER)}
    seen: set[str] = set()
    out: list[_Entry] = []
    for e in REGISTRY:
        if e.label not in seen:
            seen.add(e.label)
            out.append(e)
    return sorted(out, key=lambda e: rank.get(e.label, len(rank)))

"""One cell of a bracket file, typed: the contract between the producers of bracket files and their reader.

A producer (the float tier's search, the two-bit oracle, the proof checks,
the panel's ablation, the test data) builds a :class:`CellSpec` and hands it
to ``fileio.bracketwriter.write_bracket_file``, which writes
:meth:`CellSpec.to_json`. The reader, ``exact.bracketfile``, validates every
field of the untrusted file first and only then builds the same
:class:`CellSpec` from it (``Cell.spec``). The witness kinds and their fields
(:data:`UPPER_KINDS`, :data:`LOWER_KINDS`) are defined here once, for both
sides (``docs/bracket-format.md``): an upper side is trivial or a
factorisation ``A ~ P Q^T`` (K.1); a lower side is trivial, a reconstruction
``R, X, L`` (K.3/K.4), its row-side form ``G, Z, M`` (row-side K.3), a
Frobenius tail ``k`` (K.2) or an odd map ``labels, points``.

This module has no dependency beyond the standard library, so every producer
may import it (``tests/test_architecture.py``).

>>> cell = CellSpec("c", "1/4", TargetSpec("A"), Claim.of(1, "trivial"), Claim.of(2, "factors", P="P", Q="Q"))
>>> cell.to_json()
{'id': 'c', 'eps': '1/4', 'target': {'matrix': 'A'}, 'lower': {'rank': 1, 'witness': {'kind': 'trivial'}}, \
'upper': {'rank': 2, 'witness': {'kind': 'factors', 'P': 'P', 'Q': 'Q'}}}
>>> sorted(cell.tensor_names())
['A', 'P', 'Q']
>>> CellSpec("c", "1/4", TargetSpec("A"), Claim.of(1, "factors", P="P", Q="Q"), Claim.of(2, "trivial"))
Traceback (most recent call last):
...
ValueError: cell 'c' lower: unknown witness kind 'factors'
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["UPPER_KINDS", "LOWER_KINDS", "CAP_KINDS", "FieldValue", "Claim", "TargetSpec", "CellSpec"]

#: A witness field: a tensor name (``"tensor"``) or a non-negative integer (``"int"``).
FieldValue = str | int

#: Witness kinds of each side and the fields each must have, in the order they are written.
UPPER_KINDS: Mapping[str, Mapping[str, str]] = {"trivial": {}, "factors": {"P": "tensor", "Q": "tensor"}}
LOWER_KINDS: Mapping[str, Mapping[str, str]] = {
    "trivial": {},
    "reconstruction": {"R": "tensor", "X": "tensor", "L": "tensor"},
    "row_reconstruction": {"G": "tensor", "Z": "tensor", "M": "tensor"},
    "frobenius": {"k": "int"},
    "odd_map": {"labels": "tensor", "points": "tensor"},
}
#: The optional convex cap of a cell (``exact.cap``): a diagnostic, never a side of the bracket.
CAP_KINDS: Mapping[str, Mapping[str, str]] = {
    "column_blocks": {"blocks": "tensor", "mu": "tensor", "e": "tensor"},
    "cyclic_windows": {"order": "tensor", "width": "int", "mu": "tensor", "e": "tensor"},
}


@dataclass(frozen=True)
class Claim:
    """One side of a bracket: a rank and its witness (kind plus fields, tensor names or ints)."""

    rank: int
    kind: str
    fields: dict[str, FieldValue] = field(default_factory=dict)

    @classmethod
    def of(cls, rank: int, kind: str, **fields: FieldValue) -> Claim:
        """``Claim.of(2, "factors", P="c/P", Q="c/Q")``: the fields in the order given."""
        return cls(rank, kind, dict(fields))

    def check(self, kinds: Mapping[str, Mapping[str, str]], what: str) -> None:
        """``ValueError`` unless the rank is a non-negative int and the witness one of ``kinds`` with its fields."""
        if type(self.rank) is not int or self.rank < 0:
            raise ValueError(f"{what} rank must be a non-negative int, got {self.rank!r}")
        spec = kinds.get(self.kind)
        if spec is None:
            raise ValueError(f"{what}: unknown witness kind {self.kind!r}")
        if set(self.fields) != set(spec):
            raise ValueError(f"{what}: witness {self.kind!r} has fields {sorted(self.fields)}, needs {sorted(spec)}")
        for key, typ in spec.items():
            value = self.fields[key]
            ok = isinstance(value, str) if typ == "tensor" else type(value) is int and value >= 0
            if not ok:
                raise ValueError(f"{what} witness {key} must be a {'tensor name' if typ == 'tensor' else 'int >= 0'}")

    def tensor_names(self) -> set[str]:
        return {v for v in self.fields.values() if isinstance(v, str)}

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "witness": {"kind": self.kind, **self.fields}}


@dataclass(frozen=True)
class TargetSpec:
    """The matrix a cell is about: ``matrix``, or ``softmax_row(logits)`` within ``slack`` (rational text, K.5)."""

    matrix: str
    logits: str | None = None
    slack: str | None = None

    def __post_init__(self) -> None:
        if (self.logits is None) != (self.slack is None):
            raise ValueError("a logit target needs both logits and slack")

    def to_json(self) -> dict[str, str]:
        out = {"matrix": self.matrix}
        if self.logits is not None and self.slack is not None:
            out.update(logits=self.logits, slack=self.slack)
        return out


@dataclass(frozen=True)
class CellSpec:
    """One cell of the claim document: ``lower <= r_eps(target) <= upper`` with the witnesses of both sides.

    ``eps`` is the tolerance as exact rational text; ``provenance`` a JSON object describing what produced the
    cell (``None``: no provenance key); ``convex_cap`` an optional column-block witness (``exact.cap``), a
    diagnostic of an open cell. Built by a producer, or by the reader after it validated the file.
    """

    id: str
    eps: str
    target: TargetSpec
    lower: Claim
    upper: Claim
    provenance: Mapping[str, Any] | None = None
    convex_cap: Claim | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not isinstance(self.eps, str):
            raise ValueError(f"cell {self.id!r}: id and eps must be strings")
        self.lower.check(LOWER_KINDS, f"cell {self.id!r} lower")
        self.upper.check(UPPER_KINDS, f"cell {self.id!r} upper")
        if self.convex_cap is not None:
            self.convex_cap.check(CAP_KINDS, f"cell {self.id!r} convex_cap")

    def tensor_names(self) -> set[str]:
        """Every tensor the cell names."""
        names = {self.target.matrix} | self.lower.tensor_names() | self.upper.tensor_names()
        if self.convex_cap is not None:
            names |= self.convex_cap.tensor_names()
        return names | ({self.target.logits} if self.target.logits is not None else set())

    def to_json(self) -> dict[str, Any]:
        """The cell as the claim document holds it (``docs/bracket-format.md``), keys in the format's order."""
        out: dict[str, Any] = {"id": self.id, "eps": self.eps, "target": self.target.to_json(),
                               "lower": self.lower.to_json(), "upper": self.upper.to_json()}
        if self.provenance is not None:
            out["provenance"] = self.provenance
        if self.convex_cap is not None:
            out["convex_cap"] = self.convex_cap.to_json()
        return out

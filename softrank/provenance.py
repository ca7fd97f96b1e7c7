"""The front door's view of a bracket cell's provenance: the untrusted JSON, parsed once into a record.

A cell's provenance is not checked by the exact tier: it is a label for people, never a claim. What
``softrank``'s records show of it (``softrank.records``: a head's label, whether a stop request capped
the search, the effort and seed in a table's title, the input's conversion, the batch shape that
``softrank.bracket`` recorded) is read here, once, into a :class:`ProvenanceView`, and used by attribute
everywhere else. The keys are those the writers name: ``"search"`` (``numeric.search.provenance``,
``CellSearch`` and ``RunProvenance``), ``"softrank"`` (``softrank.api``: the input's conversion,
``softrank.inputs.Matrices.provenance``, its index in the batch and a captured head's ``capture``) and
``"input_kind"``. Parsing never raises: a field of the wrong type reads as absent, except a malformed
batch shape, which is kept as its one-line error for the reader that needs the shape
(:meth:`ProvenanceView.recorded_batch_shape`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exact.bracketfile import show
from exact.limits import MAX_CELLS
from softrank.errors import UserInputError

__all__ = ["MAX_BATCH_DIMS", "ProvenanceView"]

#: Dimensions of a batch shape recorded in provenance, at most.
MAX_BATCH_DIMS = 32


def _object(doc: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """``doc[key]`` when it is a JSON object, else None."""
    value = doc.get(key)
    return value if isinstance(value, dict) else None


def _head_label(own: Mapping[str, Any]) -> str:
    """``LAYER.HEAD`` of a captured head, ``[i,j]`` of a batch member, "" otherwise."""
    cap = _object(own, "capture")
    if cap is not None:
        layer, head = cap.get("layer"), cap.get("head")
        if isinstance(layer, int) and isinstance(head, int):
            return f"{layer}.{head}"
    index = own.get("index")
    if isinstance(index, list) and index and all(isinstance(i, int) for i in index):
        return "[" + ",".join(map(str, index)) + "]"
    return ""


def _batch_shape(own: Mapping[str, Any]) -> tuple[tuple[int, ...], str]:
    """(shape, error) of the recorded batch shape: ``()`` when none is recorded; an error (one line) when it is
    not a list of at most ``MAX_BATCH_DIMS`` positive integers, each at most ``MAX_CELLS``."""
    shape = own.get("batch_shape", ())
    if shape is None:
        return (), ""
    if (not isinstance(shape, (list, tuple)) or len(shape) > MAX_BATCH_DIMS
            or any(type(d) is not int or not 0 < d <= MAX_CELLS for d in shape)):
        return (), (f"the provenance's batch_shape {show(shape, 40)} is not a list of at most "
                    f"{MAX_BATCH_DIMS} positive integers (each at most {MAX_CELLS})")
    return tuple(shape), ""


@dataclass(frozen=True)
class ProvenanceView:
    """What ``softrank``'s records read of one cell's provenance.

    ``capped``: a stop request capped the cell's search; ``head``: the matrix's label in a batch
    (``LAYER.HEAD`` of a captured head, ``[i,j]`` of a batch member, "" otherwise); ``effort`` and
    ``seed``: the search's, as text ("?" when absent); ``input_kind``: ``"logits"`` or ``"matrix"``
    (None when absent); ``conversion``: how the input was converted ("" when not recorded);
    ``has_softrank``: the cell carries a ``softrank`` record; ``batch_shape`` / ``batch_shape_error``:
    the shape that record names (``()`` when none) or why it is not one.
    """

    capped: bool = False
    head: str = ""
    effort: str = "?"
    seed: str = "?"
    input_kind: str | None = None
    conversion: str = ""
    has_softrank: bool = False
    batch_shape: tuple[int, ...] = ()
    batch_shape_error: str = ""

    @classmethod
    def from_json(cls, provenance: object) -> ProvenanceView:
        """The view of a cell's provenance as read from its bracket file (anything but an object: empty)."""
        if not isinstance(provenance, dict):
            return cls()
        search = _object(provenance, "search") or {}
        own = _object(provenance, "softrank")
        kind = provenance.get("input_kind")
        shape, error = _batch_shape(own) if own is not None else ((), "")
        conversion = own.get("conversion") if own is not None else None
        return cls(capped=bool(search.get("capped")), head=_head_label(own) if own is not None else "",
                   effort=f"{search.get('effort', '?')}", seed=f"{search.get('seed', '?')}",
                   input_kind=kind if isinstance(kind, str) else None,
                   conversion=f"{conversion}" if conversion else "", has_softrank=own is not None,
                   batch_shape=shape, batch_shape_error=error)

    def recorded_batch_shape(self, name: str) -> tuple[int, ...] | None:
        """The batch shape ``softrank.bracket`` recorded (``()`` when none), None without a ``softrank``
        record; ``UserInputError`` (one line, naming ``name``) when the recorded one is malformed."""
        if not self.has_softrank:
            return None
        if self.batch_shape_error:
            raise UserInputError(f"{name}: {self.batch_shape_error}")
        return self.batch_shape

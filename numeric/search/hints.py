"""Lower witnesses of an earlier bracket file, offered to a new search as hints.

A lower certificate is a fixed object (``G, Z, M`` of row-side K.3, ``R, X, L`` of K.3), and its exact
check (MATH.md section 2) tolerates a change of the matrix up to the margin it has: ``||G|| eps < 1 - eta``
with ``eta`` computed from the residual ``Z^T A G - Z^T`` of the matrix checked. So the witnesses found
for one extraction of a head are re-checked, exactly, on another extraction (other float32 kernels,
another machine: entries 1e-6 apart) before the search's own candidates, and an L that a search reached
once is not lost to a chance difference in which certificates the next search finds. A hint is never
believed: it is a candidate like any other, and only the exact tier's verdict on the new matrix counts.

The file is untrusted input: it is read by the trusted core's reader (``exact.bracketfile``: validated,
size-limited, no pickle) and only reconstruction witnesses whose shapes fit the target are kept.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from exact.bracketfile import read_bracket_file
from numeric.search.candidate import LowerCandidate
from numeric.search.norms import row_l1_norm

__all__ = ["HINT_FAMILY", "read_hints", "hints_for"]

#: The family suffix of a hint's candidate (``row_reconstruction/hint``, ``reconstruction/hint``).
HINT_FAMILY = "hint"
#: The tensors of each witness kind a hint can carry, in the order the exact tier takes them.
FIELDS = {"row_reconstruction": ("G", "Z", "M"), "reconstruction": ("R", "X", "L")}


def read_hints(path: str | os.PathLike[str]) -> tuple[LowerCandidate, ...]:
    """Every reconstruction lower witness of the bracket file at ``path``, as float candidates, largest
    rank first (``exact.errors.MalformedInput``, one line, on a malformed file)."""
    bf = read_bracket_file(path)
    out = []
    for cell in bf.cells:
        claim = cell.lower
        names = FIELDS.get(claim.kind)
        if names is None or claim.rank < 1:
            continue
        tensors = {k: np.array(bf.tensors[str(claim.fields[k])], dtype=np.float64) for k in names}
        norm = row_l1_norm(tensors[names[0]])
        out.append(LowerCandidate(int(claim.rank), f"{claim.kind}/{HINT_FAMILY}", claim.kind, tensors, norm=norm))
    return tuple(sorted(out, key=lambda c: -c.rank))


def _fits(c: LowerCandidate, m: int, n: int) -> bool:
    """The witness's tensors have the shapes the exact check of an m x n target at rank ``c.rank`` needs."""
    d = c.rank
    if c.kind == "row_reconstruction":
        want = {"G": (n, m), "Z": (m, d), "M": (d, m)}
    else:
        want = {"R": (n, m), "X": (n, d), "L": (d, n)}
    return all(c.tensors[k].shape == s for k, s in want.items())


def hints_for(hints: Sequence[LowerCandidate], shape: tuple[int, int]) -> tuple[LowerCandidate, ...]:
    """The hints whose witnesses fit an m x n target (the rest could not be checked on it)."""
    m, n = shape
    return tuple(c for c in hints if _fits(c, m, n))

"""Lower-witness records and their float checks (MATH.md section 2).

``LowerCandidate`` is what every lower family returns; the helpers build
row-side selection witnesses (``Z = I[:, S]``, row-side K.3) and check
witnesses in float before the exact tier judges them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from numeric.search.norms import row_l1_norm

__all__ = ["SAFETY", "DEFECT_TOL", "LowerCandidate", "row_witness", "certifies_rows", "certifies_subspace",
           "rows_of", "rows_and_map", "strongest_rows"]

#: Float safety margin on every lower test ``norm * eps < 1 - eta``: the exact
#: defect terms of float witnesses are about 1e-13, so 1e-6 of room is ample.
SAFETY = 1e-6
#: Largest float defect ``|A[S] G - I|`` or ``|R A X - X|`` accepted before the exact check
#: (a witness of a well-posed inverse has defects near 1e-13).
DEFECT_TOL = 1e-9


@dataclass(frozen=True)
class LowerCandidate:
    """A float-checked lower witness: claimed rank, family, kind and tensors."""

    rank: int
    family: str
    kind: str                      # "trivial" | "frobenius" | "reconstruction" | "row_reconstruction"
    tensors: dict[str, np.ndarray] = field(default_factory=dict)   # R, X, L  or  G, Z, M
    k: int | None = None           # Frobenius tail index
    norm: float | None = None      # ||R|| or ||G|| (float)


def row_witness(A: np.ndarray, S: list[int], GS: np.ndarray, family: str) -> LowerCandidate:
    """The row-side witness ``(G, Z, M)`` of rows S with map ``GS`` (n x d, ``A[S] GS = I``)."""
    m, n = A.shape
    d = len(S)
    Z = np.zeros((m, d))
    Z[S, np.arange(d)] = 1.0
    G = np.zeros((n, m))
    G[:, S] = GS
    return LowerCandidate(d, family, "row_reconstruction", {"G": G, "Z": Z, "M": Z.T.copy()}, norm=row_l1_norm(GS))


def certifies_rows(A: np.ndarray, rows: list[int], G: np.ndarray, eps: float) -> bool:
    """Float check of a row-side selection witness: ``A[rows] G = I`` to rounding, ``||G|| eps < 1``."""
    return bool(row_l1_norm(G) * eps < 1 - SAFETY and np.abs(A[rows] @ G - np.eye(len(rows))).max() < DEFECT_TOL)


def certifies_subspace(A: np.ndarray, X: np.ndarray, R: np.ndarray, eps: float) -> bool:
    """Float check of a column-side witness on ``W = range X``: ``R A X = X`` to rounding, ``||R|| eps < 1``."""
    return bool(row_l1_norm(R) * eps < 1 - SAFETY and np.abs(R @ A @ X - X).max() < DEFECT_TOL)


def rows_of(c: LowerCandidate) -> list[int]:
    """The row set S of a selection witness ``Z = I[:, S]`` (column order kept)."""
    return [int(i) for i in np.argmax(c.tensors["Z"], axis=0)]


def rows_and_map(c: LowerCandidate | None, n: int) -> tuple[list[int], np.ndarray]:
    """(S, G[:, S]) of a selection witness, the n x d map that inverts ``A[S, :]``; ([], n x 0) for None."""
    if c is None:
        return [], np.zeros((n, 0))
    S = rows_of(c)
    return S, c.tensors["G"][:, S]


def _strength(c: LowerCandidate) -> tuple[int, float]:
    """Most rows first, then least norm (a row-side witness always has its norm)."""
    assert c.norm is not None
    return c.rank, -c.norm


def strongest_rows(candidates: list[LowerCandidate]) -> LowerCandidate | None:
    """The row-side witness with the most rows (ties: least norm), or None."""
    rows = [c for c in candidates if c.kind == "row_reconstruction"]
    return max(rows, key=_strength) if rows else None

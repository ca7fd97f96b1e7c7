"""Row-side reconstruction certificates: K.3 applied to the transpose.

``||M||_row1`` is also the 1->1 norm of ``M^T`` and ``rank M = rank M^T``.
For ``Z`` (m x d), ``G`` (n x m), ``M`` (d x m), with ``E = Z^T A G - Z^T``
and ``F = M Z - I_d``: if ``||F^T|| < 1``,
``eta = ||E|| ||M^T|| / (1 - ||F^T||) < 1`` and ``||G|| eps < 1 - eta`` then
``r_eps(A) >= d``. Reason: for ``w = Z z``, ``G^T A^T w = w + E^T z`` gives
``||w||_1 <= ||G|| ||A^T w||_1 + eta ||w||_1``, while a B of rank < d has a
nonzero such w with ``B^T w = 0`` and ``||A^T w||_1 <= ||A - B||_row1 ||w||_1``.

>>> from exact.matrix import ExactMatrix
>>> A = ExactMatrix.from_rationals([["3/4", "1/4"], ["1/4", "3/4"]])
>>> G = ExactMatrix.from_rationals([["3/2", "-1/2"], ["-1/2", "3/2"]])
>>> I = ExactMatrix.identity(2)
>>> check_row_reconstruction(A, RowReconstructionWitness(G, I, I), fmpq(1, 4), 2).margin
1/2
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from .matrix import ExactMatrix
from .norms import residual_row_l1, row_l1_norm
from .reconstruction import defect_bound, final_test
from .verdict import Cache, Verdict, fresh, refuted

__all__ = ["RowReconstructionWitness", "check_row_reconstruction"]


@dataclass(frozen=True)
class RowReconstructionWitness:
    """Row-side witness: G (n x m), Z (m x d, rows combined), M (d x m)."""

    G: ExactMatrix
    Z: ExactMatrix
    M: ExactMatrix
    kind = "row_reconstruction"


def check_row_reconstruction(A: ExactMatrix, w: RowReconstructionWitness, eps: fmpq, rank: int,
                             cache: Cache = fresh) -> Verdict:
    m, n = A.shape
    d = w.Z.ncols
    if w.G.shape != (n, m) or w.Z.nrows != m or w.M.shape != (d, m):
        return refuted("row_reconstruction", rank, f"shape mismatch: A {m}x{n}, G {w.G.nrows}x{w.G.ncols}, "
                       f"Z {w.Z.nrows}x{w.Z.ncols}, M {w.M.nrows}x{w.M.ncols} (need n x m, m x d, d x m)")
    if d != rank:
        return refuted("row_reconstruction", rank, f"Z has {d} columns, claimed rank {rank}",
                       claimed=rank, derived=d)
    Zt = w.Z.T
    norm_E, norm_M, norm_F, norm_G = cache("norms", lambda: (
        residual_row_l1(Zt, [Zt, A, w.G]),                           # E = Z^T A G - Z^T
        row_l1_norm(w.M.T),
        row_l1_norm((w.M @ w.Z - ExactMatrix.identity(d)).T),      # F = M Z - I
        row_l1_norm(w.G)))
    eta = defect_bound("row_reconstruction", rank, norm_E, norm_M, norm_F)
    if isinstance(eta, Verdict):
        return eta
    return final_test("row_reconstruction", rank, norm_G, eps, eta, name="G")

"""Input-subspace reconstruction certificates (K.3, K.4).

For ``X`` (n x d), ``R`` (n x m), ``L`` (d x n), with ``E = R A X - X`` and
``F = L X - I_d``: if ``||F|| < 1``, ``eta = ||E|| ||L|| / (1 - ||F||) < 1``
and ``||R|| eps < 1 - eta`` then ``r_eps(A) >= d`` (all norms row-l1).
Reason: for ``x = X y``, ``(1 - ||F||) ||y|| <= ||L|| ||x||`` and
``||x|| <= ||R|| ||A x|| + ||E|| ||y||``, so ``||A x|| >= (1 - eta)/||R|| ||x||``,
while a B of rank < d kills some nonzero x in range X.

>>> from exact.matrix import ExactMatrix
>>> A = ExactMatrix.from_rationals([["3/4", "1/4"], ["1/4", "3/4"]])
>>> R = ExactMatrix.from_rationals([["3/2", "-1/2"], ["-1/2", "3/2"]])   # A^-1, norm 2
>>> I = ExactMatrix.identity(2)
>>> check_reconstruction(A, ReconstructionWitness(R, I, I), fmpq(1, 4), 2).margin
1/2
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from .matrix import ExactMatrix
from .norms import residual_row_l1, row_l1_norm
from .verdict import Cache, Verdict, fresh, refuted, verified

__all__ = ["ReconstructionWitness", "check_reconstruction", "defect_bound"]


@dataclass(frozen=True)
class ReconstructionWitness:
    """Column-side witness: R (n x m), X (n x d, a basis of W), L (d x n)."""

    R: ExactMatrix
    X: ExactMatrix
    L: ExactMatrix
    kind = "reconstruction"


def defect_bound(kind: str, rank: int, norm_E: fmpq, norm_L: fmpq, norm_F: fmpq) -> Verdict | fmpq:
    """``eta = ||E|| ||L|| / (1 - ||F||)``, or a refutation when ``||F|| >= 1`` or ``eta >= 1``."""
    if norm_F >= 1:
        return refuted(kind, rank, "basis defect ||F|| >= 1: the basis is not certified of full rank",
                       claimed="||F|| < 1", derived=f"||F|| = {norm_F}")
    eta = norm_E * norm_L / (1 - norm_F)
    if eta >= 1:
        return refuted(kind, rank, "reconstruction defect eta >= 1", claimed="eta < 1", derived=f"eta = {eta}")
    return eta


def final_test(kind: str, rank: int, norm_R: fmpq, eps: fmpq, eta: fmpq, name: str = "R") -> Verdict:
    """``||R|| eps < 1 - eta``, with margin ``1 - eta - ||R|| eps``."""
    margin = 1 - eta - norm_R * eps
    if margin > 0:
        return verified(kind, rank, margin)
    return refuted(kind, rank, f"||{name}|| eps >= 1 - eta", margin,
                   claimed=f"||{name}|| eps = {norm_R * eps}", derived=f"1 - eta = {1 - eta}")


def check_reconstruction(A: ExactMatrix, w: ReconstructionWitness, eps: fmpq, rank: int,
                         cache: Cache = fresh) -> Verdict:
    m, n = A.shape
    d = w.X.ncols
    if w.R.shape != (n, m) or w.X.nrows != n or w.L.shape != (d, n):
        return refuted("reconstruction", rank, f"shape mismatch: A {m}x{n}, R {w.R.nrows}x{w.R.ncols}, "
                       f"X {w.X.nrows}x{w.X.ncols}, L {w.L.nrows}x{w.L.ncols} (need n x m, n x d, d x n)")
    if d != rank:
        return refuted("reconstruction", rank, f"X has {d} columns, claimed rank {rank}",
                       claimed=rank, derived=d)
    norm_E, norm_L, norm_F, norm_R = cache("norms", lambda: (
        residual_row_l1(w.X, [w.R, A, w.X]),                       # E = R A X - X
        row_l1_norm(w.L),
        row_l1_norm(w.L @ w.X - ExactMatrix.identity(d)),          # F = L X - I
        row_l1_norm(w.R)))
    eta = defect_bound("reconstruction", rank, norm_E, norm_L, norm_F)
    if isinstance(eta, Verdict):
        return eta
    return final_test("reconstruction", rank, norm_R, eps, eta)

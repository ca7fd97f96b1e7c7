"""Frobenius-tail lower certificates (K.2).

``F_k(A)^2 = sum_{i>k} sigma_i(A)^2``. If ``F_k(A) > sqrt(m) eps`` then
``r_eps(A) >= k + 1``, because every B of rank <= k has
``||A - B||_F >= F_k(A)`` (Eckart-Young) and
``||M||_F^2 <= m ||M||_row1^2``.

The check needs a rigorous upper bound ``U_k >= sum_{i<=k} sigma_i^2``, so
that ``F_k^2 >= ||A||_F^2 - U_k``. It is derived here, from exact products
only, with a float eigenbasis ``V`` of ``S = A^T A`` (or ``A A^T``) as a
hint that the check never trusts:

* ``G = V^T V`` and ``D = V^T S V``, exactly; ``g = ||G - I||_row1 < 1``
  makes V invertible and ``lambda_min(G) >= 1 - g`` (G symmetric).
* ``W = V G^{-1/2}`` is orthogonal, so ``S`` has the eigenvalues of
  ``G^{-1/2} D G^{-1/2}``, and Ostrowski's theorem (D is PSD) bounds each by
  ``lambda_i(D) / (1 - g)``.
* Ky Fan: ``sum_top_k lambda(D) <= sum_top_k diag(D) + k ||D - diag D||_row1``.

So ``U_k = (sum of the k largest diag(D) + k ||D - diag D||_row1) / (1 - g)``.

>>> from exact.matrix import ExactMatrix
>>> I = ExactMatrix.identity(3)          # sigma = 1, 1, 1
>>> check_frobenius(I, FrobeniusTail(2), fmpq(1, 2), 3).verified   # F_2 = 1 > sqrt(3)/2
True
>>> check_frobenius(I, FrobeniusTail(2), fmpq(3, 5), 3).verified   # 1 <= sqrt(3) 3/5
False
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flint import fmpq, fmpz_mat

from .matrix import ExactMatrix
from .norms import diagonal, frobenius_sq, row_l1_norm
from .verdict import Cache, Verdict, fresh, refuted, verified

__all__ = ["FrobeniusTail", "check_frobenius", "top_energy_upper_bound"]


@dataclass(frozen=True)
class FrobeniusTail:
    """Proves rank ``k + 1`` when ``F_k(A) > sqrt(m) eps``."""

    k: int
    kind = "frobenius"


def top_energy_upper_bound(A: ExactMatrix, k: int) -> fmpq | None:
    """A rigorous upper bound on ``sum_{i<=k} sigma_i(A)^2``, or None when the hint fails."""
    if k == 0:
        return fmpq(0)
    S = A.T @ A if A.ncols <= A.nrows else A @ A.T
    biggest = max((abs(int(x)) for x in S.num.entries()), default=0)
    shift = biggest.bit_length() - int(S.den).bit_length()     # S / 2^shift has entries near 1: no overflow
    hint = S.scale(fmpq(1, 2**shift) if shift >= 0 else fmpq(2**(-shift))).to_float64()
    _, vectors = np.linalg.eigh(hint)
    if not np.isfinite(vectors).all():
        return None
    V = ExactMatrix.from_float64(np.ascontiguousarray(vectors), "eigenvector hint")
    p = S.nrows
    G = V.T @ V
    g = row_l1_norm(G - ExactMatrix.identity(p))
    if g >= 1:
        return None
    D = V.T @ (S @ V)
    diag = diagonal(D)
    off = D.num - fmpz_mat(p, p, [D.num[i, j] if i == j else 0 for i in range(p) for j in range(p)])
    off_norm = row_l1_norm(ExactMatrix(off, D.den))
    top: fmpq = sum(sorted(diag, reverse=True)[:k], fmpq(0))
    return (top + k * off_norm) / (1 - g)


def check_frobenius(A: ExactMatrix, w: FrobeniusTail, eps: fmpq, rank: int, cache: Cache = fresh) -> Verdict:
    m, n = A.shape
    k = w.k
    if k + 1 != rank:
        return refuted("frobenius", rank, f"the Frobenius tail at k = {k} proves rank {k + 1}, not {rank}",
                       claimed=rank, derived=k + 1)
    if k + 1 > min(m, n):
        return refuted("frobenius", rank, f"k + 1 = {k + 1} exceeds min(m, n) = {min(m, n)}")
    bound, energy = cache("energies", lambda: (top_energy_upper_bound(A, k), frobenius_sq(A)))
    if bound is None:
        return refuted("frobenius", rank, "could not bound the top-k singular energy rigorously")
    tail_sq = energy - bound                     # <= F_k(A)^2
    margin = tail_sq - m * eps * eps
    if margin > 0:
        return verified("frobenius", rank, margin)
    return refuted("frobenius", rank, "F_k(A)^2 <= m eps^2 (lower bound on the tail)", margin,
                   claimed=f"m eps^2 = {m * eps * eps}", derived=f"F_k^2 >= {tail_sq}")

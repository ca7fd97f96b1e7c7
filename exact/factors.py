"""Upper factors (K.1): an explicit ``B = P Q^T`` within eps.

If ``rank B <= k`` and ``||A - B||_row1 <= eps`` then ``r_eps(A) <= k``.
A failed search is never a lower bound; this only checks a given B.

>>> from exact.matrix import ExactMatrix
>>> A = ExactMatrix.from_rationals([["3/4", "1/4"], ["1/4", "3/4"]])
>>> P = ExactMatrix.from_rationals([[1], [1]]); Q = ExactMatrix.from_rationals([["1/2"], ["1/2"]])
>>> check_factors(A, UpperFactors(P, Q), fmpq(1, 2), 1).margin     # error 1/2 at eps 1/2
0
>>> check_factors(A, UpperFactors(P, Q), fmpq(1, 4), 1).verified
False
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from .matrix import ExactMatrix
from .norms import residual_row_l1
from .verdict import Cache, Verdict, fresh, refuted, verified

__all__ = ["UpperFactors", "check_factors"]


@dataclass(frozen=True)
class UpperFactors:
    """``B = P Q^T`` with P (m x k) and Q (n x k): rank at most k."""

    P: ExactMatrix
    Q: ExactMatrix
    kind = "factors"


def check_factors(A: ExactMatrix, w: UpperFactors, eps: fmpq, rank: int, cache: Cache = fresh) -> Verdict:
    m, n = A.shape
    k = w.P.ncols
    if w.P.nrows != m or w.Q.shape != (n, k):
        return refuted("factors", rank, f"shape mismatch: A {m}x{n}, P {w.P.nrows}x{w.P.ncols}, "
                       f"Q {w.Q.nrows}x{w.Q.ncols} (need m x k and n x k)")
    if k != rank:
        return refuted("factors", rank, f"the factors have {k} columns, claimed rank {rank}",
                       claimed=rank, derived=k)
    error = cache("error", lambda: residual_row_l1(A, [w.P, w.Q.T]))      # ||A - P Q^T||_row1
    margin = eps - error
    if margin >= 0:
        return verified("factors", rank, margin)
    return refuted("factors", rank, "||A - P Q^T||_row1 > eps", margin,
                   claimed=f"eps = {eps}", derived=f"error = {error}")

"""Trivial certificates (MATH.md section 1).

Upper: ``B = A`` has rank at most ``p = min(m, n)`` and error 0, so
``r_eps(A) <= p`` for every matrix and every eps >= 0.
Lower: ``r_eps(A) >= 0`` always, and ``r_eps(A) >= 1`` iff
``eps < ||A||_row1`` (the only rank-0 matrix is 0, with error ``||A||_row1``).
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

from .matrix import ExactMatrix
from .norms import row_l1_norm
from .verdict import Cache, Verdict, fresh, refuted, verified

__all__ = ["TrivialUpper", "TrivialLower", "check_trivial_upper", "check_trivial_lower"]


@dataclass(frozen=True)
class TrivialUpper:
    """``B = A``: proves ``r_eps(A) <= min(m, n)``."""

    kind = "trivial"


@dataclass(frozen=True)
class TrivialLower:
    """Proves rank 0, or rank 1 when ``eps < ||A||_row1``."""

    kind = "trivial"


def check_trivial_upper(A: ExactMatrix, w: TrivialUpper, eps: fmpq, rank: int, cache: Cache = fresh) -> Verdict:
    p = min(A.shape)
    if rank != p:
        return refuted("trivial", rank, f"the trivial upper witness proves rank {p}, not {rank}",
                       claimed=rank, derived=p)
    return verified("trivial", rank, None)


def check_trivial_lower(A: ExactMatrix, w: TrivialLower, eps: fmpq, rank: int, cache: Cache = fresh) -> Verdict:
    """>>> A = ExactMatrix.from_rationals([["1/2", "1/2"]])
    >>> check_trivial_lower(A, TrivialLower(), fmpq(1, 4), 1).margin
    3/4
    >>> check_trivial_lower(A, TrivialLower(), fmpq(1), 1).verified
    False
    """
    if rank == 0:
        return verified("trivial", 0, None)
    if rank != 1:
        return refuted("trivial", rank, "the trivial lower witness proves at most rank 1",
                       claimed=rank, derived=1)
    norm = cache("norm", lambda: row_l1_norm(A))
    margin = norm - eps
    if margin > 0:
        return verified("trivial", 1, margin)
    return refuted("trivial", 1, "rank 1 needs eps < ||A||_row1", margin,
                   claimed=f"eps = {eps}", derived=f"||A||_row1 = {norm}")

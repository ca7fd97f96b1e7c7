"""Float row-l1 norms: the float tier's estimates of ``||M||_row1`` (MATH.md 1).

These are estimates that guide the search; the exact tier
(``exact.norms``) decides every claim.
"""
from __future__ import annotations

import numpy as np

__all__ = ["row_l1_norm", "row_l1_error"]


def row_l1_norm(M: np.ndarray) -> float:
    """Float64 ``||M||_row1 = max_i sum_j |M_ij|`` (0 for an empty matrix); an estimate, the exact tier decides.

    >>> row_l1_norm(np.array([[0.5, -0.25], [0.125, 0.0]]))
    0.75
    """
    return float(np.abs(M).sum(axis=1).max()) if M.size else 0.0


def row_l1_error(A: np.ndarray, P: np.ndarray, Q: np.ndarray) -> float:
    """Float64 ``||A - P Q^T||_row1`` (an estimate; the exact tier decides)."""
    return row_l1_norm(A - P @ Q.T) if P.shape[1] else row_l1_norm(A)

"""Norm lower bounds: the trivial bound and the Frobenius tail (K.2).

- ``trivial``: ``r_eps(A) >= 1`` iff ``eps < ||A||_row1``.
- ``frobenius``: K.2, the largest k with ``F_k(A) > sqrt(m) eps`` gives rank k + 1.

Float tests with a margin; the exact tier decides.
"""
from __future__ import annotations

import numpy as np

from numeric.search.candidate import SAFETY, LowerCandidate
from numeric.search.norms import row_l1_norm

__all__ = ["trivial", "frobenius"]


def trivial(A: np.ndarray, eps: float) -> LowerCandidate:
    """Rank 1 when ``eps < ||A||_row1`` (trivial lower), else rank 0.

    >>> trivial(np.eye(2), 0.5).rank, trivial(np.eye(2), 1.0).rank
    (1, 0)
    """
    return LowerCandidate(1 if eps < row_l1_norm(A) * (1 - SAFETY) else 0, "trivial", "trivial")


def frobenius(S: np.ndarray, m: int, eps: float) -> LowerCandidate | None:
    """K.2: the largest k with ``F_k(A)^2 > m eps^2`` (float, with margin ``SAFETY``), rank k + 1.

    ``S``: the singular values of the m-row matrix A, largest first.

    >>> frobenius(np.array([1.0, 1.0]), 2, 0.5).rank      # F_1 = 1 > sqrt(2) / 2
    2
    """
    tail = np.concatenate([np.cumsum((S ** 2)[::-1])[::-1], [0.0]])   # tail[k] = sum_{i >= k} s_i^2
    ks = np.nonzero(tail > m * eps * eps * (1 + SAFETY))[0]
    if ks.size == 0:
        return None
    k = int(ks[-1])
    return LowerCandidate(k + 1, "frobenius", "frobenius", k=k)

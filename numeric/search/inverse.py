"""Column-side K.3 with explicit inverses: truncated pseudo-inverse and decoded inverse.

- ``pinv``: ``X = V_d``, ``R = V_d S_d^-1 U_d^T``, ``L = V_d^T``, d the largest
  with ``||R|| eps < 1``.
- ``decoded``: ``X = I[:, T]``, ``R = I[:, T] A[S, T]^-1 I[S, :]``; (S, T)
  grown greedily, each column t paired with the unused row of largest weight on it.

Float tests with a margin; the exact tier decides.
"""
from __future__ import annotations

import numpy as np

from numeric.search.candidate import SAFETY, LowerCandidate
from numeric.search.norms import row_l1_norm

__all__ = ["pinv", "decoded", "PINV_SLACK"]

#: ``pinv`` stops scanning d once d exceeds twice the best d plus this many: the norm of
#: the pseudo-inverse grows with d, so a success far beyond a failure does not come.
PINV_SLACK = 8


def pinv(U: np.ndarray, S: np.ndarray, Vt: np.ndarray, eps: float) -> LowerCandidate | None:
    """K.3 truncated pseudo-inverse: the largest d with ``||V_d S_d^-1 U_d^T|| eps < 1``.

    >>> c = pinv(*np.linalg.svd(np.eye(3)), 0.5); c.rank, c.norm
    (3, 1.0)
    """
    n, m = Vt.shape[1], U.shape[0]
    R = np.zeros((n, m))
    best = None
    for d in range(1, S.size + 1):
        if S[d - 1] <= 0:
            break
        R += np.outer(Vt[d - 1], U[:, d - 1]) / S[d - 1]
        if row_l1_norm(R) * eps < 1 - SAFETY:
            best = d
        elif best is not None and d > 2 * best + PINV_SLACK:
            break
    if best is None:
        return None
    X = Vt[:best].T.copy()
    R = (Vt[:best].T / S[:best]) @ U[:, :best].T
    return LowerCandidate(best, "reconstruction/pinv", "reconstruction",
                          {"R": R, "X": X, "L": X.T.copy()}, norm=row_l1_norm(R))


def decoded(A: np.ndarray, eps: float) -> LowerCandidate | None:
    """K.3 decoded inverse on (S, T) grown greedily: columns by peak weight, rows by argmax.

    >>> decoded(np.eye(4), 0.5).rank
    4
    """
    m, n = A.shape
    cols = np.argsort(-A.max(axis=0), kind="stable")
    S: list[int] = []
    T: list[int] = []
    used = np.zeros(m, dtype=bool)
    for t in cols:
        w = np.where(used, -np.inf, A[:, t])
        s = int(np.argmax(w))
        if used[s]:
            break
        Ss, Ts = S + [s], T + [int(t)]
        try:
            inv = np.linalg.inv(A[np.ix_(Ss, Ts)])
        except np.linalg.LinAlgError:
            continue
        if np.isfinite(inv).all() and row_l1_norm(inv) * eps < 1 - SAFETY:
            S, T = Ss, Ts
            used[s] = True
    if not S:
        return None
    d = len(S)
    inv = np.linalg.inv(A[np.ix_(S, T)])
    X = np.zeros((n, d))
    X[T, np.arange(d)] = 1.0
    R = np.zeros((n, m))
    R[np.ix_(T, S)] = inv
    return LowerCandidate(d, "reconstruction/decoded", "reconstruction",
                          {"R": R, "X": X, "L": X.T.copy()}, norm=row_l1_norm(inv))

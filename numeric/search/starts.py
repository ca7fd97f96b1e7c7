"""Starts of the upper search's trials (K.1): rank-k factors ``(P, Q)`` for ``refine.refine``.

The balanced truncated SVD of A, the best Frobenius compression of feasible factors to a lower
rank, the hybrid coordinate + SVD start for sharp heads, and a deterministic perturbation.
Everything here is float; ``upper.search_upper`` chooses among them.
"""
from __future__ import annotations

import numpy as np

from numeric.search.norms import row_l1_error
from numeric.search.refine import Objective

__all__ = ["svd_factors", "compress", "hybrid_factors", "perturbed", "PERTURB_SCALE", "PERTURB_SEED"]

#: The perturbed restart: the start plus Gaussian noise of this size relative to the
#: root-mean-square factor entry, drawn from ``default_rng((PERTURB_SEED, rank, round, tag))``.
PERTURB_SCALE = 0.05
PERTURB_SEED = 27

#: Rank-k factors ``(P, Q)`` with ``A ~ P Q^T``.
Factors = tuple[np.ndarray, np.ndarray]
#: The thin SVD ``(U, S, Vt)`` of a target.
Svd = tuple[np.ndarray, np.ndarray, np.ndarray]
#: A trial's outcome: the factors and their float max row-l1 error.
Trial = tuple[np.ndarray, np.ndarray, float]
#: A restart's closest miss: a trial's outcome and the objective (``refine.Objective``) that reached it.
Miss = tuple[np.ndarray, np.ndarray, float, Objective]
#: A start already run at a rank: ``(rank, kind, columns of the factors it was compressed from)``.
Tried = tuple[int, str, int | None]


def svd_factors(U: np.ndarray, S: np.ndarray, Vt: np.ndarray, k: int) -> Factors:
    """Balanced truncated-SVD factors ``P = U_k S_k^(1/2)``, ``Q = V_k S_k^(1/2)``."""
    r = np.sqrt(S[:k])
    return U[:, :k] * r, Vt[:k].T * r


def compress(P: np.ndarray, Q: np.ndarray, k: int) -> Factors:
    """Best Frobenius rank-k factors of ``P Q^T`` (warm start for a lower rank)."""
    qp, rp = np.linalg.qr(P)
    qq, rq = np.linalg.qr(Q)
    u, s, vt = np.linalg.svd(rp @ rq.T)
    return svd_factors(qp @ u, s, vt @ qq.T, k)


def hybrid_factors(A: np.ndarray, eps: float, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Rank-k start for sharp heads: coordinate columns for near-one-hot rows, the SVD for the rest.

    A row whose largest entry ``a_ij >= 1 - eps/2`` is within eps of ``e_j`` in l1
    (``||a_i - e_j||_1 = 2 (1 - a_ij)``), so the column ``e_j`` in Q serves all such
    rows at one rank. The columns J covering the most of these rows are taken
    (all of them, or three quarters, or half: the best start of the three), the
    remaining rows get the top right singular vectors of their rows with the
    columns J zeroed (orthogonal to ``E_J``), and ``P = A Q`` (Q has orthonormal
    columns). None when no row is near one-hot. The reference search's
    "start that mixes coordinate columns for near-one-hot rows with the SVD".

    >>> A = np.array([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.3, 0.3, 0.4]])
    >>> P, Q = hybrid_factors(A, 0.25, 2); Q[:, 0].tolist(), Q.shape
    ([1.0, 0.0, 0.0], (3, 2))
    >>> hybrid_factors(A, 0.1, 2) is None        # no row within 0.1 of a coordinate vector
    True
    """
    top, arg = A.max(axis=1), A.argmax(axis=1)
    sharp = np.flatnonzero(2 * (1 - top) <= eps)
    if sharp.size == 0 or k < 1:
        return None
    cols, counts = np.unique(arg[sharp], return_counts=True)
    order = cols[np.argsort(-counts, kind="stable")]
    best: tuple[np.ndarray, np.ndarray, float] | None = None
    for nj in sorted({min(order.size, k), min(order.size, k) * 3 // 4, min(order.size, k) // 2} - {0}):
        J = order[:nj]
        rest = np.setdiff1d(np.arange(A.shape[0]), sharp[np.isin(arg[sharp], J)])
        B = A[rest].copy()
        B[:, J] = 0.0
        V = np.linalg.svd(B, full_matrices=False)[2][:k - nj].T if k > nj and rest.size else \
            np.zeros((A.shape[1], 0))
        E = np.zeros((A.shape[1], nj))
        E[J, np.arange(nj)] = 1.0
        Q = np.hstack([E, V, np.zeros((A.shape[1], k - nj - V.shape[1]))])
        P = A @ Q
        err = row_l1_error(A, P, Q)
        if best is None or err < best[2]:
            best = (P, Q, err)
    assert best is not None   # the set of column counts is not empty (k >= 1 and a sharp row)
    return best[0], best[1]


def perturbed(P: np.ndarray, Q: np.ndarray, rank: int, round_: int,
              tag: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(P, Q)`` plus Gaussian noise of ``PERTURB_SCALE`` times their rms entry (deterministic:
    ``default_rng((PERTURB_SEED, rank, round_, tag))``)."""
    rng = np.random.default_rng((PERTURB_SEED, int(rank), int(round_), int(tag)))
    sp = PERTURB_SCALE * float(np.sqrt(np.mean(P * P))) if P.size else 0.0
    sq = PERTURB_SCALE * float(np.sqrt(np.mean(Q * Q))) if Q.size else 0.0
    return P + sp * rng.standard_normal(P.shape), Q + sq * rng.standard_normal(Q.shape)

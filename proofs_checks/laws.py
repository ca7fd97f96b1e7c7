"""Both halves of the sphere and full-ball laws on fine point sets (I.1, I.2's disc keys, I.3).

Lower half: a *separated subset* S of the query rows with cells (each key goes to its
nearest message), ``X`` the cell indicator, ``L`` the cell averages, and the contractive
row-selection decoder ``D = I[S, :]``: the reconstruction certificate ``R = X D`` (K.3/K.4)
with a nonzero defect ``E = X (D A X - I)``. Upper half (circle): the truncated Fourier
(circulant) matrix ``B = sum_{|f| <= F} lambda_f e_f e_f^*`` as real factors P, Q of rank
2F + 1. Upper half (disc, I.2): every row replaced by the softmax row of its nearest
representative on a grid ``Z^2 / k``, ``B = P Q^T`` of rank = representatives used. Floats
only *choose* M and F (the largest M, the smallest F whose float test passes with a margin);
every bracket is then proved by ``python -m exact verify`` on the stored float64 logits, their
softmax slack charged (K.5).
"""
from __future__ import annotations

from fractions import Fraction

import itertools

import numpy as np
from flint import fmpq

from ._export import float_softmax, slack_bound
from exact.cellspec import CellSpec, Claim, TargetSpec
from fileio.bracketwriter import rational_string

__all__ = ["decoded_cell", "circle_logits", "fourier_factors", "largest_separated", "disc_points"]

#: Float searches keep this margin below the exact threshold (the exact tier decides).
FLOAT_MARGIN = 1e-3


def _frac(q: fmpq):
    return Fraction(int(q.p), int(q.q))


def selection_witness(n: int, m: int, S, cell_of_key):
    """(R, X, L) floats for messages S (rows of A) and key cells ``cell_of_key`` (values 0..M-1)."""
    M = len(S)
    X = np.zeros((n, M))
    X[np.arange(n), cell_of_key] = 1.0
    sizes = X.sum(axis=0)
    if (sizes == 0).any():
        raise ValueError("an empty cell")
    L = X.T / sizes[:, None]
    R = np.zeros((n, m))
    R[:, list(S)] = X
    return R, X, L


def eta_float(A: np.ndarray, S, X: np.ndarray) -> float:
    """Float ``||D A X - I||_row1`` for the row-selection decoder (a search hint only)."""
    C = A[list(S)] @ X
    return float(np.abs(C - np.eye(len(S))).sum(axis=1).max())


def decoded_cell(cid: str, H: np.ndarray, eps: fmpq, tensors: dict, provenance: dict,
                 *, S=None, cell_of_key=None, P=None, Q=None) -> CellSpec:
    """A CELL on ``softmax_row(H)``: lower = decoded witness (or trivial), upper = factors P Q^T
    (or trivial)."""
    m, n = H.shape
    A0 = float_softmax(H)
    slack = slack_bound(H, A0)
    tensors[f"H_{cid}"] = H
    tensors[f"A_{cid}"] = A0
    if S is not None:
        R, X, L = selection_witness(n, m, S, cell_of_key)
        tensors[f"R_{cid}"], tensors[f"X_{cid}"], tensors[f"L_{cid}"] = R, X, L
        lower = Claim.of(len(S), "reconstruction", R=f"R_{cid}", X=f"X_{cid}", L=f"L_{cid}")
    else:
        lower = Claim.of(1, "trivial")
    if P is not None:
        tensors[f"P_{cid}"], tensors[f"Q_{cid}"] = P, Q
        upper = Claim.of(P.shape[1], "factors", P=f"P_{cid}", Q=f"Q_{cid}")
    else:
        upper = Claim.of(min(m, n), "trivial")
    lemma = "separated subset, decoded witness (K.4); truncated Fourier factors (K.1)"
    return CellSpec(cid, rational_string(_frac(eps)), TargetSpec(f"A_{cid}", f"H_{cid}", rational_string(_frac(slack))),
                    lower, upper, dict(provenance, source="proofs_checks", lemma=lemma))


# ------------------------------------------------------------------ circle (I.1)

def circle_logits(N: int, beta: int) -> np.ndarray:
    """``beta cos(2 pi (i - j) / N)`` as float64 (the stored logits are the instance)."""
    ang = 2 * np.pi * np.subtract.outer(np.arange(N), np.arange(N)) / N
    return beta * np.cos(ang)


def fourier_factors(A: np.ndarray, F: int):
    """Real rank-(2F+1) factors of the circulant truncation of the circulant A (first row)."""
    N = A.shape[0]
    k = np.arange(N)
    a = A[0]
    lam = [float(np.sum(a * np.cos(2 * np.pi * f * k / N))) for f in range(F + 1)]
    P = [np.ones(N)]
    Q = [np.full(N, lam[0] / N)]
    for f in range(1, F + 1):
        c, s = np.cos(2 * np.pi * f * k / N), np.sin(2 * np.pi * f * k / N)
        P += [c, s]
        Q += [2 * lam[f] / N * c, 2 * lam[f] / N * s]
    return np.stack(P, axis=1), np.stack(Q, axis=1)


def smallest_fourier(A: np.ndarray, budget: float):
    """The smallest F whose float error is below ``budget`` (a hint), with its factors."""
    def ok(F):
        P, Q = fourier_factors(A, F)
        return np.abs(A - P @ Q.T).sum(axis=1).max() < budget - FLOAT_MARGIN
    lo, hi = -1, A.shape[0] // 2             # ok(hi) holds (the full spectrum); binary search
    if not ok(hi):
        return None, None, None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return (hi, *fourier_factors(A, hi))


def circular_cells(N: int, M: int):
    S = np.round(np.arange(M) * N / M).astype(int) % N
    k = np.arange(N)
    dist = np.abs(((k[:, None] - S[None, :] + N / 2) % N) - N / 2)
    return S, np.argmin(dist, axis=1)


def largest_separated(A: np.ndarray, candidates, eps_budget: float):
    """The largest M (from ``candidates``: M -> (S, cells)) whose float decoded test passes."""
    for M in sorted(candidates, reverse=True):
        S, cells = candidates[M]
        n = A.shape[1]
        X = np.zeros((n, M))
        X[np.arange(n), cells] = 1.0
        if (X.sum(axis=0) > 0).all() and eta_float(A, S, X) < 1 - eps_budget - FLOAT_MARGIN:
            return M, S, cells
    return None, None, None


def circle_cells(beta: int, Ns, eps: fmpq, tensors: dict, tag: str = "I1"):
    """Cells [L, U] on N points of S^1 for each N: separated-subset lower, Fourier upper."""
    out = []
    e = float(eps.p) / float(eps.q)
    for N in Ns:
        H = circle_logits(N, beta)
        A0 = float_softmax(H)
        slack = float(slack_bound(H, A0))
        top = min(N // 2, 8 * int(beta ** 0.5))        # M above 8 sqrt(beta) leaks far too much
        M, S, cells = largest_separated(A0, {M: circular_cells(N, M) for M in range(2, top)}, e + slack)
        F, P, Q = smallest_fourier(A0, e - slack)
        cid = f"{tag}_beta{beta}_N{N}"
        out.append((cid, N, M, 2 * F + 1 if F is not None else None,
                    decoded_cell(cid, H, eps, tensors, {"check": "I.1", "beta": beta, "N": N},
                                 S=S, cell_of_key=cells, P=P, Q=Q)))
    return out


# ------------------------------------------------------------------ disc (I.3)

def disc_points(G: int):
    """Lattice points ``(a, b) / G`` of the closed unit disc (spacing 1/G)."""
    return np.array([(a / G, b / G) for a, b in itertools.product(range(-G, G + 1), repeat=2)
                     if a * a + b * b <= G * G])


def disc_logits(pts: np.ndarray, beta) -> np.ndarray:
    """``beta (<x_i, y_j> - |y_j|^2 / 2)`` (queries = keys = the points), float64."""
    return beta * (pts @ pts.T - 0.5 * (pts * pts).sum(axis=1)[None, :])


def disc_candidates(pts: np.ndarray, G: int):
    """Separated subsets: the fine points on a coarse sub-lattice of step t (in fine units),
    each key in the cell of its nearest message (ties to the lowest index)."""
    out = {}
    idx = {(round(p[0] * G), round(p[1] * G)): i for i, p in enumerate(pts)}
    for t in range(1, G + 1):
        S = [i for (a, b), i in sorted(idx.items()) if a % t == 0 and b % t == 0]
        if len(S) < 2 or len(S) in out:
            continue
        d = ((pts[:, None, :] - pts[S][None, :, :]) ** 2).sum(axis=2)
        out[len(S)] = (S, np.argmin(d, axis=1))
    return out


def disc_cells(G: int, betas, eps: fmpq, tensors: dict, tag: str = "I3"):
    """Cells on keys filling the unit disc (spacing 1/G): separated subset lower, trivial upper."""
    out = []
    e = float(eps.p) / float(eps.q)
    pts = disc_points(G)
    cands = disc_candidates(pts, G)
    for beta in betas:
        H = disc_logits(pts, beta)
        A0 = float_softmax(H)
        slack = float(slack_bound(H, A0))
        M, S, cells = largest_separated(A0, cands, e + slack)
        cid = f"{tag}_G{G}_beta{beta}"
        out.append((cid, len(pts), M, decoded_cell(cid, H, eps, tensors, {"check": "I.3", "G": G, "beta": beta},
                                                   S=S, cell_of_key=cells)))
    return out


# ------------------------------------------------------------------ disc, upper half (I.2)

def representative_factors(pts: np.ndarray, beta, k: int):
    """Rank-M factors of ``B``: each query's row replaced by the softmax row of its nearest
    point of the grid ``Z^2 / k`` (the representative): ``P`` (n x M) the 0/1 assignment,
    ``Q`` (n x M) the representatives' rows. M counts the representatives used."""
    reps = np.round(pts * k) / k
    uniq, assign = np.unique(reps, axis=0, return_inverse=True)
    assign = assign.reshape(-1)
    Hr = beta * (uniq @ pts.T - 0.5 * (pts * pts).sum(axis=1)[None, :])
    Qt = float_softmax(Hr)                        # M x n: rows of the representatives
    P = np.zeros((len(pts), len(uniq)))
    P[np.arange(len(pts)), assign] = 1.0
    return P, Qt.T


def disc_bracket_cells(Gs, beta, eps: fmpq, tensors: dict, tag: str = "I2"):
    """Cells on lattice discs of spacing 1/G (G in Gs) at one beta: separated-subset lower
    (when one passes) and the representative upper, whose rank should not grow with G."""
    out = []
    e = float(eps.p) / float(eps.q)
    for G in Gs:
        pts = disc_points(G)
        H = disc_logits(pts, beta)
        A0 = float_softmax(H)
        slack = float(slack_bound(H, A0))
        M, S, cells = largest_separated(A0, disc_candidates(pts, G), e + slack)
        P = Q = None
        for k in np.arange(1.0, 4.0 * G, 0.25):            # representative grid spacing 1/k
            Pk, Qk = representative_factors(pts, beta, k)
            if Pk.shape[1] < len(pts) and np.abs(A0 - Pk @ Qk.T).sum(axis=1).max() < e - slack - FLOAT_MARGIN:
                P, Q = Pk, Qk
                break
        cid = f"{tag}_G{G}_beta{beta}"
        out.append((cid, len(pts), M, None if P is None else P.shape[1],
                    decoded_cell(cid, H, eps, tensors, {"check": "I.2", "G": G, "beta": beta},
                                 S=S, cell_of_key=cells, P=P, Q=Q)))
    return out

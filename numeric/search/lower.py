"""Lower witnesses: float searches for certificates of ``r_eps(A) >= d``.

Families (MATH.md section 2), each returning ``LowerCandidate`` records:

- ``trivial``: rank 1 iff ``eps < ||A||_row1``.
- ``frobenius``: K.2, the largest k with ``F_k(A) > sqrt(m) eps``; rank k + 1.
- ``reconstruction/pinv``: K.3 with the truncated pseudo-inverse,
  ``X = V_d``, ``R = V_d S_d^-1 U_d^T``, ``L = V_d^T``.
- ``reconstruction/decoded``: K.3 decoded inverse, ``X = I[:, T]``,
  ``R = I[:, T] A[S, T]^-1 I[S, :]``; (S, T) grown greedily, each column t
  paired with the unused row of largest weight on it.
- ``reconstruction/lp-svd``: K.3 with the LP-optimal R on the top-d right
  singular subspace (``numeric.lp.min_norm_left_inverse``, norm ``1/gamma(W)``),
  d above the best rank found so far, while HiGHS time lasts.
- ``row_reconstruction/far-rows``: the row-side lemma with ``Z = I[:, S]``,
  rows S taken greedily in farthest-first l1 order. The map
  ``G = C K^-1 I[S, :]`` aggregates columns into Voronoi cells (column j goes
  to the row of S with the largest weight on it, C the cell indicator,
  ``K = A[S, :] C``), so ``Z^T A G = Z^T`` and ``||G|| = ||K^-1||_row1``.
- ``row_reconstruction/far-rows-lp``: the same rows extended, with the
  LP-optimal G (``numeric.lp.min_norm_row_decoder``, norm ``1/gamma_row``).
- ``row_reconstruction/far-rows-descent``: the same rows extended further,
  with a G found by first-order descent instead of the LP: ``G = G_p + N Y``
  (``G_p`` any solution of ``A[S, :] G = I``, N a null-space basis of
  ``A[S, :]``), Y minimising a smooth max of the row-l1 norms of G. Not an
  optimum, only a proposal: the row-side lemma needs ``||G|| eps < 1 - eta``
  for whatever G is exported, and the exact tier judges it. It scales to the
  large row sets (d ~ 100) where the LP is too slow.
- ``row_reconstruction/greedy``: the best row set so far grown one row at a
  time; every row is screened at once by the norm of the map obtained by
  appending it (``append_bounds``), and when the screened map misses, the
  descent re-optimises the map of the enlarged set.
- ``row_reconstruction/greedy-lp``: mid-sized row sets (16 to 22 rows) grown
  with LP-optimal maps on the best screened rows.
- ``row_reconstruction/swap``: small row sets (fewer than 16 rows) enlarged
  by one by a swap search on the LP-optimal norm: the rows with the largest
  LP duals leave for rows far from the rest, random exchanges at local optima.

The farthest-first order suits large tolerances (the rows must be nearly
disjoint) and the span-aware greedy small ones (the rows must only be
independent in l1); ``search_brackets`` runs the tolerances largest first and
hands each row set on (``start``), so every tolerance begins where the larger
one ended.

All margins are float estimates; the exact tier decides.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from numeric.search.lp import LPFailed, min_norm_row_decoder
from numeric.search.norms import row_l1_norm

__all__ = ["LowerCandidate", "lower_candidates", "far_order"]

#: Float safety margin on every lower test ``norm * eps < 1 - eta``: the exact
#: defect terms of float witnesses are about 1e-13, so 1e-6 of room is ample.
SAFETY = 1e-6
#: Seconds of HiGHS time per tolerance for the LP extension of far rows (3 s of LP
#: plus 3 s of descent certified more rows on MiniLM heads than 4 s of LP alone).
LP_BUDGET_S = 3.0
#: The LP extension of far rows stops at this many rows: the decoder LP has
#: ``2 n d`` variables, and at d ~ 30 one solve takes several seconds (HiGHS IPM,
#: n = 256), beyond the budget; larger sets are left to the descent and the greedy.
LP_MAX_ROWS = 32
#: The LP extension of far rows gives up after this many rows in a row failed.
LP_MISSES = 3
#: Seconds of first-order descent per tolerance for the far-rows extension.
DESCENT_BUDGET_S = 3.0
#: Adam steps per trial row set; the descent stops earlier once the target norm
#: is reached or when 150 steps gained less than 0.3 % (measured on MiniLM heads:
#: within 7 % of the LP optimum at d = 18..30 in about 0.5 s).
DESCENT_ITERS = 1500
DESCENT_PATIENCE = 150
DESCENT_GAIN = 3e-3
#: Seconds per tolerance for the screened greedy growth of a certified row set
#: (``rows_greedy``), and candidates tried per step before it stops.
GREEDY_BUDGET_S = 2.0
GREEDY_TRIES = 3
#: The LP swap search (``rows_swap``) on small row sets: seconds per tolerance,
#: the largest set it tries, members and far candidates per exchange round,
#: random exchanges at a local optimum, and the pool they are drawn from.
SWAP_BUDGET_S = 3.0
#: LP-optimal growth of mid-sized row sets (``rows_lp_append``): seconds per
#: tolerance, and the set size below which it runs (one LP at 24 rows takes
#: about 2 s at n = 256; the swap search covers sets under ``SWAP_MAX_ROWS``).
LP_APPEND_BUDGET_S = 2.0
LP_APPEND_MAX_ROWS = 24
SWAP_MAX_ROWS = 16
SWAP_MEMBERS = 2
SWAP_CANDIDATES = 6
SWAP_KICKS = 20
SWAP_POOL = 40


@dataclass(frozen=True)
class LowerCandidate:
    """A float-checked lower witness: claimed rank, family, kind and tensors."""

    rank: int
    family: str
    kind: str                      # "trivial" | "frobenius" | "reconstruction" | "row_reconstruction"
    tensors: dict = field(default_factory=dict)   # R, X, L  or  G, Z, M
    k: int | None = None           # Frobenius tail index
    norm: float | None = None      # ||R|| or ||G|| (float)


def trivial(A: np.ndarray, eps: float) -> LowerCandidate:
    """Rank 1 when ``eps < ||A||_row1`` (trivial lower), else rank 0."""
    return LowerCandidate(1 if eps < row_l1_norm(A) * (1 - SAFETY) else 0, "trivial", "trivial")


def frobenius(S: np.ndarray, m: int, eps: float) -> LowerCandidate | None:
    """K.2: the largest k with ``F_k(A)^2 > m eps^2`` (float, with margin), rank k + 1."""
    tail = np.concatenate([np.cumsum((S ** 2)[::-1])[::-1], [0.0]])   # tail[k] = sum_{i >= k} s_i^2
    ks = np.nonzero(tail > m * eps * eps * (1 + 1e-6))[0]
    if ks.size == 0:
        return None
    k = int(ks[-1])
    return LowerCandidate(k + 1, "frobenius", "frobenius", k=k)


def pinv(U, S, Vt, eps: float) -> LowerCandidate | None:
    """K.3 truncated pseudo-inverse: the largest d with ``||V_d S_d^-1 U_d^T|| eps < 1``."""
    n, m = Vt.shape[1], U.shape[0]
    R = np.zeros((n, m))
    best = None
    for d in range(1, S.size + 1):
        if S[d - 1] <= 0:
            break
        R += np.outer(Vt[d - 1], U[:, d - 1]) / S[d - 1]
        if row_l1_norm(R) * eps < 1 - SAFETY:
            best = d
        elif best is not None and d > 2 * best + 8:
            break
    if best is None:
        return None
    X = Vt[:best].T.copy()
    R = (Vt[:best].T / S[:best]) @ U[:, :best].T
    return LowerCandidate(best, "reconstruction/pinv", "reconstruction",
                          {"R": R, "X": X, "L": X.T.copy()}, norm=row_l1_norm(R))


def far_order(M: np.ndarray) -> list[int]:
    """Rows of M in farthest-first order under the l1 distance (start: the most peaked row)."""
    m = M.shape[0]
    first = int(np.argmax(M.max(axis=1)))
    order = [first]
    mind = np.abs(M - M[first]).sum(axis=1)
    mind[first] = -1.0
    for _ in range(m - 1):
        j = int(np.argmax(mind))
        order.append(j)
        mind = np.minimum(mind, np.abs(M - M[j]).sum(axis=1))
        mind[order] = -1.0
    return order


def _voronoi(A: np.ndarray, S: list[int]):
    AS = A[S]
    cell = np.argmax(AS, axis=0)
    C = np.zeros((A.shape[1], len(S)))
    C[np.arange(A.shape[1]), cell] = 1.0
    K = AS @ C
    try:
        Ki = np.linalg.inv(K)
    except np.linalg.LinAlgError:
        return None, np.inf
    if not np.isfinite(Ki).all():
        return None, np.inf
    return C @ Ki, row_l1_norm(Ki)


def _row_witness(A: np.ndarray, S: list[int], GS: np.ndarray, family: str) -> LowerCandidate:
    m, n = A.shape
    d = len(S)
    Z = np.zeros((m, d))
    Z[S, np.arange(d)] = 1.0
    G = np.zeros((n, m))
    G[:, S] = GS
    return LowerCandidate(d, family, "row_reconstruction", {"G": G, "Z": Z, "M": Z.T.copy()}, norm=row_l1_norm(GS))


def _certifies(A: np.ndarray, rows: list[int], G: np.ndarray, eps: float) -> bool:
    """Float check of a row-side selection witness: ``A[rows] G = I`` to rounding, ``||G|| eps < 1``."""
    return bool(row_l1_norm(G) * eps < 1 - SAFETY and np.abs(A[rows] @ G - np.eye(len(rows))).max() < 1e-9)


def certifies_subspace(A: np.ndarray, X: np.ndarray, R: np.ndarray, eps: float) -> bool:
    """Float check of a column-side witness on ``W = range X``: ``R A X = X`` to rounding, ``||R|| eps < 1``."""
    return bool(row_l1_norm(R) * eps < 1 - SAFETY and np.abs(R @ A @ X - X).max() < 1e-9)


def far_rows(A: np.ndarray, eps: float, order: list[int]) -> tuple[LowerCandidate | None, list[int]]:
    """Row-side witness on far-apart rows with the Voronoi map (greedy over ``order``)."""
    S: list[int] = []
    for i in order:
        _, nrm = _voronoi(A, S + [i])
        if nrm * eps < 1 - SAFETY:
            S.append(i)
    if not S:
        return None, S
    GS, _ = _voronoi(A, S)
    return _row_witness(A, S, GS, "row_reconstruction/far-rows"), S


def far_rows_lp(A: np.ndarray, eps: float, S: list[int], order: list[int],
                budget_s: float = LP_BUDGET_S) -> LowerCandidate | None:
    """Extend S with the next far rows as long as the LP-optimal G certifies (doubling steps)."""
    t0 = time.perf_counter()
    rest = [i for i in order if i not in set(S)]
    best = None
    base = list(S)
    step = 1
    misses = 0
    while rest and time.perf_counter() - t0 < budget_s and misses < LP_MISSES:
        trial = base + rest[:min(step, LP_MAX_ROWS - len(base))]
        if len(trial) == len(base):
            break
        left = budget_s - (time.perf_counter() - t0)
        try:
            GS, v = min_norm_row_decoder(A[trial], time_limit=max(left, 0.1))
        except LPFailed:
            break
        # the LP norm is a float; re-measure the row-l1 norm of the map we export
        if _certifies(A, trial, GS, eps):
            best = _row_witness(A, trial, GS, "row_reconstruction/far-rows-lp")
            base, rest = trial, rest[len(trial) - len(base):]
            step *= 2
            misses = 0
        elif step > 1:
            step = 1
        else:
            rest = rest[1:]   # skip this row, try the next
            misses += 1
    return best


def _descend_row_map(AS: np.ndarray, G0: np.ndarray, target: float, iters: int = DESCENT_ITERS,
                     deadline: float | None = None) -> tuple[np.ndarray, float]:
    """A map G with ``AS G = I`` and small row-l1 norm, by Adam on ``G = G0 + N Y`` (row-side K.3).

    ``G0`` must satisfy ``AS G0 = I`` (up to rounding); N spans the null space
    of AS, so every iterate satisfies the constraint. The loss is a smooth
    maximum (log-sum-exp) of the row-l1 norms; the best iterate is returned,
    re-normalised as ``G (AS G)^-1`` so that the float defect is at rounding level.
    Stops once the norm is below ``target``.
    """
    import torch

    d, n = AS.shape
    _, _, vt = np.linalg.svd(AS)
    N = torch.tensor(vt[d:].T.copy())
    Gp = torch.tensor(G0)
    Y = torch.zeros(N.shape[1], d, dtype=torch.float64, requires_grad=True)
    best_v, best_G = row_l1_norm(G0), G0
    if best_v < target:
        return best_G, best_v
    opt = torch.optim.Adam([Y], lr=0.01 * float(np.abs(G0).max()))
    mark, mark_it = best_v, 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for it in range(iters):
            G = Gp + N @ Y
            r = G.abs().sum(dim=1)
            v = float(r.max().detach())
            if v < best_v:
                best_v, best_G = v, G.detach().numpy().copy()
                if v < target:
                    break
            if it - mark_it >= DESCENT_PATIENCE:
                if best_v > mark * (1 - DESCENT_GAIN):
                    break
                mark, mark_it = best_v, it
            if deadline is not None and it % 50 == 0 and time.perf_counter() > deadline:
                break
            beta = 30.0 / v
            loss = torch.logsumexp(beta * r, 0) / beta
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    try:
        G = best_G @ np.linalg.inv(AS @ best_G)
    except np.linalg.LinAlgError:
        return best_G, np.inf
    return G, row_l1_norm(G)


def _initial_row_map(A: np.ndarray, trial: list[int], prev: tuple[list[int], np.ndarray] | None):
    """A starting G for ``A[trial] G = I``: the previous map with Voronoi columns appended, else Voronoi."""
    Gv, nv = _voronoi(A, trial)
    if Gv is None:                       # a Voronoi cell matrix is singular: the least-squares map
        AS = A[trial]
        try:
            Gv = AS.T @ np.linalg.inv(AS @ AS.T)
        except np.linalg.LinAlgError:
            return None
        if not np.isfinite(Gv).all():
            return None
        nv = row_l1_norm(Gv)
    if prev is None:
        return Gv
    S, G = prev
    d0 = len(S)
    G0 = Gv.copy()
    G0[:, :d0] = G
    try:
        G1 = G0 @ np.linalg.inv(A[trial] @ G0)
    except np.linalg.LinAlgError:
        return Gv
    if not np.isfinite(G1).all() or row_l1_norm(G1) > nv:
        return Gv
    return G1


def far_rows_descent(A: np.ndarray, eps: float, S: list[int], order: list[int], GS: np.ndarray | None = None,
                     budget_s: float = DESCENT_BUDGET_S) -> LowerCandidate | None:
    """Extend S along ``order`` (doubling steps, skipping rows that fail) with descent-found maps G."""
    t0 = time.perf_counter()
    deadline = t0 + budget_s
    target = (1 - SAFETY) / eps
    Sset = set(S)
    rest = [i for i in order if i not in Sset]
    best = None
    base = list(S)
    prev = (base, GS) if GS is not None and len(base) else None
    step = max(1, len(base) // 4)
    misses = 0
    while rest and time.perf_counter() < deadline and misses < LP_MISSES:
        trial = base + rest[:step]
        G0 = _initial_row_map(A, trial, prev)
        if G0 is None:
            rest = rest[1:]
            misses += 1
            continue
        G, v = _descend_row_map(A[trial], G0, target, deadline=deadline)
        if _certifies(A, trial, G, eps):
            best = _row_witness(A, trial, G, "row_reconstruction/far-rows-descent")
            base, rest = trial, rest[step:]
            prev = (base, G)
            step *= 2
            misses = 0
        elif step > 1:
            step = max(1, step // 4)
        else:
            rest = rest[1:]
            misses += 1
    return best


def _rows_of(c: LowerCandidate) -> list[int]:
    """The row set S of a selection witness ``Z = I[:, S]`` (column order kept)."""
    return [int(i) for i in np.argmax(c.tensors["Z"], axis=0)]


def _rows_and_map(c: LowerCandidate | None, n: int) -> tuple[list[int], np.ndarray]:
    """(S, G[:, S]) of a selection witness, the n x d map that inverts ``A[S, :]``; ([], n x 0) for None."""
    if c is None:
        return [], np.zeros((n, 0))
    S = _rows_of(c)
    return S, c.tensors["G"][:, S]


def strongest_rows(candidates: list[LowerCandidate]) -> LowerCandidate | None:
    """The row-side witness with the most rows (ties: least norm), or None."""
    rows = [c for c in candidates if c.kind == "row_reconstruction"]
    return max(rows, key=lambda c: (c.rank, -c.norm)) if rows else None


def append_bounds(A: np.ndarray, S: list[int], GS: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every row i, a map for ``S + [i]`` built from ``GS`` and its row-l1 norm (row-side K.3).

    If ``A[S] GS = I`` and g satisfies ``A[S] g = 0``, ``A[i] g = 1``, then
    ``G' = [GS - g c, g]`` with ``c = A[i] GS`` satisfies ``A[S + [i]] G' = I``
    and ``||G'|| <= max_j (||GS_j||_1 + |g_j| (1 + ||c||_1))``. g is the
    least-squares choice (the part of ``A[i]`` orthogonal to the rows of
    ``A[S]``, scaled). Returns (bound per row, g per row, c per row), rows of
    S with bound inf. One vectorised pass: the greedy's screening step.
    """
    m, n = A.shape
    if S:
        Qb, _ = np.linalg.qr(A[S].T)
        H = A - (A @ Qb) @ Qb.T
    else:
        H = A.copy()
    hs = (H * H).sum(axis=1)
    hs[S] = np.inf
    g = H / np.maximum(hs, 1e-300)[:, None]
    C = A @ GS if GS.shape[1] else np.zeros((m, 0))
    r = np.abs(GS).sum(axis=1) if GS.shape[1] else np.zeros(n)
    bound = (r[None, :] + np.abs(g) * (1.0 + np.abs(C).sum(axis=1))[:, None]).max(axis=1)
    bound[S] = np.inf
    bound[~np.isfinite(bound)] = np.inf
    return bound, g, C


def _grow_rows(A: np.ndarray, eps: float, S: list[int], GS: np.ndarray, budget_s: float, tries: int,
               max_rows: int, improve, family: str) -> LowerCandidate | None:
    """Grow a certified row set one row at a time, the rows of least ``append_bounds`` first.

    Each candidate first gets the appended map; if that misses,
    ``improve(rows, G, deadline)`` proposes a better map for the enlarged set
    (or None). Stops when none of the ``tries`` best candidates certifies, at
    ``max_rows`` rows, or at the deadline; returns a witness only if a row was added.
    """
    deadline = time.perf_counter() + budget_s
    S = list(S)
    G = np.asarray(GS, dtype=np.float64).reshape(A.shape[1], len(S))
    d0 = len(S)
    while len(S) < min(max_rows, *A.shape) and time.perf_counter() < deadline:
        bound, g, C = append_bounds(A, S, G)
        grown = False
        for i in np.argsort(bound, kind="stable")[:tries]:
            if not np.isfinite(bound[i]) or time.perf_counter() > deadline:
                break
            trial = S + [int(i)]
            Gn = np.hstack([G - np.outer(g[i], C[i]), g[i][:, None]])
            if not _certifies(A, trial, Gn, eps):
                Gn = improve(trial, Gn, deadline)
            if Gn is not None and _certifies(A, trial, Gn, eps):
                S, G, grown = trial, Gn, True
                break
        if not grown:
            break
    return _row_witness(A, S, G, family) if len(S) > d0 else None


def rows_greedy(A: np.ndarray, eps: float, S: list[int], GS: np.ndarray, budget_s: float = GREEDY_BUDGET_S,
                tries: int = GREEDY_TRIES) -> LowerCandidate | None:
    """Grow a certified row set one row at a time, the row of least ``append_bounds`` first.

    Each step appends the screened map; when its bound misses ``1/eps``, the
    descent (``_descend_row_map``) re-optimises the whole map for the enlarged
    set before the next candidate is tried. Starts from a certified (S, GS),
    possibly empty; returns a witness only if it certified more rows than S.
    """
    target = (1 - SAFETY) / eps

    def descend(rows, G, deadline):
        return _descend_row_map(A[rows], G, target, deadline=deadline)[0]

    return _grow_rows(A, eps, S, GS, budget_s, tries, min(A.shape), descend, "row_reconstruction/greedy")


def rows_lp_append(A: np.ndarray, eps: float, S: list[int], GS: np.ndarray,
                   budget_s: float = LP_APPEND_BUDGET_S, tries: int = GREEDY_TRIES) -> LowerCandidate | None:
    """Grow a mid-sized certified row set with LP-optimal maps (``min_norm_row_decoder``).

    The rows screened best by ``append_bounds`` are tried in turn; the LP
    gives the least norm ``1/gamma_row`` of the enlarged set, so it certifies
    rows that the descent (within a few per cent of the optimum) just misses.
    Only up to ``LP_APPEND_MAX_ROWS - 1`` rows (the LP grows as ``n d^2``);
    returns a witness only if a row was added.
    """
    def lp(rows, G, deadline):
        try:
            return min_norm_row_decoder(A[rows], time_limit=max(deadline - time.perf_counter(), 0.01))[0]
        except LPFailed:
            return None

    return _grow_rows(A, eps, S, GS, budget_s, tries, LP_APPEND_MAX_ROWS - 1, lp, "row_reconstruction/greedy-lp")


def rows_swap(A: np.ndarray, eps: float, S: list[int], budget_s: float = SWAP_BUDGET_S,
              max_rows: int = SWAP_MAX_ROWS, seed: int = 0) -> LowerCandidate | None:
    """Certify ``len(S) + 1`` rows, then more, by a swap search on the LP-optimal norm.

    The set starts as S plus the row farthest (l1) from it; while its
    LP-optimal norm ``1/gamma_row`` (``min_norm_row_decoder``) is at least
    ``1/eps``, one row is exchanged: the rows of the set with the largest LP
    duals (the rows in the near-dependency that limits ``gamma_row``) are
    swapped for the rows farthest from the rest, the first exchange that
    lowers the norm is kept; at a local optimum a random exchange from the
    far rows is tried instead (iterated local search). Only small sets: the
    LP grows as ``n d^2``.
    """
    t0 = time.perf_counter()
    deadline = t0 + budget_s
    target = (1 - SAFETY) / eps
    m, n = A.shape
    rng = np.random.default_rng(seed)
    best = None

    def dist_to(rows):
        d = np.full(m, np.inf)
        for k in rows:
            d = np.minimum(d, np.abs(A - A[k]).sum(axis=1))
        return d

    def solve(rows):
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        try:
            return min_norm_row_decoder(A[rows], time_limit=left, duals=True)
        except LPFailed:
            return None

    cur = list(S)
    while len(cur) < min(max_rows, m, n) and time.perf_counter() < deadline:
        dist = dist_to(cur)
        dist[cur] = -1.0
        cur = cur + [int(np.argmax(dist))]
        sol = solve(cur)
        if sol is None:
            break
        G, v, lam = sol
        tabu: set[int] = set()
        while v >= target and time.perf_counter() < deadline:
            blame = np.abs(lam).sum(axis=1)
            moved = False
            for pos in np.argsort(-blame, kind="stable")[:SWAP_MEMBERS]:
                rest = cur[:pos] + cur[pos + 1:]
                dist = dist_to(rest)
                dist[cur] = -1.0
                dist[list(tabu)] = -1.0
                for c in np.argsort(-dist, kind="stable")[:SWAP_CANDIDATES]:
                    trial = list(cur)
                    trial[pos] = int(c)
                    sol = solve(trial)
                    if sol is None:
                        break
                    if sol[1] < v:
                        tabu.add(cur[pos])
                        cur, (G, v, lam), moved = trial, sol, True
                        break
                if moved or time.perf_counter() > deadline:
                    break
            if moved:
                continue
            # local optimum: random exchanges among the far rows until one lowers the norm
            for _ in range(SWAP_KICKS):
                pos = int(rng.integers(len(cur)))
                rest = cur[:pos] + cur[pos + 1:]
                dist = dist_to(rest)
                dist[cur] = -1.0
                pool = np.argsort(-dist, kind="stable")[:SWAP_POOL]
                trial = list(cur)
                trial[pos] = int(rng.choice(pool))
                sol = solve(trial)
                if sol is None:
                    break
                if sol[1] < v:
                    cur, (G, v, lam), moved = trial, sol, True
                    break
            if not moved:
                break
        if v < target and _certifies(A, cur, G, eps):
            best = _row_witness(A, cur, G, "row_reconstruction/swap")
        else:
            break
    return best


def lp_svd(A: np.ndarray, eps: float, Vt: np.ndarray, start: int,
           budget_s: float = LP_BUDGET_S) -> LowerCandidate | None:
    """K.3 with the LP-optimal R on ``W = span(V_d)`` (norm ``1/gamma(W)``), d from ``start`` up."""
    from numeric.search.lp import min_norm_left_inverse

    t0 = time.perf_counter()
    best = None
    for d in range(max(start, 1), Vt.shape[0] + 1):
        left = budget_s - (time.perf_counter() - t0)
        if left <= 0:
            break
        X = Vt[:d].T.copy()
        # gamma(W) <= ||A x|| / ||x|| for every x in W (K.3); W grows with d, so
        # once a basis vector fails no larger d can pass: skip the LPs
        ratio = np.abs(A @ X).max(axis=0) / np.abs(X).max(axis=0)
        if ratio.min() * (1 - SAFETY) <= eps:
            break
        try:
            R, _ = min_norm_left_inverse(A @ X, X, time_limit=max(left, 0.1))
        except LPFailed:
            break
        if certifies_subspace(A, X, R, eps):
            best = LowerCandidate(d, "reconstruction/lp-svd", "reconstruction",
                                  {"R": R, "X": X, "L": X.T.copy()}, norm=row_l1_norm(R))
        else:
            break
    return best


def decoded(A: np.ndarray, eps: float) -> LowerCandidate | None:
    """K.3 decoded inverse on (S, T) grown greedily: columns by peak weight, rows by argmax."""
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


def lower_candidates(A: np.ndarray, eps: float, svd, *, lp: bool = True,
                     lp_budget_s: float = LP_BUDGET_S,
                     descent_budget_s: float = DESCENT_BUDGET_S,
                     greedy_budget_s: float = GREEDY_BUDGET_S,
                     swap_budget_s: float = SWAP_BUDGET_S,
                     lp_append_budget_s: float = LP_APPEND_BUDGET_S,
                     start: LowerCandidate | None = None) -> list[LowerCandidate]:
    """Every family's best float witness at ``eps``, strongest first (ties: cheaper kind first).

    ``start``: a row-side selection witness found at a larger tolerance. It
    stays valid at ``eps`` (``||G|| eps' < 1 - eta`` for ``eps' > eps``
    implies the same at eps), so it is offered as it is and the row-set
    searches grow it instead of starting over.
    """
    U, S, Vt = svd
    m = A.shape[0]
    out = [trivial(A, eps)]
    if out[0].rank == 0:
        return out
    for c in (frobenius(S, m, eps), pinv(U, S, Vt, eps), decoded(A, eps)):
        if c is not None:
            out.append(c)
    if start is not None and start.kind == "row_reconstruction" and start.norm is not None \
            and start.norm * eps < 1 - SAFETY:
        out.append(start)
    order = far_order(A)
    fr, Srows = far_rows(A, eps, order)
    if fr is not None:
        out.append(fr)
    if lp and Srows and len(Srows) < LP_MAX_ROWS:
        c = far_rows_lp(A, eps, Srows, order, budget_s=lp_budget_s)
        if c is not None:
            out.append(c)
    n = A.shape[1]
    top = strongest_rows(out)
    if descent_budget_s > 0 and top is not None:
        S0, G0 = _rows_and_map(top, n)
        c = far_rows_descent(A, eps, S0, order, G0, budget_s=descent_budget_s)
        if c is not None:
            out.append(c)
    top = strongest_rows(out)
    if greedy_budget_s > 0:
        c = rows_greedy(A, eps, *_rows_and_map(top, n), budget_s=greedy_budget_s)
        if c is not None:
            out.append(c)
    top = strongest_rows(out)
    if lp and swap_budget_s > 0 and top is not None and top.rank < SWAP_MAX_ROWS:
        c = rows_swap(A, eps, _rows_of(top), budget_s=swap_budget_s)
        if c is not None:
            out.append(c)
    top = strongest_rows(out)
    if lp and lp_append_budget_s > 0 and top is not None and SWAP_MAX_ROWS <= top.rank < LP_APPEND_MAX_ROWS - 1:
        c = rows_lp_append(A, eps, *_rows_and_map(top, n), budget_s=lp_append_budget_s)
        if c is not None:
            out.append(c)
    if lp:
        # column side last: it has to beat every row-side witness, so its LPs start above them
        # (and its cheap test ``||A x|| / ||x|| <= eps`` on a basis vector usually stops it at once)
        c = lp_svd(A, eps, Vt, max(c.rank for c in out) + 1, budget_s=lp_budget_s / 2)
        if c is not None:
            out.append(c)
    kind_cost = {"trivial": 0, "frobenius": 1, "reconstruction": 2, "row_reconstruction": 3}
    out.sort(key=lambda c: (-c.rank, kind_cost[c.kind]))
    return out

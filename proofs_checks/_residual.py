"""The residual ``q(M) = min_b max_i osc_j(M_ij - b_j)`` exactly, with both certificates.

With ``D[j][j'] = max_i (M_ij - M_ij')`` the LP reads
``min_b max_{j, j'} D[j][j'] - b_j + b_j'``: a minimum over potentials, whose
value is the maximum cycle mean of the weights ``D`` (the potentials telescope
around any cycle). We find it with Karp's algorithm in exact rationals and
then *prove* it: a column shift ``b`` with every constraint ``<= q``
(so ``q(M) <= q``) and a cycle of columns whose mean weight is ``q``
(so ``q(M) >= q``). Two-cycles are the rectangular contrasts
``|M_ij - M_ij' - M_i'j + M_i'j'| / 2``; a longer cycle is what makes
``q`` exceed them (H.4).

>>> from flint import fmpq
>>> residual([[fmpq(1), fmpq(-1)], [fmpq(-1), fmpq(1)]]).q
2
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

__all__ = ["ResidualCertificate", "residual", "contrast_bound", "row_osc_bound"]


@dataclass(frozen=True)
class ResidualCertificate:
    """``q(M) = q``: ``shift`` attains it, ``cycle`` (column indices) proves optimality."""

    q: fmpq
    shift: tuple
    cycle: tuple


def _weights(M) -> list[list[fmpq]]:
    n = len(M[0])
    return [[max(row[j] - row[k] for row in M) for k in range(n)] for j in range(n)]


def _karp(D) -> fmpq:
    """Maximum cycle mean of the complete digraph with weights D (self-loops 0 included)."""
    n = len(D)
    F: list[list[fmpq | None]] = [[None] * n for _ in range(n + 1)]
    F[0][0] = fmpq(0)
    for k in range(1, n + 1):
        for v in range(n):
            best: fmpq | None = None
            for u in range(n):
                prev = F[k - 1][u]
                if prev is not None:
                    cand = prev + D[u][v]
                    best = cand if best is None or cand > best else best
            F[k][v] = best
    lam: fmpq | None = None
    for v in range(n):
        last = F[n][v]
        if last is None:
            continue
        worst = min((last - f) / (n - k) for k in range(n) if (f := F[k][v]) is not None)
        lam = worst if lam is None or worst > lam else lam
    assert lam is not None              # F[n][0]: every walk of n steps from 0 exists (complete digraph)
    return lam


def residual(M) -> ResidualCertificate:
    """``q(M)`` for a rational matrix (rows of fmpq), proved from both sides.

    Raises ArithmeticError if either certificate fails to check (never returns
    an unproved value).
    """
    M = [[fmpq(v) if not isinstance(v, fmpq) else v for v in row] for row in M]
    n = len(M[0])
    D = _weights(M)
    lam = _karp(D)
    # Primal: potentials b with D[j][k] - b_j + b_k <= lam (longest paths, no positive cycle).
    b = [fmpq(0)] * n
    for _ in range(n + 1):
        changed = False
        for j in range(n):
            for k in range(n):
                if b[k] + D[j][k] - lam > b[j]:
                    b[j] = b[k] + D[j][k] - lam
                    changed = True
        if not changed:
            break
    for row in M:
        shifted = [row[j] - b[j] for j in range(n)]
        if max(shifted) - min(shifted) > lam:
            raise ArithmeticError("primal shift does not attain the cycle mean")
    # Dual: a cycle of tight edges (D[j][k] - lam == b_j - b_k) has mean exactly lam.
    tight = {j: [k for k in range(n) if D[j][k] - lam == b[j] - b[k]] for j in range(n)}
    cycle = _find_cycle(tight, n)
    if cycle is None:
        raise ArithmeticError("no tight cycle")
    total = sum((D[cycle[t]][cycle[(t + 1) % len(cycle)]] for t in range(len(cycle))), fmpq(0))
    if total != lam * len(cycle):
        raise ArithmeticError("tight cycle does not have mean q")
    return ResidualCertificate(lam, tuple(b), tuple(cycle))


def _find_cycle(adj, n):
    colour = [0] * n
    stack_pos: dict[int, int] = {}
    path: list[int] = []

    def dfs(u):
        colour[u] = 1
        stack_pos[u] = len(path)
        path.append(u)
        for v in adj[u]:
            if colour[v] == 1:
                return path[stack_pos[v]:]
            if colour[v] == 0:
                found = dfs(v)
                if found:
                    return found
        colour[u] = 2
        path.pop()
        del stack_pos[u]
        return None

    for s in range(n):
        if colour[s] == 0:
            found = dfs(s)
            if found:
                return found
    return None


def contrast_bound(M) -> fmpq:
    """``max |M_ij - M_ij' - M_i'j + M_i'j'| / 2``, the rectangular lower bound on q (H.4)."""
    D = _weights([[fmpq(v) for v in row] for row in M])
    n = len(D)
    return max((D[j][k] + D[k][j]) / 2 for j in range(n) for k in range(n))


def row_osc_bound(M, shift=None) -> fmpq:
    """``max_i osc_j(M_ij - b_j)`` for a given shift (b = 0 by default): an upper bound on q."""
    n = len(M[0])
    b = shift or [fmpq(0)] * n
    return max(max(r[j] - b[j] for j in range(n)) - min(r[j] - b[j] for j in range(n)) for r in M)

"""Odd-map lower certificates, found in floats and written for the exact tier (MATH.md section 2).

The search (after ``research/oddmap_search.py``): the nerve of the cover by
``C(i, s) = {x in [-1,1]^n : s a_i . x > eps}`` by LPs (HiGHS), then a SAT
problem (python-sat, a test extra, imported when first needed) for an odd
vertex labelling of the first barycentric subdivision of the
d-cross-polytope boundary whose every facet label set is a face of the nerve,
then one LP point per distinct facet label set. The vertex order, the facets
and the order of the label sets are those of ``exact.oddmap``, which judges
the result; nothing here is trusted, and a failed search is never a bound.

A label is coded ``l = 2 i + b`` in the SAT problem: row i, sign +1 when
b = 0, -1 when b = 1; ``l ^ 1`` is its antipode.
"""
from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, SupportsFloat

import numpy as np
from scipy.optimize import linprog

from exact.cellspec import CellSpec, Claim, TargetSpec
from exact.oddmap import MAX_ODDMAP_DIM, label_sets
from fileio.bracketwriter import rational_string, write_bracket_file

__all__ = ["FACE_TOL", "vertices", "facets", "face_point", "nerve", "budgeted_nerve", "find_odd_map", "odd_map_cell",
           "export_odd_map"]

#: A label set is a face when its LP margin exceeds this; points are only kept above it.
FACE_TOL = 1e-9

#: A label set as sorted codes ``2 i + (s < 0)`` of its labels (row i, sign s).
Codes = tuple[int, ...]


def vertices(d: int) -> list[tuple[int, ...]]:
    """The nonzero sign vectors of ``{-1, 0, 1}^d`` in ``exact.oddmap``'s order (antipode of k: V - 1 - k)."""
    return [v for v in itertools.product((-1, 0, 1), repeat=d) if any(v)]


def facets(d: int) -> list[tuple[int, ...]]:
    """The maximal chains as tuples of vertex indices (a permutation and a sign per coordinate)."""
    index = {v: k for k, v in enumerate(vertices(d))}
    out: list[tuple[int, ...]] = []
    for perm in itertools.permutations(range(d)):
        for signs in itertools.product((1, -1), repeat=d):
            v, chain = [0] * d, list[int]()
            for c in perm:
                v[c] = signs[c]
                chain.append(index[tuple(v)])
            out.append(tuple(chain))
    return out


def face_point(A: np.ndarray, eps: float, labels: Sequence[tuple[int, int]]) -> tuple[float, np.ndarray]:
    """max t with ``s a_i . x >= eps + t`` for the labels (i, s), x in [-1,1]^n (LP): (t*, x)."""
    n = A.shape[1]
    rows = np.array([-s * A[i] for i, s in labels], dtype=np.float64).reshape(len(labels), n)
    c = np.zeros(n + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=np.hstack([rows, np.ones((len(labels), 1))]), b_ub=np.full(len(labels), -eps),
                  bounds=[(-1, 1)] * n + [(None, 1)], method="highs")
    if res.status != 0:
        return -np.inf, np.zeros(n)
    return -res.fun, np.clip(res.x[:n], -1.0, 1.0)


def _pair(l: int) -> tuple[int, int]:
    return (l >> 1, 1 - 2 * (l & 1))


def nerve(A: np.ndarray, eps: float, max_size: int) -> tuple[dict[Codes, np.ndarray], list[Codes]]:
    """(faces, minimal non-faces) of the cover, label sets of size <= max_size as sorted codes.

    Downward closed: a set is tried only when its one-smaller subsets are faces.
    """
    faces, mnf, _, _ = budgeted_nerve(A, eps, max_size)
    return faces, mnf


def budgeted_nerve(A: np.ndarray, eps: float, max_size: int,
                   max_lps: int | None = None) -> tuple[dict[Codes, np.ndarray], list[Codes], int, bool]:
    """``nerve`` with at most ``max_lps`` LPs: (faces, minimal non-faces, LPs, complete)."""
    nlab = 2 * A.shape[0]
    faces: dict[Codes, np.ndarray] = {}
    mnf: list[Codes] = [(2 * i, 2 * i + 1) for i in range(A.shape[0])]
    level: list[Codes] = [()]
    lps = 0
    for _ in range(max_size):
        nxt: list[Codes] = []
        for F in level:
            used = {l >> 1 for l in F}
            for l in range((F[-1] + 1) if F else 0, nlab):
                G = F + (l,)
                if l >> 1 in used or any(G[:k] + G[k + 1:] not in faces for k in range(len(G) - 1)):
                    continue
                if max_lps is not None and lps >= max_lps:
                    return faces, mnf, lps, False
                t, x = face_point(A, eps, [_pair(c) for c in G])
                lps += 1
                if t > FACE_TOL:
                    faces[G] = x
                    nxt.append(G)
                else:
                    mnf.append(G)
        level = nxt
    return faces, mnf, lps, True


def _sat_labels(d: int, nlab: int, mnf: list[Codes], conflicts: int) -> list[int] | str | None:
    """An odd vertex labelling (codes) whose facet label sets avoid every minimal non-face, None or 'unknown'."""
    try:
        from pysat.solvers import Solver  # noqa: PLC0415  (python-sat: the test extra, truly optional)
    except ImportError:
        raise RuntimeError("the odd-map search needs python-sat: pip install python-sat") from None
    V = 3**d - 1
    half = V // 2

    def x(v: int, l: int) -> int:                    # vertex v >= half is the antipode of V - 1 - v
        return 1 + v * nlab + l if v < half else 1 + (V - 1 - v) * nlab + (l ^ 1)

    chains = facets(d)
    z: Callable[[int, int], int] = lambda a, l: 1 + half * nlab + a * nlab + l  # label l in facet a
    clauses = [[x(v, l) for l in range(nlab)] for v in range(half)]
    small = [N for N in mnf if len(N) <= d]
    for a, F in enumerate(chains):
        for v in F:
            clauses.extend([-x(v, l), z(a, l)] for l in range(nlab))
        clauses.extend([-z(a, l) for l in N] for N in small)
    with Solver(name="cadical195", bootstrap_with=clauses) as s:
        s.conf_budget(conflicts)
        ok = s.solve_limited()
        if ok is None:
            return "unknown"
        if not ok:
            return None
        model = {v for v in s.get_model() if v > 0}
    return [next(l for l in range(nlab) if x(v, l) in model) for v in range(V)]


def find_odd_map(A: object, eps: float, d: int, conflicts: int = 100_000) -> tuple[np.ndarray, np.ndarray] | None:
    """(labels V x 2, points S x n) of an odd-map certificate for ``r_eps(A) >= d``, or None.

    None when the SAT problem is unsatisfiable or its conflict budget is spent:
    not a bound either way. Points are LP optima clipped to [-1, 1].
    """
    A = np.asarray(A, dtype=np.float64)
    if not 1 <= d <= min(MAX_ODDMAP_DIM, *A.shape):
        raise ValueError(f"d = {d} outside [1, min({MAX_ODDMAP_DIM}, m, n)]")
    faces, mnf = nerve(A, float(eps), d)
    codes = _sat_labels(d, 2 * A.shape[0], mnf, conflicts)
    if codes is None or isinstance(codes, str):      # unsatisfiable, or "unknown"
        return None
    labels = tuple(_pair(l) for l in codes)
    points: list[np.ndarray] = []
    for S in label_sets(labels, d):
        key = tuple(sorted(2 * i + (s < 0) for i, s in S))
        points.append(faces[key])
    return np.array(labels, dtype=np.float64), np.array(points, dtype=np.float64)


def odd_map_cell(cell_id: str, A: object, eps: object, d: int, labels: np.ndarray, points: np.ndarray,
                 *, upper: dict[str, Any] | None = None, prefix: str = "") -> tuple[CellSpec, dict[str, np.ndarray]]:
    """A cell (``CellSpec``) with an ``odd_map`` lower side, and its tensors (the target is ``prefix + 'A'``).

    ``upper`` is ``{"rank": k, "P": array, "Q": array}`` for a factors upper side (default: trivial).
    """
    A = np.asarray(A, dtype=np.float64)
    tensors = {f"{prefix}A": A, f"{prefix}labels": labels, f"{prefix}points": points}
    up = Claim.of(min(A.shape), "trivial")
    if upper is not None:
        tensors.update({f"{prefix}P": upper["P"], f"{prefix}Q": upper["Q"]})
        up = Claim.of(upper["rank"], "factors", P=f"{prefix}P", Q=f"{prefix}Q")
    cell = CellSpec(cell_id, rational_string(eps), TargetSpec(f"{prefix}A"),
                    Claim.of(d, "odd_map", labels=f"{prefix}labels", points=f"{prefix}points"), up,
                    {"producer": "numeric.search.oddmap"})
    return cell, tensors


def export_odd_map(path: str | os.PathLike[str], A: object, eps: SupportsFloat, d: int,
                   upper: dict[str, Any] | None = None, conflicts: int = 100_000) -> Path | None:
    """Search an odd-map certificate for ``r_eps(A) >= d`` and write a one-cell bracket file; the path, or None."""
    found = find_odd_map(A, float(eps), d, conflicts)
    if found is None:
        return None
    cell, tensors = odd_map_cell("oddmap", A, eps, d, *found, upper=upper)
    return write_bracket_file(path, [cell], tensors)

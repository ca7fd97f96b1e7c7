"""Odd-map certificates: Borsuk-Ulam beyond Bernstein widths (MATH.md section 2).

Theorem (MATH.md section 2, "Beyond Bernstein widths: the odd-map
certificate"; A is m x n, rows a_i, ``C(i, s) = {x in [-1,1]^n : s a_i . x > eps}``).
Let T be a centrally symmetric triangulation of ``S^{d-1}`` and ``l`` an odd
labelling of its vertices by (row, sign) pairs: ``l(-v) = (i, -s)`` when
``l(v) = (i, s)``. If every facet F has a point ``x_F`` in ``[-1,1]^n`` with
``s (a_i . x_F) > eps`` for every label (i, s) of F's vertices, then
``r_eps(A) >= d``: the points give an odd continuous map from ``S^{d-1}``
into the union of the C's, and a B of rank < d composed with it has a zero
(Borsuk-Ulam), a point x of some C(i, s) in ker B, so
``||a_i - b_i||_1 >= |a_i . x| > eps``.

The checker builds T itself (the file never proves that T is a sphere): the
first barycentric subdivision of the boundary of the d-cross-polytope.

* Vertices: the ``V = 3^d - 1`` nonzero sign vectors in ``{-1, 0, 1}^d``, in
  the order of ``itertools.product((-1, 0, 1), repeat=d)`` with the zero
  vector left out, so vertex ``V - 1 - k`` is the antipode of vertex k.
* Facets: the ``2^d d!`` maximal chains ``v_1 < ... < v_d``: a permutation
  of the coordinates and a sign per coordinate, ``v_k`` carrying the first k.
* Witness: ``labels``, one (row, sign) per vertex (oddness is checked), and
  ``points`` (S x n), one per distinct facet label set; the label sets, each
  a sorted tuple of (row, sign) pairs, in Python's sorted order.

Verified iff ``d`` equals the claimed rank, the labels are odd, every point
has ``|x_j| <= 1``, and the margin ``min s (a_i . x_S) - eps`` over every set
S and label (i, s) of S is > 0 (exact rationals). ``d`` above
``MAX_ODDMAP_DIM`` is refused (``LimitExceeded``); the facet walk is charged.

>>> A = ExactMatrix.from_rationals([[1, 0], [0, 1]])          # d = 2: vertices (-1,-1), (-1,0), ..., (1,1)
>>> labels = ((0, -1),) * 3 + ((1, -1), (1, 1)) + ((0, 1),) * 3   # l(v) = (first k with v_k != 0, v_k)
>>> label_sets(labels, 2)[:3]
[((0, -1),), ((0, -1), (1, -1)), ((0, -1), (1, 1))]
>>> X = ExactMatrix.from_rationals([[-1, 0], [-1, -1], [-1, 1], [1, 0], [1, -1], [1, 1]])
>>> str(check_odd_map(A, OddMapWitness(labels, X), fmpq(1, 2), 2).margin)
'1/2'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from flint import fmpq

from .errors import LimitExceeded
from .limits import charge
from .matrix import ExactMatrix
from .verdict import Cache, Verdict, fresh, refuted, verified

#: A vertex label: (row of the target, sign +1 or -1).
Label = tuple[int, int]

__all__ = ["MAX_ODDMAP_DIM", "FACET_UNITS", "OddMapWitness", "check_odd_map", "dimension", "label_sets", "labels_of"]

#: The largest d: 2^7 7! = 645,120 facets, about 1 s of the facet walk.
MAX_ODDMAP_DIM = 7
#: Work units charged per facet and dimension: the walk is Python, about 2^7 times slower per step than
#: a unit of FLINT work (measured: 1 s for d = 7; 2^7 * 7 * 645,120 = 5.8e8 units, 1.2 to 1.7 s of FLINT).
FACET_UNITS = 2**7


@dataclass(frozen=True)
class OddMapWitness:
    """A vertex labelling of the subdivided cross-polytope and one point per facet label set."""

    labels: tuple[Label, ...]    # ((row, sign), ...), one per vertex in the documented order
    points: ExactMatrix      # S x n
    kind = "odd_map"


def dimension(vertices: int) -> int | None:
    """The d >= 1 with ``3^d - 1 = vertices``, or None."""
    d, count = 1, 2
    while count < vertices:
        d, count = d + 1, 3 * count + 2
    return d if count == vertices else None


def labels_of(rows: object) -> tuple[Label, ...]:
    """(row, sign) pairs from a V x 2 float array of integer rows (|row| < 2^53) and signs +1 or -1;
    ValueError on anything else."""
    a = np.asarray(rows, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"labels of shape {list(a.shape)}, need [V, 2]")
    ok = (np.abs(a[:, 0]) < 2.0**53) & (a[:, 0] == np.floor(a[:, 0])) & (np.abs(a[:, 1]) == 1)
    if not ok.all():
        k = int(np.argmin(ok))
        raise ValueError(f"label {k} is ({float(a[k, 0])!r}, {float(a[k, 1])!r}), not (integer row, +1 or -1)")
    pairs: list[list[int]] = a.astype(np.int64).tolist()
    return tuple((p[0], p[1]) for p in pairs)


def label_sets(labels: tuple[Label, ...], d: int) -> list[tuple[Label, ...]]:
    """The distinct label sets of the facets (maximal chains), sorted; the walk is charged."""
    facets = 2**d * math.factorial(d)
    charge(FACET_UNITS * d * facets, f"walking the {facets} facets of a d = {d} odd map")
    middle = (3**d - 1) // 2
    sets: set[tuple[Label, ...]] = set()
    weight = [3 ** (d - 1 - c) for c in range(d)]

    def grow(code: int, free: tuple[int, ...], acc: frozenset[Label]) -> None:
        if not free:
            sets.add(tuple(sorted(acc)))
            return
        for c in free:
            rest = tuple(f for f in free if f != c)
            for s in (1, -1):
                nxt = code + s * weight[c]                   # the product index of the larger vertex
                grow(nxt, rest, acc | {labels[nxt - (nxt > middle)]})

    grow(middle, tuple(range(d)), frozenset())
    return sorted(sets)


def _lowest(A: ExactMatrix, points: ExactMatrix, sets: list[tuple[Label, ...]]) -> tuple[fmpq, int, Label]:
    """``min s (a_i . x_S)`` over the sets S and their labels (i, s), with the (S, label) that attains it."""
    values = A @ points.T                                    # m x S, exact
    return min((s * values.entry(i, j), j, (i, s)) for j, S in enumerate(sets) for i, s in S)


def check_odd_map(A: ExactMatrix, w: OddMapWitness, eps: fmpq, rank: int, cache: Cache = fresh) -> Verdict:
    m, n = A.shape
    V = len(w.labels)
    d = dimension(V)
    if d is None:
        return refuted("odd_map", rank, f"{V} vertex labels: not 3^d - 1 for any d >= 1")
    if d > MAX_ODDMAP_DIM:
        raise LimitExceeded(f"odd map of dimension {d}, limit {MAX_ODDMAP_DIM}")
    if d != rank:
        return refuted("odd_map", rank, f"the labels triangulate S^{d - 1}, proving rank {d}, not {rank}",
                       claimed=rank, derived=d)
    for k, (i, s) in enumerate(w.labels):
        if not (0 <= i < m and s in (1, -1)):
            return refuted("odd_map", rank, f"label {k} = ({i}, {s}) is not (row in [0, {m}), +1 or -1)")
        if w.labels[V - 1 - k] != (i, -s):
            return refuted("odd_map", rank, f"labels not odd: vertex {k} has ({i}, {s}), its antipode "
                           f"{V - 1 - k} has {w.labels[V - 1 - k]}")
    sets = cache("label sets", lambda: label_sets(w.labels, d))
    if w.points.shape != (len(sets), n):
        return refuted("odd_map", rank, f"points are {w.points.nrows} x {w.points.ncols}, need "
                       f"{len(sets)} x {n} (one per facet label set)")
    charge(len(sets) * n, "bounding the odd map's points")
    num, den = w.points.num, w.points.den
    if any(abs(x) > den for x in num.entries()):
        return refuted("odd_map", rank, "a point has an entry outside [-1, 1]")
    low, j, (i, s) = cache("lowest", lambda: _lowest(A, w.points, sets))
    margin = low - eps
    if margin > 0:
        return verified("odd_map", rank, margin)
    return refuted("odd_map", rank, f"label ({i}, {s}) of set {j}: s a_i . x <= eps", margin,
                   claimed=f"eps = {eps}", derived=f"s a_i . x = {low}")

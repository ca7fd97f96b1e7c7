"""The odd-map certificate (MATH.md section 2, "Beyond Bernstein widths"), built here from the faces.

The checker builds the triangulation T itself: the first barycentric
subdivision of the boundary of the d-cross-polytope. Its vertices are the
proper nonempty faces of the cross-polytope, each a set of signed
coordinates with one sign per coordinate, written as its sign vector in
``{-1, 0, 1}^d``; the file lists their labels in the order of
``itertools.product((-1, 0, 1), repeat=d)`` with the zero vector left out
(docs/bracket-format.md section 2). A facet of T is a maximal chain of faces
``f_1 < f_2 < ... < f_d``: pick the coordinates in some order and a sign for
each; ``f_k`` carries the first k. The chains are walked depth first here,
each chain prefix once, keeping the set of labels seen so far.

Verified iff d equals the claimed rank, the labels are odd
(``l(-v) = (i, -s)`` when ``l(v) = (i, s)``), there is exactly one point per
distinct facet label set (the sets, each a sorted tuple of (row, sign)
pairs, in Python's sorted order), every point has ``|x_j| <= 1``, and
``s (a_i . x_S) > eps`` for every label (i, s) of every set S, exactly.

>>> labels = label_sets_of([(0, -1)] * 3 + [(1, -1), (1, 1)] + [(0, 1)] * 3, 2)
>>> labels[:3]
[((0, -1),), ((0, -1), (1, -1)), ((0, -1), (1, 1))]
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from typing import Any

from ._limits import Meter

__all__ = ["vertices", "label_sets_of", "FACET_UNITS"]

#: Work units per facet and dimension of the walk (Python steps).
FACET_UNITS = 2**7


def vertices(d: int) -> list[tuple[int, ...]]:
    """The sign vectors of the subdivision's vertices, in the file's order."""
    return [v for v in product((-1, 0, 1), repeat=d) if any(v)]


def label_sets_of(labels: Sequence[Sequence[Any]], d: int, meter: Meter | None = None) -> list[tuple[Any, ...]]:
    """The distinct label sets of the facets, sorted (``labels[k]`` is the label of ``vertices(d)[k]``)."""
    facets = 2**d * math.factorial(d)
    if meter is not None:
        meter.charge(FACET_UNITS * d * facets, f"walking the {facets} facets of a d = {d} odd map")
    # a face as its position in product((-1, 0, 1), repeat=d): sum_c (v_c + 1) 3^(d - 1 - c); the zero
    # vector sits at (3^d - 1) / 2 and is not listed, so later positions are one lower in ``labels``
    middle = (3**d - 1) // 2
    by_position: list[Any] = [tuple(x) for x in labels[:middle]] + [None] + [tuple(x) for x in labels[middle:]]
    step = [3 ** (d - 1 - c) for c in range(d)]
    found: set[tuple[Any, ...]] = set()

    def walk(position: int, free: tuple[int, ...], seen: frozenset[Any]) -> None:
        if len(free) == 1:
            c = free[0]
            found.add(tuple(sorted(seen | {by_position[position + step[c]]})))
            found.add(tuple(sorted(seen | {by_position[position - step[c]]})))
            return
        for c in free:
            rest = tuple(x for x in free if x != c)
            for s in (1, -1):
                nxt = position + s * step[c]
                walk(nxt, rest, seen | {by_position[nxt]})

    walk(middle, tuple(range(d)), frozenset())
    return sorted(found)

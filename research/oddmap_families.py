"""Small row-stochastic test matrices for ``research/oddmap_search.py`` (seeded; n, m <= 6).

Each generator yields (name, A as float64, A as rationals). Rational families
(uniform supports, graph edges) are exact; the others are float matrices whose
entries, read as dyadic rationals, are the exact matrix the certificates are about.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

CATEGORIES = ("dir-sparse", "dir-flat", "support", "graph", "banded", "softmax", "perturbed")

#: MATH.md section 2's 4 x 4 example (the odd map proves 3 at eps 9/20; so does the column side).
EXAMPLE = [[(0, 1)], [(2, 3)], [(0, 2)], [(1, 3)]]


def subsets(n: int, d: int):
    """All d-subsets of range(n)."""
    return itertools.combinations(range(n), d)


def _rational(supports, m: int):
    """Rows uniform on the given supports: (float, rational)."""
    Aq = [[Fraction(0)] * m for _ in supports]
    for i, S in enumerate(supports):
        for j in S:
            Aq[i][j] = Fraction(1, len(S))
    return np.array([[float(t) for t in r] for r in Aq]), Aq


def _exact(A: np.ndarray):
    return A, [[Fraction(float(t)) for t in r] for r in A]


def _dims(rng):
    n, m = rng.integers(3, 7, size=2)
    return int(n), int(m)


def _graphs():
    """Fixed edge matrices: the MATH.md example, cycles C4..C6, K4, K_{2,3}, the path P5."""
    out = [("example4x4", [(0, 1), (2, 3), (0, 2), (1, 3)], 4)]
    for k in (4, 5, 6):
        out.append((f"cycle{k}", [(i, (i + 1) % k) for i in range(k)], k))
    out.append(("K4", list(itertools.combinations(range(4), 2)), 4))
    out.append(("K23", [(a, b) for a in range(2) for b in range(2, 5)], 5))
    out.append(("path5", [(i, i + 1) for i in range(4)], 5))
    out.append(("tri-cover", [(0, 1, 2), (2, 3, 4), (4, 5, 0), (1, 3, 5)], 6))
    return out


def generate(cat: str, count: int, rng):
    """Yield (name, A, Aq) for one category."""
    if cat == "graph":
        for name, sup, m in _graphs():
            yield (name, *_rational(sup, m))
        for t in range(count):
            n, m = _dims(rng)
            edges = list(itertools.combinations(range(m), 2))
            pick = rng.choice(len(edges), size=min(n, len(edges)), replace=False)
            yield (f"graph{t}", *_rational([edges[a] for a in pick], m))
        return
    for t in range(count):
        n, m = _dims(rng)
        name = f"{cat}{t}"
        if cat == "dir-sparse":
            yield (name, *_exact(rng.dirichlet(np.full(m, 0.3), size=n)))
        elif cat == "dir-flat":
            yield (name, *_exact(rng.dirichlet(np.full(m, 3.0), size=n)))
        elif cat == "support":
            sup = [tuple(rng.choice(m, size=int(rng.integers(2, 4)), replace=False)) for _ in range(n)]
            yield (name, *_rational(sup, m))
        elif cat == "banded":
            beta = rng.uniform(0.5, 4.0)
            pos = np.arange(n)[:, None] * (m - 1) / max(n - 1, 1) - np.arange(m)[None, :]
            H = -beta * pos ** 2
            yield (name, *_exact(_softmax(H)))
        elif cat == "softmax":
            yield (name, *_exact(_softmax(rng.uniform(1, 5) * rng.standard_normal((n, m)))))
        elif cat == "perturbed":
            base, _ = _rational(EXAMPLE_SUPPORTS[t % len(EXAMPLE_SUPPORTS)], 4 + (t % len(EXAMPLE_SUPPORTS)) % 2)
            w = rng.uniform(0.02, 0.3)
            noise = rng.dirichlet(np.full(base.shape[1], 0.5), size=base.shape[0])
            yield (name, *_exact((1 - w) * base + w * noise))


#: Bases of the perturbed family: the 4 x 4 example and C5.
EXAMPLE_SUPPORTS = [[(0, 1), (2, 3), (0, 2), (1, 3)], [(i, (i + 1) % 5) for i in range(5)]]


def _softmax(H: np.ndarray) -> np.ndarray:
    E = np.exp(H - H.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)

"""Shared hypothesis strategies for the exact tier's tests.

Small matrices (1..5 x 1..5) whose entries are small dyadic rationals (so
they are float64 values too, and can go through a bracket file) or small
general rationals (API only), plus near-valid witnesses: a float solve
rounded to a coarse dyadic grid, so that both verified and refuted cases
occur in every run.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

__all__ = ["dyadics", "small_rationals", "matrices", "shapes", "epsilons", "round_dyadic",
           "factor_cases", "reconstruction_cases", "row_reconstruction_cases", "frobenius_cases", "odd_map_cases",
           "to_float_rows"]

#: Numerators up to 16 over 2^0..2^5: a few bits, so products stay short but ties happen.
MAX_NUMERATOR = 16
MAX_SHIFT = 5
#: Matrices are 1..5 x 1..5 (the task's size for fast differential tests).
MAX_SIDE = 5


def dyadics(max_num: int = MAX_NUMERATOR, max_shift: int = MAX_SHIFT):
    """``k / 2^j`` with ``|k| <= max_num``: exactly representable in float64."""
    return st.builds(lambda k, j: Fraction(k, 2**j), st.integers(-max_num, max_num), st.integers(0, max_shift))


def small_rationals(max_num: int = 12, max_den: int = 12):
    return st.builds(Fraction, st.integers(-max_num, max_num), st.integers(1, max_den))


def shapes(max_side: int = MAX_SIDE):
    return st.tuples(st.integers(1, max_side), st.integers(1, max_side))


def matrices(m: int, n: int, elements=None):
    elements = elements if elements is not None else dyadics()
    return st.lists(st.lists(elements, min_size=n, max_size=n), min_size=m, max_size=m)


def epsilons():
    """Tolerances on a dyadic grid in [0, 3], ties with norms included."""
    return st.builds(lambda k: Fraction(k, 16), st.integers(0, 48))


def round_dyadic(a: np.ndarray, bits: int) -> list[list[Fraction]]:
    """Round a float array to the grid ``2^-bits`` and return exact Fractions."""
    scaled = np.round(np.asarray(a, dtype=np.float64) * 2.0**bits)
    return [[Fraction(int(v), 2**bits) for v in row] for row in scaled]


def to_float_rows(M) -> np.ndarray:
    """Exact Fractions (dyadic, short) as a float64 array; asserts exactness."""
    out = np.array([[float(x) for x in row] for row in M], dtype=np.float64)
    for row, frow in zip(M, out):
        for x, f in zip(row, frow):
            assert Fraction(*float(f).as_integer_ratio()) == x, "not a float64 value"
    return out


def _floats(M) -> np.ndarray:
    return np.array([[float(x) for x in row] for row in M], dtype=np.float64)


@st.composite
def factor_cases(draw, elements=None):
    """(A, P, Q, eps, rank): P, Q a rounded truncated SVD of A, sometimes perturbed, rank sometimes off."""
    m, n = draw(shapes())
    A = draw(matrices(m, n, elements))
    k = draw(st.integers(1, min(m, n)))
    U, s, Vt = np.linalg.svd(_floats(A))
    bits = draw(st.integers(1, 10))
    P = round_dyadic(U[:, :k] * s[:k], bits)
    Q = round_dyadic(Vt[:k].T, bits)
    if draw(st.booleans()):
        i, j = draw(st.integers(0, m - 1)), draw(st.integers(0, k - 1))
        P[i][j] += draw(dyadics())
    rank = k + draw(st.sampled_from([0, 0, 0, -1, 1]))
    return A, P, Q, draw(epsilons()), rank


@st.composite
def reconstruction_cases(draw, elements=None):
    """(A, R, X, L, eps, rank): X a random or coordinate basis, R a rounded least-squares
    inverse on it, L a rounded pseudo-inverse of X; grid coarseness decides validity."""
    m, n = draw(shapes())
    A = draw(matrices(m, n, elements))
    d = draw(st.integers(1, min(m, n)))
    if draw(st.booleans()):
        cols = draw(st.permutations(range(n)))[:d]
        X = [[Fraction(int(i == c)) for c in cols] for i in range(n)]
    else:
        X = draw(matrices(n, d, dyadics(4, 1)))
    Xf, Af = _floats(X), _floats(A)
    bits = draw(st.integers(1, 12))
    # R with R (A X) ~ X: R = X (A X)^+
    R = round_dyadic(Xf @ np.linalg.pinv(Af @ Xf), bits)
    L = round_dyadic(np.linalg.pinv(Xf), bits)
    rank = d + draw(st.sampled_from([0, 0, 0, -1, 1]))
    return A, R, X, L, draw(epsilons()) / 4, rank


@st.composite
def row_reconstruction_cases(draw, elements=None):
    """(A, G, Z, M, eps, rank): the same as ``reconstruction_cases`` for the transpose."""
    m, n = draw(shapes())
    A = draw(matrices(m, n, elements))
    d = draw(st.integers(1, min(m, n)))
    if draw(st.booleans()):
        rows = draw(st.permutations(range(m)))[:d]
        Z = [[Fraction(int(i == r)) for r in rows] for i in range(m)]
    else:
        Z = draw(matrices(m, d, dyadics(4, 1)))
    Zf, Af = _floats(Z), _floats(A)
    bits = draw(st.integers(1, 12))
    # G with Z^T A G ~ Z^T: G = (Z^T A)^+ Z^T
    G = round_dyadic(np.linalg.pinv(Zf.T @ Af) @ Zf.T, bits)
    M = round_dyadic(np.linalg.pinv(Zf), bits)
    rank = d + draw(st.sampled_from([0, 0, 0, -1, 1]))
    return A, G, Z, M, draw(epsilons()) / 4, rank


@st.composite
def frobenius_cases(draw, elements=None):
    """(A, k, eps) with eps near the critical value ``F_k / sqrt(m)``."""
    m, n = draw(shapes())
    A = draw(matrices(m, n, elements))
    k = draw(st.integers(0, min(m, n) - 1))
    s = np.linalg.svd(_floats(A), compute_uv=False)
    crit = float(np.sqrt(np.sum(s[k:] ** 2) / m))
    scale = draw(st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0, 1.01, 1.5]))
    eps = Fraction(round(crit * scale * 2**20), 2**20)
    return A, k, eps


@st.composite
def odd_map_cases(draw, elements=None):
    """(A, labels, points, eps, rank) for the odd-map certificate (MATH.md section 2), d = 1..3.

    Odd random labels on the subdivided cross-polytope (``tests.independent_checker``'s
    construction), points ``x_j = sign(sum_S s a_ij)`` per facet label set, eps near
    the lowest ``s a_i . x``; sometimes a label, a point, the point count or the rank is spoiled.
    """
    from tests.independent_checker import odd_map_label_sets
    m, n = draw(shapes(4))
    d = draw(st.integers(1, min(3, m, n) + (1 if draw(st.booleans()) else 0)))
    A = draw(matrices(m, n, elements or dyadics()))
    V = 3**d - 1
    half = [(draw(st.integers(0, m - 1)), draw(st.sampled_from((1, -1)))) for _ in range(V // 2)]
    labels = half + [(i, -s) for i, s in reversed(half)]
    spoil = draw(st.sampled_from(["none"] * 6 + ["odd", "row", "box", "count", "rank"]))
    if spoil == "odd":
        labels[draw(st.integers(0, V - 1))] = (draw(st.integers(0, m - 1)), draw(st.sampled_from((1, -1))))
    if spoil == "row":
        labels[0] = (m, 1)
    sets = odd_map_label_sets([tuple(x) for x in labels], d) if spoil != "row" else [()]
    points = [[Fraction((t > 0) - (t < 0)) for t in (sum(s * A[i][j] for i, s in S) for j in range(n))]
              for S in sets]
    if spoil == "box" and points:
        points[0][0] = Fraction(draw(st.sampled_from((1, -1)))) * (1 + Fraction(1, 2**40))
    if spoil == "count":
        points = points[:-1] if len(points) > 1 else points + points
    values = [s * sum(a * x for a, x in zip(A[i], p)) for S, p in zip(sets, points) for i, s in S] or [Fraction(0)]
    gap = draw(st.sampled_from([Fraction(0), Fraction(1, 2**30)]) | small_rationals(1, 8))
    eps = max(Fraction(0), min(values) - gap)
    rank = d + (draw(st.sampled_from((1, -1))) if spoil == "rank" else 0)
    return A, labels, points, eps, max(rank, 0)

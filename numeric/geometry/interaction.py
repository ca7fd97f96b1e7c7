"""The visible interaction ``C = P_m H P_n`` and its canonical form (MATH.md section 3).

``C`` is the part of the logits that the attention matrix sees: the row
constant ``logsumexp`` of ``log A = H - logsumexp`` is killed by ``P_n``, and a
Q/K gauge leaves H, hence C, unchanged (F.1). Every intrinsic descriptor reads
the logits only through C.

The size optimisation (``numeric.geometry.gauge``) takes discrete decisions, so
it runs on C rounded to a fixed dyadic grid (reproducible descriptors): logits that
differ by rounding, as under a dense Q/K gauge, give bit-identical inputs.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["CANON_BITS", "visible_interaction", "canonical_interaction"]

# Canonical input of the size optimisation (reproducible descriptors). The gauge and MEB
# solvers take discrete decisions (argmax picks, active sets, early stops), so
# inputs that differ by float rounding -- the same cell read through a dense
# Q/K gauge -- can end at different points inside the ~1% duality gap. They
# therefore run on C rounded to the dyadic grid g = 2^(e + b - CANON_BITS),
# 2^(e-1) <= max|C| < 2^e, b = ceil(log2(m n)): two copies of C that differ by
# delta round to the same bits unless an entry lies within delta of a grid
# boundary, expected count sum_ij |delta_ij| / g, about 2^(CANON_BITS - e)
# times the mean |delta_ij|: measured 1.3e-4 per 256 x 256 cell under dense
# gauges of condition 4 and 16 (mean |delta| 1.7e-16, max 2e-15 relative to
# max|C|; no cell of 300 rounded differently). The rounding (at most g/2 per
# entry, ~1e-6 of max|C| at 256 x 256) is charged to the rigorous bound
# through the exact tail C - X0 Y0^T (numeric.geometry.bounds): +2e-7
# relative there.
CANON_BITS = 40


def visible_interaction(logits: np.ndarray) -> np.ndarray:
    """``C = P_m H P_n`` in float64 (gauge invariant; MATH.md section 3).

    >>> visible_interaction(np.array([[1.0, 0.0], [0.0, 1.0]])).tolist()
    [[0.5, -0.5], [-0.5, 0.5]]
    """
    h = np.asarray(logits, dtype=np.float64)
    c = h - h.mean(axis=1, keepdims=True)
    return c - c.mean(axis=0, keepdims=True)


def canonical_interaction(C: np.ndarray) -> tuple[np.ndarray, float, float]:
    """C rounded to the dyadic grid of ``CANON_BITS`` (reproducible descriptors).

    Returns ``(C_round, g, margin)``: ``g`` the grid (a power of two,
    ``2^(e + ceil(log2(m n)) - CANON_BITS)`` with ``2^(e-1) <= max|C| < 2^e``),
    ``margin`` the largest max-norm perturbation of C, relative to max|C|, that
    provably leaves ``C_round`` bit-identical (distance of the nearest entry to
    a rounding boundary). Scaling by a power of two and ``np.round`` are exact,
    so ``C_round`` is exactly ``g * round(C / g)``.

    >>> Cr, g, _ = canonical_interaction(np.array([[1.0 + 2.0**-45, -1.0]]))
    >>> Cr.tolist(), g == 2.0**-38
    ([[1.0, -1.0]], True)
    """
    C = np.asarray(C, dtype=np.float64)
    amax = float(np.abs(C).max()) if C.size else 0.0
    if amax == 0.0:
        return C.copy(), 0.0, math.inf
    e = math.frexp(amax)[1]  # amax = f 2^e with 1/2 <= f < 1
    b = (C.size - 1).bit_length()  # ceil(log2(m n))
    g = math.ldexp(1.0, e + b - CANON_BITS)
    t = C / g
    k = np.round(t)
    margin = float((0.5 - np.abs(t - k)).min()) * g / amax
    return k * g, g, margin

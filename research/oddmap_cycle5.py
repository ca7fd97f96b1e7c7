"""An explicit eps for the column side of the C5 edge matrix (docs/oddmap.md, the found case).

A is the 5 x 5 matrix with rows (e_i + e_{i+1}) / 2 (indices mod 5). The
odd-map certificate proves ``r_eps(A) >= 3`` for every eps < 1. This script
proves that no 3-dimensional W of R^5 has ``gamma(W) > eps`` (K.3, column
side) at the given eps, in two steps (docs/oddmap.md states the argument):

- Lemma A (branch and bound, re-checked in rationals): every 2-dimensional
  V' of {x_0 = 0} with ``gamma(V') > eps`` has, in one of the four charts
  ``{x_N = Y^T x_P}`` where V_0 = span(e1 + e2, e3 + e4) has coordinates Y_0,
  ``max |Y - Y_0| <= r``. Charts: V' = {x_N = Y^T x_P} with |Y| <= 1 entrywise
  for some pivot pair P (a largest 2 x 2 minor). A box of Y's is discarded when,
  for one u (the best of 1440 directions at the centre, or the parent's), ``x(Y) = (u on P, Y^T u on N)`` has ``||A x(Y)||_inf <= eps ||u||_inf``
  over the whole box (every entry is affine in Y; ``||x(Y)||_inf`` is at least ``||u||_inf`` and
  every ``|centre_j| - radius_j``); or when it lies within r of Y_0.
- Lemma B: W contains such a V' for {x_0 = 0} and, by the rotation i -> i+1,
  one near V_1 = span(e2 + e3, e4 + e0) for {x_1 = 0}; their four chart basis
  vectors differ from M0 = (e1+e2, e3+e4, e2+e3, e4+e0) by at most r in two
  entries each, so by at most sqrt(8) r in spectral norm; when
  ``sigma_4(M0)^2 > 8 r^2`` (checked exactly on the Gram matrix;
  sigma_4(M0) = (sqrt 5 - 1)/2) they span 4 dimensions inside the
  3-dimensional W, a contradiction.

    nice -n 15 python -m research.oddmap_cycle5 [--eps 99/100] [--r 1/5] [--max-boxes 200000]
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from fractions import Fraction

import numpy as np

#: A restricted to {x_0 = 0}: the columns 1..4 of the C5 edge matrix.
A_SUB = np.array([[0.5 if j in (i, (i + 1) % 5) else 0.0 for j in range(1, 5)] for i in range(5)])
#: V_0 = span(e1 + e2, e3 + e4) in the coordinates (x_1, .., x_4).
V0 = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])


#: Directions u = (cos t, sin t) tried per box: any u gives a valid bound, the best one the tightest.
ANGLES = np.linspace(0.0, np.pi, 1441)[:-1]
UDIRS = np.vstack([np.cos(ANGLES), np.sin(ANGLES)])


def _min_u(X):
    """A u with small ``||A X u||_inf / ||X u||_inf`` (best of 1440 directions; validity needs none)."""
    XU = X @ UDIRS
    ratio = np.abs(A_SUB @ XU).max(axis=0) / np.abs(XU).max(axis=0)
    return UDIRS[:, int(np.argmin(ratio))]


def _bound(P, N, Y0, h, u, A):
    """(max over the box of ||A x(Y)||_inf, a lower bound of ||x(Y)||_inf), in floats or in Fractions."""
    cen, rad = [None] * 4, [None] * 4
    for a, j in enumerate(P):
        cen[j], rad[j] = u[a], 0 * h
    for b, j in enumerate(N):
        cen[j] = Y0[0][b] * u[0] + Y0[1][b] * u[1]
        rad[j] = h * (abs(u[0]) + abs(u[1]))
    num = max(abs(sum(A[i][j] * cen[j] for j in range(4))) + sum(abs(A[i][j]) * rad[j] for j in range(4))
              for i in range(5))
    den = max([abs(u[0]), abs(u[1])] + [abs(cen[j]) - rad[j] for j in N])
    return num, den


def _near(Yc, h, Y0, r) -> bool:
    return Y0 is not None and float(np.abs(Yc - Y0).max()) + h <= r


def lemma_a(eps: Fraction, r: Fraction, max_boxes: int):
    """Branch and bound over the six charts of Gr(2, 4); (proved, boxes, accepted boxes re-checked exactly)."""
    Aq = [[Fraction(t) for t in row] for row in A_SUB]
    count, checked = 0, 0
    for P in itertools.combinations(range(4), 2):
        print(f"  chart {P}: {count} boxes so far", file=sys.stderr, flush=True)
        N = [j for j in range(4) if j not in P]
        BP = V0[list(P)]
        Y0 = (V0 @ np.linalg.inv(BP))[N].T if abs(np.linalg.det(BP)) > 0.5 else None
        stack = [(np.zeros((2, 2)), 1.0, None)]
        while stack:
            Yc, h, u = stack.pop()
            count += 1
            if count > max_boxes:
                return False, count, checked
            if _near(Yc, h, Y0, float(r)):
                continue
            ok = u is not None and _ok(P, N, Yc, h, u, eps)
            if not ok:
                X = np.zeros((4, 2))
                X[list(P)] = np.eye(2)
                X[N] = Yc.T
                u = _min_u(X)
                if u is None:
                    return False, count, checked
                ok = _ok(P, N, Yc, h, u, eps)
            if ok:
                num, den = _bound(P, N, [[Fraction(t) for t in row] for row in Yc], Fraction(h),
                                  [Fraction(t) for t in u], Aq)
                if not (den > 0 and num <= eps * den):
                    return False, count, checked
                checked += 1
                continue
            for sg in itertools.product((-0.5, 0.5), repeat=4):
                stack.append((Yc + h * np.array(sg).reshape(2, 2), h / 2, u))
    return True, count, checked


def _ok(P, N, Yc, h, u, eps) -> bool:
    num, den = _bound(P, N, Yc, h, u, A_SUB)
    return den > 0 and num <= float(eps) * den * (1 - 1e-9)


#: The chart bases of V_0 and V_1 in (x_0, .., x_4): e1+e2, e3+e4, e2+e3, e4+e0.
M0 = [[0, 1, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 1, 1, 0], [1, 0, 0, 0, 1]]


def lemma_b(r: Fraction) -> bool:
    """``sigma_4(M0)^2 > 8 r^2``, exactly: the Gram matrix minus 8 r^2 I is positive definite (leading minors)."""
    G = [[Fraction(sum(a * b for a, b in zip(M0[i], M0[j]))) - (8 * r * r if i == j else 0) for j in range(4)]
         for i in range(4)]
    for k in range(1, 5):
        if _det([row[:k] for row in G[:k]]) <= 0:
            return False
    return True


def _det(M) -> Fraction:
    """Determinant by exact Gaussian elimination."""
    M = [row[:] for row in M]
    n, det = len(M), Fraction(1)
    for c in range(n):
        p = next((i for i in range(c, n) if M[i][c] != 0), None)
        if p is None:
            return Fraction(0)
        if p != c:
            M[c], M[p] = M[p], M[c]
            det = -det
        det *= M[c][c]
        for i in range(c + 1, n):
            f = M[i][c] / M[c][c]
            M[i] = [a - f * b for a, b in zip(M[i], M[c])]
    return det


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", default="99/100")
    ap.add_argument("--r", default="1/5")
    ap.add_argument("--max-boxes", type=int, default=200000)
    args = ap.parse_args(argv)
    try:
        eps, r = Fraction(args.eps), Fraction(args.r)
    except (ValueError, ZeroDivisionError):
        print("error: --eps and --r must be fractions", file=sys.stderr)
        return 2
    if not (Fraction(1, 2) <= eps < 1 and 0 < r < 1):
        print("error: need 1/2 <= eps < 1 and 0 < r < 1", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    okb = lemma_b(r)
    oka, boxes, checked = lemma_a(eps, r, args.max_boxes)
    print(f"C5 column side at eps = {eps}, r = {r}: lemma B (sqrt 8 r < sigma_4) {okb}; lemma A "
          f"{oka} ({boxes} boxes, {checked} re-checked in rationals); {time.monotonic() - t0:.1f} s")
    print("PROVED: no 3-dimensional W has gamma(W) > eps" if okb and oka else "not proved")
    return 0 if okb and oka else 1


if __name__ == "__main__":
    sys.exit(main())

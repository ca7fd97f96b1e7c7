"""Odd-map (Borsuk-Ulam) certificates on small matrices: nerve, height filter, SAT search.

Helpers of ``research/oddmap_search.py`` (MATH.md section 2, "Beyond Bernstein
widths: the odd-map certificate"). Notation: A is n x m (n rows a_i, row
stochastic), a label l = 2 i + b stands for (row i, sign s = +1 if b = 0 else
-1), ``l ^ 1`` is its antipode, and ``C(l) = {x in [-1,1]^m : s a_i . x > eps}``.

- ``nerve`` / ``primal_nerve``: the feasible label sets (faces: the C's meet)
  by LP, with a witness point each, and the minimal non-faces. At most 3^n faces.
- ``height_at_least``: the mod-2 height of w1 of the nerve is >= k, by Yang's
  chain criterion over GF(2): chains c_0..c_k with aug(c_0) = 1 and
  ``d c_j = (1 + T) c_{j-1}``. Necessary for any odd map S^k -> U (U ~ nerve).
- ``cross``, ``subdivide``: the d-cross-polytope boundary and barycentric
  subdivisions, with the antipodal map on vertices.
- ``sat_vertex``, ``sat_facet``: the vertex-labelled and facet-labelled
  certificate forms as SAT problems (python-sat), odd by construction.
- ``exact_check_*``: the certificate re-checked in rationals (fractions).

Everything except ``exact_check_*`` is float and search: a failed search is
never a bound.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from scipy.optimize import linprog

#: A face is feasible when the LP margin t* exceeds this (float); smaller margins count as non-faces.
FACE_TOL = 1e-9


def sign(l: int) -> int:
    """+1 for an even label, -1 for an odd one."""
    return 1 - 2 * (l & 1)


def face_margin(A: np.ndarray, eps: float, labels) -> tuple[float, np.ndarray]:
    """max t with ``s a_i . x >= eps + t`` for every label, x in [-1,1]^m (LP): (t*, x)."""
    m = A.shape[1]
    rows = np.array([-sign(l) * A[l >> 1] for l in labels])
    A_ub = np.hstack([rows, np.ones((len(labels), 1))])
    c = np.zeros(m + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=A_ub, b_ub=np.full(len(labels), -eps), bounds=[(-1, 1)] * m + [(None, 1)],
                  method="highs")
    if res.status != 0:
        return -np.inf, np.zeros(m)
    return -res.fun, res.x[:m]


def nerve(margin, nlab: int, max_size: int | None = None):
    """(faces, minimal non-faces) of a cover by convex pieces C(l), ``C(l ^ 1) = -C(l)``.

    ``margin(labels)`` is an LP (t*, witness): the pieces meet when t* > FACE_TOL.
    Downward-closed enumeration: a set is tried only when all its one-smaller
    subsets are faces; the ones that fail the LP are the minimal non-faces,
    and every antipodal pair {l, l^1} is one too. Faces map to witnesses.
    """
    faces, mnf = {}, [(2 * i, 2 * i + 1) for i in range(nlab // 2)]
    level = []
    for l in range(nlab):
        t, x = margin([l])
        if t > FACE_TOL:
            faces[(l,)] = x
            level.append((l,))
        else:
            mnf.append((l,))
    size = 1
    while level and (max_size is None or size < max_size):
        nxt = []
        for F in level:
            used = {l >> 1 for l in F}
            for l in range(F[-1] + 1, nlab):
                if l >> 1 in used:
                    continue
                G = F + (l,)
                if any(G[:k] + G[k + 1:] not in faces for k in range(len(G) - 1)):
                    continue
                t, x = margin(G)
                if t > FACE_TOL:
                    faces[G] = x
                    nxt.append(G)
                else:
                    mnf.append(G)
        level, size = nxt, size + 1
    return faces, mnf


def primal_nerve(A: np.ndarray, eps: float):
    """The nerve of the C(i, s) (MATH.md section 2): odd maps into it prove ``r_eps(A) >= d``."""
    return nerve(lambda L: face_margin(A, eps, L), 2 * A.shape[0])


def _gf2_solvable(rows: list[int], nvar: int) -> bool:
    """Whether the GF(2) system (bit rows, the right-hand side at bit nvar) is consistent."""
    pivots = {}
    for r in rows:
        for p in sorted(pivots, reverse=True):
            if r >> p & 1:
                r ^= pivots[p]
        low = r & ((1 << nvar) - 1)
        if low == 0:
            if r:
                return False
            continue
        p = low.bit_length() - 1
        for q in list(pivots):
            if pivots[q] >> p & 1:
                pivots[q] ^= r
        pivots[p] = r
    return True


def height_at_least(faces: dict, k: int) -> bool:
    """Whether chains c_0..c_k of the nerve satisfy aug(c_0) = 1, ``d c_j = (1+T) c_{j-1}`` (GF(2)).

    Yang's criterion: equivalent to ``w1^k != 0`` on the nerve mod the antipodal
    action, necessary for an odd map from S^k into the union of the C's.
    """
    simp = [sorted(F for F in faces if len(F) == j + 1) for j in range(k + 1)]
    if any(not s for s in simp):
        return False
    offset, index = [], {}
    total = 0
    for j, s in enumerate(simp):
        offset.append(total)
        for a, F in enumerate(s):
            index[F] = total + a
        total += len(s)
    rows = [sum(1 << index[F] for F in simp[0]) | (1 << total)]
    for j in range(1, k + 1):
        eq = {F: 0 for F in simp[j - 1]}
        for F in simp[j]:
            for a in range(len(F)):
                eq[F[:a] + F[a + 1:]] ^= 1 << index[F]
        for F in simp[j - 1]:
            TF = tuple(sorted(l ^ 1 for l in F))
            eq[F] ^= (1 << index[F]) ^ (1 << index[TF])
        rows.extend(v for v in eq.values() if v)
    return _gf2_solvable(rows, total)


def cross(d: int):
    """Boundary of the d-cross-polytope: (vertices, facets as index tuples, antipode list)."""
    verts = [(k, s) for k in range(d) for s in (1, -1)]
    idx = {v: a for a, v in enumerate(verts)}
    facets = [tuple(idx[(k, sg[k])] for k in range(d)) for sg in itertools.product((1, -1), repeat=d)]
    anti = [idx[(k, -s)] for (k, s) in verts]
    return verts, facets, anti


def subdivide(cx):
    """First barycentric subdivision: vertices are the faces, facets the maximal chains."""
    _, facets, anti = cx
    faces = sorted({frozenset(c) for F in facets for r in range(1, len(F) + 1)
                    for c in itertools.combinations(F, r)}, key=lambda f: (len(f), sorted(f)))
    idx = {f: a for a, f in enumerate(faces)}
    new = []
    for F in facets:
        for perm in itertools.permutations(F):
            new.append(tuple(idx[frozenset(perm[:r])] for r in range(1, len(F) + 1)))
    nanti = [idx[frozenset(anti[v] for v in f)] for f in faces]
    return faces, new, nanti


class _Vars:
    """SAT variables v(x, l) for an odd family: v(anti x, l) is v(x, l ^ 1)."""

    def __init__(self, anti, nlab: int, start: int):
        self.anti, self.nlab, self.base = anti, nlab, {}
        nxt = start
        for x, y in enumerate(anti):
            if x < y:
                self.base[x] = nxt
                nxt += nlab
        self.top = nxt

    def __call__(self, x: int, l: int) -> int:
        if x in self.base:
            return self.base[x] + l
        return self.base[self.anti[x]] + (l ^ 1)


def _facet_anti(facets, anti):
    """The antipode as a map on facets (index list)."""
    key = {tuple(sorted(F)): a for a, F in enumerate(facets)}
    return [key[tuple(sorted(anti[v] for v in F))] for F in facets]


def _solve(clauses, solver: str, conflicts: int):
    """A model (set of true variables), None (unsatisfiable) or 'unknown' (conflict budget spent)."""
    from pysat.solvers import Solver

    with Solver(name=solver, bootstrap_with=clauses) as s:
        s.conf_budget(conflicts)
        ok = s.solve_limited()
        if ok is None:
            return "unknown"
        return {v for v in s.get_model() if v > 0} if ok else None


def sat_vertex(cx, nlab: int, mnf, solver="cadical195", conflicts=200000):
    """Vertex-labelled certificate on the complex: {vertex: label} or None / 'unknown'.

    Every facet's label set must be a face: aux z(F, l) for "some vertex of F
    has l", and no minimal non-face of size <= dim+1 inside a facet's z's.
    """
    _, facets, anti = cx
    X = _Vars(anti, nlab, 1)
    Z = _Vars(_facet_anti(facets, anti), nlab, X.top)
    dim = len(facets[0])
    small = [N for N in mnf if len(N) <= dim]
    cl = [[X(v, l) for l in range(nlab)] for v in X.base]
    for a, F in enumerate(facets):
        for v in F:
            cl.extend([-X(v, l), Z(a, l)] for l in range(nlab))
        cl.extend([-Z(a, l) for l in N] for N in small)
    model = _solve(cl, solver, conflicts)
    if model is None or model == "unknown":
        return model
    return {v: next(l for l in range(nlab) if X(v, l) in model) for v in range(len(anti))}


def sat_facet(cx, nlab: int, mnf, solver="cadical195", conflicts=200000):
    """Facet-labelled certificate on the complex: {facet: label} or None / 'unknown'.

    y(v, l): label l is on a facet at v; the labels at each vertex must be a
    face (no minimal non-face among the y's), and each facet has a label.
    """
    _, facets, anti = cx
    Fv = _Vars(_facet_anti(facets, anti), nlab, 1)
    Y = _Vars(anti, nlab, Fv.top)
    cl = [[Fv(a, l) for l in range(nlab)] for a in Fv.base]
    for a, F in enumerate(facets):
        for v in F:
            cl.extend([-Fv(a, l), Y(v, l)] for l in range(nlab))
    for v in Y.base:
        cl.extend([-Y(v, l) for l in N] for N in mnf)
    model = _solve(cl, solver, conflicts)
    if model is None or model == "unknown":
        return model
    return {a: next(l for l in range(nlab) if Fv(a, l) in model) for a in range(len(facets))}


def _rat_point(x) -> list[Fraction]:
    """A float witness as rationals (nearby 2^-40 grid), clipped to [-1, 1]."""
    return [max(Fraction(-1), min(Fraction(1), Fraction(round(float(t) * 2 ** 40), 2 ** 40))) for t in x]


def primal_holds(Aq, eps: Fraction):
    """Exact membership in C(l): ``|x_j| <= 1`` and ``s a_i . x > eps``."""
    def holds(l: int, x) -> bool:
        return all(abs(t) <= 1 for t in x) and sign(l) * sum(a * t for a, t in zip(Aq[l >> 1], x)) > eps
    return holds


def exact_check_vertex(holds, cx, lab: dict, faces: dict) -> bool:
    """Re-check a vertex-labelled certificate exactly (MATH.md checkable form): oddness, one
    rational point per facet label set inside every piece of the set."""
    _, facets, anti = cx
    if any(lab[anti[v]] != lab[v] ^ 1 for v in lab):
        return False
    for F in facets:
        S = tuple(sorted({lab[v] for v in F}))
        if S not in faces:
            return False
        x = _rat_point(faces[S])
        if not all(holds(l, x) for l in S):
            return False
    return True


def exact_check_facet(holds, cx, lab: dict, faces: dict) -> bool:
    """Re-check a facet-labelled certificate exactly: odd vertex images x_v, each facet's piece
    contains the images of its vertices."""
    _, facets, anti = cx
    fanti = _facet_anti(facets, anti)
    if any(lab[fanti[a]] != lab[a] ^ 1 for a in lab):
        return False
    at = {v: set() for v in range(len(anti))}
    for a, F in enumerate(facets):
        for v in F:
            at[v].add(lab[a])
    img = {}
    for v in range(len(anti)):
        if v in img:
            continue
        S = tuple(sorted(at[v]))
        if S not in faces:
            return False
        img[v] = _rat_point(faces[S])
        img[anti[v]] = [-t for t in img[v]]
    return all(holds(lab[a], img[v]) for a, F in enumerate(facets) for v in F)

"""The discrete-Gaussian hard core (I.4) and fixed-margin robust sharpness (G.3).

The paper gives I.4 only as a heading; this is the project's reading
(``../shared/MATH.md`` section 5, ``docs/proofs-checks.md``). Coordinates are
centred in the unit box. Per side, ``K = M c`` keys sit at ``y_j = Y_j / (2K)``
with ``Y_j = 2j - (K - 1)`` (odd integers) and ``M`` messages at the centres of
cells of ``c`` consecutive keys, ``x_k = X_k / (2K)``, ``X_k = c (2k + 1 - M)``.
The logits use the linear and quadratic key columns,
``h(k, j) = beta (x_k y_j - y_j^2 / 2)``, rounded to the dyadic grid
``2^-GRID_BITS`` (so the stored float64 logits *are* the instance: every
entry, and every sum of r entries, is exact in float64). In r dimensions the
messages and keys are the product lattices and ``H = sum_t h(k_t, j_t)``, so
each softmax row is a product of the one-dimensional rows.

Decoder ``D = lam I_M`` (contractive iff ``lam <= 1``), cells ``X`` (n x M,
0/1), ``L = X^T / c^r`` (cell averages, ``L X = I`` exactly), ``R = X D``.
The decoded channel ``D A X`` is ``lam C1^{(x) r}`` with ``C1[k, l]`` the mass of
the one-dimensional row k in cell l. Its row-l1 distance to ``I`` is bounded
with arb (each row: ``lam (prod S - p) + |lam p - 1|`` with ``S`` the row sums,
``p`` the product of own-cell masses; convex in ``p``, so its maximum over
``[min p, max p]`` is at an endpoint). If that bound is ``<= 2 delta`` and
``eps + 2 delta < 1`` (exact), the reconstruction certificate (K.3/K.4) with
``E = X (D A X - I)``, ``F = 0``, ``||R|| = ||L|| = 1`` proves
``r_eps(A) >= M^r``; with ``M^r`` rows the trivial upper bound closes the
bracket at ``[M^r, M^r]``.
"""
from __future__ import annotations

from fractions import Fraction

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp
from flint import arb, fmpq, fmpq_mat

from ._core import Recorder, qstr, is_thorough, register, arb_precision
from ._export import float_softmax, slack_bound, write_and_verify
from .growth import GrowthLaw, m_bounds, prove_law, round_error_ok
from exact.cellspec import CellSpec, Claim, TargetSpec
from fileio.bracketwriter import rational_string

__all__ = ["HardCore", "hard_core", "channel_bound", "certify", "largest_m", "core_cell",
           "I4_EPS", "I4_BETAS", "G3_BETAS", "stencil_columns", "visible_key_gap"]

#: The logits are rounded to multiples of 2^-GRID_BITS (|h| <= beta/2 <= 2^13 keeps 53 bits).
GRID_BITS = 30
#: Keys per cell per side: a power of two, so L = X^T / c^r is exact in float64.
CELLS = 4
#: I.4's tolerance and leakage budget: eps + 2 delta = 1 - 1/32 < 1.
I4_EPS = fmpq(1, 4)
#: beta per dimension r: the unit-box inverse temperatures of the table.
I4_BETAS = {1: (2 ** 8, 2 ** 10, 2 ** 12, 2 ** 14), 2: (2 ** 6, 2 ** 7, 2 ** 8, 2 ** 9)}
I4_BETAS_THOROUGH = {1: (2 ** 8, 2 ** 10, 2 ** 12, 2 ** 14, 2 ** 16), 2: (2 ** 6, 2 ** 7, 2 ** 8, 2 ** 9, 2 ** 10)}


def _round(q: fmpq) -> fmpq:
    s = 2 ** GRID_BITS
    return fmpq(int((q * s + fmpq(1, 2)).floor()), s)


def leakage_budget(eps: fmpq) -> fmpq:
    """``delta = (1 - eps)/2 - 1/64``: then ``eps + 2 delta = 1 - 1/32 < 1``."""
    return (1 - eps) / 2 - fmpq(1, 64)


@dataclass(frozen=True)
class HardCore:
    """One-dimensional data of the hard core; the r-dimensional one is its product."""

    beta: fmpq
    M: int
    c: int
    h: tuple            # M x K exact dyadic logits (tuples of fmpq)

    @property
    def K(self) -> int:
        return self.M * self.c


#: The quadratic key column ``-y^2/2`` (a negative control switches it off).
QUADRATIC = True


def hard_core(beta, M: int, c: int = CELLS) -> HardCore:
    """The one-dimensional logits ``h(k, j) = beta (x_k y_j - y_j^2/2)``, rounded to the grid."""
    beta = fmpq(beta)
    K = M * c
    den = fmpq(1, 8 * K * K)                       # x y - y^2/2 = (2 X Y - Y^2) / (8 K^2)
    q = 1 if QUADRATIC else 0
    rows = []
    for k in range(M):
        X = c * (2 * k + 1 - M)
        rows.append(tuple(_round(beta * den * (2 * X * Y - q * Y * Y)) for Y in range(-(K - 1), K, 2)))
    return HardCore(beta, M, c, tuple(rows))


def channel_1d(core: HardCore, prec: int = 128):
    """arb ``C1`` (M x M, mass of row k in cell l) and the row sums of ``C1``."""
    M, c = core.M, core.c
    with arb_precision(prec):
        C1, S = [], []
        for row in core.h:
            top = max(row)
            w = [(arb(v - top)).exp() for v in row]
            Z = sum(w, arb(0))
            masses = [sum(w[l * c:(l + 1) * c], arb(0)) / Z for l in range(M)]
            C1.append(masses)
            S.append(sum(masses, arb(0)))
    return C1, S


def channel_bound(core: HardCore, r: int, lam: fmpq = fmpq(1), prec: int = 128) -> arb:
    """An arb upper bound on ``||D A X - I||_row1`` for ``D = lam I`` in r dimensions."""
    if lam <= 0:
        raise ValueError("the decoder scale must be positive")
    C1, S = channel_1d(core, prec)
    with arb_precision(prec):
        smax = S[0]
        dmin = dmax = C1[0][0]
        for k in range(core.M):
            smax, dmin, dmax = smax.max(S[k]), dmin.min(C1[k][k]), dmax.max(C1[k][k])
        bounds = []
        for p in (dmin ** r, dmax ** r):
            bounds.append(arb(lam) * (smax ** r - p) + abs(arb(lam) * p - 1))
        return bounds[0].max(bounds[1])


def certify(beta, M: int, r: int, eps: fmpq, lam: fmpq = fmpq(1), c: int = CELLS):
    """(certified?, refuted?, bound): ``||D A X - I|| <= 2 delta`` certainly / certainly not."""
    delta = leakage_budget(eps)
    bound = channel_bound(hard_core(beta, M, c), r, lam)
    return bound <= 2 * delta, bound > 2 * delta, bound


def largest_m(beta, r: int, eps: fmpq, c: int = CELLS) -> int:
    """The largest M per side certified at beta (exponential then binary search on M)."""
    lo = 1
    hi = 2
    while certify(beta, hi, r, eps, c=c)[0]:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if certify(beta, mid, r, eps, c=c)[0]:
            lo = mid
        else:
            hi = mid
    return lo


# ------------------------------------------------------------------ r-dimensional tensors

def logits_nd(core: HardCore, r: int) -> np.ndarray:
    """``H[(k_1..k_r), (j_1..j_r)] = sum_t h(k_t, j_t)``, exact in float64 (dyadic grid)."""
    h = np.array([[float(v.p) / float(v.q) for v in row] for row in core.h])
    # every entry is a multiple of 2^-GRID_BITS below 2^13: the float64 conversion is exact
    for row_q, row_f in zip(core.h, h):
        for v, f in zip(row_q, row_f):
            if fmpq(*f.as_integer_ratio()) != v:
                raise ArithmeticError("a logit is not exact in float64")
    H = h
    for _ in range(r - 1):
        H = (H[:, None, :, None] + h[None, :, None, :]).reshape(H.shape[0] * h.shape[0], H.shape[1] * h.shape[1])
    return H


def cells_nd(M: int, c: int, r: int) -> np.ndarray:
    """``X`` (n x M^r): key (j_1..j_r) lies in cell (j_1 // c, ..., j_r // c)."""
    K = M * c
    X = np.zeros((K ** r, M ** r))
    for idx, j in enumerate(itertools.product(range(K), repeat=r)):
        cell = 0
        for t in j:
            cell = cell * M + t // c
        X[idx, cell] = 1.0
    return X


def core_cell(cid: str, core: HardCore, r: int, eps: fmpq, tensors: dict, provenance: dict,
              *, lam: fmpq = fmpq(1), H: np.ndarray | None = None) -> CellSpec:
    """A CELL claiming ``r_eps(softmax_row(H)) = M^r`` with the decoded witness R = X D, X, L."""
    H = logits_nd(core, r) if H is None else H
    A0 = float_softmax(H)
    slack = slack_bound(H, A0)
    X = cells_nd(core.M, core.c, r)
    lam_f = float(lam.p) / float(lam.q)
    if fmpq(*lam_f.as_integer_ratio()) != lam:
        raise ValueError("decoder scale must be dyadic")
    tensors[f"H_{cid}"] = H
    tensors[f"A_{cid}"] = A0
    tensors[f"X_{cid}"] = X
    tensors[f"R_{cid}"] = X * lam_f
    tensors[f"L_{cid}"] = X.T / float(core.c ** r)
    Mr = core.M ** r
    return CellSpec(cid, rational_string(_frac(eps)), TargetSpec(f"A_{cid}", f"H_{cid}", rational_string(_frac(slack))),
                    Claim.of(Mr, "reconstruction", R=f"R_{cid}", X=f"X_{cid}", L=f"L_{cid}"), Claim.of(Mr, "trivial"),
                    dict(provenance, source="proofs_checks",
                         lemma="I.4 hard core: decoded witness R = X D, L = cell averages (K.3/K.4)"))


def _frac(q: fmpq):
    return Fraction(int(q.p), int(q.q))


def verify_cells(rec: Recorder, name: str, cells, tensors, expect: dict) -> dict:
    """Write one bracket file, run ``python -m exact verify``, require each [lo, up] in ``expect``."""
    path, doc = write_and_verify(name, cells, tensors)
    rec.require(doc.get("returncode") == 0 and doc.get("all_verified") is True,
                f"python -m exact verify {path.name}: exit {doc.get('returncode')} {doc.get('error', '')}")
    got = {c["id"]: c for c in doc.get("cells", [])}
    for cid, (lo, up) in expect.items():
        c = got.get(cid, {})
        rec.require(c.get("lower_verified") is True and c.get("upper_verified") is True
                    and c.get("lower") == lo and c.get("upper") == up,
                    f"{cid}: exact tier did not verify [{lo}, {up}]: {c.get('lower_reason')} / {c.get('upper_reason')}")
    return got


def _up(a: arb) -> str:
    return f"{float(a.mid()) + float(a.rad()):.6f}"


def slope(xs, ys) -> float:
    """Least-squares slope of log y on log x: an illustration printed next to the exact law
    (``growth.py``); it decides nothing."""
    if len(set(xs)) < 2:
        return float("nan")
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def prove_growth(rec: Recorder, r: int, delta: fmpq) -> GrowthLaw:
    """Prove the growth law for (r, delta) (``growth.py``) and record its facts."""
    law, facts = prove_law(r, delta)
    for ok, what in facts:
        rec.require(ok, what)
    return law


def law_bracket(rec: Recorder, law: GrowthLaw, beta, M: int, core: HardCore, where: str) -> dict:
    """At a sampled beta: the rounding lemma's hypothesis on the stored core, and the computed
    largest M inside the law's exact integer bracket ``[M_lo, max(M0 - 1, M_hi)]``."""
    rec.require(round_error_ok(core), f"{where}: a stored logit is more than 2^-31 from the exact one")
    lo, hi = m_bounds(law, beta)
    top = max(law.M0 - 1, hi)
    rec.require(lo <= M <= top, f"{where}: largest certified M = {M} outside the law's [{lo}, {top}]")
    return {"law_M": f"[{lo}, {top}]", "beta>=beta0": fmpq(beta) >= law.beta0}


def law_numbers(law: GrowthLaw) -> dict:
    """The law's exact constants (and rounded decimals to read them)."""
    return {"s_lo": qstr(law.s_lo), "s_hi": qstr(law.s_hi), "M0": law.M0, "beta0": qstr(law.beta0),
            "s_lo~": f"{float(law.s_lo.p) / float(law.s_lo.q):.9f}",
            "beta0~": f"{float(law.beta0.p) / float(law.beta0.q):.1f}",
            "statement": f"beta >= beta0: floor(sqrt(beta/(128 s_hi))) <= M <= floor(sqrt(beta/(128 s_lo))), "
                         f"proved rank M^{law.r}"}




def i4_run(betas: dict, eps: fmpq = I4_EPS, lam: fmpq = fmpq(1), name: str = "I.4"):
    """The I.4 check body (parametrised so the tests can run perturbed constructions)."""
    rec = Recorder()
    delta = leakage_budget(eps)
    rec.require(eps + 2 * delta < 1, f"eps + 2 delta = {eps + 2 * delta} not < 1")
    rec.require(0 < lam <= 1, f"decoder D = {lam} I is not contractive (row-l1 norm {lam} > 1)")
    cells: list[CellSpec] = []
    tensors: dict[str, np.ndarray] = {}
    expect: dict[str, object] = {}
    table: list[dict[str, Any]] = []
    exps: dict[Any, float] = {}
    laws: dict[int, GrowthLaw] = {}
    for r, bs in betas.items():
        ms = []
        law = laws[r] = prove_growth(rec, r, delta)
        for beta in bs:
            M = largest_m(beta, r, eps)
            ok, _, bound = certify(beta, M, r, eps, lam)
            _, refuted_next, bound_next = certify(beta, M + 1, r, eps, lam)
            rec.require(ok, f"r={r} beta={beta} M={M}: ||DAX - I|| {bound} not certainly <= 2 delta")
            rec.require(refuted_next, f"r={r} beta={beta}: M+1 = {M + 1} is not refuted ({bound_next})")
            core = hard_core(beta, M)
            law_row = law_bracket(rec, law, beta, M, core, f"r={r} beta={beta}")
            cid = f"I4_r{r}_beta{beta}_M{M}"
            cells.append(core_cell(cid, core, r, eps, tensors, {"check": name, "r": r, "beta": beta}, lam=lam))
            expect[cid] = (M ** r, M ** r)
            ms.append(M ** r)
            table.append({"r": r, "beta": beta, "M_side": M, "messages": M ** r, "keys": (M * CELLS) ** r,
                          "||DAX-I||<=": _up(bound), "2delta": qstr(2 * delta),
                          "M+1: ||DAX-I||>=": f"{float(bound_next.mid()) - float(bound_next.rad()):.6f}",
                          **law_row, "messages/beta^(r/2)~": f"{M ** r / beta ** (r / 2):.4f}", "id": cid})
        exps[r] = slope(bs, ms)             # illustration only: the law above is what is proved
    got = verify_cells(rec, name, cells, tensors, expect)
    for row in table:
        c = got.get(row.pop("id"), {})
        row["bracket"] = f"[{c.get('lower')}, {c.get('upper')}]"
    numbers = {"eps": qstr(eps), "delta": qstr(delta), "decoder": f"{qstr(lam)} I_M", "keys_per_cell_side": CELLS,
               "law": {str(r): law_numbers(law) for r, law in laws.items()},
               "illustration_fitted_exponent": {str(r): round(v, 4) for r, v in exps.items()}, "cells": len(cells)}
    return (f"hard cores r=1,2 at {sum(len(b) for b in betas.values())} betas: ||DAX-I|| <= 2 delta (arb), "
            f"[M, M] verified; growth law M in [floor(sqrt(beta/(128 s_hi))), floor(sqrt(beta/(128 s_lo)))] "
            f"proved for every beta >= beta0 (float fit, illustration: "
            f"{', '.join(f'{v:.2f}' for v in exps.values())})", numbers, rec, table)


@register("I.4", "native interaction-exponent hard core")
def check_i4():
    """I.4 (project's reading, MATH.md section 5): for each beta the largest M with
    ``||D A X - I|| <= 2 delta`` (arb) and M+1 refuted; the decoded witness exported and
    verified [M^r, M^r] by ``python -m exact verify``; M^r grows like beta^(r/2)."""
    return i4_run(I4_BETAS_THOROUGH if is_thorough() else I4_BETAS)


# ------------------------------------------------------------------ G.3

#: G.3: r = 1, d = 3 (linear, quadratic and one appended key column), eps + alpha + 2 delta < 1.
G3_EPS, G3_ALPHA = fmpq(1, 4), fmpq(1, 8)
G3_BETAS = (2 ** 8, 2 ** 10, 2 ** 12)
#: The appended columns are third-difference stencils scaled by 2^-G3_SCALE_BITS.
G3_SCALE_BITS = 6
G3_D = 3


def stencil_columns(K: int, count: int, scale: fmpq) -> list[list[fmpq]]:
    """``count`` key columns, each a third-difference stencil (-1, 3, -3, 1) on 4 consecutive
    keys (disjoint blocks spread over the lattice), times ``scale``. A third difference
    annihilates every quadratic on equally spaced points, so each column is exactly
    orthogonal to the constant, linear and quadratic key columns."""
    cols = []
    for t in range(count):
        start = (t + 1) * K // (count + 1) - 2
        col = [fmpq(0)] * K
        for off, v in enumerate((-1, 3, -3, 1)):
            col[start + off] = scale * v
        cols.append(col)
    return cols


def visible_key_gap(F: fmpq_mat, r: int):
    """Exact isolation of the eigenvalues of the Gram matrix of the centred key columns.

    Returns (rank, eigen_ok, gap_ok, intervals): ``rank`` of the centred key matrix; whether
    the first r coordinate vectors are exact eigenvectors; whether every isolating interval
    (sympy, exact rational endpoints, repeated by multiplicity) of the r largest eigenvalues
    lies strictly above every interval of the others, so the top-r visible-key subspace is
    the coordinate one.
    """
    n, d = F.nrows(), F.ncols()
    means = [sum((F[i, j] for i in range(n)), fmpq(0)) / n for j in range(d)]
    Fc = fmpq_mat(n, d, [F[i, j] - means[j] for i in range(n) for j in range(d)])
    G = Fc.transpose() * Fc
    lam = sp.symbols("lam")
    Gs = sp.Matrix(d, d, lambda i, j: sp.Rational(int(G[i, j].p), int(G[i, j].q)))
    poly = sp.Poly((Gs - lam * sp.eye(d)).det(), lam)
    ivals = sorted(poly.intervals(), key=lambda t: t[0][0])           # exact isolation (Sturm/Vincent)
    flat = [iv for iv, m in ivals for _ in range(m)]                   # one interval per eigenvalue
    eigen_ok = all(all(G[i, k] == 0 for i in range(d) if i != k) for k in range(r))
    gap_ok = False
    if len(flat) == d and d >= r + 1:
        upper_iv, lower_iv = flat[-r:], flat[:-r]
        inside = all(any(sp.Rational(int(G[k, k].p), int(G[k, k].q)) >= a
                         and sp.Rational(int(G[k, k].p), int(G[k, k].q)) <= b for a, b in upper_iv)
                     for k in range(r))
        strict = max(b for a, b in lower_iv) < min(a for a, b in upper_iv)
        gap_ok = bool(inside and strict)
    return Fc.rank(), eigen_ok, gap_ok, ivals


def _row_softmax_arb(H_rows):
    out = []
    for row in H_rows:
        top = max(row)
        w = [(arb(v - top)).exp() for v in row]
        Z = sum(w, arb(0))
        out.append([x / Z for x in w])
    return out


#: G.3's instances in the default run: (r, d, betas). d = r + 1 algebraic key columns
#: (linear and quadratic) plus d - r - 1 appended stencil columns.
G3_INSTANCES = ((1, 3, G3_BETAS), (1, 5, (2 ** 8, 2 ** 10)), (2, 4, (2 ** 8,)))
G3_INSTANCES_THOROUGH = ((1, 3, G3_BETAS + (2 ** 14,)), (1, 5, (2 ** 8, 2 ** 10, 2 ** 12)),
                         (2, 4, (2 ** 8, 2 ** 10)), (2, 5, (2 ** 8,)))


def g3_key_model(core: HardCore, r: int, d: int, scale: fmpq):
    """The model's visible key columns on the K^r product keys (row-major j_1 .. j_r):
    ``y_1 .. y_r``, ``-|y|^2 / 2`` and ``d - r - 1`` third-difference stencils along the first
    axis, each on one line of keys (``y_2 .. y_r`` fixed on it, so it is orthogonal to every
    polynomial of degree <= 2 in y). Returns (rows of F, the appended columns)."""
    K = core.K
    y1 = [fmpq(Y, 2 * K) for Y in range(-(K - 1), K, 2)]
    count = d - r - 1
    base = stencil_columns(K, count, scale)
    keys = list(itertools.product(range(K), repeat=r))
    extra = []
    for t, col in enumerate(base):
        line = [(K // 2 + t) % K] * (r - 1)             # the other coordinates on this stencil's line
        extra.append([col[j[0]] if list(j[1:]) == line else fmpq(0) for j in keys])
    rows = []
    for idx, j in enumerate(keys):
        ys = [y1[t] for t in j]
        rows.append(ys + [-sum((v * v for v in ys), fmpq(0)) / 2] + [c[idx] for c in extra])
    return rows, extra


def _g3_instance(rec: Recorder, law: GrowthLaw, r: int, d: int, beta, eps, *, alpha, scale, name,
                 cells, tensors, expect, table):
    where = f"r={r} d={d} beta={beta}"
    M = largest_m(beta, r, eps + alpha)
    ok, _, bound = certify(beta, M, r, eps + alpha)
    rec.require(ok, f"{where}: core at eps+alpha: ||DAX - I|| {bound} not <= 2 delta")
    core = hard_core(beta, M)
    law_row = law_bracket(rec, law, beta, M, core, where)
    K = core.K
    Frows, extra = g3_key_model(core, r, d, scale)
    F = fmpq_mat(len(Frows), d, [v for row in Frows for v in row])
    rank, eigen_ok, gap_ok, ivals = visible_key_gap(F, r)
    rec.require(rank == d, f"{where}: visible key span has dimension {rank}, not {d}")
    rec.require(eigen_ok, f"{where}: e1..er are not exact eigenvectors of the visible-key Gram matrix")
    rec.require(gap_ok, f"{where}: no strict gap between the top-{r} and the other visible-key eigenvalues")
    # the verified instance: stored (rounded) core logits plus the perturbation w_i z_j
    Hf_core = logits_nd(core, r)
    msgs = list(itertools.product(range(M), repeat=r))
    keys = list(itertools.product(range(K), repeat=r))
    w = [(-1) ** sum(i) for i in msgs]
    z = [sum((c[j] for c in extra), fmpq(0)) for j in range(len(keys))]
    dyad = fmpq(1, 2 ** GRID_BITS)
    Hq = [[fmpq(int(round(Hf_core[a, b] * 2 ** GRID_BITS)), 2 ** GRID_BITS) for b in range(len(keys))]
          for a in range(len(msgs))]
    rec.require(all(fmpq(*Hf_core[a, b].as_integer_ratio()) == Hq[a][b]
                    for a in range(len(msgs)) for b in range(len(keys))), f"{where}: stored logits off the grid")
    H_pert = [[Hq[a][b] + w[a] * z[b] for b in range(len(keys))] for a in range(len(msgs))]
    rec.require(all((v / dyad).q == 1 for row in H_pert for v in row), f"{where}: perturbed logits off the grid")
    # residual of W = span(e_1..e_r) on the *verified* rational instance: with the model's
    # linear part beta x.y removed and the column term -beta |y|^2/2 as shift b, what is left
    # is w z^T plus the rounding E; q <= max_i osc_j (shift b), computed exactly here
    c_shift = [beta * Frows[b][r] for b in range(len(keys))]
    xs = [[fmpq(CELLS * (2 * k + 1 - M), 2 * K) for k in i] for i in msgs]
    q_up = fmpq(0)
    for a in range(len(msgs)):
        row = [H_pert[a][b] - beta * sum((xs[a][t] * Frows[b][t] for t in range(r)), fmpq(0)) - c_shift[b]
               for b in range(len(keys))]
        q_up = max(q_up, max(row) - min(row))
    with arb_precision(128):
        tau = 2 * (arb(q_up) / 4).tanh()
        # (7): ||A_pert - A_core|| <= 2 tanh(osc(w_i z)/4) row by row (every beta)
        osc_z = max(z) - min(z)
        dist7 = 2 * (arb(osc_z) / 4).tanh()
    rec.require(q_up < alpha and tau < alpha, f"{where}: residual bound {q_up} (tau {tau}) not below alpha")
    rec.require(dist7 <= alpha, f"{where}: ||A_pert - A_core|| <= 2 tanh(osc/4) = {dist7} not <= alpha")
    if r == 1:      # the direct arb distance as well (small)
        with arb_precision(128):
            Ac, Ap = _row_softmax_arb(Hq), _row_softmax_arb(H_pert)
            dist = arb(0)
            for a_, b_ in zip(Ac, Ap):
                dist = dist.max(sum((abs(x - y_) for x, y_ in zip(a_, b_)), arb(0)))
        rec.require(dist <= alpha, f"{where}: ||A_pert - A_core|| {dist} not certainly <= alpha")
    # the zero-dimensional subspace is not feasible: tau(0) >= 2 tanh(contrast/8) > eps
    i0, i1, j0, j1 = 0, len(msgs) - 1, 0, len(keys) - 1
    contrast = abs(H_pert[i0][j0] - H_pert[i0][j1] - H_pert[i1][j0] + H_pert[i1][j1]) / 2
    with arb_precision(128):
        tau0 = 2 * (arb(contrast) / 4).tanh()
    rec.require(tau0 > eps, f"{where}: tau(0) lower bound {tau0} not above eps")
    Hf = np.array([[float(v.p) / float(v.q) for v in row] for row in H_pert])
    rec.require(all(fmpq(*Hf[a, b].as_integer_ratio()) == H_pert[a][b]
                    for a in range(len(msgs)) for b in range(len(keys))),
                f"{where}: perturbed logits not exact in float64")
    tag = f"r{r}_d{d}_beta{beta}_M{M}"
    cid_core, cid_pert = f"G3_core_{tag}", f"G3_pert_{tag}"
    prov = {"check": name, "r": r, "d": d, "beta": beta}
    cells.append(core_cell(cid_core, core, r, eps + alpha, tensors, dict(prov, matrix="A_core at eps + alpha")))
    cells.append(core_cell(cid_pert, core, r, eps, tensors, dict(prov, matrix="A_pert at eps"), H=Hf))
    expect[cid_core] = expect[cid_pert] = (M ** r, M ** r)
    table.append({"r": r, "d": d, "beta": beta, "M": M, "keys": K ** r, **law_row,
                  "||A_pert-A_core||<=": _up(dist7), "q(C-T_W)<=~": _up(arb(q_up)),
                  "top_eig_interval": str(ivals[-1][0]), "M/sqrt(beta)~": f"{M / beta ** 0.5:.4f}",
                  "ids": (cid_core, cid_pert)})
    return M


def g3_run(betas=None, eps=G3_EPS, alpha=G3_ALPHA, *, scale_bits=G3_SCALE_BITS, d=G3_D, name="G.3", r=1,
           instances=None):
    """The G.3 check body (parametrised for the negative controls): ``instances`` is a tuple of
    (r, d, betas); without it, ``betas`` (with ``r`` and ``d``) or the default instances."""
    if instances is None:
        instances = ((r, d, betas),) if betas is not None else (G3_INSTANCES_THOROUGH if is_thorough()
                                                                  else G3_INSTANCES)
    rec = Recorder()
    delta = leakage_budget(eps + alpha)
    rec.require(eps + alpha + 2 * delta < 1, f"eps + alpha + 2 delta = {eps + alpha + 2 * delta} not < 1")
    cells: list[CellSpec] = []
    tensors: dict[str, np.ndarray] = {}
    expect: dict[str, object] = {}
    table: list[dict[str, Any]] = []
    ms: dict[str, list[int]] = {}
    laws: dict[int, GrowthLaw] = {}
    exps: dict[Any, float] = {}
    scale = fmpq(1, 2 ** scale_bits) if scale_bits >= 0 else fmpq(2 ** -scale_bits)
    for r_, d_, bs in instances:
        if r_ not in laws:
            laws[r_] = prove_growth(rec, r_, delta)
        # every beta: the stencils' oscillation bounds the perturbation by (7) and the residual,
        # up to the rounding (at most 2 * 2^-31 more oscillation per row)
        osc = 6 * scale
        with arb_precision(128):
            uniform = 2 * (arb(osc + fmpq(2, 2 ** 31)) / 4).tanh()
        rec.require(osc + fmpq(2, 2 ** 31) < alpha and uniform < alpha,
                    f"r={r_} d={d_}: the uniform perturbation/residual bound {uniform} is not below alpha")
        got_ms = [_g3_instance(rec, laws[r_], r_, d_, beta, eps, alpha=alpha, scale=scale, name=name, cells=cells,
                               tensors=tensors, expect=expect, table=table)
                  for beta in bs]
        ms[f"r{r_}_d{d_}"] = got_ms
        exps[f"r{r_}_d{d_}"] = slope(bs, got_ms)          # illustration only
    got = verify_cells(rec, name, cells, tensors, expect)
    for row in table:
        ids = row.pop("ids")
        c_core, c_pert = got.get(ids[0], {}), got.get(ids[1], {})
        # Lemma 11 (G.2): r_eps(A_pert) >= r_{eps+alpha}(A_core) >= M^r, from the verified core cell
        row["core@eps+alpha"] = f"[{c_core.get('lower')}, {c_core.get('upper')}]"
        row["pert@eps"] = f"[{c_pert.get('lower')}, {c_pert.get('upper')}]"
    numbers = {"eps": qstr(eps), "alpha": qstr(alpha), "delta": qstr(delta),
               "instances": [f"r={a} d={b}" for a, b, _ in instances], "d": sorted({b for _, b, _ in instances}),
               "appended_scale": qstr(scale), "law": {str(a): law_numbers(v) for a, v in laws.items()},
               "illustration_fitted_exponent": {k: round(v, 4) for k, v in exps.items() if v == v}, "M": ms}
    return (f"{len(instances)} instances (r, d) = {[(a, b) for a, b, _ in instances]}: core at eps+alpha "
            "verified, transferred to A_pert at eps (Lemma 11), strict visible-key gap, residual of the "
            "verified (rounded) instance < alpha; growth law proved for every beta >= beta0", numbers, rec, table)


@register("G.3", "fixed-margin robust sharpness, full algebraic interaction")
def check_g3():
    """G.3: hard core at eps + alpha, appended key columns (full visible key span, exact
    strict gap), ``||A_pert - A_core|| <= alpha`` ((7), every beta), decoded witness verified
    on the core at eps + alpha and on A_pert at eps, residual of W on the verified rounded
    instance below alpha, and the core's growth law ``M = Theta(beta^(r/2))`` (``growth.py``)."""
    return g3_run()

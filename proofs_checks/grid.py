"""Finite-grid sharpness (G.1), size is necessary (H.1), and the full-ball law (I.2, I.3).

Points ``x_i`` on an integer grid, logits ``H_ij = -beta ||x_i - x_j||^2``
(float-exact: beta and the distances are small integers). Each row of
``A = softmax_row(H)`` is a truncated discrete Gaussian around its own index,
so ``||A - I||_row1 = max_i 2 (1 - A_ii)`` with ``A_ii = 1 / S_i``,
``S_i = sum_j exp(-beta d_ij)``; arb encloses it.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from flint import arb, fmpq, fmpq_mat

from exact.cellspec import CellSpec

from ._core import Q, Recorder, centring, qstr, is_thorough, register, arb_precision
from ._export import neumann_cell, write_and_verify
from .laws import disc_bracket_cells, disc_cells

__all__ = ["grid_points", "ball_points", "neumann_gap", "grid_kappa"]

#: G.1's fixed inverse temperature and tolerance. beta = 4 keeps every
#: interior row's off-diagonal mass below 1 - 1/theta(4)^3 ~ 0.10 for r <= 3
#: (theta(b) = sum_k exp(-b k^2)), under the (1 - eps)/4 = 3/16 the Neumann
#: condition needs at eps = 1/4, the paper's table tolerance.
BETA = 4
EPS = fmpq(1, 4)
#: Grid side lengths per dimension r (n = N^r <= 125 keeps the run short).
GRIDS = {1: (2, 4, 8, 16, 32, 64), 2: (2, 3, 4, 6, 8), 3: (2, 3, 4, 5)}


def grid_points(N: int, r: int) -> list[tuple]:
    """``{0..N-1}^r`` in lexicographic order."""
    return list(itertools.product(range(N), repeat=r))


def ball_points(rho: int, r: int = 2) -> list[tuple]:
    """Integer points in the closed ball of radius ``rho`` (the full-ball family, I.2)."""
    return [p for p in itertools.product(range(-rho, rho + 1), repeat=r)
            if sum(c * c for c in p) <= rho * rho]


def _sqdist(pts) -> list[list[int]]:
    return [[sum((a - b) ** 2 for a, b in zip(p, q)) for q in pts] for p in pts]


def neumann_gap(pts, beta: int, prec: int = 128) -> arb:
    """An arb enclosure of ``||A - I||_row1 = max_i 2 (1 - 1/S_i)`` for the Gaussian logits."""
    D = _sqdist(pts)
    with arb_precision(prec):
        cache: dict[int, arb] = {}
        worst = arb(0)
        for row in D:
            S = arb(0)
            for d in row:
                e = cache.get(d)
                if e is None:
                    e = cache[d] = (-arb(beta * d)).exp()
                S += e
            worst = worst.max(2 * (S - 1) / S)
        return worst


def grid_kappa(pts, beta: int) -> dict:
    """``kappa(C)`` for ``C = P (log A) P = P H P`` exactly: the contrast at opposite
    cube vertices (lower, MATH.md section 3) and the factorisation
    ``C = (2 beta X_c) X_c^T`` with radii from the cube centre (upper)."""
    n, r = len(pts), len(pts[0])
    H = fmpq_mat(n, n, [fmpq(-beta * d) for row in _sqdist(pts) for d in row])
    P = centring(n)
    C = P * H * P
    X = fmpq_mat(n, r, [fmpq(c) for p in pts for c in p])
    Xc = P * X
    factor_ok = (Xc * Xc.transpose()) * (2 * beta) == C
    i0 = pts.index(tuple(min(c for c in pts[0]) for _ in range(r)))
    i1 = pts.index(tuple(max(p[0] for p in pts) for _ in range(r)))
    contrast = C[i0, i0] - C[i0, i1] - C[i1, i0] + C[i1, i1]
    lower = abs(contrast) / 4
    # Radius bound from the centre 0 of the centred points: R(2 beta Xc) R(Xc) <= 2 beta max |xc|^2.
    maxsq = max(sum(Xc[i, k] ** 2 for k in range(r)) for i in range(n))
    upper = 2 * beta * maxsq
    return {"C": C, "factor_ok": factor_ok, "lower": lower, "upper": upper,
            "rank_C": C.rank(), "H": H}


def _short(text) -> str | None:
    """A rational string shortened to 8 significant digits for display (JSON keeps exact ones)."""
    if text is None:
        return None
    q = Q(text)
    return f"{int(q.p) / int(q.q):.8g}"


def _logits(pts, beta) -> np.ndarray:
    return -float(beta) * np.array(_sqdist(pts), dtype=np.float64)


def _verify_cells(rec: Recorder, name: str, cells, tensors, expect: dict) -> dict:
    path, doc = write_and_verify(name, cells, tensors)
    rec.require(doc.get("returncode") == 0 and doc.get("all_verified") is True,
                f"python -m exact verify {path.name}: exit {doc.get('returncode')} {doc.get('error', '')}")
    got = {c["id"]: c for c in doc.get("cells", [])}
    for cid, n in expect.items():
        c = got.get(cid, {})
        rec.require(c.get("lower_verified") is True and c.get("upper_verified") is True
                    and c.get("lower") == n and c.get("upper") == n,
                    f"{cid}: exact tier did not verify [{n}, {n}]: {c.get('lower_reason')} / {c.get('upper_reason')}")
    return got


@register("G.1", "finite-grid sharpness")
def check_g1():
    """G.1: ``||A - I|| < (1-eps)/2`` (arb), r_eps = n (exported, verified exactly),
    ``kappa(C) = beta r (N-1)^2 / 2`` (exact), ``r_eps / kappa^(r/2)`` bounded."""
    rec = Recorder()
    cells: list[CellSpec] = []
    tensors: dict[str, np.ndarray] = {}
    expect: dict[str, Any] = {}
    table: list[dict[str, Any]] = []
    neumann_bound = (1 - EPS) / 2
    for r, Ns in GRIDS.items():
        # The bound (N/(N-1))^r (2/(beta r))^(r/2) <= 2^r (2/(beta r))^(r/2) for N >= 2.
        for N in Ns:
            pts = grid_points(N, r)
            n = len(pts)
            gap = neumann_gap(pts, BETA)
            rec.require(gap < neumann_bound, f"r={r} N={N}: ||A-I|| {gap} not < (1-eps)/2")
            kap = grid_kappa(pts, BETA)
            formula = fmpq(BETA * r * (N - 1) ** 2, 2)
            rec.require(kap["factor_ok"], f"r={r} N={N}: C != 2 beta Xc Xc^T")
            rec.require(kap["lower"] == formula and kap["upper"] == formula,
                        f"r={r} N={N}: kappa bounds {kap['lower']}, {kap['upper']} != {formula}")
            rec.require(kap["rank_C"] == min(r, n - 1), f"r={r} N={N}: rank C = {kap['rank_C']}")
            cid = f"G1_r{r}_N{N}"
            cells.append(neumann_cell(cid, _logits(pts, BETA), EPS, tensors,
                                      {"check": "G.1", "r": r, "N": N, "beta": BETA}))
            expect[cid] = n
            # (r_eps / kappa^(r/2))^2 = n^2 / kappa^r is rational: compare it exactly with
            # the cap (2^r (2/(beta r))^(r/2))^2, valid for every N >= 2.
            ratio_sq = fmpq(n * n) / formula ** r
            cap_sq = fmpq(4) ** r * fmpq(2, BETA * r) ** r
            rec.require(ratio_sq <= cap_sq, f"r={r} N={N}: ratio^2 {ratio_sq} above {cap_sq}")
            # and bounded below by its limit (2/(beta r))^(r/2): r_eps = Theta(kappa^(r/2)).
            floor_sq = fmpq(2, BETA * r) ** r
            rec.require(ratio_sq >= floor_sq, f"r={r} N={N}: ratio^2 {ratio_sq} below {floor_sq}")
            with arb_precision(64):
                ratio = arb(ratio_sq).sqrt()
            table.append({"r": r, "N": N, "n": n, "kappa": qstr(formula),
                          "neumann_gap_upper": f"{float(gap.mid()) + float(gap.rad()):.6f}",
                          "r_eps/kappa^(r/2)": f"{float(ratio.mid()):.6f}"})
    got = _verify_cells(rec, "G.1", cells, tensors, expect)
    for row in table:
        c = got.get(f"G1_r{row['r']}_N{row['N']}", {})
        row["bracket"] = f"[{c.get('lower')}, {c.get('upper')}]"
        row["lower_margin"] = _short(c.get("lower_margin"))
    numbers = {"beta": BETA, "eps": qstr(EPS), "cells": len(cells), "largest_n": max(expect.values()),
               "kappa_formula": "beta r (N-1)^2 / 2"}
    return (f"{len(cells)} grids (r=1..3, n<=125): brackets [n,n] verified, kappa exact, "
            f"ratio bounded", numbers, rec, table)


#: H.1's sizes: n up to and beyond 64 at G.1's beta and eps.
H1_SIZES = (2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 80)


@register("H.1", "rank-one interaction, zero residual, full rank")
def check_h1():
    """H.1: r = 1 grid: rank C = 1, ``H - C`` is a pure row+column term (so T = C has
    zero residual, tau(C) = 0), and yet ``r_eps = n`` (exported, verified)."""
    rec = Recorder()
    cells: list[CellSpec] = []
    tensors: dict[str, np.ndarray] = {}
    expect: dict[str, Any] = {}
    for n in H1_SIZES:
        pts = grid_points(n, 1)
        kap = grid_kappa(pts, BETA)
        C, H = kap["C"], kap["H"]
        rec.require(C.rank() == 1, f"n={n}: rank C = {C.rank()}")
        R = H - C   # must be a_i + b_j: every 2x2 contrast vanishes
        additive = all(R[i, j] - R[i, 0] - R[0, j] + R[0, 0] == 0 for i in range(n) for j in range(n))
        rec.require(additive, f"n={n}: H - C is not a row plus column term")
        rec.require(neumann_gap(pts, BETA) < (1 - EPS) / 2, f"n={n}: Neumann condition")
        cid = f"H1_n{n}"
        cells.append(neumann_cell(cid, _logits(pts, BETA), EPS, tensors, {"check": "H.1", "n": n}))
        expect[cid] = n
    _verify_cells(rec, "H.1", cells, tensors, expect)
    numbers = {"beta": BETA, "eps": qstr(EPS), "sizes": list(H1_SIZES), "rank_C": 1,
               "residual_q(C-T)_at_T=C": "0", "tau": "0", "largest_verified_r_eps": max(H1_SIZES)}
    return (f"rank C = 1, q = 0, r_eps = n verified for n in {H1_SIZES[0]}..{H1_SIZES[-1]}",
            numbers, rec)


#: I.2 / I.3: integer points of the disc of radius rho at beta = 4 are the
#: unit disc at beta_unit = 4 rho^2 (scale the points by 1/rho).
BALL_RADII = (1, 2, 3, 4, 5, 6)


#: I.2's fine discs (spacing 1/G) for both halves, at eps = 1/2: {beta: (G, ...)}.
I2_FINE_EPS = fmpq(1, 2)
I2_FINE = {16: (12, 20), 32: (20,)}
I2_FINE_THOROUGH = {16: (12, 16, 20), 32: (12, 16, 20)}


@register("I.2", "full-ball law (finite instances)")
def check_i2():
    """I.2: (a) lattice points of a disc, Gaussian logits: arb proves r_eps = n (Neumann)
    for each instance; n / beta_unit ~ pi/4 illustrates the beta^(r/2) law. (b) Both halves
    on discs of spacing 1/G: separated-subset lower and, above, every row replaced by the
    softmax row of its nearest representative on a grid (rank = representatives used):
    the exact tier verifies [L, U] with U <= 8 beta, not growing with G at fixed beta."""
    rec = Recorder()
    table: list[dict[str, Any]] = []
    cells: list[CellSpec] = []
    tensors: dict[str, np.ndarray] = {}
    expect: dict[str, Any] = {}
    for rho in BALL_RADII:
        pts = ball_points(rho)
        n = len(pts)
        gap = neumann_gap(pts, BETA)
        rec.require(gap < (1 - EPS) / 2, f"rho={rho}: Neumann condition fails ({gap})")
        cid = f"I2_disc_rho{rho}"
        cells.append(neumann_cell(cid, _logits(pts, BETA), EPS, tensors, {"check": "I.2", "rho": rho}))
        expect[cid] = (n, n)
        table.append({"disc": f"rho={rho} (integer points)", "beta_unit": BETA * rho * rho, "eps": qstr(EPS),
                      "n": n, "id": cid})
    uppers: dict[int, list[int]] = {}
    for beta, Gs in (I2_FINE_THOROUGH if is_thorough() else I2_FINE).items():
        for cid, n, M, U, cell in disc_bracket_cells(Gs, beta, I2_FINE_EPS, tensors):
            rec.require(U is not None and U <= 8 * beta and U < n,
                        f"{cid}: representative upper rank {U} not <= 8 beta")
            cells.append(cell)
            expect[cid] = (M or 1, U)
            uppers.setdefault(beta, []).append(U)
            table.append({"disc": f"spacing 1/{cell.provenance['G']}", "beta_unit": beta,
                          "eps": qstr(I2_FINE_EPS), "n": n, "id": cid})
    got = _verify_cells(rec, "I.2", cells, tensors, {})
    for row in table:
        cid = row.pop("id")
        c = got.get(cid, {})
        rec.require(c.get("lower_verified") is True and c.get("upper_verified") is True
                    and (c.get("lower"), c.get("upper")) == expect[cid], f"{cid}: bracket {expect[cid]} not verified")
        row["r_eps_bracket"] = f"[{c.get('lower')}, {c.get('upper')}]"
        row["upper/beta_unit"] = f"{(c.get('upper') or 0) / row['beta_unit']:.4f}"
    numbers = {"beta_grid": BETA, "eps": qstr(EPS), "radii": list(BALL_RADII),
               "n": [t["n"] for t in table[:len(BALL_RADII)]],
               "fine_upper_ranks": {str(b): u for b, u in uppers.items()}}
    return ("r_eps = n verified per integer disc; on fine discs [L, U] with U = O(beta) not growing with n "
            f"({ {b: u for b, u in uppers.items()} })", numbers, rec, table)


#: I.3: keys filling the unit disc with spacing 1/G (G >> sqrt(beta) / 4), queries = keys.
I3_G, I3_BETAS = 16, (16, 36)
I3_G_THOROUGH, I3_BETAS_THOROUGH = 20, (16, 36, 64)


@register("I.3", "finite full-ball lower certificate")
def check_i3():
    """I.3: keys on a lattice of spacing 1/G filling the unit disc (at beta = 16, spacing
    1/16 against beta^(-1/2) = 1/4); the certificate picks a separated subset S of the rows
    (a coarse sub-lattice), cells = nearest message, decoder = row selection (contractive,
    nonzero defect), and the exact tier verifies r_eps >= |S| with the softmax slack."""
    rec = Recorder()
    tensors: dict[str, np.ndarray] = {}
    cells: list[CellSpec] = []
    expect: dict[str, Any] = {}
    table: list[dict[str, Any]] = []
    G, betas = (I3_G_THOROUGH, I3_BETAS_THOROUGH) if is_thorough() else (I3_G, I3_BETAS)
    for cid, n, M, cell in disc_cells(G, betas, EPS, tensors):
        rec.require(M is not None, f"{cid}: no separated subset passes the float test")
        cells.append(cell)
        expect[cid] = M
        table.append({"id": cid, "keys": n, "beta": cell.provenance["beta"], "spacing": f"1/{G}"})
    got = _verify_cells(rec, "I.3", cells, tensors, {})
    for row in table:
        c = got.get(row["id"], {})
        rec.require(c.get("lower_verified") is True and c.get("lower") == expect[row["id"]]
                    and c.get("upper_verified") is True,
                    f"{row['id']}: lower {expect[row['id']]} not verified ({c.get('lower_reason')})")
        row["bracket"] = f"[{c.get('lower')}, {c.get('upper')}]"
        row["lower_margin"] = _short(c.get("lower_margin"))
    Ms = [expect[r["id"]] for r in table]
    rec.require(all(a < b for a, b in zip(Ms, Ms[1:])), f"separated subsets do not grow with beta: {Ms}")
    return (f"disc keys at spacing 1/{G}: separated subsets of {Ms} rows certified by the exact tier",
            {"G": G, "betas": list(betas), "certified_lower": Ms, "eps": qstr(EPS)}, rec, table)

"""The Hilbert-metric bound, the paper's (7):
``||p - p'||_1 <= 2 tanh(osc(h - h') / 4)`` for ``p ~ w exp(h)``, ``p' ~ w exp(h')``.

Checked with arb balls (the inequality must be *certainly* true) on random,
extreme and near-equality cases, and its equality case proved symbolically
(sympy) and on an exact rational multi-atom instance.
"""
from __future__ import annotations

import random

import sympy as sp
from flint import arb, fmpq

from ._core import Recorder, arb_mid_fmpq, register, arb_precision

__all__ = ["hilbert_sides"]

#: Seeded trials: random, extreme (osc up to 80, weights down to 2^-60) and
#: near-equality perturbations of the two-group extremal family.
HILBERT_SEED = 7
N_RANDOM, N_EXTREME, N_NEAR = 120, 40, 40
#: The divisor in 2 tanh(osc / 4); a test sets a wrong one (the check must then fail).
RHS_DIV = 4
#: Precision for the near-equality cases, whose gaps go down to ~1e-12.
NEAR_PREC = 256


def hilbert_sides(w, h, hp, prec: int = 128):
    """arb enclosures of ``(||p - p'||_1, 2 tanh(osc(h - h')/4))`` from exact rationals."""
    with arb_precision(prec):
        h_max, hp_max = max(h), max(hp)
        e = [arb(wj) * (arb(hj - h_max)).exp() for wj, hj in zip(w, h)]
        ep = [arb(wj) * (arb(hj - hp_max)).exp() for wj, hj in zip(w, hp)]
        Z, Zp = sum(e, arb(0)), sum(ep, arb(0))
        lhs = sum((abs(a / Z - b / Zp) for a, b in zip(e, ep)), arb(0))
        d = [a - b for a, b in zip(h, hp)]
        rhs = 2 * (arb(max(d) - min(d)) / RHS_DIV).tanh()
        return lhs, rhs


def _rq(rng, lo, hi, den=64):
    return fmpq(rng.randint(lo * den, hi * den), den)


@register("(7)", "Hilbert-metric bound")
def check_hilbert():
    """(7): random, extreme and near-equality cases certainly satisfy the bound; equality
    holds exactly on the two-group family with p(S)/p(S^c) = exp(osc/2)."""
    rec = Recorder()
    rng = random.Random(HILBERT_SEED)
    worst_ratio = fmpq(0)
    for t in range(N_RANDOM + N_EXTREME):
        n = rng.randint(2, 9)
        if t < N_RANDOM:
            w = [_rq(rng, 0, 3) + fmpq(1, 64) for _ in range(n)]
            h = [_rq(rng, -4, 4) for _ in range(n)]
            hp = [_rq(rng, -4, 4) for _ in range(n)]
        else:
            w = [fmpq(1, 2 ** rng.randint(0, 60)) for _ in range(n)]
            h = [_rq(rng, -40, 40, 4) for _ in range(n)]
            hp = [_rq(rng, -40, 40, 4) for _ in range(n)]
        lhs, rhs = hilbert_sides(w, h, hp)
        rec.require(lhs <= rhs, f"case {t}: {lhs} not certainly <= {rhs}")
    # Near equality: two groups S, S^c, delta = D on S, p(S) = 1/(1 + exp(-D/2)) (1 + tiny).
    for t in range(N_NEAR):
        n = rng.randint(2, 8)
        k = rng.randint(1, n - 1)
        D = _rq(rng, 1, 12)
        h = [_rq(rng, -3, 3) for _ in range(n)]
        w = [fmpq(1)] * n
        with arb_precision(NEAR_PREC):
            # shift group S so that its mass ratio to S^c is exp(D/2) up to a 2^-40 nudge
            sS = sum((arb(hj).exp() for hj in h[:k]), arb(0))
            sC = sum((arb(hj).exp() for hj in h[k:]), arb(0))
            c = arb(D) / 2 + sC.log() - sS.log()
        # never exactly extremal
        nudge = fmpq(rng.choice((-4, -3, -2, -1, 1, 2, 3, 4)), 2 ** 40)
        c_q = fmpq((arb_mid_fmpq(c) * 2 ** 60).floor(), 2 ** 60) + nudge
        h = [hj + c_q for hj in h[:k]] + h[k:]
        hp = [hj - D for hj in h[:k]] + h[k:]
        lhs, rhs = hilbert_sides(w, h, hp, prec=NEAR_PREC)
        rec.require(lhs <= rhs, f"near-equality case {t}: {lhs} not certainly <= {rhs}")
        with arb_precision(NEAR_PREC):
            ratio = lhs / rhs
        worst_ratio = max(worst_ratio, arb_mid_fmpq(ratio))
    # Equality, symbolically: two atoms, h = (d/2, -d/2), h' = -h, osc(h - h') = 2d.
    d = sp.symbols("d", positive=True)
    p1 = sp.exp(d / 2) / (sp.exp(d / 2) + sp.exp(-d / 2))
    p1p = sp.exp(-d / 2) / (sp.exp(d / 2) + sp.exp(-d / 2))
    lhs_sym = 2 * (p1 - p1p)              # |p1 - p1'| + |p2 - p2'| with p1 > p1' for d > 0
    rec.require(sp.simplify((lhs_sym - 2 * sp.tanh(2 * d / 4)).rewrite(sp.exp)) == 0,
                "two-atom equality ||p - p'|| = 2 tanh(osc/4)")
    # Equality, exactly in rationals: D = 2 log 3 so exp(-D) = 1/9 and 2 tanh(D/4) = 1.
    p = [fmpq(1, 4), fmpq(1, 4), fmpq(1, 4), fmpq(1, 8), fmpq(1, 8)]    # p(S) = 3/4 on S = first 3
    raw = [v * fmpq(1, 9) for v in p[:3]] + p[3:]
    pp = [v / sum(raw) for v in raw]
    l1 = sum((abs(a - b) for a, b in zip(p, pp)), fmpq(0))
    rhs_exact = sp.simplify((2 * sp.tanh(2 * sp.log(3) / 4)).rewrite(sp.exp))
    rec.require(l1 == 1 and rhs_exact == 1, f"five-atom rational equality: lhs {l1}, rhs {rhs_exact}")
    numbers = {"random": N_RANDOM, "extreme": N_EXTREME, "near_equality": N_NEAR,
               "max_lhs/rhs_near_equality": f"{float(int(worst_ratio.p) / int(worst_ratio.q)):.12f}",
               "equality_case": "p(S)/p(S^c) = exp(osc/2); exact: lhs = rhs = 1 at osc = 2 log 3"}
    return (f"{N_RANDOM + N_EXTREME + N_NEAR} cases certainly within the bound; equality proved",
            numbers, rec)

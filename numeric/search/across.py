"""Witnesses carried across tolerances: monotone brackets.

``r_eps(A)`` is non-increasing in eps, and so are the certificates' conditions:

- a rank-r upper witness (K.1, factors with ``||A - P Q^T||_row1 <= eps' - slack``)
  is one at every larger tolerance eps >= eps';
- a lower witness that proves ``r >= d`` at ``eps' + slack`` (K.2, K.3 and the
  row side: ``||R|| (eps' + slack) < 1`` and the rest, MATH.md section 2) proves it
  at every smaller tolerance.

``carry_upper`` walks the tolerances smallest first and ``carry_lower`` largest
first; where a witness found at another tolerance gives a tighter side than the
cell's own, it is re-checked by the exact tier at the cell's own tolerance and
taken only if verified there (nothing unverified is exported). So U is
non-decreasing and L non-increasing in eps in the output. A carried side keeps
its family and records the tolerance whose search found it (``from_eps``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from exact.certificates import (FrobeniusTail, ReconstructionWitness, RowReconstructionWitness, TrivialLower,
                                UpperFactors, check_lower, check_upper)
import numpy as np
from flint import fmpq

from exact.matrix import ExactMatrix
from exact.verdict import Verdict
from numeric.search.candidate import LowerCandidate
from numeric.search.upper import UpperResult

__all__ = ["LowerPick", "UpperPick", "exact_lower_witness", "exact_upper_witness", "carry_lower", "carry_upper"]


@dataclass(frozen=True)
class LowerPick:
    """The lower side of one tolerance: its candidate, the exact verdict at this tolerance, and
    the tolerance (text) whose search found it (None: this one's)."""

    cand: LowerCandidate
    verdict: Verdict
    from_eps: str | None = None


@dataclass(frozen=True)
class UpperPick:
    """The upper side of one tolerance: rank, family, exact verdict at this tolerance, the factors
    (``upper.UpperResult``; None for the trivial witness), and where they were found (None: here)."""

    rank: int
    family: str
    verdict: Verdict
    result: UpperResult | None
    from_eps: str | None = None


def exact_lower_witness(c: LowerCandidate) -> object:
    """The exact tier's witness object of a float lower candidate (tensors rounded exactly)."""
    t = {k: ExactMatrix.from_float64(v) for k, v in c.tensors.items()}
    if c.kind == "trivial":
        return TrivialLower()
    if c.kind == "frobenius":
        assert c.k is not None        # a Frobenius candidate has its tail index
        return FrobeniusTail(c.k)
    if c.kind == "reconstruction":
        return ReconstructionWitness(t["R"], t["X"], t["L"])
    return RowReconstructionWitness(t["G"], t["Z"], t["M"])


def exact_upper_witness(P: np.ndarray, Q: np.ndarray) -> UpperFactors:
    """The exact tier's witness of float factors ``P, Q`` (K.1; every entry rounded exactly)."""
    return UpperFactors(ExactMatrix.from_float64(P), ExactMatrix.from_float64(Q))


def carry_lower(A_exact: ExactMatrix, picks: list[LowerPick], lo_exacts: list[fmpq],
                eps_texts: list[str]) -> list[LowerPick]:
    """``picks`` (``LowerPick``) of the tolerances largest first, each raised to the strongest
    lower witness of a larger tolerance that the exact tier verifies at its own ``eps + slack``."""
    out: list[LowerPick] = []
    best: LowerPick | None = None
    for pick, lo, text in zip(picks, lo_exacts, eps_texts):
        if best is not None and best.cand.rank > pick.cand.rank:
            v = check_lower(A_exact, exact_lower_witness(best.cand), lo, best.cand.rank)
            if v.verified:
                pick = LowerPick(best.cand, v, best.from_eps)
        if best is None or pick.cand.rank > best.cand.rank:
            best = pick if pick.from_eps is not None else replace(pick, from_eps=text)
        out.append(pick)
    return out


def carry_upper(A_exact: ExactMatrix, picks: list[UpperPick], up_exacts: list[fmpq],
                eps_texts: list[str]) -> list[UpperPick]:
    """``picks`` (``UpperPick``) of the tolerances smallest first, each lowered to the lowest-rank
    factors of a smaller tolerance that the exact tier verifies at its own ``eps - slack``."""
    out: list[UpperPick] = []
    best: UpperPick | None = None
    for pick, up, text in zip(picks, up_exacts, eps_texts):
        if best is not None and best.rank < pick.rank and up > 0:
            u = best.result
            assert u is not None          # only factors are carried
            v = check_upper(A_exact, exact_upper_witness(u.P, u.Q), up, best.rank)
            if v.verified:
                pick = UpperPick(best.rank, best.family, v, u, best.from_eps)
        if pick.result is not None and (best is None or pick.rank < best.rank):
            best = pick if pick.from_eps is not None else replace(pick, from_eps=text)
        out.append(pick)
    return out

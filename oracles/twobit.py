"""The two-bit oracle (paper K.6, MATH.md section 4): exact known-answer cells.

``A(t, s) = K(t) (x) K(s)`` with ``K(t) = t I + (1 - t) J/2``, a 4 x 4
doubly stochastic matrix whose eigenvectors are the Walsh characters
``w_ab(x, y) = (-1)^(a x + b y)`` with eigenvalues ``1, t, s, t s``. For a
cell ``(t, s, eps)`` the oracle searches upper witnesses (zero, constant,
LP-optimal Walsh truncations, B = A; K.1) and lower witnesses (trivial,
Frobenius tail K.2, truncated pseudo-inverse and LP-optimal reconstruction
maps on Walsh subspaces K.3), all in exact rationals, and hands every witness
to the exact tier (``exact.certificates``). A rank is printed only after its
certificate verifies there; the paper's ranks are shown next to it as the
claim being checked. LP optima are exact and proved by dual certificates.

Without ``--t/--s/--eps`` it runs the paper's six cells and the two facts it
states about t = s = 3/4, and exits 0 only if every cell closes (L = U),
every certificate verifies and every stated fact is proved.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations

import numpy as np
from flint import fmpq, fmpz

from exact.certificates import (FrobeniusTail, ReconstructionWitness, TrivialLower, TrivialUpper,
                                UpperFactors, check_lower, check_upper)
from exact.cellspec import CellSpec, Claim, TargetSpec
from exact.errors import ExitCode, MalformedInput, UserInputError
from exact.matrix import ExactMatrix
from exact.norms import row_l1_norm
from exact.rational import format_rational, parse_rational
from exact.verdict import Verdict, refuted
from fileio.bracketwriter import write_bracket_file
from fileio.safeio import SafeIOError, check_target, escape

from ._exactlp import Infeasible, LPSolution, solve

__all__ = ["WALSH_LABELS", "PAPER_CELLS", "two_bit_matrix", "walsh_eigenvalues", "UpperCandidate",
           "LowerTest", "CellResult", "solve_cell", "walsh_truncation", "lp_optimal_reconstruction",
           "RowStochasticFact", "row_stochastic_fact", "HierarchyFact", "hierarchy_fact",
           "paper_cells", "export_cells", "ExportRefused", "main"]

#: Walsh characters ``w_ab``, index ``i = 2 x + y`` (x indexes K(t), y indexes K(s)).
WALSH_LABELS = ("00", "10", "01", "11")
WALSH = {"00": (1, 1, 1, 1), "10": (1, 1, -1, -1), "01": (1, -1, 1, -1), "11": (1, -1, -1, 1)}
#: Rows of A: the sqrt(m) of the Frobenius-tail test (K.2) is sqrt(4).
M_ROWS = 4
#: The paper's six cells (K.6, MATH.md section 4) with the ranks it states: the
#: claims this oracle checks, never used to produce a rank.
PAPER_CELLS = (("3/4", "1/2", "1/4", 4), ("3/4", "1/2", "7/16", 3), ("3/4", "1/2", "5/8", 2),
               ("3/4", "1/2", "7/8", 1), ("3/4", "3/4", "5/8", 3), ("3/4", "3/4", "3/4", 1))
#: The values the paper states about t = s = 3/4 (K.6): claims checked by the two facts.
PAPER_RS_EPS, PAPER_RS_RANK_ONE_ERROR = fmpq(3, 4), fmpq(33, 32)
PAPER_H_EPS, PAPER_H_FROBENIUS_F2, PAPER_H_PINV_NORM = fmpq(5, 8), fmpq(15, 16), fmpq(11, 6)
PAPER_H_LP_NORM, PAPER_H_LP_MARGIN, PAPER_H_UPPER_ERROR = fmpq(4, 3), fmpq(1, 6), fmpq(9, 16)

_ZERO, _ONE = fmpq(0), fmpq(1)


def _fmt(q) -> str:
    return "-" if q is None else format_rational(q)


# --------------------------------------------------------------------------- the matrix
def _check_parameter(value: fmpq, name: str) -> fmpq:
    if not isinstance(value, fmpq):
        raise TypeError(f"{name} must be an fmpq")
    if not 0 <= value <= 1:
        raise MalformedInput(f"{name} must lie in [0, 1], got {format_rational(value)}")
    return value


def two_bit_matrix(t: fmpq, s: fmpq) -> ExactMatrix:
    """``A(t, s) = K(t) (x) K(s)``, exactly (MATH.md section 4).

    >>> two_bit_matrix(fmpq(3, 4), fmpq(3, 4)).scale(64).to_fractions()[0]
    [Fraction(49, 1), Fraction(7, 1), Fraction(7, 1), Fraction(1, 1)]
    """
    _check_parameter(t, "t")
    _check_parameter(s, "s")
    kt = [[(1 + t) / 2, (1 - t) / 2], [(1 - t) / 2, (1 + t) / 2]]
    ks = [[(1 + s) / 2, (1 - s) / 2], [(1 - s) / 2, (1 + s) / 2]]
    return ExactMatrix.from_rationals([[kt[i >> 1][j >> 1] * ks[i & 1][j & 1] for j in range(4)]
                                       for i in range(4)])


def walsh_eigenvalues(t: fmpq, s: fmpq) -> dict:
    """``A w_ab = t^a s^b w_ab``: eigenvalue of each Walsh character."""
    return {"00": _ONE, "10": t, "01": s, "11": t * s}


def _walsh_columns(labels) -> ExactMatrix:
    """X (4 x d) whose columns are the Walsh characters ``labels``."""
    return ExactMatrix.from_rationals([[WALSH[c][i] for c in labels] for i in range(4)])


def _rows(M: ExactMatrix) -> list[list[fmpq]]:
    return [[M.entry(i, j) for j in range(M.ncols)] for i in range(M.nrows)]


def _min_l1(C: list[list[fmpq]], e: list[fmpq]) -> tuple[list[fmpq], LPSolution]:
    """``min ||r||_1`` subject to ``C r = e`` (r in Q^n): ``(r, LP solution)``.

    Split ``r = r+ - r-`` with ``r+, r- >= 0`` and minimise ``sum r+ + sum r-``;
    at an optimum ``||r||_1`` equals that sum. The dual is ``max e . y``
    subject to ``-1 <= C^T y <= 1``: its certificate ``y`` (``sol.y_eq``) proves
    ``||r'||_1 >= e . y`` for every feasible r' (weak duality).
    """
    n = len(C[0])
    sol = solve([_ONE] * (2 * n), A_eq=[list(c) + [-v for v in c] for c in C], b_eq=list(e))
    return [sol.x[j] - sol.x[n + j] for j in range(n)], sol


# --------------------------------------------------------------------------- upper side
@dataclass(frozen=True)
class UpperCandidate:
    """An explicit B of rank <= ``rank`` (K.1) with its exact error ``||A - B||_row1``.

    ``optimal`` means: the error is the exact LP optimum over every B in the
    span of the Walsh characters ``characters`` (proved by a dual certificate).
    """

    kind: str                 # zero | constant | walsh_truncation | trivial
    rank: int
    characters: tuple
    error: fmpq
    optimal: bool
    witness: UpperFactors | TrivialUpper = field(repr=False)


def walsh_truncation(t: fmpq, s: fmpq, labels: tuple, *, stochastic: bool = False):
    """The best B in ``span{w_c w_c^T : c in labels}``: ``(B factors, error, LP solution)``.

    ``A - B`` is a group matrix ``M_ij = f(i xor j)`` with ``w_c . f = lambda_c``
    for c outside ``labels``; its row-l1 norm is ``||f||_1``, so the best B
    solves ``min ||f||_1`` under those constraints (and ``w_00 . f = 0``, i.e.
    row sums 1, when ``stochastic``). Then ``B = sum_c mu_c w_c w_c^T / 4`` with
    ``mu_c = lambda_c - w_c . f``: factors ``P = [mu_c w_c / 4]``, ``Q = [w_c]``.
    Returns None when the constraints are infeasible.
    """
    lam = walsh_eigenvalues(t, s)
    fixed = [c for c in WALSH_LABELS if c not in labels]
    C = [[fmpq(v) for v in WALSH[c]] for c in fixed]
    e = [lam[c] for c in fixed]
    if stochastic and "00" in labels:
        C.append([fmpq(v) for v in WALSH["00"]])
        e.append(_ZERO)
    if C:
        try:
            f, sol = _min_l1(C, e)
        except Infeasible:
            return None
    else:
        sol, f = None, [_ZERO] * 4
    mu = [lam[c] - sum((WALSH[c][j] * f[j] for j in range(4)), _ZERO) for c in labels]
    P = ExactMatrix.from_rationals([[mu[k] * WALSH[c][i] / 4 for k, c in enumerate(labels)] for i in range(4)])
    Q = _walsh_columns(labels)
    error = sum((abs(v) for v in f), _ZERO)
    return UpperFactors(P, Q), error, sol


@lru_cache(maxsize=256)
def _upper_profile(t: fmpq, s: fmpq) -> tuple:
    """The best upper candidate of every rank 0..4 (eps-independent, cached per (t, s))."""
    A = two_bit_matrix(t, s)
    best = [UpperCandidate("zero", 0, (), row_l1_norm(A), True,
                           UpperFactors(ExactMatrix.zeros(4, 0), ExactMatrix.zeros(4, 0)))]
    for k in (1, 2, 3):
        cands = []
        for labels in combinations(WALSH_LABELS, k):
            witness, error, _ = walsh_truncation(t, s, labels)
            kind = "constant" if labels == ("00",) else "walsh_truncation"
            cands.append(UpperCandidate(kind, k, labels, error, True, witness))
        best.append(min(cands, key=lambda c: c.error))      # first minimiser in label order
    best.append(UpperCandidate("trivial", 4, WALSH_LABELS, _ZERO, True, TrivialUpper()))
    return tuple(best)


# --------------------------------------------------------------------------- lower side
@dataclass(frozen=True)
class LowerTest:
    """One lower test tried on a cell, with its exact norm and margin.

    ``margin`` is this oracle's exact value of the test's inequality gap
    (> 0 means the test proves ``rank``); ``verdict`` is the exact tier's
    independent judgement of ``witness`` (None when no witness exists).
    """

    test: str                 # trivial | frobenius | truncated_pseudo_inverse | lp_optimal_reconstruction
    kind: str                 # the bracket-format witness kind
    rank: int
    subspace: tuple | None
    norm_name: str
    norm: fmpq | None
    margin: fmpq | None
    optimal: bool
    witness: object = field(repr=False)
    verdict: Verdict | None
    note: str = ""

    @property
    def passes(self) -> bool:
        return self.margin is not None and self.margin > 0

    @property
    def verified(self) -> bool:
        return self.verdict is not None and self.verdict.verified

    def to_json(self) -> dict:
        return {"test": self.test, "kind": self.kind, "rank": self.rank,
                "subspace": None if self.subspace is None else list(self.subspace),
                "norm_name": self.norm_name, "norm": None if self.norm is None else _fmt(self.norm),
                "margin": None if self.margin is None else _fmt(self.margin),
                "passes": self.passes, "optimal": self.optimal, "verified": self.verified,
                "verdict_margin": None if self.verdict is None or self.verdict.margin is None
                else _fmt(self.verdict.margin),
                "reason": self.verdict.reason if self.verdict is not None else self.note}


def lp_optimal_reconstruction(A: ExactMatrix, labels: tuple):
    """The LP-optimal reconstruction witness on ``W = span{w_c : c in labels}`` (K.3).

    Row i of R minimises ``||r||_1`` subject to ``r (A X) = X[i, :]``; each
    row's optimum carries a dual certificate, so ``||R||_row1`` is exactly
    ``1 / gamma(W)`` (MATH.md K.3, "LP-optimal R"). ``L = X^T / 4`` gives
    ``L X = I`` because the characters are orthogonal with squared norm 4.
    Returns ``(witness, norm, duals)`` or None when ``A X`` has rank < d
    (gamma = 0). ``duals[i]`` is row i's dual certificate ``y``: ``x = X y``
    has ``||A x||_inf <= 1`` and ``x_i = ||r_i||_1``, so ``gamma(W) <= 1/||r_i||_1``.
    """
    X = _walsh_columns(labels)
    AX = _rows(A @ X)
    C = [[AX[j][c] for j in range(4)] for c in range(len(labels))]
    rows: list[list[fmpq]] = []
    duals = []
    for i in range(4):
        try:
            r, sol = _min_l1(C, [fmpq(WALSH[c][i]) for c in labels])
        except Infeasible:
            return None
        rows.append(r)
        duals.append(sol.y_eq)
    R = ExactMatrix.from_rationals(rows)
    return ReconstructionWitness(R, X, X.T.scale(fmpq(1, 4))), row_l1_norm(R), tuple(duals)


def _reconstruction_test(test, A, eps, labels, witness, norm, *, optimal) -> LowerTest:
    d = len(labels)
    return LowerTest(test, "reconstruction", d, labels, "||R||", norm, 1 - norm * eps, optimal,
                     witness, check_lower(A, witness, eps, d))


def _lower_tests(t: fmpq, s: fmpq, eps: fmpq, d: int) -> list[LowerTest]:
    """Every lower test for rank ``d``, in order of strength (K.2 < K.3 pinv < K.3 LP-optimal)."""
    A = two_bit_matrix(t, s)
    lam = walsh_eigenvalues(t, s)
    tests = []
    norm = row_l1_norm(A)
    tests.append(LowerTest("trivial", "trivial", 1, None, "||A||", norm, norm - eps, True,
                           TrivialLower(), check_lower(A, TrivialLower(), eps, 1)))
    # K.2: A is symmetric with eigenvalues lam >= 0, so its singular values are lam.
    sq = sorted((v * v for v in lam.values()), reverse=True)
    tail = sum(sq[d - 1:], _ZERO)
    tests.append(LowerTest("frobenius", "frobenius", d, None, f"F_{d - 1}^2", tail, tail - M_ROWS * eps * eps,
                           False, FrobeniusTail(d - 1), check_lower(A, FrobeniusTail(d - 1), eps, d)))
    # Truncated pseudo-inverse: X = the d top characters, R = X diag(1/lam) X^T / 4.
    top = tuple(sorted(WALSH_LABELS, key=lambda c: -lam[c])[:d])
    top = tuple(c for c in WALSH_LABELS if c in top)
    if all(lam[c] != 0 for c in top):
        X = _walsh_columns(top)
        Dinv = ExactMatrix.from_rationals([[1 / lam[c] if a == b else 0 for b in range(d)]
                                           for a, c in enumerate(top)])
        R = (X @ Dinv @ X.T).scale(fmpq(1, 4))
        tests.append(_reconstruction_test("truncated_pseudo_inverse", A, eps, top,
                                          ReconstructionWitness(R, X, X.T.scale(fmpq(1, 4))),
                                          row_l1_norm(R), optimal=False))
    else:
        tests.append(LowerTest("truncated_pseudo_inverse", "reconstruction", d, top, "||R||", None, None,
                               False, None, None, "a top singular value is 0"))
    # LP-optimal R on every d-dimensional Walsh subspace; report the best.
    best = None
    for labels in combinations(WALSH_LABELS, d):
        got = lp_optimal_reconstruction(A, labels)
        if got is not None and (best is None or got[1] < best[2]):
            best = (labels, got[0], got[1])
    if best is None:
        tests.append(LowerTest("lp_optimal_reconstruction", "reconstruction", d, None, "||R||", None, None,
                               False, None, None, f"A kills a vector of every {d}-dim Walsh subspace"))
    else:
        tests.append(_reconstruction_test("lp_optimal_reconstruction", A, eps, best[0], best[1], best[2], optimal=True))
    return tests


# --------------------------------------------------------------------------- cells
@dataclass(frozen=True)
class CellResult:
    """A closed (or not) bracket ``lower <= r_eps(A(t, s)) <= upper``.

    ``lower`` and ``upper`` are ranks whose certificates the exact tier
    verified (``lower_verdict``, ``upper_verdict``); ``lower_tests`` lists
    every lower test tried for the final rank, weakest first.
    """

    t: fmpq
    s: fmpq
    eps: fmpq
    lower: int
    upper: int
    lower_test: LowerTest
    upper_candidate: UpperCandidate
    upper_verdict: Verdict
    lower_tests: tuple
    upper_candidates: tuple
    problems: tuple = ()

    @property
    def closed(self) -> bool:
        return self.lower == self.upper

    @property
    def verified(self) -> bool:
        return self.lower_test.verified and self.upper_verdict.verified and not self.problems

    def to_json(self) -> dict:
        lt, uc = self.lower_test, self.upper_candidate
        return {
            "t": _fmt(self.t), "s": _fmt(self.s), "eps": _fmt(self.eps),
            "lower": self.lower, "upper": self.upper, "closed": self.closed, "verified": self.verified,
            "lower_witness": lt.test, "lower_kind": lt.kind, "lower_subspace":
                None if lt.subspace is None else list(lt.subspace),
            "lower_norm_name": lt.norm_name, "lower_norm": None if lt.norm is None else _fmt(lt.norm),
            "lower_margin": None if lt.verdict is None or lt.verdict.margin is None else _fmt(lt.verdict.margin),
            "upper_witness": uc.kind, "upper_kind": uc.witness.kind, "upper_characters": list(uc.characters),
            "upper_error": _fmt(uc.error),
            "upper_margin": None if self.upper_verdict.margin is None else _fmt(self.upper_verdict.margin),
            "lower_tests": [x.to_json() for x in self.lower_tests],
            "upper_candidates": [{"kind": c.kind, "rank": c.rank, "characters": list(c.characters),
                                  "error": _fmt(c.error), "optimal": c.optimal} for c in self.upper_candidates],
            "problems": list(self.problems),
        }


def solve_cell(t: fmpq, s: fmpq, eps: fmpq) -> CellResult:
    """Close the cell: the least upper rank and the greatest lower rank whose
    certificates the exact tier verifies (K.1, K.2, K.3).

    >>> c = solve_cell(fmpq(3, 4), fmpq(3, 4), fmpq(5, 8))
    >>> (c.lower, c.upper, c.closed, c.verified, c.lower_test.test, c.lower_test.norm)
    (3, 3, True, True, 'lp_optimal_reconstruction', 4/3)
    """
    _check_parameter(t, "t")
    _check_parameter(s, "s")
    if not isinstance(eps, fmpq) or eps < 0:
        raise MalformedInput(f"eps must be a rational >= 0, got {eps}")
    A = two_bit_matrix(t, s)
    profile = _upper_profile(t, s)
    problems = []
    upper = None
    for cand in profile:
        if cand.error <= eps:
            verdict = check_upper(A, cand.witness, eps, cand.rank)
            if verdict.verified:
                upper = (cand, verdict)
                break
            problems.append(f"exact tier refuted the rank-{cand.rank} {cand.kind} upper witness: {verdict.reason}")
    if upper is None:        # unreachable while B = A verifies; kept fail-closed
        raise AssertionError("no upper witness verified, not even B = A")
    cand, verdict = upper
    chosen, tests = None, []
    for d in range(cand.rank, 0, -1):
        tests = _lower_tests(t, s, eps, d)
        for test in tests:
            if test.rank == d and test.verified:
                chosen = test
                break
            if test.rank == d and test.passes and not test.verified and test.kind == "reconstruction":
                assert test.verdict is not None         # a reconstruction witness is always judged
                problems.append(f"exact tier refuted a passing {test.test} witness: {test.verdict.reason}")
        if chosen is not None:
            break
    if chosen is None:
        chosen = LowerTest("trivial", "trivial", 0, None, "-", None, None, True, TrivialLower(),
                           check_lower(A, TrivialLower(), eps, 0))
        tests = tests or [chosen]
    return CellResult(t, s, eps, chosen.rank, cand.rank, chosen, cand, verdict, tuple(tests), profile,
                      tuple(problems))


def paper_cells() -> list[tuple[CellResult, int]]:
    """The paper's six cells, solved, each with the rank the paper states."""
    return [(solve_cell(parse_rational(t), parse_rational(s), parse_rational(e)), rank)
            for t, s, e, rank in PAPER_CELLS]


# --------------------------------------------------------------------------- the two facts
@dataclass(frozen=True)
class RowStochasticFact:
    """t = s = 3/4, eps = 3/4: unrestricted rank 1, row-stochastic rank 2 (K.6).

    A row-stochastic B of rank <= 1 is ``1 p^T`` with p a probability vector
    (``B = u v^T``, ``B 1 = 1`` forces u constant; rank 0 has row sums 0), so
    the best row-stochastic rank-one error is ``min_p max_i ||A_i - p||_1``,
    an LP solved exactly with a dual certificate.
    """

    cell: CellResult
    rank_one_error: fmpq
    p: tuple
    dual: LPSolution
    rank_two_characters: tuple
    rank_two_error: fmpq | None               # None: no row-stochastic rank-two truncation within eps
    rank_two_verdict: Verdict
    rank_two_stochastic: bool

    @property
    def holds(self) -> bool:
        return (self.cell.closed and self.cell.verified and self.cell.upper == 1
                and self.rank_one_error == PAPER_RS_RANK_ONE_ERROR and self.rank_one_error > PAPER_RS_EPS
                and self.rank_two_stochastic and self.rank_two_verdict.verified)


def _best_stochastic_rank_one(A: ExactMatrix) -> LPSolution:
    """``min tau`` over ``p >= 0, sum p = 1, sum_j |A_ij - p_j| <= tau`` for all i.

    Variables ``(p_0..3, tau, u_ij)``; ``|A_ij - p_j| <= u_ij``.
    """
    a = _rows(A)
    nv = 4 + 1 + 16
    a_ub, b_ub = [], []
    for i in range(4):
        for j in range(4):
            for sign in (1, -1):                       # sign (A_ij - p_j) <= u_ij
                row = [_ZERO] * nv
                row[j] = fmpq(-sign)
                row[5 + 4 * i + j] = fmpq(-1)
                a_ub.append(row)
                b_ub.append(-sign * a[i][j])
        row = [_ZERO] * nv
        row[4] = fmpq(-1)
        for j in range(4):
            row[5 + 4 * i + j] = _ONE
        a_ub.append(row)
        b_ub.append(_ZERO)
    c = [_ZERO] * nv
    c[4] = _ONE
    return solve(c, a_ub, b_ub, [[_ONE] * 4 + [_ZERO] * 17], [_ONE])


def row_stochastic_fact(t: fmpq = fmpq(3, 4), s: fmpq = fmpq(3, 4), eps: fmpq = PAPER_RS_EPS) -> RowStochasticFact:
    """Prove the competitor-class fact of K.6 exactly (see the class docstring)."""
    cell = solve_cell(t, s, eps)
    A = two_bit_matrix(t, s)
    lp = _best_stochastic_rank_one(A)
    p = lp.x[:4]
    # Re-check the optimum's value on the original problem.
    a = _rows(A)
    value = max(sum((abs(a[i][j] - p[j]) for j in range(4)), _ZERO) for i in range(4))
    if value != lp.value:
        raise AssertionError("row-stochastic LP value does not match its solution")
    found: tuple[tuple[str, ...], fmpq | None, Verdict, bool] | None = None
    for labels in combinations(WALSH_LABELS, 2):
        if "00" not in labels:
            continue
        got = walsh_truncation(t, s, labels, stochastic=True)
        if got is None:
            continue
        witness, error, _ = got
        B = witness.P @ witness.Q.T
        entries = _rows(B)
        stochastic = all(v >= 0 for r in entries for v in r) and all(sum(r, _ZERO) == 1 for r in entries)
        if stochastic and error <= eps:
            found = (labels, error, check_upper(A, witness, eps, 2), stochastic)
            break
    if found is None:
        found = ((), None, refuted("factors", 2, "no row-stochastic rank-two Walsh truncation within eps"), False)
    return RowStochasticFact(cell, lp.value, tuple(p), lp, *found)


@dataclass(frozen=True)
class HierarchyFact:
    """t = s = 3/4, eps = 5/8: Frobenius and rank-3 pinv fail, the LP-optimal
    witness on the right 3-dim subspace proves 3, a rank-3 upper closes (K.6)."""

    cell: CellResult
    frobenius: LowerTest
    pinv: LowerTest
    lp: LowerTest

    @property
    def frobenius_f2(self):
        """``F_2`` itself when ``F_2^2`` is a rational square, else None."""
        q = self.frobenius.norm
        assert q is not None                  # the Frobenius test always has its norm
        p, r = fmpz(q.p).sqrtrem(), fmpz(q.q).sqrtrem()
        return fmpq(p[0], r[0]) if p[1] == 0 and r[1] == 0 else None

    @property
    def holds(self) -> bool:
        c = self.cell
        return (c.closed and c.verified and c.lower == 3
                and self.frobenius_f2 == PAPER_H_FROBENIUS_F2 and not self.frobenius.passes
                and not self.frobenius.verified
                and self.pinv.norm == PAPER_H_PINV_NORM and not self.pinv.passes and not self.pinv.verified
                and self.lp.norm == PAPER_H_LP_NORM and self.lp.optimal and self.lp.verified
                and self.lp.verdict is not None and self.lp.verdict.margin == PAPER_H_LP_MARGIN
                and c.upper_candidate.rank == 3 and c.upper_candidate.error == PAPER_H_UPPER_ERROR)


def hierarchy_fact(t: fmpq = fmpq(3, 4), s: fmpq = fmpq(3, 4), eps: fmpq = PAPER_H_EPS) -> HierarchyFact:
    cell = solve_cell(t, s, eps)
    by = {x.test: x for x in cell.lower_tests}
    return HierarchyFact(cell, by["frobenius"], by["truncated_pseudo_inverse"], by["lp_optimal_reconstruction"])


# --------------------------------------------------------------------------- export
class ExportRefused(UserInputError):
    """A cell that the float64 bracket format cannot carry exactly."""


def _is_dyadic(q: fmpq) -> bool:
    d = int(q.q)
    return d & (d - 1) == 0


def _to_exact_image(M: ExactMatrix) -> ExactMatrix:
    return ExactMatrix.from_float64(M.to_float64())


def export_cells(path, cells: list[CellResult]) -> None:
    """Write ``cells`` as a bracket file (format v1, ``exact.bracketfile``).

    Only dyadic t and s give a float64 A equal to A(t, s); every witness is
    rounded to float64 and re-checked by the exact tier on exactly the values
    written (the defect terms of K.3 absorb the rounding of R). Raises
    :class:`ExportRefused` for a cell that cannot be carried.
    """
    tensors, out = {}, []
    for n, cell in enumerate(cells):
        name = f"t={_fmt(cell.t)} s={_fmt(cell.s)} eps={_fmt(cell.eps)}"
        if not (_is_dyadic(cell.t) and _is_dyadic(cell.s)):
            raise ExportRefused(f"cell {name}: t and s must be dyadic (denominator a power of 2) "
                                "for A(t, s) to be exact in float64")
        if not (cell.closed and cell.verified):
            raise ExportRefused(f"cell {name}: not closed and verified")
        A = two_bit_matrix(cell.t, cell.s)
        a_name = f"A(t={_fmt(cell.t)},s={_fmt(cell.s)})"
        tensors[a_name] = A.to_float64()
        Af = ExactMatrix.from_float64(tensors[a_name])
        if not Af == A:
            raise ExportRefused(f"cell {name}: A did not round-trip through float64")
        uc = cell.upper_candidate
        if uc.kind == "trivial":
            upper = Claim.of(cell.upper, "trivial")
        else:
            assert isinstance(uc.witness, UpperFactors)       # every upper side but the trivial one
            P, Q = _to_exact_image(uc.witness.P), _to_exact_image(uc.witness.Q)
            if not check_upper(A, UpperFactors(P, Q), cell.eps, uc.rank).verified:
                raise ExportRefused(f"cell {name}: the float64 image of the upper witness does not verify")
            tensors[f"c{n}.P"], tensors[f"c{n}.Q"] = P.to_float64(), Q.to_float64()
            upper = Claim.of(cell.upper, "factors", P=f"c{n}.P", Q=f"c{n}.Q")
        lower = None
        candidates = [x for x in cell.lower_tests if x.rank == cell.lower and x.verified]
        if cell.lower == 0 or not candidates:
            lower = Claim.of(cell.lower, "trivial")
        for test in candidates:
            if test.kind == "trivial":
                lower = Claim.of(cell.lower, "trivial")
            elif test.kind == "frobenius":
                lower = Claim.of(cell.lower, "frobenius", k=test.witness.k)
            else:
                w = test.witness
                R, X, L = (_to_exact_image(m) for m in (w.R, w.X, w.L))
                if not check_lower(A, ReconstructionWitness(R, X, L), cell.eps, cell.lower).verified:
                    continue
                tensors[f"c{n}.R"], tensors[f"c{n}.X"], tensors[f"c{n}.L"] = (
                    R.to_float64(), X.to_float64(), L.to_float64())
                lower = Claim.of(cell.lower, "reconstruction", R=f"c{n}.R", X=f"c{n}.X", L=f"c{n}.L")
            break
        if lower is None:
            raise ExportRefused(f"cell {name}: no lower witness survives float64 rounding")
        out.append(CellSpec(f"twobit {name}", format_rational(cell.eps), TargetSpec(a_name), lower, upper,
                            {"oracle": "oracles.twobit", "t": _fmt(cell.t), "s": _fmt(cell.s),
                             "lower_test": cell.lower_test.test, "upper_witness": uc.kind}))
    assert all(isinstance(v, np.ndarray) for v in tensors.values())
    write_bracket_file(path, out, tensors)


# --------------------------------------------------------------------------- CLI
def _cell_table(rows: list[tuple[CellResult, int | None]]) -> str:
    head = f"{'t':>5} {'s':>5} {'eps':>6}  {'L':>2} {'U':>2}  {'closed':6} {'verified':8}  " \
           f"{'upper witness':36} {'lower witness':44}"
    if any(p is not None for _, p in rows):
        head += " paper"
    lines = [head, "-" * len(head)]
    for c, paper in rows:
        uc, lt = c.upper_candidate, c.lower_test
        up = f"{uc.kind} {{{','.join(uc.characters)}}} err {_fmt(uc.error)}" if uc.characters else \
            f"{uc.kind} err {_fmt(uc.error)}"
        lo = f"{lt.test} {lt.norm_name}={_fmt(lt.norm)} margin {_fmt(lt.margin)}" if lt.norm is not None \
            else lt.test
        line = (f"{_fmt(c.t):>5} {_fmt(c.s):>5} {_fmt(c.eps):>6}  {c.lower:>2} {c.upper:>2}  "
                f"{'yes' if c.closed else 'NO':6} {'yes' if c.verified else 'NO':8}  {up:36} {lo:44}")
        if paper is not None:
            line += f" {paper}" + ("" if paper == c.lower == c.upper else "  MISMATCH")
        lines.append(line)
    return "\n".join(lines)


def _tests_block(c: CellResult) -> str:
    target = max(x.rank for x in c.lower_tests)
    lines = [f"cell t={_fmt(c.t)} s={_fmt(c.s)} eps={_fmt(c.eps)}: lower tests for rank {target}, "
             f"weakest first"]
    for x in c.lower_tests:
        if x.rank == 0:
            lines.append(f"  {x.test:26} rank 0: every rank is >= 0 -> verified")
            continue
        where = f" on span{{{','.join(x.subspace)}}}" if x.subspace else ""
        status = "verified" if x.verified else ("passes" if x.passes else "fails")
        opt = " (LP optimum, dual certificate checked)" if x.optimal and x.test.startswith("lp_") else ""
        lines.append(f"  {x.test:26} rank {x.rank}{where}: {x.norm_name} = {_fmt(x.norm)}, "
                     f"margin {_fmt(x.margin)} -> {status}{opt}" + (f" [{x.note}]" if x.note else ""))
    for p in c.problems:
        lines.append(f"  PROBLEM: {p}")
    return "\n".join(lines)


def _facts_text(rs: RowStochasticFact, h: HierarchyFact) -> str:
    ok = lambda b: "proved" if b else "NOT PROVED"
    verdict = lambda x: "verified" if x.verified else ("passes" if x.passes else "fails")
    c = rs.cell
    f2 = h.frobenius_f2
    lines = [
        f"Fact 1 (t = s = 3/4, eps = {_fmt(PAPER_RS_EPS)}): {ok(rs.holds)}",
        f"  unrestricted: [{c.lower}, {c.upper}] via {c.upper_candidate.kind} "
        f"(error {_fmt(c.upper_candidate.error)}) and {c.lower_test.test} lower",
        f"  best row-stochastic rank-one error = {_fmt(rs.rank_one_error)} at p = "
        f"({', '.join(_fmt(v) for v in rs.p)}), LP optimum with dual certificate "
        f"(paper: {_fmt(PAPER_RS_RANK_ONE_ERROR)}) > eps",
        f"  row-stochastic rank-two B on span{{{','.join(rs.rank_two_characters)}}}: error "
        f"{_fmt(rs.rank_two_error)} <= eps, entries >= 0, rows sum to 1: "
        f"{'verified' if rs.rank_two_stochastic and rs.rank_two_verdict.verified else 'NOT verified'}",
        f"  so the minimum row-stochastic rank is 2 while r_eps = {c.upper}" if rs.holds
        else "  the row-stochastic rank gap is NOT shown",
        f"Fact 2 (t = s = 3/4, eps = {_fmt(PAPER_H_EPS)}): {ok(h.holds)}",
        f"  Frobenius tail k=2: F_2^2 = {_fmt(h.frobenius.norm)}" + (f" (F_2 = {_fmt(f2)})" if f2 else "")
        + f" vs 4 eps^2 = {_fmt(M_ROWS * PAPER_H_EPS ** 2)}: {verdict(h.frobenius)}",
        f"  truncated pseudo-inverse rank 3: ||R|| = {_fmt(h.pinv.norm)}, margin {_fmt(h.pinv.margin)}: "
        f"{verdict(h.pinv)}",
        f"  LP-optimal reconstruction on span{{{','.join(h.lp.subspace or ())}}}: ||R|| = {_fmt(h.lp.norm)} "
        f"(optimal, dual certificate), margin {_fmt(h.lp.verdict.margin if h.lp.verdict else None)}: "
        f"{verdict(h.lp)}",
        f"  upper: rank {h.cell.upper_candidate.rank} {h.cell.upper_candidate.kind} error "
        f"{_fmt(h.cell.upper_candidate.error)}: bracket [{h.cell.lower}, {h.cell.upper}]",
    ]
    return "\n".join(lines)


def _parse(text: str, name: str) -> fmpq:
    value = parse_rational(text)
    if name in ("t", "s") and not 0 <= value <= 1:
        raise MalformedInput(f"{name} must lie in [0, 1], got {text}")
    if name == "eps" and value < 0:
        raise MalformedInput(f"eps must be >= 0, got {text}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (exit 2) instead of the usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (also rendered into the CLI reference of the docs)."""
    parser = _Parser(prog="python -m oracles.twobit", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--t", help="t in [0, 1], a rational like 3/4 or an exact decimal")
    parser.add_argument("--s", help="s in [0, 1]")
    parser.add_argument("--eps", help="eps >= 0")
    parser.add_argument("--json", action="store_true", help="print a JSON array, one object per cell")
    parser.add_argument("--export", metavar="FILE",
                        help="write the cells as a bracket file (format v1) in an existing directory")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)

    given = [v is not None for v in (args.t, args.s, args.eps)]
    try:
        if args.export:
            # refused before any work: a link, a directory, a FIFO, a device, a directory that does not exist
            check_target(args.export, parent_exists=True)
        if any(given) and not all(given):
            raise MalformedInput("--t, --s and --eps go together")
        rows: list[tuple[CellResult, int | None]]
        facts: tuple[RowStochasticFact, HierarchyFact] | None
        if all(given):
            rows = [(solve_cell(_parse(args.t, "t"), _parse(args.s, "s"), _parse(args.eps, "eps")), None)]
            facts = None
        else:
            rows = list(paper_cells())
            facts = (row_stochastic_fact(), hierarchy_fact())
        if args.export:
            export_cells(args.export, [c for c, _ in rows])
    except (MalformedInput, ExportRefused, SafeIOError) as exc:
        print(f"python -m oracles.twobit: error: {exc}", file=sys.stderr)
        return ExitCode.MALFORMED
    except OSError as exc:
        print(f"python -m oracles.twobit: error: cannot write {escape(args.export)}: "
              f"{exc.strerror or type(exc).__name__}", file=sys.stderr)
        return ExitCode.MALFORMED
    ok = all(c.closed and c.verified and (p is None or p == c.lower) for c, p in rows)
    if facts is not None:
        ok = ok and all(f.holds for f in facts)
    if args.json:
        print(json.dumps([c.to_json() | ({"paper_rank": p} if p is not None else {}) for c, p in rows],
                         indent=1))
    else:
        print(_cell_table(rows))
        print()
        for c, _ in rows:
            print(_tests_block(c))
        if facts is not None:
            print()
            print(_facts_text(*facts))
        if args.export:
            shown = escape(args.export, 4096)
            print(f"\nwrote {len(rows)} cell(s) to {shown}; check with: python -m exact verify {shown}")
        print("\nall cells closed and verified" if ok else "\nNOT all cells closed and verified")
    return ExitCode.OK if ok else ExitCode.REFUTED


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

"""The convex cap of an open cell: the float search for a cover witness (``exact.cap``).

For a width ``w`` the columns, in one of a few orders, are cut into
contiguous blocks of ``w`` columns (``column_blocks``), or covered by the n
cyclic windows of ``w`` consecutive columns, each with weight ``1/w``
(``cyclic_windows``: on ``I_n`` they reach the trace bound
``n (1 - eps) / (1 + eps)``, where a partition needs a whole block). With
``a_iJ`` the (weighted) l1 mass of row i on set J, one LP asks whether amounts
``e_iJ`` exist with (the common row ``mu`` is 0)::

    minimise  sum_J c_J   over c_J >= 0, 0 <= e_iJ <= a_iJ
    subject to  c_J >= a_iJ - e_iJ,   sum_J e_iJ <= eps - slack  (every row i)

and the witness proves the cap ``r = w`` when the optimum is at most
``R = ||A0||_row1 + slack + eps``. ``mu = 0`` loses nothing for given sets: by
the triangle inequality ``max_i (p_iJ - e_iJ) + ||mu||_{1,J} >= max_i (a_iJ - e_iJ)``
(the weighted norm of mu on J; the weights of a column sum to 1), so a common
row never lowers ``||mu||_1 + sum_J c_J``, and it takes one column of each set.
Only pairs with ``a_iJ > max_i' a_i'J - (eps - slack)`` can need ``e_iJ > 0``
(every ``c_J`` is at least ``max_i a_iJ - (eps - slack)``), so the LP has a
variable for those pairs only; before any LP, two guesses are tried (no LP),
and a dual solution above R refutes a width (no LP).

Orders: natural (keys are token positions: local and QK^T-shaped heads are
banded), columns by the row of their largest entry, and by the second right
singular vector of the centred matrix (a spectral order, from a fixed-start
subspace iteration). Width ``n`` (one block) always works with ``e = 0``. The
widths are searched by doubling, then by bisection between the last width
that failed and the first that worked. This relies on feasibility being
monotone in ``w``, which holds for nested partitions (a coarser partition of
the same order never needs more: merge the blocks' ``e``) but only roughly
otherwise, so the cap found is *a* width that verified, not always the least
one: every witness is sound on its own, a smaller one would only be a
stronger diagnostic.

The budget counts work, never seconds: blocks are searched first, with up
to ``max_lps`` LPs; then windows, below the blocks' cap, with up to ``max_lps``
LPs of ``max_amounts`` variables in all (their LPs are the large ones). Every witness is rounded
(``e`` shrunk by a relative 1e-9, clipped and rounded down to a dyadic grid)
and checked with ``exact.cap`` before it is returned: a witness that does not
verify exactly is never returned. Float tier: the exact tier re-checks the
witness in the bracket file.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from flint import fmpq

from exact.cap import CAP_KIND, WINDOWS_KIND, CapTarget, check_cap
from exact.cellspec import Claim
from exact.matrix import ExactMatrix

from .lp import LPFailed, solve_lp

__all__ = ["CapWitness", "convex_cap", "cap_claim", "open_cell_caps", "ORDERS", "MAX_CAP_LPS", "MAX_CAP_AMOUNTS"]

#: LPs one cell may spend on its convex cap (each is one HiGHS solve).
MAX_CAP_LPS = 24
#: Variables ``e_iJ`` that the LPs of windows may have in all, per cell (an LP that does not fit is not
#: solved): about 1 s per 10,000 on one core (windows on 128 x 128 heads).
MAX_CAP_AMOUNTS = 20_000
#: HiGHS iteration limit of one cap LP.
CAP_LP_ITERATIONS = 20_000
#: Relative safety margins of the float witness: ``e`` is shrunk by ``SHRINK``; a width counts as feasible in
#: floats when its objective is at most ``R (1 - FEAS)``.
SHRINK, FEAS = 1e-9, 1e-7
#: The amounts are rounded down to multiples of ``1 / GRID`` (2^-40: far below ``FEAS``), so that their
#: exact images are short integers.
GRID = 2.0**40
#: The most amounts ``e_iJ`` one LP may have (the LP restricted to the pairs above a floor is still a
#: valid witness: the other pairs keep ``e_iJ = 0`` below ``c_J``).
MAX_PAIRS = 20_000
#: The LP's floors, as fractions of the proportional guess of ``_guess``: tried in turn.
FLOORS = (0.5,)
ORDERS = ("natural", "argmax", "spectral")
#: Steps of the subspace iteration behind the spectral order (an approximate vector is enough: every order
#: gives valid witnesses).
SPECTRAL_STEPS = 30


@dataclass(frozen=True)
class CapWitness:
    """A cover witness that verified exactly: cap ``rank``, its ``kind`` (``column_blocks`` or
    ``cyclic_windows``), ``line`` (1 x n: the block labels, or the order of the windows), ``width`` (of the
    windows), ``mu`` (1 x n), amounts ``e`` (m x sets), the column ``order`` it used, the ``lps`` spent and
    the exact ``margin``."""

    rank: int
    kind: str
    line: np.ndarray
    width: int
    mu: np.ndarray
    e: np.ndarray
    order: str
    lps: int
    margin: Fraction

    def fields(self) -> dict[str, np.ndarray | int]:
        """The witness fields of ``exact.cap.check_cap`` (and of the file, by name)."""
        line: dict[str, np.ndarray | int] = (
            {"blocks": self.line} if self.kind == CAP_KIND else {"order": self.line, "width": self.width})
        return {**line, "mu": self.mu, "e": self.e}


def _order(A: np.ndarray, name: str) -> np.ndarray:
    """A permutation of the columns (stable, deterministic)."""
    n = A.shape[1]
    if name == "natural":
        return np.arange(n)
    if name == "argmax":
        return np.lexsort((np.arange(n), A.argmax(axis=0)))
    C = A - A.mean(axis=0, keepdims=True)
    V = np.linalg.qr(np.cos(np.outer(np.arange(n), [1.0, 2.0]) * np.pi / max(n, 1)))[0][:, :min(2, n)]
    for _ in range(SPECTRAL_STEPS):                       # subspace iteration on C^T C: the top two vectors
        V = np.linalg.qr(C.T @ (C @ V))[0]
    w, U = np.linalg.eigh(V.T @ (C.T @ (C @ V)))
    v = (V @ U[:, np.argsort(-w)])[:, -1]                 # the second (or only) right singular vector
    v = v if v[np.argmax(np.abs(v))] >= 0 else -v        # a sign convention: the same order every time
    return np.lexsort((np.arange(n), v))


def _window_masses(absA: np.ndarray, order: np.ndarray, width: int) -> np.ndarray:
    """``a_it``: the mass of row i on the ``width`` columns from position t of ``order`` (cyclically), over
    ``width`` (each window's weight)."""
    n = order.size
    B = absA[:, np.concatenate([order, order])]
    cs = np.concatenate([np.zeros((absA.shape[0], 1)), np.cumsum(B, axis=1)], axis=1)
    return np.asarray((cs[:, width:width + n] - cs[:, :n]) / width)


def _labels(order: np.ndarray, width: int) -> np.ndarray:
    labels = np.empty(order.size, dtype=np.float64)
    labels[order] = np.arange(order.size) // width
    return labels


def _refuted(a: np.ndarray, budget: float, R: float) -> bool:
    """True when the LP's dual proves its optimum above ``R``: with ``z_i = 1/t`` and ``y_iJ = 1/t`` on the
    ``t`` largest ``a_iJ`` of each block, ``sum_J mean of the top t - budget m / t`` is a lower bound."""
    m = a.shape[0]
    top = -np.sort(-a, axis=0).cumsum(axis=0)                     # top[t-1, J] = sum of the t largest
    t = np.unique(np.minimum(m, 2 ** np.arange(int(np.log2(m)) + 1)))
    bounds = top[t - 1].sum(axis=1) / t - budget * m / t
    return bool(bounds.max() > R * (1 + FEAS))


def _guess(a: np.ndarray, budget: float, R: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Levels ``c`` with ``sum c = R (1 - FEAS)``, proportional to the block maxima or a common water level
    (no LP), and ``e = (a - c)_+``: the first whose rows stay within ``budget``, or None."""
    top, goal = a.max(axis=0), R * (1 - FEAS)
    if top.sum() <= goal:
        return top, np.zeros_like(a)
    levels = [top * goal / top.sum()]
    lo, hi = 0.0, float(top.max())                                # water level: sum min(top, lam) = goal
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.minimum(top, mid).sum() < goal else (lo, mid)
    levels.append(np.minimum(top, lo))
    for c in levels:
        e = np.maximum(a - c[None, :], 0.0)
        if e.sum(axis=1).max() <= budget * (1 - FEAS):
            return c, e
    return None


def _pairs(a: np.ndarray, budget: float, floor: np.ndarray) -> int:
    """The amounts ``e_iJ`` that ``_lp`` gives a variable (its size)."""
    return int((a > np.maximum(floor, a.max(axis=0) - budget)[None, :]).sum())


def _lp(a: np.ndarray, budget: float, floor: np.ndarray) -> np.ndarray:
    """The LP of the module docstring on the block masses ``a`` (m x k), with a variable ``e_iJ`` only where
    ``a_iJ > floor_J`` (and ``c_J >= floor_J``): its optimal ``e`` (``LPFailed`` when HiGHS fails)."""
    m, k = a.shape
    floor = np.maximum(floor, a.max(axis=0) - budget)
    pairs = np.argwhere(a > floor[None, :])               # (i, J) that may need e_iJ > 0
    if len(pairs) > MAX_PAIRS:
        raise LPFailed(f"{len(pairs)} amounts, limit {MAX_PAIRS}")
    lb_c = np.maximum(floor, 0.0)
    P = len(pairs)
    nv = k + P
    cost = np.concatenate([np.ones(k), np.zeros(P)])
    rows = np.arange(P)
    # -c_J - e_p <= -a_p for every pair p; sum_{p in row i} e_p <= budget
    A1 = sp.csr_matrix((np.concatenate([-np.ones(P), -np.ones(P)]),
                        (np.concatenate([rows, rows]), np.concatenate([pairs[:, 1], k + rows]))), shape=(P, nv))
    A2 = sp.csr_matrix((np.ones(P), (pairs[:, 0], k + rows)), shape=(m, nv))
    values = a[pairs[:, 0], pairs[:, 1]]
    x, _ = solve_lp(cost, A_ub=sp.vstack([A1, A2]), b_ub=np.concatenate([-values, np.full(m, budget)]),
                    lb=np.concatenate([lb_c, np.zeros(P)]), ub=np.concatenate([np.full(k, np.inf), values]),
                    iterations=CAP_LP_ITERATIONS)
    e = np.zeros((m, k))
    e[pairs[:, 0], pairs[:, 1]] = x[k:]
    return e


def _rounded(a: np.ndarray, e: np.ndarray, budget: float) -> np.ndarray:
    """``e`` shrunk into the exact conditions: ``0 <= e <= a (1 - SHRINK)``, row sums ``<= budget (1 - SHRINK)``,
    rounded down to the grid."""
    e = np.clip(e * (1 - SHRINK), 0.0, a * (1 - SHRINK))
    sums = e.sum(axis=1)
    over = sums > budget * (1 - SHRINK)
    if over.any():
        e[over] *= (budget * (1 - 2 * SHRINK) / sums[over])[:, None]
    return np.floor(e * GRID) / GRID                      # rounded down: short dyadics, cheap to check exactly


class _Search:
    def __init__(self, A: np.ndarray, eps: Fraction, slack: Fraction, max_lps: int, max_amounts: int):
        self.A, self.eps, self.slack, self.max_lps = A, eps, slack, max_lps
        self.absA = np.abs(A)
        self.budget = float(eps - slack)
        self.R = float(np.abs(A).sum(axis=1).max()) + float(slack) + float(eps)
        self.orders: dict[str, np.ndarray] = {}
        self.lps, self.spent, self.amounts_left = 0, 0, max_amounts
        self.target = CapTarget(ExactMatrix.from_float64(A, "target"))   # converted once, for every check

    def order(self, name: str) -> np.ndarray:
        if name not in self.orders:
            self.orders[name] = _order(self.A, name)
        return self.orders[name]

    def width(self, w: int, kind: str) -> CapWitness | None:
        """A verified witness of ``kind`` (blocks, or cyclic windows) of ``w`` columns in some order, or None."""
        n = self.A.shape[1]
        if kind == WINDOWS_KIND and not 1 < w < n:       # windows of width 1 or n are blocks
            return None
        names = ORDERS if 1 < w < n else ORDERS[:1]      # one block per column, or one block: any order
        tries = []
        for name in names:
            order = self.order(name)
            if kind == CAP_KIND:
                line = _labels(order, w)
                a = np.zeros((self.A.shape[0], int(line.max()) + 1))
                np.add.at(a.T, line.astype(np.int64), self.absA.T)
            else:
                line, a = order.astype(np.float64), _window_masses(self.absA, order, w)
            if not _refuted(a, self.budget, self.R):      # else the LP's dual is above R: no LP needed
                tries.append((name, line, a))
        for lp in (False, True):                          # the guesses of every order first, then LPs
            for name, line, a in tries:
                e = self.amounts(a, lp)
                witness = None if e is None else self.verify(kind, w, line, e, name)
                if witness is not None:
                    return witness
        return None

    def amounts(self, a: np.ndarray, lp: bool) -> np.ndarray | None:
        """Rounded amounts ``e`` whose float objective is within ``R``: from a guess, or (``lp``) from LPs."""
        if a.shape[1] == 1:                                # one block: c = ||A0||_row1 <= R exactly, e = 0
            return None if lp else np.zeros_like(a)
        if not lp:
            guess = _guess(a, self.budget, self.R)
            return None if guess is None else _rounded(a, guess[1], self.budget)
        top = a.max(axis=0)
        for f in FLOORS:
            floor = f * top * self.R / top.sum()
            size = _pairs(a, self.budget, floor)
            if self.lps - self.spent >= self.max_lps or size > min(MAX_PAIRS, self.amounts_left):
                return None                                # beyond the budget: not solved, not spent
            self.lps += 1
            self.amounts_left -= size
            try:
                e = _rounded(a, _lp(a, self.budget, floor), self.budget)
            except LPFailed:
                continue
            if (a - e).max(axis=0).sum() <= self.R * (1 - FEAS):
                return e
        return None

    def verify(self, kind: str, w: int, line: np.ndarray, e: np.ndarray, name: str) -> CapWitness | None:
        mu = np.zeros((1, line.size))
        found = CapWitness(w, kind, line[None, :], w, mu, e, name, self.lps, Fraction(0))
        verdict = check_cap(self.target, kind, found.fields(), fmpq(self.eps.numerator, self.eps.denominator),
                            fmpq(self.slack.numerator, self.slack.denominator), w)
        if not verdict.verified or verdict.margin is None:
            return None
        return replace(found, margin=Fraction(int(verdict.margin.p), int(verdict.margin.q)))


def convex_cap(A0: np.ndarray, eps: Fraction, slack: Fraction = Fraction(0), *,
               max_lps: int = MAX_CAP_LPS, max_amounts: int = MAX_CAP_AMOUNTS,
               below: int | None = None) -> CapWitness | None:
    """The smallest width the search verifies (module docstring), or None (eps < slack, or no witness below
    ``below`` within ``max_lps`` LPs of ``max_amounts`` variables in all). ``A0`` is the checked float64 matrix,
    ``slack`` its proved slack."""
    A = np.ascontiguousarray(A0, dtype=np.float64)
    eps, slack = Fraction(eps), Fraction(slack)
    if eps < slack or A.ndim != 2 or 0 in A.shape:
        return None
    n = A.shape[1]
    top = n if below is None else max(1, min(n, below - 1))
    s = _Search(A, eps, slack, max_lps, n * MAX_PAIRS)   # blocks: LPs counted, each at most MAX_PAIRS
    best = _smallest(s, CAP_KIND, top)
    s.spent, s.amounts_left = s.lps, max_amounts         # then windows below the blocks' cap, on their own budget
    windows = _smallest(s, WINDOWS_KIND, top if best is None else best.rank - 1) if n > 2 else None
    best = windows or best
    return None if best is None else replace(best, lps=s.lps)


def _smallest(s: _Search, kind: str, top: int) -> CapWitness | None:
    """The smallest width at most ``top`` with a verified witness of ``kind`` that doubling and bisection
    find, or None."""
    lo = 1 if kind == CAP_KIND else 2                    # windows of width 1 are blocks
    if top < lo:
        return None
    best, failed, w = None, lo - 1, lo                   # failed: the largest width known to fail
    while best is None:
        best = s.width(w, kind)
        if best is None:
            if w >= top:
                return None
            failed, w = w, min(2 * w, top)               # once the LPs are spent, only the guesses are tried
    hi = best.rank
    while hi - failed > 1:
        mid = (failed + hi) // 2
        found = s.width(mid, kind)
        if found is None:
            failed = mid
        else:
            best, hi = found, mid
    return best


def _claim(found: CapWitness, cid: str) -> tuple[Claim, dict[str, np.ndarray]]:
    """The ``convex_cap`` claim of a witness and its tensors, named after the cell ``cid``."""
    names: dict[str, str | int] = {}
    tensors: dict[str, np.ndarray] = {}
    for key, value in found.fields().items():
        if isinstance(value, int):
            names[key] = value
        else:
            names[key] = f"{cid}/cap_{key}"
            tensors[f"{cid}/cap_{key}"] = value
    return Claim.of(found.rank, found.kind, **names), tensors


def open_cell_caps(A0: np.ndarray, cells: list[tuple[str, str, int, int]], slack: object,
                   max_lps: int = MAX_CAP_LPS) -> list[tuple[Claim | None, dict[str, np.ndarray]]]:
    """The ``convex_cap`` (``exact.cellspec``) and its tensors of each cell ``(eps text, id, L, U)``: for an
    open cell (``L < U``) the search's witness, ``(None, {})`` for a closed one. A witness at a smaller eps
    holds at every larger one (the row budget and R only grow), so the cells are taken by increasing eps,
    each searched below the cap carried from the one before, and the carried witness (its tensors shared)
    kept where the search finds none smaller. ``slack``: an fmpq, a Fraction or None."""
    delta = Fraction(0) if slack is None else Fraction(str(slack))
    out: list[tuple[Claim | None, dict[str, np.ndarray]]] = [(None, {})] * len(cells)
    carried: Claim | None = None
    for i in sorted(range(len(cells)), key=lambda i: Fraction(cells[i][0])):
        eps_text, cid, lower, upper = cells[i]
        found = convex_cap(A0, Fraction(eps_text), delta, max_lps=max_lps,
                           below=None if carried is None else carried.rank)
        if found is not None:
            carried, tensors = _claim(found, cid)
            if lower < upper:
                out[i] = (carried, tensors)
                continue
            out[i] = (None, {})                            # a closed cell: no cap written, its witness unused
            carried = None
        elif lower < upper and carried is not None:
            out[i] = (carried, {})                          # the tensors of the smaller eps' cell
    return out


def cap_claim(A0: np.ndarray, eps_text: str, slack: object, cid: str, lower: int, upper: int,
              *, max_lps: int = MAX_CAP_LPS) -> tuple[Claim | None, dict[str, np.ndarray]]:
    """The ``convex_cap`` of a cell (``exact.cellspec``) and its tensors, for an open cell (``lower < upper``)
    where the search verifies a witness; ``(None, {})`` otherwise. ``slack``: an fmpq, a Fraction or None."""
    return open_cell_caps(A0, [(eps_text, cid, lower, upper)], slack, max_lps)[0]

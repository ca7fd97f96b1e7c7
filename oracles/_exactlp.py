"""Exact rational linear programming for the oracles.

A dense two-phase simplex over ``flint.fmpq`` with Bland's rule (so it
terminates on degenerate problems), and a checker for the primal-dual
certificate it returns. The oracles' LPs are tiny (a handful of rows and
columns), so a textbook tableau is fast enough and every pivot is exact.

The problem form is

    minimise  c . x
    subject to A_ub x <= b_ub,  A_eq x = b_eq,  x_j >= 0 unless j in ``free``,

and its dual (LP duality, e.g. Schrijver, *Theory of Linear and Integer
Programming*, Cor. 7.1g) is

    maximise  b_ub . y_ub + b_eq . y_eq
    subject to y_ub <= 0,  (A_ub^T y_ub + A_eq^T y_eq)_j <= c_j  (x_j >= 0),
                           (A_ub^T y_ub + A_eq^T y_eq)_j  = c_j  (x_j free).

A primal-feasible ``x`` and a dual-feasible ``y`` with equal objective values
prove that both are optimal (weak duality). :func:`solve` returns such a pair
only after :func:`check_certificate` has accepted it, so an optimum reported
by this module is proved, not merely computed.

>>> sol = solve([1, 1], A_ub=[[-1, -2]], b_ub=[-3])   # min x + y, x + 2y >= 3
>>> sol.value, sol.x
(3/2, (0, 3/2))
>>> sol.y_ub                                           # the dual certificate
(-1/2,)
"""
from __future__ import annotations

from dataclasses import dataclass

from flint import fmpq

__all__ = ["LPSolution", "LPError", "Infeasible", "Unbounded", "CertificateFailure",
           "solve", "check_certificate"]


class LPError(ArithmeticError):
    """Base class of the exact LP errors."""


class Infeasible(LPError):
    """The constraints have no solution (phase one ends above zero)."""


class Unbounded(LPError):
    """The objective is unbounded below on the feasible set."""


class CertificateFailure(LPError):
    """A claimed primal-dual pair does not prove optimality (a solver bug)."""


@dataclass(frozen=True)
class LPSolution:
    """An exact optimum with its dual certificate.

    ``value = c . x = b_ub . y_ub + b_eq . y_eq``; ``x`` is primal feasible
    and ``(y_ub, y_eq)`` dual feasible, checked exactly.
    """

    value: fmpq
    x: tuple
    y_ub: tuple
    y_eq: tuple


def _q(v) -> fmpq:
    return v if isinstance(v, fmpq) else fmpq(v)


def _matrix(rows, ncols: int, what: str) -> list[list[fmpq]]:
    out = []
    for row in rows:
        row = [_q(v) for v in row]
        if len(row) != ncols:
            raise ValueError(f"{what}: a row has {len(row)} entries, expected {ncols}")
        out.append(row)
    return out


def _pivot(tab: list[list[fmpq]], cost: list[fmpq], basis: list[int], r: int, j: int) -> None:
    prow = tab[r]
    inv = 1 / prow[j]
    prow = [v * inv for v in prow]
    tab[r] = prow
    for i, row in enumerate(tab):
        if i != r and row[j] != 0:
            f = row[j]
            tab[i] = [a - f * b for a, b in zip(row, prow)]
    if cost[j] != 0:
        f = cost[j]
        cost[:] = [a - f * b for a, b in zip(cost, prow)]
    basis[r] = j


def _simplex(tab, cost, basis, allowed: int) -> None:
    """Bland's rule on columns ``< allowed``; ``cost`` holds reduced costs and,
    in its last entry, minus the objective value."""
    while True:
        entering = next((j for j in range(allowed) if cost[j] < 0), None)
        if entering is None:
            return
        best = None
        for i, row in enumerate(tab):
            a = row[entering]
            if a > 0:
                ratio = row[-1] / a
                if best is None or ratio < best[0] or (ratio == best[0] and basis[i] < basis[best[1]]):
                    best = (ratio, i)
        if best is None:
            raise Unbounded("the LP objective is unbounded below")
        _pivot(tab, cost, basis, best[1], entering)


def _normalise(c, A_ub, b_ub, A_eq, b_eq, free):
    """The LP data as exact rationals, shapes and free indices checked."""
    c = [_q(v) for v in c]
    n = len(c)
    A_ub = _matrix(A_ub, n, "A_ub")
    A_eq = _matrix(A_eq, n, "A_eq")
    b_ub = [_q(v) for v in b_ub]
    b_eq = [_q(v) for v in b_eq]
    if len(b_ub) != len(A_ub) or len(b_eq) != len(A_eq):
        raise ValueError("right-hand side length does not match the constraint rows")
    free = frozenset(free)
    if any(not 0 <= j < n for j in free):
        raise ValueError("free variable index out of range")
    return c, A_ub, b_ub, A_eq, b_eq, free


def solve(c, A_ub=(), b_ub=(), A_eq=(), b_eq=(), free=()) -> LPSolution:
    """Solve the LP of the module docstring exactly and prove the optimum.

    Raises :class:`Infeasible` or :class:`Unbounded`; the returned solution
    has passed :func:`check_certificate`.

    >>> solve([1], A_eq=[[1]], b_eq=[-1])
    Traceback (most recent call last):
    ...
    oracles._exactlp.Infeasible: the LP constraints are infeasible
    """
    c, A_ub, b_ub, A_eq, b_eq, free = _normalise(c, A_ub, b_ub, A_eq, b_eq, free)
    n = len(c)

    # Standard form: column map (original var -> list of (column, sign)).
    cols: list[tuple[int, int]] = []            # (original var or -1 for slack, sign)
    for j in range(n):
        cols.append((j, 1))
        if j in free:
            cols.append((j, -1))
    n_struct = len(cols)
    n_ub = len(A_ub)
    N = n_struct + n_ub                          # structural + slack columns
    rows = A_ub + A_eq
    rhs = b_ub + b_eq
    m = len(rows)
    std = []
    for i, row in enumerate(rows):
        line = [row[j] * sgn for (j, sgn) in cols]
        line += [fmpq(1) if k == i else fmpq(0) for k in range(n_ub)]
        std.append(line)
    std_cost = [c[j] * sgn for (j, sgn) in cols] + [fmpq(0)] * n_ub
    flip = [fmpq(-1) if rhs[i] < 0 else fmpq(1) for i in range(m)]
    # Tableau [A' | I (artificials) | b'], rows sign-normalised so b' >= 0.
    tab = []
    for i in range(m):
        tab.append([v * flip[i] for v in std[i]]
                   + [fmpq(1) if k == i else fmpq(0) for k in range(m)]
                   + [rhs[i] * flip[i]])
    basis = [N + i for i in range(m)]
    # Phase one: minimise the sum of the artificials.
    cost = [fmpq(0)] * N + [fmpq(1)] * m + [fmpq(0)]
    for row in tab:
        cost = [a - b for a, b in zip(cost, row)]
    _simplex(tab, cost, basis, N)
    if cost[-1] != 0:
        raise Infeasible("the LP constraints are infeasible")
    # Drive zero-level artificials out of the basis where a structural column allows.
    for r in range(m):
        if basis[r] >= N:
            col = next((j for j in range(N) if tab[r][j] != 0), None)
            if col is not None:
                _pivot(tab, cost, basis, r, col)
            # else: redundant row; its artificial stays basic at level zero forever.
    # Phase two: reduced costs of the true objective (artificials cost 0, never enter).
    full_cost = std_cost + [fmpq(0)] * m
    cost = full_cost + [fmpq(0)]
    for r, b in enumerate(basis):
        if full_cost[b] != 0:
            f = full_cost[b]
            cost = [a - f * v for a, v in zip(cost, tab[r])]
    _simplex(tab, cost, basis, N)

    z = [fmpq(0)] * N
    for r, b in enumerate(basis):
        if b < N:
            z[b] = tab[r][-1]
    x = [fmpq(0)] * n
    for k, (j, sgn) in enumerate(cols):
        x[j] += z[k] * sgn
    # Duals y'^T = c_B^T B^-1; B^-1 sits in the artificial columns of the tableau.
    y_std = []
    for i in range(m):
        acc = fmpq(0)
        for r, b in enumerate(basis):
            if full_cost[b] != 0:
                acc += full_cost[b] * tab[r][N + i]
        y_std.append(acc * flip[i])
    sol = LPSolution(value=sum((c[j] * x[j] for j in range(n)), fmpq(0)), x=tuple(x),
                     y_ub=tuple(y_std[:n_ub]), y_eq=tuple(y_std[n_ub:]))
    check_certificate(c, A_ub, b_ub, A_eq, b_eq, free, sol=sol)
    return sol


def check_certificate(c, A_ub, b_ub, A_eq, b_eq, free, *, sol: LPSolution) -> None:
    """Raise :class:`CertificateFailure` unless ``sol`` proves optimality exactly.

    Checks primal feasibility of ``x``, dual feasibility of ``(y_ub, y_eq)``
    and equality of the two objective values (weak duality then gives
    optimality of both).

    >>> check_certificate([1], [], [], [[1]], [1], (), sol=LPSolution(fmpq(1), (fmpq(1),), (), (fmpq(0),)))
    Traceback (most recent call last):
    ...
    oracles._exactlp.CertificateFailure: duality gap: primal 1, dual 0
    """
    c, A_ub, b_ub, A_eq, b_eq, free = _normalise(c, A_ub, b_ub, A_eq, b_eq, free)
    n = len(c)
    x, y_ub, y_eq = sol.x, sol.y_ub, sol.y_eq
    if len(x) != n or len(y_ub) != len(A_ub) or len(y_eq) != len(A_eq):
        raise CertificateFailure("certificate has the wrong dimensions")
    for j in range(n):
        if j not in free and x[j] < 0:
            raise CertificateFailure(f"x[{j}] = {x[j]} < 0")
    for i, row in enumerate(A_ub):
        lhs = sum((a * v for a, v in zip(row, x)), fmpq(0))
        if lhs > b_ub[i]:
            raise CertificateFailure(f"inequality row {i} violated: {lhs} > {b_ub[i]}")
    for i, row in enumerate(A_eq):
        lhs = sum((a * v for a, v in zip(row, x)), fmpq(0))
        if lhs != b_eq[i]:
            raise CertificateFailure(f"equality row {i} violated: {lhs} != {b_eq[i]}")
    if any(y > 0 for y in y_ub):
        raise CertificateFailure("a dual multiplier of an inequality is positive")
    for j in range(n):
        col = sum((A_ub[i][j] * y_ub[i] for i in range(len(A_ub))), fmpq(0))
        col += sum((A_eq[i][j] * y_eq[i] for i in range(len(A_eq))), fmpq(0))
        if (j in free and col != c[j]) or (j not in free and col > c[j]):
            raise CertificateFailure(f"dual constraint of variable {j} violated: {col} vs cost {c[j]}")
    primal = sum((a * v for a, v in zip(c, x)), fmpq(0))
    dual = sum((a * v for a, v in zip(b_ub, y_ub)), fmpq(0)) + sum((a * v for a, v in zip(b_eq, y_eq)), fmpq(0))
    if primal != dual or sol.value != primal:
        raise CertificateFailure(f"duality gap: primal {primal}, dual {dual}")

"""The convex cap of a cell: a cover witness that no convex certificate can prove ``r_eps(A) > r``.

It is a diagnostic for an open bracket, not a claim about ``r_eps``: the lower
and upper verdicts never depend on it (``docs/explanation/convex-cap.md``).

*Lemma (convex cap).* Let ``A0`` be the checked matrix, ``||A - A0||_row1 <= delta``
for the true head A (delta = the proved slack, 0 for a plain matrix target),
``eps >= delta``, ``R = ||A0||_row1 + delta + eps`` and
``K_r = {B : rank B <= r, ||B||_row1 <= R}``. Every B of rank <= r with
``||A - B|| <= eps`` lies in ``K_r``, so a convex set ``C`` that contains ``K_r``
and misses ``A - eps Ball`` proves ``r_eps(A) > r``; no such C exists when
``A in conv(K_r) + eps Ball``. A *cover witness* shows that: weights
``phi_tj >= 0`` (sets t = 1..T) with ``sum_t phi_tj = 1`` for every column j,
row t supported on a set ``S_t`` of columns, a row ``mu`` and amounts
``e_it >= 0``; with ``p_it = sum_j phi_tj |A0_ij - mu_j|`` and
``c_t = max_i (p_it - e_it)``:

1. ``r >= 1``; every set has at most ``r`` columns, at most ``r - 1`` when ``mu != 0``;
2. ``0 <= e_it <= p_it``;
3. ``sum_t e_it <= eps - delta`` for every row i;
4. ``||mu||_1 + sum_t c_t <= R``.

Two kinds: ``column_blocks`` (a partition of the columns into blocks, phi 0 or
1) and ``cyclic_windows`` (the ``w`` consecutive columns from position t of an
order, cyclically, for t = 1..n, each with ``phi = 1/w``: every column lies in
exactly w windows).

*Proof.* With ``d_ij = A0_ij - mu_j``, let ``E_t[i, j] = (e_it / p_it) phi_tj d_ij``
(0 when ``p_it = 0``) and ``E = sum_t E_t``: row i of E has l1 norm at most
``sum_t e_it <= eps - delta``, so ``||A - (A0 - E)|| <= eps``. ``P_t[i, j] =
phi_tj d_ij - E_t[i, j]`` lives on the columns of ``S_t``, its rows have l1
norm ``p_it - e_it <= c_t`` (by 2), and ``sum_t P_t = A0 - 1 mu^T - E``
because the weights of a column sum to 1. With ``s = R - ||mu||_1`` and
``lambda_t = c_t / s`` (sets with ``c_t = 0`` have ``P_t = 0`` and are left
out), ``B_t = 1 mu^T + P_t / lambda_t`` has rank <= 1 + |S_t| (|S_t| when mu = 0),
so <= r, and row norms <= ``||mu||_1 + s = R``: ``B_t in K_r``. By 4,
``sum lambda_t <= 1``; the rest of the weight goes to ``1 mu^T`` (rank <= 1, norm
<= R; the zero matrix when mu = 0). The combination is
``(sum lambda_t) 1 mu^T + sum_t P_t + (1 - sum lambda_t) 1 mu^T = A0 - E``. QED.

The check reads the target, ``mu`` and ``e`` as exact dyadic rationals (the
target's integers over its power-of-two denominator, made once per target:
``CapTarget``), sums ``|A0_ij - mu_j|`` over the sets in Python integers
(windows by prefix sums along the order), and decides 1-4 exactly; its margin
is ``R - ||mu||_1 - sum_t c_t``. The shapes, labels and orders are validated
by the reader (``exact.bracketfile``); here they are checked again and fail
closed.
"""
from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate

import numpy as np
from flint import fmpq

from .limits import charge
from .matrix import ExactMatrix, _words
from .verdict import Verdict, refuted, verified

__all__ = ["CAP_KIND", "WINDOWS_KIND", "CapTarget", "check_cap"]

#: The witness kinds of a convex cap: a partition into blocks, and cyclic windows along an order.
CAP_KIND = "column_blocks"
WINDOWS_KIND = "cyclic_windows"
#: Work units per word of a Python integer step (the block sums are Python, about 2^7 times slower per
#: step than FLINT, as the odd map's facet walk: ``exact.limits``).
PYTHON_STEP = 2**7


def _blocks(labels: np.ndarray, k: int) -> list[list[int]] | None:
    """The columns of each of the ``k`` blocks, or None when a label is not an integer in ``[0, k)``."""
    out: list[list[int]] = [[] for _ in range(k)]
    for j, x in enumerate(labels.tolist()):
        if not (isinstance(x, float) and x.is_integer() and 0 <= x < k):
            return None
        out[int(x)].append(j)
    return out


def _permutation(order: np.ndarray) -> list[int] | None:
    """``order`` as a list of ints when it is a permutation of ``0..n-1``, else None."""
    values = order.tolist()
    if not all(isinstance(x, float) and x.is_integer() for x in values):
        return None
    ints = [int(x) for x in values]
    return ints if sorted(ints) == list(range(len(ints))) else None


class CapTarget:
    """A target's exact integer entries and row-l1 norm, made once for every cap checked on it."""

    __slots__ = ("matrix", "_rows")

    def __init__(self, matrix: ExactMatrix):
        self.matrix = matrix
        self._rows: tuple[list[int], int] | None = None

    def rows(self) -> tuple[list[int], int]:
        """(the numerators row-major, over ``matrix.den``; the largest row sum of their absolute values)."""
        if self._rows is None:
            (m, n), M = self.matrix.shape, self.matrix
            charge(PYTHON_STEP * m * n * _words(M.bits), "the integer entries of a cap's target")
            ints = [int(x) for x in M.num.entries()]
            self._rows = ints, max(sum(map(abs, ints[i * n:(i + 1) * n])) for i in range(m))
        return self._rows


def check_cap(target: CapTarget, kind: str, fields: Mapping[str, np.ndarray | int], eps: fmpq, delta: fmpq,
              rank: int) -> Verdict:
    """Conditions 1-4 of the module's lemma for a witness of ``kind`` with ``fields`` (tensors as arrays, the
    width as an int), exactly: the cap ``rank`` is verified or refuted with a reason."""
    def no(why: str, margin: fmpq | None = None) -> Verdict:
        return refuted(kind, rank, why, margin)

    (m, n) = target.matrix.shape
    mu, e = np.asarray(fields["mu"]), np.asarray(fields["e"])
    if kind == CAP_KIND:
        labels = np.asarray(fields["blocks"])
        k = e.shape[1] if e.ndim == 2 else 0
        if labels.shape != (1, n) or k < 1:
            return no(f"shapes: blocks {labels.shape}, e {e.shape} (need 1 x {n}, {m} x k with k >= 1)")
        sets = _blocks(labels[0], k)
        if sets is None:
            return no(f"a block label is not an integer in [0, {k})")
        weight = 1
    elif kind == WINDOWS_KIND:
        order, width = np.asarray(fields["order"]), fields["width"]
        if order.shape != (1, n) or not isinstance(width, int) or not 1 <= width <= n:
            return no(f"order {order.shape} and width {width!r} (need 1 x {n} and 1 <= width <= {n})")
        perm = _permutation(order[0])
        if perm is None:
            return no("order is not a permutation of the columns")
        sets, weight = [perm], width                          # the windows, as their order (prefix sums)
    else:
        return no(f"unknown cap kind {kind!r}")
    k = n if kind == WINDOWS_KIND else len(sets)
    if mu.shape != (1, n) or e.shape != (m, k):
        return no(f"shapes: mu {mu.shape}, e {e.shape} (need 1 x {n}, {m} x {k})")
    if rank < 1:
        return no("a convex cap has rank >= 1")
    with_mu = bool(np.any(mu != 0))
    allowed = rank - 1 if with_mu else rank
    widest = weight if kind == WINDOWS_KIND else max(len(b) for b in sets)
    if widest > allowed:
        return no(f"a set has {widest} columns, rank {rank} allows {allowed}"
                  + (" (a nonzero mu takes one)" if with_mu else ""))
    if bool(np.any(e < 0)):
        return no("an amount e_iJ is negative")
    budget = eps - delta
    if budget < 0:
        return no("eps < slack")

    ints, widest_row = target.rows()
    DA = int(target.matrix.den)
    M, E = ExactMatrix.from_float64(mu, "mu"), ExactMatrix.from_float64(e, "e")
    D = max(DA, int(M.den))                                   # powers of two: their lcm is the larger
    sA = D // DA
    mu_int = [int(x) * (D // int(M.den)) for x in M.num.entries()]
    DW, De = D * weight, int(E.den)                           # p_iJ is a sum over D, times 1/weight
    e_int = [int(x) for x in E.num.entries()]
    charge(PYTHON_STEP * (2 * m * n * _words(max(target.matrix.bits, M.bits) + 64) + m * k * _words(E.bits)),
           "the block sums of a convex cap")
    caps = [0] * k                                            # c_J * DW * De
    for i in range(m):
        row = ints[i * n:(i + 1) * n]
        diff = [abs(row[j] * sA - mu_int[j]) for j in range(n)] if with_mu else [abs(x) for x in row]
        for J, p in enumerate(_sums(diff, sets, weight, kind)):   # p_iJ * DW
            eJ = e_int[i * k + J]                             # e_iJ * De
            if eJ * DW > p * De:
                return no(f"e_iJ > p_iJ at row {i}, set {J}")
            caps[J] = max(caps[J], p * De - eJ * DW)
        used = sum(e_int[i * k:(i + 1) * k])
        if fmpq(used, De) > budget:
            return no(f"row {i}: sum_J e_iJ > eps - slack", budget - fmpq(used, De))
    R = fmpq(widest_row, DA) + delta + eps
    total = fmpq(sum(map(abs, mu_int)), D) + fmpq(sum(caps), DW * De)
    margin = R - total
    if margin < 0:
        return no("||mu||_1 + sum_J c_J > ||A0||_row1 + slack + eps", margin)
    return verified(kind, rank, margin)


def _sums(diff: list[int], sets: list[list[int]], width: int, kind: str) -> list[int]:
    """The sum of ``diff`` over each set: blocks directly; cyclic windows (``sets`` holds their order, window
    t its ``width`` entries from position t) by prefix sums along the order."""
    if kind != WINDOWS_KIND:
        return [sum(diff[j] for j in cols) for cols in sets]
    along = [diff[j] for j in sets[0]]
    n = len(along)
    prefix = list(accumulate(along + along, initial=0))
    return [prefix[t + width] - prefix[t] for t in range(n)]

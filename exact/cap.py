"""The convex cap of a cell: a column-block witness that no convex certificate can prove ``r_eps(A) > r``.

It is a diagnostic for an open bracket, not a claim about ``r_eps``: the lower
and upper verdicts never depend on it (``docs/explanation/convex-cap.md``).

*Lemma (convex cap).* Let ``A0`` be the checked matrix, ``||A - A0||_row1 <= delta``
for the true head A (delta = the proved slack, 0 for a plain matrix target),
``eps >= delta``, ``R = ||A0||_row1 + delta + eps`` and
``K_r = {B : rank B <= r, ||B||_row1 <= R}``. Every B of rank <= r with
``||A - B|| <= eps`` lies in ``K_r``, so a convex set ``C`` that contains ``K_r``
and misses ``A - eps Ball`` proves ``r_eps(A) > r``; no such C exists when
``A in conv(K_r) + eps Ball``. A *column-block witness* shows that: a
partition of the columns into blocks J, a row ``mu`` and amounts ``e_iJ >= 0``
with ``p_iJ = sum_{j in J} |A0_ij - mu_j|`` and ``c_J = max_i (p_iJ - e_iJ)``:

1. ``r >= 1``; every block has at most ``r`` columns, at most ``r - 1`` when ``mu != 0``;
2. ``0 <= e_iJ <= p_iJ``;
3. ``sum_J e_iJ <= eps - delta`` for every row i;
4. ``||mu||_1 + sum_J c_J <= R``.

*Proof.* ``E_ij = (e_iJ / p_iJ)(A0_ij - mu_j)`` for j in J (0 when
``p_iJ = 0``) has row-l1 norm ``sum_J e_iJ <= eps - delta``, so
``||A - (A0 - E)|| <= eps``. ``P = A0 - 1 mu^T - E`` has, on the columns of J,
rows of l1 norm ``p_iJ - e_iJ <= c_J``. With ``s = R - ||mu||_1`` and
``lambda_J = c_J / s`` (blocks with ``c_J = 0`` have ``P_J = 0`` and are left
out), ``B_J = 1 mu^T + P_J / lambda_J`` has rank <= 1 + |J| (|J| when mu = 0),
so <= r, and row norms <= ``||mu||_1 + s = R``: ``B_J in K_r``. By 4,
``sum lambda_J <= 1``; the rest of the weight goes to ``1 mu^T`` (rank <= 1, norm
<= R; the zero matrix when mu = 0). The combination is
``(sum lambda_J) 1 mu^T + P + (1 - sum lambda_J) 1 mu^T = A0 - E``. QED.

The check reads the target, ``mu`` and ``e`` as exact dyadic rationals (the
target's integers over its power-of-two denominator, made once per target:
``CapTarget``), sums ``|A0_ij - mu_j|`` over blocks in Python integers, and decides 1-4 exactly; its margin is
``R - ||mu||_1 - sum_J c_J``. The shapes and block labels are validated by the
reader (``exact.bracketfile``); here they are checked again and fail closed.
"""
from __future__ import annotations

import numpy as np
from flint import fmpq

from .limits import charge
from .matrix import ExactMatrix, _words
from .verdict import Verdict, refuted, verified

__all__ = ["CAP_KIND", "CapTarget", "check_cap"]

#: The witness kind of a convex cap (the only one).
CAP_KIND = "column_blocks"
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


def check_cap(target: CapTarget, labels: np.ndarray, mu: np.ndarray, e: np.ndarray, eps: fmpq, delta: fmpq,
              rank: int) -> Verdict:
    """Conditions 1-4 of the module's lemma, exactly: the cap ``rank`` is verified or refuted with a reason."""
    def no(why: str, margin: fmpq | None = None) -> Verdict:
        return refuted(CAP_KIND, rank, why, margin)

    (m, n), k = target.matrix.shape, e.shape[1] if e.ndim == 2 else 0
    if labels.shape != (1, n) or mu.shape != (1, n) or e.shape != (m, k) or k < 1:
        return no(f"shapes: blocks {labels.shape}, mu {mu.shape}, e {e.shape} (need 1 x {n}, 1 x {n}, {m} x k)")
    if rank < 1:
        return no("a convex cap has rank >= 1")
    blocks = _blocks(labels[0], k)
    if blocks is None:
        return no(f"a block label is not an integer in [0, {k})")
    with_mu = bool(np.any(mu != 0))
    width = rank - 1 if with_mu else rank
    widest = max(len(b) for b in blocks)
    if widest > width:
        return no(f"a block has {widest} columns, rank {rank} allows {width}"
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
    De = int(E.den)
    e_int = [int(x) for x in E.num.entries()]
    charge(PYTHON_STEP * (m * n * _words(max(target.matrix.bits, M.bits) + 64) + m * k * _words(E.bits)),
           "the block sums of a convex cap")
    caps = [0] * k                                            # c_J * D * De
    for i in range(m):
        row = ints[i * n:(i + 1) * n]
        used = 0
        for J, cols in enumerate(blocks):
            if with_mu:
                p = sum(abs(row[j] * sA - mu_int[j]) for j in cols)      # p_iJ * D
            else:
                p = sum(abs(row[j]) for j in cols)                      # p_iJ * DA (= D)
            eJ = e_int[i * k + J]                                        # e_iJ * De
            if eJ * D > p * De:
                return no(f"e_iJ > p_iJ at row {i}, block {J}")
            used += eJ
            caps[J] = max(caps[J], p * De - eJ * D)
        if fmpq(used, De) > budget:
            return no(f"row {i}: sum_J e_iJ > eps - slack", budget - fmpq(used, De))
    R = fmpq(widest_row, DA) + delta + eps
    total = fmpq(sum(map(abs, mu_int)), D) + fmpq(sum(caps), D * De)
    margin = R - total
    if margin < 0:
        return no("||mu||_1 + sum_J c_J > ||A0||_row1 + slack + eps", margin)
    return verified(CAP_KIND, rank, margin)

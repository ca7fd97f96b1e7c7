"""The second checker's judge of a cell's convex cap (docs/explanation/convex-cap.md), written from the
lemma, sharing no code with ``exact.cap``.

The witness: block labels ``b`` (1 x n), a row ``mu`` (1 x n), amounts ``e``
(m x k). With ``p_iJ = sum_{b_j = J} |A_ij - mu_j|`` and
``c_J = max_i (p_iJ - e_iJ)`` the cap r holds when r >= 1, every block has at
most r columns (r - 1 when mu is not zero), ``0 <= e_iJ <= p_iJ``, every row
has ``sum_J e_iJ <= eps - slack``, and ``||mu||_1 + sum_J c_J <= ||A||_row1 +
slack + eps``. Then ``A - E`` (E moves row i by ``sum_J e_iJ``) is a convex
combination of matrices of rank <= r and row-l1 norm <= that bound, so no
convex certificate proves ``r_eps > r``. Every float is an integer over a
power of two (``float.as_integer_ratio``); all sums here are Python integers
over one common power of two.
"""
from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from ._limits import Meter
from ._results import SideResult, Status

__all__ = ["judge_cap", "KIND"]

KIND = "column_blocks"
#: Work units per entry read and per amount (Python integer steps; measured on 1024 x 1024 targets at
#: about 70 ns per entry, some 16 times the cost of a unit of the packed products).
UNITS = 2**7


def _integers(values: Sequence[float]) -> tuple[list[int], int]:
    """Integers ``N`` and a power of two ``D`` with ``values[j] == N[j] / D`` exactly."""
    ratios = [float(x).as_integer_ratio() for x in values]
    D = max((d for _, d in ratios), default=1)
    return [p * (D // d) for p, d in ratios], D


def judge_cap(A: Sequence[float], shape: tuple[int, int], labels: Sequence[float], mu: Sequence[float],
              e: Sequence[float], k: int, eps: Fraction, slack: Fraction, rank: int, meter: Meter) -> SideResult:
    """The cap ``rank`` of the row-major target ``A`` (m x n), ``e`` row-major m x k: verified or refuted."""
    def no(why: str, margin: Fraction | None = None) -> SideResult:
        return SideResult(Status.REFUTED, KIND, rank, margin, why)

    m, n = shape
    if len(A) != m * n or len(labels) != n or len(mu) != n or len(e) != m * k or k < 1:
        return no("the witness does not fit the target")
    if rank < 1:
        return no("a convex cap has rank >= 1")
    blocks: list[list[int]] = [[] for _ in range(k)]
    for j, x in enumerate(labels):
        if not (x == int(x) and 0 <= x < k):
            return no(f"column {j} has no block in [0, {k})")
        blocks[int(x)].append(j)
    nonzero = any(x != 0 for x in mu)
    allowed = rank - 1 if nonzero else rank
    if any(len(b) > allowed for b in blocks):
        return no(f"a block is wider than {allowed} columns")
    if any(x < 0 for x in e):
        return no("a negative amount e_iJ")
    room = eps - slack
    if room < 0:
        return no("eps below the slack")
    meter.charge(UNITS * (m * n + n + m * k), "the block sums of a convex cap")
    ints, D = _integers(list(A) + list(mu))
    M = ints[m * n:]
    E, De = _integers(e)
    widest = 0
    high = [0] * k                                   # c_J, over D * De
    for i in range(m):
        row = ints[i * n:(i + 1) * n]
        widest = max(widest, sum(map(abs, row)))
        spent = 0
        for J in range(k):
            p = 0
            for j in blocks[J]:
                p += abs(row[j] - M[j])
            amount = E[i * k + J]
            if amount * D > p * De:
                return no(f"e_iJ > p_iJ (row {i}, block {J})")
            spent += amount
            if p * De - amount * D > high[J]:
                high[J] = p * De - amount * D
        if Fraction(spent, De) > room:
            return no(f"row {i} spends more than eps - slack", room - Fraction(spent, De))
    bound = Fraction(widest, D) + slack + eps
    used = Fraction(sum(map(abs, M)), D) + Fraction(sum(high), D * De)
    if used > bound:
        return no("||mu||_1 + sum_J c_J above ||A||_row1 + slack + eps", bound - used)
    return SideResult(Status.VERIFIED, KIND, rank, bound - used)

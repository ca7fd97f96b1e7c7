"""The second checker's judge of a cell's convex cap (docs/explanation/convex-cap.md), written from the
lemma, sharing no code with ``exact.cap``.

The witness: sets of columns with weights that sum to 1 on every column
(blocks of a partition, weight 1, from block labels; or the n cyclic windows
of ``width`` columns along an order, weight 1/width), a row ``mu`` (1 x n),
amounts ``e`` (m x sets). With ``p_it`` the weighted sum of ``|A_ij - mu_j|``
over set t and ``c_t = max_i (p_it - e_it)`` the cap r holds when r >= 1,
every set has at most r columns (r - 1 when mu is not zero),
``0 <= e_it <= p_it``, every row has ``sum_t e_it <= eps - slack``, and
``||mu||_1 + sum_t c_t <= ||A||_row1 + slack + eps``. Then ``A - E`` (E moves
row i by ``sum_t e_it``) is a convex combination of matrices of rank <= r and
row-l1 norm <= that bound, so no convex certificate proves ``r_eps > r``. Every float is an integer over a
power of two (``float.as_integer_ratio``); all sums here are Python integers
over one common power of two.
"""
from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from ._limits import Meter
from ._results import SideResult, Status

__all__ = ["judge_cap", "KIND", "WINDOWS"]

KIND = "column_blocks"
WINDOWS = "cyclic_windows"
#: Work units per entry read and per amount (Python integer steps; measured on 1024 x 1024 targets at
#: about 70 ns per entry, some 16 times the cost of a unit of the packed products).
UNITS = 2**7


def _integers(values: Sequence[float]) -> tuple[list[int], int]:
    """Integers ``N`` and a power of two ``D`` with ``values[j] == N[j] / D`` exactly."""
    ratios = [float(x).as_integer_ratio() for x in values]
    D = max((d for _, d in ratios), default=1)
    return [p * (D // d) for p, d in ratios], D


def _window_sums(values: list[int], order: list[int], width: int) -> list[int]:
    """Sum of ``values`` over the ``width`` consecutive columns of ``order`` from each position, cyclically."""
    seq = [values[j] for j in order]
    n = len(seq)
    total = sum(seq[:width])
    out = []
    for t in range(n):
        out.append(total)
        total += seq[(t + width) % n] - seq[t]
    return out


def judge_cap(A: Sequence[float], shape: tuple[int, int], kind: str, structure: Sequence[float], width: int,
              mu: Sequence[float], *, e: Sequence[float], k: int, eps: Fraction, slack: Fraction, rank: int,
              meter: Meter) -> SideResult:
    """The cap ``rank`` of the row-major target ``A`` (m x n), ``e`` row-major m x k: verified or refuted.

    ``structure`` is the block label of each column (``column_blocks``; ``width`` unused) or the order of
    the columns (``cyclic_windows``: the k = n windows of ``width`` columns, each with weight 1/width)."""
    def no(why: str, margin: Fraction | None = None) -> SideResult:
        return SideResult(Status.REFUTED, kind, rank, margin, why)

    m, n = shape
    if len(A) != m * n or len(structure) != n or len(mu) != n or len(e) != m * k or k < 1:
        return no("the witness does not fit the target")
    if rank < 1:
        return no("a convex cap has rank >= 1")
    blocks: list[list[int]] = [[] for _ in range(k)]
    order: list[int] = []
    if kind == KIND:
        for j, x in enumerate(structure):
            if not (x == int(x) and 0 <= x < k):
                return no(f"column {j} has no block in [0, {k})")
            blocks[int(x)].append(j)
        wide = max(len(b) for b in blocks)
        weight = 1
    elif kind == WINDOWS:
        order = [int(x) for x in structure if x == int(x)]
        if sorted(order) != list(range(n)) or k != n or not 1 <= width <= n:
            return no("the order is not a permutation, or the windows do not fit")
        wide = weight = width
    else:
        return no(f"unknown cap kind {kind!r}")
    nonzero = any(x != 0 for x in mu)
    allowed = rank - 1 if nonzero else rank
    if wide > allowed:
        return no(f"a set is wider than {allowed} columns")
    if any(x < 0 for x in e):
        return no("a negative amount e_it")
    room = eps - slack
    if room < 0:
        return no("eps below the slack")
    meter.charge(UNITS * (2 * m * n + n + m * k), "the set sums of a convex cap")
    ints, D = _integers(list(A) + list(mu))
    M = ints[m * n:]
    E, De = _integers(e)
    DW = D * weight
    widest = 0
    high = [0] * k                                   # c_t, over DW * De
    for i in range(m):
        row = ints[i * n:(i + 1) * n]
        widest = max(widest, sum(map(abs, row)))
        dev = [abs(row[j] - M[j]) for j in range(n)]
        sums = _window_sums(dev, order, width) if kind == WINDOWS else [sum(dev[j] for j in b) for b in blocks]
        spent = 0
        for t in range(k):
            amount = E[i * k + t]
            if amount * DW > sums[t] * De:
                return no(f"e_it > p_it (row {i}, set {t})")
            spent += amount
            if sums[t] * De - amount * DW > high[t]:
                high[t] = sums[t] * De - amount * DW
        if Fraction(spent, De) > room:
            return no(f"row {i} spends more than eps - slack", room - Fraction(spent, De))
    bound = Fraction(widest, D) + slack + eps
    used = Fraction(sum(map(abs, M)), D) + Fraction(sum(high), DW * De)
    if used > bound:
        return no("||mu||_1 + sum_t c_t above ||A||_row1 + slack + eps", bound - used)
    return SideResult(Status.VERIFIED, kind, rank, bound - used)

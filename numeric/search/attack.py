"""Targeted attacks on certified lower bounds.

A lower certificate ``r_eps(A) >= L`` says no rank-(L-1) matrix is within
eps of A. The attack runs the strongest upper machinery of
``numeric.search.upper`` (truncated SVD, then refinement from two starts, each a
complete annealed trial of the short length: as strong as the former trial of
twice the steps with its stall rule, ``research/anneal_tune.py``) at rank ``L - 1``
and tolerance ``eps (1 - 1e-3)``; a float
success is re-checked exactly, and an exactly verified success is a
soundness bug: ``search_brackets`` records it and warns, and every caller
(the bracket CLI, the panel) stops with an error.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from exact.errors import SoundnessError
from numeric.search.norms import row_l1_error, row_l1_norm
from numeric.search.refine import DEFAULT_ITERS, refine
from numeric.search.starts import Factors, Svd, compress, svd_factors

__all__ = ["ATTACK_FRACTION", "AttackResult", "attack_rank", "SoundnessError"]

#: The attack tolerance is eps (1 - 1e-3): safely inside
#: the certified region, so no float rounding can make a success spurious.
ATTACK_FRACTION = 1 - 1e-3


@dataclass(frozen=True)
class AttackResult:
    """Outcome of one attack: rank tried, tolerance, best float error, success."""

    rank: int
    eps: float
    error: float
    success: bool
    P: np.ndarray | None = None
    Q: np.ndarray | None = None


def attack_rank(A: np.ndarray, rank: int, eps: float, svd: Svd, *, device: Any = None, warm: Factors | None = None,
                iters: int = DEFAULT_ITERS) -> AttackResult:
    """Try to find ``||A - P Q^T||_row1 <= eps`` with ``rank`` columns (float).

    ``warm``: optional factors of higher rank to compress as a second start.
    Success here is float only; the caller confirms it exactly.
    """
    U, S, Vt = svd
    if rank == 0:
        err = row_l1_norm(A)
        return AttackResult(0, eps, err, err <= eps)
    starts = [svd_factors(U, S, Vt, rank)]
    if warm is not None and warm[0] is not None and warm[0].shape[1] > rank:
        starts.append(compress(warm[0], warm[1], rank))
    best = None
    for P0, Q0 in starts:
        P, Q, err = refine(A, P0, Q0, eps, iters=iters, device=device)
        if best is None or err < best.error:
            best = AttackResult(rank, eps, err, err <= eps, P, Q)
        if best.success:
            break
    assert best is not None
    if best.success:   # re-measure in float64 on the CPU before anyone calls it a success
        assert best.P is not None and best.Q is not None       # a trial's result has its factors
        err = row_l1_error(A, best.P, best.Q)
        best = AttackResult(rank, eps, err, err <= eps, best.P, best.Q)
    return best

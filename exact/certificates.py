"""One entry point per side: ``check_upper`` and ``check_lower``.

Each side is judged on its own witness. A claimed rank that is not an int,
is negative or exceeds ``min(m, n)`` is refuted before any witness is read;
a check that raises is refuted too (fail closed), except past a resource
limit or out of memory: those refuse the whole file (exit 2).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flint import fmpq

from .factors import UpperFactors, check_factors
from .frobenius import FrobeniusTail, check_frobenius
from .matrix import ExactMatrix
from .oddmap import OddMapWitness, check_odd_map
from .reconstruction import ReconstructionWitness, check_reconstruction
from .row_reconstruction import RowReconstructionWitness, check_row_reconstruction
from .trivial import TrivialLower, TrivialUpper, check_trivial_lower, check_trivial_upper
from .errors import LimitExceeded
from .verdict import Cache, Verdict, fresh, refuted

__all__ = ["TrivialUpper", "UpperFactors", "TrivialLower", "ReconstructionWitness",
           "RowReconstructionWitness", "FrobeniusTail", "OddMapWitness", "check_upper", "check_lower"]

_UPPER: dict[type, Callable[..., Verdict]] = {TrivialUpper: check_trivial_upper, UpperFactors: check_factors}
_LOWER: dict[type, Callable[..., Verdict]] = {
    TrivialLower: check_trivial_lower, ReconstructionWitness: check_reconstruction,
    RowReconstructionWitness: check_row_reconstruction, FrobeniusTail: check_frobenius,
    OddMapWitness: check_odd_map}


def _dispatch(table: dict[type, Callable[..., Verdict]], side: str, A: ExactMatrix, witness: Any, eps: fmpq,
              rank: int, *, cache: Cache) -> Verdict:
    kind = getattr(witness, "kind", type(witness).__name__)
    check = table.get(type(witness))
    if check is None:
        return refuted(kind, rank, f"not a {side} witness: {type(witness).__name__}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        return refuted(kind, -1, f"claimed rank {rank!r} is not a non-negative integer")
    if not isinstance(eps, fmpq) or eps < 0:
        return refuted(kind, rank, f"eps {eps!r} is not a non-negative fmpq")
    p = min(A.shape)
    if rank > p:
        return refuted(kind, rank, f"claimed rank {rank} exceeds min(m, n) = {p}", claimed=rank, derived=p)
    try:
        return check(A, witness, eps, rank, cache)
    except (LimitExceeded, MemoryError):
        raise
    except Exception as exc:   # fail closed: an error in a check is never a verification
        return refuted(kind, rank, f"check failed: {type(exc).__name__}: {str(exc)[:120]}")


def check_upper(A: ExactMatrix, witness: Any, eps: fmpq, claimed_rank: int, cache: Cache = fresh) -> Verdict:
    """Verified iff ``witness`` proves ``r_eps(A) <= claimed_rank`` exactly (K.1, trivial cap)."""
    return _dispatch(_UPPER, "upper", A, witness, eps, claimed_rank, cache=cache)


def check_lower(A: ExactMatrix, witness: Any, eps: fmpq, claimed_rank: int, cache: Cache = fresh) -> Verdict:
    """Verified iff ``witness`` proves ``r_eps(A) >= claimed_rank`` exactly (K.2, K.3, odd map, trivial)."""
    return _dispatch(_LOWER, "lower", A, witness, eps, claimed_rank, cache=cache)

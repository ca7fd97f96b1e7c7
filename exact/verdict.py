"""Verdicts: what a check concludes, with its exact margin.

A verdict is VERIFIED only on positive evidence; every other outcome,
including a shape mismatch or an undecided interval comparison, is REFUTED
with a reason, and where a number decided it, the claimed and derived values.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from flint import fmpq

from .rational import format_rational

__all__ = ["Status", "Verdict", "verified", "refuted", "fresh"]


class Status(Enum):
    VERIFIED = "verified"
    REFUTED = "refuted"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one certificate check.

    ``margin`` is exact: for an upper witness ``eps - ||A - B||_row1`` (>= 0
    when verified), for a lower witness the strict gap of its inequality
    (> 0 when verified). ``claimed``/``derived`` name the values that decided
    a refutation.
    """

    status: Status
    kind: str
    rank: int
    margin: fmpq | None = None
    reason: str = ""
    claimed: str | None = None
    derived: str | None = None

    @property
    def verified(self) -> bool:
        return self.status is Status.VERIFIED

    def to_json(self) -> dict[str, Any]:
        return {
            "verified": self.verified,
            "kind": self.kind,
            "rank": self.rank,
            "margin": None if self.margin is None else format_rational(self.margin),
            "reason": self.reason,
            "claimed": self.claimed,
            "derived": self.derived,
        }


def verified(kind: str, rank: int, margin: fmpq | None) -> Verdict:
    return Verdict(Status.VERIFIED, kind, rank, margin)


def refuted(kind: str, rank: int, reason: str, margin: fmpq | None = None,
            claimed: object = None, derived: object = None) -> Verdict:
    return Verdict(Status.REFUTED, kind, rank, margin, reason,
                   None if claimed is None else str(claimed),
                   None if derived is None else str(derived))


_T = TypeVar("_T")

#: The ``cache`` a check is given: ``cache(what, compute)`` returns ``compute()``, or a stored copy.
Cache = Callable[[str, Callable[[], Any]], Any]


def fresh(what: str, compute: Callable[[], _T]) -> _T:
    """The default ``cache`` of a check: compute the derived quantity every time.

    A check asks ``cache(what, compute)`` for each quantity that depends only on
    the matrices (norms, energies), never on eps or the claimed rank;
    ``exact.verify`` passes a cache keyed by the tensor names instead.
    """
    return compute()

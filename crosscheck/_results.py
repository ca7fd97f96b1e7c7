"""What the second checker concludes: frozen records, one per side and per cell.

A side is VERIFIED only on positive evidence. REFUTED means the exact
computation decided against the claim (or its witness does not fit);
NOT_CHECKED means this checker could not decide it (an enclosure too wide to
decide, a hint that failed): fail closed, it is *not* verified either.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from ._numbers import text

__all__ = ["Status", "SideResult", "CellResult"]


class Status(Enum):
    VERIFIED = "verified"
    REFUTED = "refuted"
    NOT_CHECKED = "not checked"


@dataclass(frozen=True)
class SideResult:
    """One side of a bracket: its claimed rank, witness kind, verdict, exact margin and reason."""

    status: Status
    kind: str
    rank: int
    margin: Fraction | None = None
    reason: str = ""

    @property
    def verified(self) -> bool:
        return self.status is Status.VERIFIED


@dataclass(frozen=True)
class CellResult:
    """One cell: ``lower <= r_eps(A) <= upper`` as claimed, each side judged on its own witness."""

    file: str
    id: str
    index: int
    eps: Fraction
    shape: tuple[int, int]
    lower: SideResult
    upper: SideResult
    slack: Fraction | None = None
    slack_bound: Fraction | None = None
    cap: SideResult | None = None          # the convex cap: a diagnostic, never part of ``verified``

    @property
    def verified(self) -> bool:
        return self.lower.verified and self.upper.verified

    @property
    def verified_lower(self) -> int | None:
        """The lower rank this checker verified, or None."""
        return self.lower.rank if self.lower.verified else None

    @property
    def verified_upper(self) -> int | None:
        """The upper rank this checker verified, or None."""
        return self.upper.rank if self.upper.verified else None

    def to_json(self) -> dict[str, object]:
        out = {"file": self.file, "id": self.id, "index": self.index, "eps": text(self.eps),
               "shape": list(self.shape), "lower": self.lower.rank, "upper": self.upper.rank}
        for name, side in (("lower", self.lower), ("upper", self.upper)):
            out.update({f"{name}_status": side.status.value, f"{name}_verified": side.verified,
                        f"{name}_witness": side.kind, f"{name}_margin": text(side.margin),
                        f"{name}_reason": side.reason})
        out.update({"slack": text(self.slack), "slack_bound": text(self.slack_bound)})
        cap = self.cap
        out.update({"convex_cap": None if cap is None else cap.rank,
                    "convex_cap_verified": None if cap is None else cap.verified,
                    "convex_cap_margin": None if cap is None else text(cap.margin),
                    "convex_cap_reason": None if cap is None else cap.reason})
        return out

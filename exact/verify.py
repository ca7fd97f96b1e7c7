"""Re-verify every claim of a bracket file.

For each cell: the target (with its slack proved when it is a softmax of
stored logits, K.5), then the lower side at ``eps + slack`` and the upper
side at ``eps - slack``, each on its own witness. A cell whose lower rank
exceeds its upper rank cannot have two valid witnesses: both sides are
refuted (fail closed).

Work shared by cells is done once per file: each tensor is converted once,
the slacks of all matrices paired with one logits tensor proved together
(``exp(h)`` and ``Z`` enclosed once per row), and each eps-independent quantity
of a check (a residual norm, a top-k energy) is kept under the names of the
tensors it comes from. All exact work is metered (``exact.limits``).
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from flint import fmpq

from .bracketfile import BracketFile, Cell, Claim, read_bracket_file
from .cap import CapTarget, check_cap
from .certificates import (FrobeniusTail, OddMapWitness, ReconstructionWitness, RowReconstructionWitness, TrivialLower,
                           TrivialUpper, UpperFactors, check_lower, check_upper)
from .errors import LimitExceeded
from .limits import MAX_TENSOR_BYTES, MAX_WORK, work_limit
from .matrix import ExactMatrix
from .oddmap import Label, labels_of
from .rational import format_rational
from .slack import SoftmaxSlacks
from .verdict import Cache, Verdict, refuted

__all__ = ["CellReport", "verify_cell", "verify_file", "judge_file"]


@dataclass(frozen=True)
class CellReport:
    id: str
    eps: fmpq
    lower: Verdict
    upper: Verdict
    slack: fmpq | None
    slack_bound: fmpq | None
    target_sha256: str
    logits_sha256: str | None
    shape: tuple[int, ...]
    index: int = 0
    convex_cap: Verdict | None = None     # the cell's convex cap (exact.cap): a diagnostic, not a side

    @property
    def verified(self) -> bool:
        return self.lower.verified and self.upper.verified

    def to_json(self) -> dict[str, Any]:
        q: Callable[[fmpq | None], str | None]
        q = lambda x: None if x is None else format_rational(x)
        return {
            "id": self.id, "index": self.index, "eps": q(self.eps), "shape": list(self.shape),
            "lower": self.lower.rank, "upper": self.upper.rank,
            "lower_verified": self.lower.verified, "upper_verified": self.upper.verified,
            "lower_reason": self.lower.reason, "upper_reason": self.upper.reason,
            "lower_witness": self.lower.kind, "upper_witness": self.upper.kind,
            "lower_margin": q(self.lower.margin), "upper_margin": q(self.upper.margin),
            "lower_claimed": self.lower.claimed, "lower_derived": self.lower.derived,
            "upper_claimed": self.upper.claimed, "upper_derived": self.upper.derived,
            "slack": q(self.slack), "slack_bound": q(self.slack_bound),
            "target_sha256": self.target_sha256, "logits_sha256": self.logits_sha256,
            **_cap_json(self.convex_cap),
        }


def _cap_json(cap: Verdict | None) -> dict[str, Any]:
    """The convex cap's keys of a cell's JSON: rank, verified, margin and reason (all null without a cap)."""
    if cap is None:
        return {"convex_cap": None, "convex_cap_verified": None, "convex_cap_margin": None,
                "convex_cap_reason": None}
    return {"convex_cap": cap.rank, "convex_cap_verified": cap.verified,
            "convex_cap_margin": None if cap.margin is None else format_rational(cap.margin),
            "convex_cap_reason": cap.reason}


class _Exact:
    """A file's tensors as exact matrices and everything derived from them, each made once."""

    matrices: dict[str, ExactMatrix]
    slacks: dict[str, SoftmaxSlacks]
    derived: dict[Any, Any]
    hashes: dict[str | None, str]
    plan: dict[str, dict[str, set[Any]]]

    def __init__(self, tensors: dict[str, np.ndarray], cells: Iterable[Cell] = ()):
        self.tensors, self.matrices, self.slacks, self.derived, self.hashes = tensors, {}, {}, {}, {}
        self.plan = {}                    # logits -> matrix -> the slacks claimed for the pair (same shapes)
        for t in (c.target for c in cells):
            if t.logits is not None and tensors[t.logits].shape == tensors[t.matrix].shape:
                self.plan.setdefault(t.logits, {}).setdefault(t.matrix, set()).add(t.slack)

    def sha256(self, name: str | None) -> str | None:
        """SHA-256 of a tensor's little-endian float64 bytes."""
        if name is not None and name not in self.hashes:
            self.hashes[name] = hashlib.sha256(self.tensors[name].tobytes()).hexdigest()
        return self.hashes.get(name)

    def slack_bound(self, logits: str, matrix: str, slack: fmpq) -> fmpq | None:
        """A proved bound on the slack of two named tensors, ``<= slack`` when one is found (K.5); one
        ``SoftmaxSlacks`` per logits tensor serves the matrices that ``plan`` pairs with it."""
        if logits not in self.slacks:
            plan = self.plan[logits]
            self.slacks[logits] = SoftmaxSlacks(self.tensors[logits], {k: self.tensors[k] for k in plan}, plan)
        return self.slacks[logits].bound(matrix, slack)

    def cache_for(self, side: str, target: str, claim: Claim) -> Cache:
        """The ``cache`` of one side's check, keyed by the tensor names (and ints) it reads."""
        key = (side, claim.kind, target, tuple(sorted(claim.fields.items())))

        def cache(what: str, compute: Callable[[], Any]) -> Any:
            if (key, what) not in self.derived:
                self.derived[key, what] = compute()
            return self.derived[key, what]
        return cache

    def labels(self, name: str) -> tuple[Label, ...]:
        """An odd map's labels as (row, sign) pairs, read once per tensor."""
        if ("labels", name) not in self.derived:
            self.derived["labels", name] = labels_of(self.tensors[name])
        labels: tuple[Label, ...] = self.derived["labels", name]
        return labels

    def __call__(self, name: str) -> ExactMatrix:
        if name not in self.matrices:
            self.matrices[name] = ExactMatrix.from_float64(self.tensors[name], f"tensor {name!a}")
        return self.matrices[name]


def _witness(side: str, claim: Claim, exact: _Exact) -> object:
    """The in-memory witness of one side, its tensors converted exactly."""
    f, kind = cast("dict[str, Any]", claim.fields), claim.kind   # names and ints, checked by the reader
    if kind == "trivial":
        return TrivialUpper() if side == "upper" else TrivialLower()
    if kind == "factors":
        return UpperFactors(exact(f["P"]), exact(f["Q"]))
    if kind == "reconstruction":
        return ReconstructionWitness(exact(f["R"]), exact(f["X"]), exact(f["L"]))
    if kind == "row_reconstruction":
        return RowReconstructionWitness(exact(f["G"]), exact(f["Z"]), exact(f["M"]))
    if kind == "frobenius":
        return FrobeniusTail(f["k"])
    if kind == "odd_map":
        return OddMapWitness(exact.labels(f["labels"]), exact(f["points"]))
    raise ValueError(f"unknown {side} witness kind {kind!r}")


def verify_cell(cell: Cell, tensors: dict[str, np.ndarray], exact: _Exact | None = None, index: int = 0) -> CellReport:
    exact = exact or _Exact(tensors, [cell])
    matrix = tensors[cell.target.matrix]
    A = exact(cell.target.matrix)
    slack = cell.target.slack
    bound: fmpq | None = None
    failure: str | None = None
    if cell.target.logits is not None:
        logits = tensors[cell.target.logits]
        if logits.shape != matrix.shape:
            failure = f"target logits {logits.shape} and matrix {matrix.shape} differ in shape"
        else:
            slack = cast(fmpq, slack)                        # the reader reads it with the logits
            bound = exact.slack_bound(cell.target.logits, cell.target.matrix, slack)
            if bound is None or bound > slack:
                failure = "target slack not proved"
    eps_lower = cell.eps + (slack or 0)
    eps_upper = cell.eps - (slack or 0)

    def judge(side: str, claim: Claim, check: Callable[..., Verdict], eps: fmpq) -> Verdict:
        if failure:
            return refuted(claim.kind, claim.rank, failure, claimed=None if slack is None else f"slack = {slack}",
                           derived=None if bound is None else f"bound = {bound}")
        if eps < 0 and claim.kind != "trivial":
            return refuted(claim.kind, claim.rank, "eps - slack < 0", claimed=f"eps = {cell.eps}",
                           derived=f"slack = {slack}")
        try:
            witness = _witness(side, claim, exact)
        except (LimitExceeded, MemoryError):
            raise
        except Exception as exc:   # fail closed
            return refuted(claim.kind, claim.rank, f"witness unreadable: {str(exc)[:120]}")
        return check(A, witness, max(eps, fmpq(0)), claim.rank, exact.cache_for(side, cell.target.matrix, claim))

    lower = judge("lower", cell.lower, check_lower, eps_lower)
    upper = judge("upper", cell.upper, check_upper, eps_upper)
    if cell.lower.rank > cell.upper.rank:
        why = f"inconsistent claim: lower rank {cell.lower.rank} above upper rank {cell.upper.rank}"
        lower = refuted(lower.kind, lower.rank, why + ("" if lower.verified else f"; {lower.reason}"),
                        lower.margin, claimed=cell.lower.rank, derived=cell.upper.rank)
        upper = refuted(upper.kind, upper.rank, why + ("" if upper.verified else f"; {upper.reason}"),
                        upper.margin, claimed=cell.upper.rank, derived=cell.lower.rank)
    cap = None if cell.convex_cap is None else _cap(cell, cell.convex_cap, tensors, exact, failure)
    return CellReport(cell.id, cell.eps, lower, upper, slack, bound, cast(str, exact.sha256(cell.target.matrix)),
                      exact.sha256(cell.target.logits), matrix.shape, index, cap)


def _cap(cell: Cell, claim: Claim, tensors: dict[str, np.ndarray], exact: _Exact, failure: str | None) -> Verdict:
    """The verdict on a cell's convex cap (``exact.cap``), at ``eps`` with the cell's proved slack; it
    changes neither side's verdict. A slack that is not proved refutes it; an error fails closed."""
    if failure:
        return refuted(claim.kind, claim.rank, failure)
    fields = {k: v if isinstance(v, int) else tensors[v] for k, v in claim.fields.items()}   # checked by the reader
    try:
        key = ("cap target", cell.target.matrix)
        if key not in exact.derived:
            exact.derived[key] = CapTarget(exact(cell.target.matrix))
        return check_cap(exact.derived[key], claim.kind, fields, cell.eps, cell.target.slack or fmpq(0), claim.rank)
    except (LimitExceeded, MemoryError):
        raise
    except Exception as exc:   # fail closed
        return refuted(claim.kind, claim.rank, f"witness unreadable: {str(exc)[:120]}")


def judge_file(bf: BracketFile, indices: Sequence[int] | None = None,
               max_work: int = MAX_WORK) -> tuple[list[CellReport], int]:
    """The reports of the cells ``indices`` (default all) and the work units they took; raises
    ``LimitExceeded`` past ``max_work`` units."""
    chosen = range(len(bf.cells)) if indices is None else indices
    exact = _Exact(bf.tensors, [bf.cells[i] for i in chosen])
    with work_limit(max_work) as meter:
        reports = [verify_cell(bf.cells[i], bf.tensors, exact, index=i) for i in chosen]
    return reports, meter.used


def verify_file(path: str | os.PathLike[str], indices: Sequence[int] | None = None, max_work: int = MAX_WORK,
                max_tensor_bytes: int = MAX_TENSOR_BYTES) -> list[CellReport]:
    """Read, validate and re-verify a bracket file (raises ``MalformedInput``)."""
    return judge_file(read_bracket_file(path, max_tensor_bytes), indices, max_work)[0]

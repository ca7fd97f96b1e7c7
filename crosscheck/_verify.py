"""Judge every cell of a bracket file (docs/bracket-format.md section 3), with this package's arithmetic.

Per cell: the target (a stored matrix A, or ``softmax_row(logits)`` within a
proved slack alpha, K.5), then the lower side at ``eps + alpha`` and the
upper side at ``eps - alpha``, each on its own witness (MATH.md section 2):

* upper ``trivial``: rank ``min(m, n)`` (B = A); ``factors`` (K.1):
  ``||A - P Q^T||_row1 <= eps``, rank = columns of P;
* lower ``trivial``: rank 0, or 1 when ``eps < ||A||_row1``;
  ``reconstruction`` (K.3): ``E = R A X - X``, ``F = L X - I``, ``||F|| < 1``,
  ``eta = ||E|| ||L|| / (1 - ||F||) < 1`` and ``||R|| eps < 1 - eta``;
  ``row_reconstruction`` (K.3 for the transpose): ``E = Z^T A G - Z^T``,
  ``F = M Z - I``, ``||F^T|| < 1``, ``eta = ||E|| ||M^T|| / (1 - ||F^T||) < 1``,
  ``||G|| eps < 1 - eta``; ``frobenius`` (K.2): ``F_k(A)^2 > m eps^2``,
  rank k + 1 (``crosscheck._spectral``); ``odd_map``: ``crosscheck._oddmap``.

A claimed rank above ``min(m, n)`` is refuted; a slack that is not proved, or
logits of another shape than the matrix, refute both sides; a non-trivial
upper side with ``eps - alpha < 0`` is refuted; a cell whose lower rank
exceeds its upper rank has both sides refuted. A check that raises anything
but a resource limit is NOT_CHECKED (fail closed). Quantities that depend
only on tensors (a residual norm, a slack, an energy bound) are computed once
per file and shared by the cells that name the same tensors.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

from ._cap import judge_cap
from ._dyadic import Dyadic, FloatMatrix, residual
from ._errors import LimitReached
from ._limits import MAX_WORK, Meter
from ._oddmap import label_sets_of
from ._reader import Cell, Document, Side, read
from ._results import CellResult, SideResult, Status
from ._rows import residual_norm, residual_norm_bound
from ._slack import SlackBound
from ._spectral import Energies

__all__ = ["verify_file", "judge"]

#: Work units per entry of a tensor read as an exact matrix (numpy decomposes every float once, and a row
#: read exactly costs about 60 ns per entry: some 16 units of product work).
CONVERT_UNITS = 16

_T = TypeVar("_T")
#: A check of one witness kind: (file, target, witness fields, eps, rank) -> its result.
_Check = Callable[["_File", str, dict[str, Any], Fraction, int], SideResult]


def _ok(kind: str, rank: int, margin: Fraction | None = None) -> SideResult:
    return SideResult(Status.VERIFIED, kind, rank, margin)


def _no(kind: str, rank: int, reason: str, margin: Fraction | None = None) -> SideResult:
    return SideResult(Status.REFUTED, kind, rank, margin, reason)


def _undecided(kind: str, rank: int, reason: str) -> SideResult:
    return SideResult(Status.NOT_CHECKED, kind, rank, None, reason)


class _File:
    """A document's tensors as exact matrices and every derived quantity, each made once."""

    def __init__(self, doc: Document, meter: Meter):
        self.doc, self.meter = doc, meter
        self.memo: dict[tuple[Any, ...], Any] = {}

    def once(self, key: tuple[Any, ...], compute: Callable[[], _T]) -> _T:
        if key not in self.memo:
            self.memo[key] = compute()
        value: _T = self.memo[key]
        return value

    def matrix(self, name: str) -> FloatMatrix:
        """A tensor as an exact matrix (its integer rows made when first read)."""
        def convert() -> FloatMatrix:

            t = self.doc.tensors[name]
            self.meter.charge(CONVERT_UNITS * t.shape[0] * t.shape[1], f"reading tensor {name!a} exactly")
            return FloatMatrix(np.frombuffer(t.values, dtype=np.float64).reshape(t.shape))
        return self.once(("matrix", name), convert)

    def norm(self, name: str, transpose: bool = False) -> Fraction:
        """``||M||_row1`` (or of M^T), exactly (``crosscheck._rows``)."""
        return self.once(("norm", name, transpose), lambda: residual_norm(
            None, self.matrix(name).T if transpose else self.matrix(name), None, self.meter))


# ------------------------------------------------------------------ the checks
def _factors(f: _File, target: str, w: dict[str, Any], eps: Fraction, rank: int) -> SideResult:
    A, P, Q = f.matrix(target), f.matrix(w["P"]), f.matrix(w["Q"])
    (m, n), k = A.shape, P.shape[1]
    if P.shape[0] != m or Q.shape != (n, k):
        return _no("factors", rank, f"shape mismatch: A {m}x{n}, P {P.shape[0]}x{P.shape[1]}, "
                                    f"Q {Q.shape[0]}x{Q.shape[1]} (need m x k and n x k)")
    if k != rank:
        return _no("factors", rank, f"the factors have {k} columns, claimed rank {rank}")
    error = f.once(("factors", target, w["P"], w["Q"]), lambda: residual_norm(A, P, Q.T, f.meter))
    margin = eps - error
    if margin >= 0:
        return _ok("factors", rank, margin)
    return _no("factors", rank, f"||A - P Q^T||_row1 = {float(error):.6g} > eps", margin)


def _final(kind: str, rank: int, norms: tuple[Any, ...], eps: Fraction, name: str) -> SideResult:
    """K.3's inequalities from ``(||E||, ||L||, ||F||, ||R||)``.

    ``norms[0]`` is a pair ``(bound, exact)`` and a function giving the exact ``||E||``: the claim is
    first judged with the bound (an upper bound on ``||E||`` when not exact, so a verification with it
    stands, and its margin is a lower bound on the exact one); a claim the bound does not prove is
    judged again with the exact norm.
    """
    (bound, exact), exact_E = norms[0]
    judged = _inequalities(kind, rank, (bound, *norms[1:]), eps, name)
    if judged.verified or exact:
        return judged
    return _inequalities(kind, rank, (exact_E(), *norms[1:]), eps, name)


def _inequalities(kind: str, rank: int, norms: tuple[Fraction, ...], eps: Fraction, name: str) -> SideResult:
    norm_E, norm_L, norm_F, norm_R = norms
    if norm_F >= 1:
        return _no(kind, rank, f"basis defect ||F|| = {float(norm_F):.6g} >= 1")
    eta = norm_E * norm_L / (1 - norm_F)
    if eta >= 1:
        return _no(kind, rank, f"reconstruction defect eta = {float(eta):.6g} >= 1")
    margin = 1 - eta - norm_R * eps
    if margin > 0:
        return _ok(kind, rank, margin)
    return _no(kind, rank, f"||{name}|| eps >= 1 - eta", margin)


def _defect(f: _File, key: tuple[Any, ...], C: Dyadic | None, X: Dyadic,
            Y: Dyadic | None) -> tuple[tuple[Fraction, bool], Callable[[], Fraction]]:
    """``((bound, exact), exact norm)`` of ``||X Y - C||_row1``, each computed once (``crosscheck._rows``)."""
    first = f.once(key + ("bound",), lambda: residual_norm_bound(C, X, Y, f.meter))
    if first[1]:
        return first, lambda: first[0]
    return first, lambda: f.once(key + ("exact",), lambda: residual_norm(C, X, Y, f.meter))


def _reconstruction(f: _File, target: str, w: dict[str, Any], eps: Fraction, rank: int) -> SideResult:
    A, R, X, L = f.matrix(target), f.matrix(w["R"]), f.matrix(w["X"]), f.matrix(w["L"])
    (m, n), d = A.shape, X.shape[1]
    if R.shape != (n, m) or X.shape[0] != n or L.shape != (d, n):
        return _no("reconstruction", rank, f"shape mismatch: A {m}x{n}, R {R.shape}, X {X.shape}, L {L.shape} "
                                           "(need n x m, n x d, d x n)")
    if d != rank:
        return _no("reconstruction", rank, f"X has {d} columns, claimed rank {rank}")
    key = ("reconstruction", target, w["R"], w["X"], w["L"])
    AX = f.once(key + ("AX",), lambda: residual(None, [A, X], f.meter))
    norms = f.once(key, lambda: (
        _defect(f, key, X, R, AX),                                 # E = R (A X) - X
        f.norm(w["L"]),
        residual(Dyadic.identity(d), [L, X], f.meter).norm(),      # F = L X - I
        f.norm(w["R"])))
    return _final("reconstruction", rank, norms, eps, "R")


def _row_reconstruction(f: _File, target: str, w: dict[str, Any], eps: Fraction, rank: int) -> SideResult:
    A, G, Z, M = f.matrix(target), f.matrix(w["G"]), f.matrix(w["Z"]), f.matrix(w["M"])
    (m, n), d = A.shape, Z.shape[1]
    if G.shape != (n, m) or Z.shape[0] != m or M.shape != (d, m):
        return _no("row_reconstruction", rank, f"shape mismatch: A {m}x{n}, G {G.shape}, Z {Z.shape}, "
                                               f"M {M.shape} (need n x m, m x d, d x m)")
    if d != rank:
        return _no("row_reconstruction", rank, f"Z has {d} columns, claimed rank {rank}")
    key = ("row", target, w["G"], w["Z"], w["M"])

    def norms() -> tuple[Any, ...]:
        Zt = Z.T
        T = residual(None, [Zt, A], f.meter)
        return (_defect(f, key, Zt, T, G),                           # E = (Z^T A) G - Z^T
                f.norm(w["M"], transpose=True),                      # ||M^T||
                residual(Dyadic.identity(d), [M, Z], f.meter).T.norm(),   # ||F^T||, F = M Z - I
                f.norm(w["G"]))
    return _final("row_reconstruction", rank, f.once(key, norms), eps, "G")


def _frobenius(f: _File, target: str, w: dict[str, Any], eps: Fraction, rank: int) -> SideResult:
    A = f.matrix(target)
    (m, n), k = A.shape, w["k"]
    if k + 1 != rank:
        return _no("frobenius", rank, f"the Frobenius tail at k = {k} proves rank {k + 1}, not {rank}")
    if k + 1 > min(m, n):
        return _no("frobenius", rank, f"k + 1 = {k + 1} exceeds min(m, n) = {min(m, n)}")
    energies = f.once(("energies", target), lambda: Energies(A, f.meter))
    tail = energies.tail_lower_bound(k)
    if tail is None:
        return _undecided("frobenius", rank, "the eigenvector hint failed: no bound on the top-k energy")
    margin = tail - m * eps * eps
    if margin > 0:
        return _ok("frobenius", rank, margin)
    # the bound is an enclosure: a failure here is "not proved", not a disproof of the claim
    return _undecided("frobenius", rank, "F_k(A)^2 > m eps^2 not proved (lower bound on the tail too small)")


def _odd_map(f: _File, target: str, w: dict[str, Any], eps: Fraction, rank: int) -> SideResult:
    A = f.matrix(target)
    (m, n) = A.shape
    raw = f.doc.tensors[w["labels"]]
    labels = [(int(raw.values[2 * k]), int(raw.values[2 * k + 1])) for k in range(raw.shape[0])]
    vertices = len(labels)
    d = next(k for k in range(1, 9) if 3**k - 1 == vertices)        # the reader checked the shape
    if d != rank:
        return _no("odd_map", rank, f"the labels triangulate S^{d - 1}, proving rank {d}, not {rank}")
    for k, (i, s) in enumerate(labels):
        if labels[vertices - 1 - k] != (i, -s):
            return _no("odd_map", rank, f"labels not odd: vertex {k} has ({i}, {s}), its antipode "
                                        f"has {labels[vertices - 1 - k]}")
    sets = f.once(("label sets", w["labels"]), lambda: label_sets_of(labels, d, f.meter))
    X = f.matrix(w["points"])
    if X.shape != (len(sets), n):
        return _no("odd_map", rank, f"points are {X.shape[0]} x {X.shape[1]}, need {len(sets)} x {n}")
    if X.max_abs() > (1 << X.shift):
        return _no("odd_map", rank, "a point has an entry outside [-1, 1]")

    def lowest() -> Fraction:
        values = residual(None, [A, X.T], f.meter)                   # a_i . x_S, m x S
        low = min(s * values.rows[i][j] for j, S in enumerate(sets) for i, s in S)
        return Fraction(low, 1 << values.shift)
    low = f.once(("odd map", target, w["labels"], w["points"]), lowest)
    margin = low - eps
    if margin > 0:
        return _ok("odd_map", rank, margin)
    return _no("odd_map", rank, "some label (i, s) of some set S has s a_i . x_S <= eps", margin)


def _trivial_upper(f: _File, target: str, w: dict[str, Any], eps: Fraction, rank: int) -> SideResult:
    p = min(f.doc.tensors[target].shape)
    return _ok("trivial", rank) if rank == p else _no("trivial", rank, f"B = A proves rank {p}, not {rank}")


def _trivial_lower(f: _File, target: str, w: dict[str, Any], eps: Fraction, rank: int) -> SideResult:
    if rank == 0:
        return _ok("trivial", 0)
    if rank != 1:
        return _no("trivial", rank, "the trivial lower witness proves at most rank 1")
    margin = f.norm(target) - eps
    return _ok("trivial", 1, margin) if margin > 0 else _no("trivial", 1, "rank 1 needs eps < ||A||_row1", margin)


_UPPER: dict[str, _Check] = {"trivial": _trivial_upper, "factors": _factors}
_LOWER: dict[str, _Check] = {"trivial": _trivial_lower, "reconstruction": _reconstruction,
          "row_reconstruction": _row_reconstruction, "frobenius": _frobenius, "odd_map": _odd_map}


# ------------------------------------------------------------------ cells and files
def _side(f: _File, table: dict[str, _Check], target: str, side: Side, eps: Fraction) -> SideResult:
    p = min(f.doc.tensors[target].shape)
    if side.rank > p:
        return _no(side.kind, side.rank, f"claimed rank {side.rank} exceeds min(m, n) = {p}")
    try:
        return table[side.kind](f, target, dict(side.fields), eps, side.rank)
    except (LimitReached, MemoryError):
        raise
    except Exception as exc:   # fail closed: an error in a check is never a verification
        return _undecided(side.kind, side.rank, f"check failed: {type(exc).__name__}: {str(exc)[:120]}")


def _cell(f: _File, c: Cell) -> CellResult:
    shape = f.doc.tensors[c.matrix].shape
    slack = c.slack
    bound: Fraction | None = None
    failure: str | None = None
    if c.logits is not None:
        H = f.doc.tensors[c.logits]
        if H.shape != shape:
            failure = f"target logits {H.shape} and matrix {shape} differ in shape"
        else:
            proof = f.once(("slack", c.logits, c.matrix), lambda: SlackBound(
                [H.row(i) for i in range(shape[0])], [f.doc.tensors[c.matrix].row(i) for i in range(shape[0])],
                f.meter))
            assert slack is not None                  # the reader reads logits and slack together
            bound = proof.bound(slack)
            if bound > slack:
                failure = f"target slack not proved (the proved bound is {float(bound - slack):.3e} above it)"
    alpha = slack or 0

    def judge(table: dict[str, _Check], side: Side, eps: Fraction) -> SideResult:
        if failure:
            return _no(side.kind, side.rank, failure)
        if eps < 0 and side.kind != "trivial":
            return _no(side.kind, side.rank, "eps - slack < 0")
        return _side(f, table, c.matrix, side, max(eps, Fraction(0)))

    lower = judge(_LOWER, c.lower, c.eps + alpha)
    upper = judge(_UPPER, c.upper, c.eps - alpha)
    if c.lower.rank > c.upper.rank:
        why = f"inconsistent claim: lower rank {c.lower.rank} above upper rank {c.upper.rank}"
        lower = _no(lower.kind, lower.rank, why, lower.margin)
        upper = _no(upper.kind, upper.rank, why, upper.margin)
    return CellResult(f.doc.path, c.id, c.index, c.eps, shape, lower, upper, slack, bound,
                      None if c.cap is None else _cap(f, c, c.cap, failure))


def _cap(f: _File, c: Cell, cap: Side, failure: str | None) -> SideResult:
    """The cell's convex cap at eps with its slack (``crosscheck._cap``); it changes no side's verdict."""
    if failure:
        return _no(cap.kind, cap.rank, failure)
    w: dict[str, Any] = dict(cap.fields)
    t = f.doc.tensors
    try:
        line = t[w["order"] if "order" in w else w["blocks"]].values
        return judge_cap(t[c.matrix].values, t[c.matrix].shape, cap.kind, line, w.get("width", 0), t[w["mu"]].values,
                         e=t[w["e"]].values, k=t[w["e"]].shape[1], eps=c.eps, slack=c.slack or Fraction(0),
                         rank=cap.rank, meter=f.meter)
    except (LimitReached, MemoryError):
        raise
    except Exception as exc:   # fail closed
        return _undecided(cap.kind, cap.rank, f"check failed: {type(exc).__name__}: {str(exc)[:120]}")


def judge(doc: Document, max_work: int = MAX_WORK) -> tuple[CellResult, ...]:
    """The results of every cell of a read document (``LimitReached`` past ``max_work`` units)."""
    f = _File(doc, Meter(max_work))
    return tuple(_cell(f, c) for c in doc.cells)


def verify_file(path: str | os.PathLike[str], max_work: int = MAX_WORK) -> tuple[CellResult, ...]:
    """Read a bracket file with this package's reader and judge every cell: a tuple of ``CellResult``.

    Raises ``Malformed`` (one line) when the file is not a bracket file or is past a limit.
    """
    return judge(read(path), max_work)

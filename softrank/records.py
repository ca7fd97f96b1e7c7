"""The records the front door returns: ``Bracket`` (one cell), ``Verdicts``, ``Brackets``.

Every number in these records comes from the exact tier's pass over a
bracket file (``exact.verify``): the ranks are the claims it judged, the
certificate kinds those of the witnesses it checked, the margins its exact
rationals (as ``fractions.Fraction``). ``Brackets`` holds only cells whose
two sides it verified, plus the file itself, so ``Brackets.save`` writes the
standard bracket file (``docs/bracket-format.md``) and ``Brackets.load``
re-verifies one and gives the same record back.
"""
from __future__ import annotations

import errno
import hashlib
import html
import math
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from flint import fmpq

import numpy as np

from exact.bracketfile import BracketFile, read_bracket_file
from exact.errors import MalformedInput
from exact.limits import MAX_FILE_BYTES, MAX_WORK
from exact.verify import CellReport, judge_file
from fileio.safeio import SafeIOError, escape, file_kind, write_bytes
from numeric.search.inputs import parse_eps
from softrank.errors import SoundnessError, UserInputError
from softrank.provenance import ProvenanceView

__all__ = ["Bracket", "Verdicts", "Brackets", "read_verified"]


def _fraction(q: fmpq | None) -> Fraction | None:
    """An exact ``flint.fmpq`` as a ``Fraction`` (None stays None)."""
    return None if q is None else Fraction(int(q.p), int(q.q))


def _approx(q: Fraction | None) -> str:
    """A short decimal image of an exact rational, for tables only."""
    if q is None:
        return "-"
    try:
        return f"{float(q):.2e}"
    except OverflowError:
        return "huge"


def _eps_text(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


@dataclass(frozen=True)
class Bracket:
    """One cell: the claim ``lower <= r_eps(A) <= upper`` and the exact tier's verdict on each side.

    ``lower_kind``/``upper_kind`` name the certificates checked (``trivial``,
    ``frobenius`` K.2, ``reconstruction`` and ``row_reconstruction`` K.3,
    ``odd_map``; ``factors`` K.1); a margin is the exact slack of the side's
    inequality (an upper side's ``eps - ||A - B||_row1``, a lower side's strict
    gap); ``slack`` the proved softmax slack of a logit target (K.5).
    """

    id: str
    eps: Fraction
    lower: int
    upper: int
    lower_kind: str
    upper_kind: str
    lower_margin: Fraction | None
    upper_margin: Fraction | None
    lower_verified: bool
    upper_verified: bool
    lower_reason: str = ""
    upper_reason: str = ""
    slack: Fraction | None = None
    target: str = ""
    shape: tuple[int, ...] = ()
    capped: bool = False
    #: which matrix of a batch: "LAYER.HEAD" for a captured head, else its index, e.g. "[0,3]"; "" for one matrix
    head: str = ""

    @property
    def verified(self) -> bool:
        """Both sides verified by the exact tier."""
        return self.lower_verified and self.upper_verified

    @property
    def closed(self) -> bool:
        """Verified and ``lower == upper``: r_eps(A) is known exactly."""
        return self.verified and self.lower == self.upper

    @classmethod
    def from_report(cls, r: CellReport, target: str, view: ProvenanceView) -> "Bracket":
        """The cell of the exact tier's report ``r`` on a target, with what its provenance says (``view``)."""
        return cls(r.id, Fraction(int(r.eps.p), int(r.eps.q)), r.lower.rank, r.upper.rank, r.lower.kind, r.upper.kind,
                   _fraction(r.lower.margin), _fraction(r.upper.margin), r.lower.verified, r.upper.verified,
                   r.lower.reason, r.upper.reason, _fraction(r.slack), target, tuple(r.shape), view.capped,
                   view.head)


# ------------------------------------------------------------------ tables
def _rows(cells: Sequence[Bracket], labels: list[str] | None, verdicts: bool) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a table: [head,] [cell,] eps, L, U, closed, certificates and margins[, slack][, verdict]."""
    slack = any(c.slack is not None for c in cells)
    head = (["head"] if labels else []) + (["cell"] if verdicts else []) + [
        "eps", "L", "U", "closed", "lower certificate", "lower margin", "upper certificate", "upper margin"] + (
        ["slack"] if slack else []) + (["exact tier"] if verdicts else [])
    rows: list[list[str]] = []
    for i, c in enumerate(cells):
        why = "; ".join(x for x in (c.lower_reason, c.upper_reason) if x)
        rows.append(([labels[i]] if labels else []) + ([c.id] if verdicts else []) + [
            _eps_text(c.eps), str(c.lower), str(c.upper), "yes" if c.closed else "no", c.lower_kind,
            _approx(c.lower_margin), c.upper_kind, _approx(c.upper_margin)] + (
            [_approx(c.slack)] if slack else []) + (
            ["verified" if c.verified else f"REFUTED ({why})"] if verdicts else []))
    return head, rows


#: A table: (title, header, rows of cells as text).
Table = tuple[str, list[str], list[list[str]]]


def _text(title: str, head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    line: Callable[[list[str]], str] = lambda r: "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip()
    return "\n".join([title, line(head)] + [line(r) for r in rows])


def _markdown(title: str, head: list[str], rows: list[list[str]]) -> str:
    esc: Callable[[str], str] = lambda x: x.replace("|", "\\|")
    out = [f"**{esc(title)}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(out + ["| " + " | ".join(esc(x) for x in r) + " |" for r in rows])


def _html(title: str, head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>" for r in rows)
    return (f"<p><b>{html.escape(title)}</b></p><table><thead><tr>{th}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


# ------------------------------------------------------------------ verdicts
class _Rendered:
    """``table()`` for people and the Jupyter renderings, all from one ``_table()``: (title, head, rows)."""

    def _table(self) -> Table:
        raise NotImplementedError

    def table(self) -> str:
        """A fixed-width table, one line per cell (a matrix at one tolerance)."""
        return _text(*self._table())

    def _repr_markdown_(self) -> str:
        return _markdown(*self._table())

    def _repr_html_(self) -> str:
        return _html(*self._table())


@dataclass(frozen=True)
class Verdicts(_Rendered):
    """The exact tier's verdict on every cell of one bracket file (``softrank.verify``)."""

    source: str
    cells: tuple[Bracket, ...]

    @property
    def all_verified(self) -> bool:
        """Every side of every cell verified (a file always has at least one cell)."""
        return all(c.verified for c in self.cells)

    def __len__(self) -> int:
        return len(self.cells)

    def __iter__(self) -> Iterator[Bracket]:
        return iter(self.cells)

    def __getitem__(self, i: int) -> Bracket:
        return self.cells[i]

    def _table(self) -> Table:
        ok = sum(c.verified for c in self.cells)
        title = f"{self.source}: {ok}/{len(self.cells)} cells verified on both sides by the exact tier"
        return (title, *_rows(self.cells, None, verdicts=True))


def _read_source(path: Path) -> bytes:
    """The bytes of the regular file ``path`` (a link to one is followed), read once, at most
    ``MAX_FILE_BYTES``: a FIFO, a device, a directory or a link loop is named as what it is, and
    refused without blocking."""
    shown = escape(path, 4096)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise UserInputError(f"{shown}: no such file") from None
        if exc.errno == errno.ELOOP:
            raise UserInputError(f"{shown}: a symbolic link loop, not a file") from None
        if exc.errno == errno.ENOTDIR:
            raise UserInputError(f"{shown}: a component of the path is not a directory") from None
        raise UserInputError(f"{shown}: cannot read it: {exc.strerror or type(exc).__name__}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserInputError(f"{shown} is {file_kind(info.st_mode)}, not a bracket file")
        if info.st_size > MAX_FILE_BYTES:
            raise UserInputError(f"{shown}: {info.st_size} bytes, more than the limit of {MAX_FILE_BYTES}")
        parts: list[bytes] = []
        got = 0
        while True:
            chunk = os.read(fd, min(1 << 24, MAX_FILE_BYTES + 1 - got))
            if not chunk:
                return b"".join(parts)
            got += len(chunk)
            if got > MAX_FILE_BYTES:
                raise UserInputError(f"{shown}: more than the limit of {MAX_FILE_BYTES} bytes")
            parts.append(chunk)
    except OSError as exc:
        raise UserInputError(f"{shown}: cannot read it: {exc.strerror or type(exc).__name__}") from None
    except MemoryError:
        raise UserInputError(f"{shown}: out of memory reading it") from None
    finally:
        os.close(fd)


def _judged(source: object, max_work: int) -> tuple[BracketFile, list[CellReport], bytes, str]:
    """(file, exact reports, file bytes, name) of a path or the bytes of a bracket file.

    A path is read once; the exact tier then judges a private copy of exactly those bytes (the bytes
    returned), so a file replaced while it is judged cannot be returned in place of the judged one."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "<bytes>"
    elif isinstance(source, (str, os.PathLike)):
        data, name = _read_source(Path(source)), escape(Path(source), 4096)
    else:
        raise UserInputError(f"expected a path or the bytes of a bracket file, got {type(source).__name__}")
    try:
        with tempfile.TemporaryDirectory(prefix="softrank-") as tmp:
            path = Path(tmp) / "brackets.safetensors"
            path.write_bytes(data)
            bf = read_bracket_file(path)
            reports, _ = judge_file(bf, max_work=max_work)
    except MalformedInput as exc:
        raise UserInputError(f"{name}: malformed bracket file: {exc}") from None
    except MemoryError:
        raise UserInputError(f"{name}: out of memory while verifying") from None
    except OSError as exc:
        raise UserInputError(f"{name}: cannot make a private copy to verify: "
                             f"{exc.strerror or type(exc).__name__}") from None
    if bf.sha256 != hashlib.sha256(data).hexdigest():          # what was judged is what is kept
        raise UserInputError(f"{name}: the bytes verified are not the bytes read")
    return bf, reports, data, name


def _bracket_cells(bf: BracketFile, reports: list[CellReport]) -> tuple[tuple[Bracket, ...], list[ProvenanceView]]:
    """The cells of the reports, and the view of every cell's provenance (in file order), each parsed once."""
    views = [ProvenanceView.from_json(c.provenance) for c in bf.cells]
    return tuple(Bracket.from_report(r, bf.cells[r.index].target.matrix, views[r.index]) for r in reports), views


def read_verified(source: object, max_work: int = MAX_WORK) -> Verdicts:
    """The exact tier's ``Verdicts`` on a bracket file given by path or bytes."""
    bf, reports, _, name = _judged(source, max_work)
    return Verdicts(name, _bracket_cells(bf, reports)[0])


# ------------------------------------------------------------------ brackets
def _layout(views: list[ProvenanceView], cells: tuple[Bracket, ...],
            name: str) -> tuple[tuple[Fraction, ...], tuple[int, ...], tuple[Bracket, ...]]:
    """(eps, batch shape, cells in batch-major, eps-minor order) of a verified file.

    Cells are grouped by target matrix, in file order; every target must carry the
    same tolerances in the same order. The batch shape is the one ``softrank.bracket``
    recorded in the provenance, else (k,) for k targets, () for one."""
    groups: dict[str, list[Bracket]] = {}
    for c in cells:
        groups.setdefault(c.target, []).append(c)
    eps_lists = {tuple(c.eps for c in g) for g in groups.values()}
    if len(eps_lists) != 1:
        raise UserInputError(f"{name}: its targets do not share one list of tolerances; read it with softrank.verify")
    (eps,) = eps_lists
    shapes = {v.recorded_batch_shape(name) for v in views}
    shape = next(iter(shapes)) if len(shapes) == 1 else None
    if shape is None or math.prod(shape) != len(groups):
        shape = () if len(groups) == 1 else (len(groups),)
    return eps, shape, tuple(c for g in groups.values() for c in g)


@dataclass(frozen=True)
class Brackets(_Rendered):
    """Verified brackets ``L <= r_eps(A) <= U`` of one matrix or a batch, at each tolerance.

    ``eps``: the tolerances (exact), in the caller's order; ``batch_shape``: the
    leading shape of the input (``()`` for one matrix); ``cells``: one
    ``Bracket`` per matrix and tolerance, batch-major (C order) and eps-minor,
    each verified on both sides by the exact tier. The arrays ``lower``,
    ``upper``, ``closed``, ``lower_kind``, ``upper_kind``, ``lower_margin``
    and ``upper_margin`` have shape ``batch_shape + (len(eps),)``.
    ``provenance``: what the first cell records (effort, budgets, seed,
    versions, the input's dtype and conversion); ``file``: the bracket file.
    Two ``Brackets`` are equal when their tolerances, shape and cells are.
    """

    eps: tuple[Fraction, ...]
    batch_shape: tuple[int, ...]
    cells: tuple[Bracket, ...]
    provenance: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    file: bytes = field(default=b"", compare=False, repr=False)
    #: the first cell's provenance as the tables read it (``softrank.provenance``)
    view: ProvenanceView = field(default_factory=ProvenanceView, compare=False, repr=False)

    # -------------------------------------------------------------- reading
    @classmethod
    def load(cls, source: object, max_work: int = MAX_WORK) -> "Brackets":
        """Re-verify a bracket file (path or bytes) and return its brackets; ``UserInputError`` when
        it is malformed or the exact tier refutes a side (``softrank.verify`` shows every verdict)."""
        bf, reports, data, name = _judged(source, max_work)
        cells, views = _bracket_cells(bf, reports)
        bad = next((c for c in cells if not c.verified), None)
        if bad is not None:
            why = "; ".join(x for x in (bad.lower_reason, bad.upper_reason) if x)
            raise UserInputError(f"{name}: the exact tier refutes cell {bad.id!r} ({why}); see softrank.verify")
        return cls._build(bf, cells, views, data, name)

    @classmethod
    def _from_own_file(cls, bf: BracketFile, reports: list[CellReport], data: bytes) -> "Brackets":
        """The brackets of a file ``softrank.bracket`` has just written: a refuted side is a soundness bug."""
        cells, views = _bracket_cells(bf, reports)
        for c in cells:
            if not c.verified:
                why = "; ".join(x for x in (c.lower_reason, c.upper_reason) if x)
                raise SoundnessError(f"the exact tier refuted cell {c.id!r} that the search had verified: {why}")
        return cls._build(bf, cells, views, data, "<bracket file>")

    @classmethod
    def _build(cls, bf: BracketFile, cells: tuple[Bracket, ...], views: list[ProvenanceView], data: bytes,
               name: str) -> "Brackets":
        eps, shape, ordered = _layout(views, cells, name)
        return cls(eps, shape, ordered, dict(bf.cells[0].provenance), data, views[0])

    # -------------------------------------------------------------- arrays
    def _array(self, attr: str, dtype: type = object) -> np.ndarray:
        a: np.ndarray = np.empty(len(self.cells), dtype=dtype)
        a[:] = [getattr(c, attr) for c in self.cells] if dtype is object else \
            np.array([getattr(c, attr) for c in self.cells], dtype=dtype)
        a = a.reshape(self.batch_shape + (len(self.eps),))
        a.setflags(write=False)
        return a

    @property
    def lower(self) -> np.ndarray:
        """Verified lower bounds L, shape ``batch_shape + (len(eps),)``."""
        return self._array("lower", np.int64)

    @property
    def upper(self) -> np.ndarray:
        """Verified upper bounds U."""
        return self._array("upper", np.int64)

    @property
    def closed(self) -> np.ndarray:
        """Where L = U."""
        return self._array("closed", bool)

    @property
    def lower_kind(self) -> np.ndarray:
        return self._array("lower_kind")

    @property
    def upper_kind(self) -> np.ndarray:
        return self._array("upper_kind")

    @property
    def lower_margin(self) -> np.ndarray:
        """Exact margins (``Fraction``) of the lower certificates."""
        return self._array("lower_margin")

    @property
    def upper_margin(self) -> np.ndarray:
        return self._array("upper_margin")

    def cell(self, eps: object, index: int | Sequence[int] = ()) -> Bracket:
        """The ``Bracket`` at tolerance ``eps`` (as given or exact) of the matrix at ``index``.

        ``index`` is an int or a tuple into ``batch_shape`` (``()`` for one matrix)."""
        try:
            k = self.eps.index(parse_eps(eps))
        except (ValueError, TypeError):
            raise UserInputError(f"no cell at eps {eps!r} (tolerances: "
                                 f"{', '.join(_eps_text(e) for e in self.eps)})") from None
        at = (index,) if isinstance(index, (int, np.integer)) else tuple(index)
        if len(at) != len(self.batch_shape) or not all(0 <= i < d for i, d in zip(at, self.batch_shape)):
            raise UserInputError(f"index {at} is outside the batch shape {self.batch_shape}")
        flat = int(np.ravel_multi_index(at, self.batch_shape)) if self.batch_shape else 0
        return self.cells[flat * len(self.eps) + k]

    # -------------------------------------------------------------- output
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the standard bracket file (``python -m exact verify`` and ``Brackets.load`` read it).

        Written through ``fileio.safeio.write_bytes``: atomically (a new file renamed over the target),
        never through a link, and a target that is a link, a FIFO, a device or a directory is refused with
        ``UserInputError`` (a FIFO without blocking). Missing directories are created."""
        try:
            return write_bytes(Path(path), self.file)
        except SafeIOError as exc:
            raise UserInputError(str(exc)) from None

    def _labels(self) -> list[str] | None:
        if not self.batch_shape:
            return None
        return [c.head or "[" + ",".join(str(int(x)) for x in np.unravel_index(i // len(self.eps), self.batch_shape))
                + "]" for i, c in enumerate(self.cells)]

    def _table(self) -> Table:
        v = self.view
        what = "1 matrix" if not self.batch_shape else f"{int(np.prod(self.batch_shape))} matrices {self.batch_shape}"
        n = self.cells[0].shape
        kind = ("the exact softmax of each head's logits" if v.input_kind == "logits"
                else f"input {v.conversion}" if v.conversion else "")
        title = (f"softrank brackets L <= r_eps(A) <= U, verified by the exact tier: {what} of {n[0]} x {n[1]}, "
                 f"effort {v.effort}, seed {v.seed}" + (f", {kind}" if kind else ""))
        return (title, *_rows(self.cells, self._labels(), verdicts=False))

    def __repr__(self) -> str:
        cells = ", ".join(f"eps={_eps_text(c.eps)}: [{c.lower}, {c.upper}]" for c in self.cells[:6])
        more = f", ... ({len(self.cells)} cells)" if len(self.cells) > 6 else ""
        return f"Brackets(batch_shape={self.batch_shape}, {cells}{more})"

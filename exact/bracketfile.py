"""Bracket files, format version 1: the one home of the format (``docs/bracket-format.md``).

A bracket file is a safetensors file: 8 bytes little-endian header length N,
N bytes of JSON header, then the tensor data. The header's ``__metadata__``
has exactly one key, ``softrank``, whose value is the JSON claim document.

The reader parses the container itself (no third-party parser in the
trusted core). It opens regular files only, reads the header first and
validates it within ``exact.limits`` before any data: duplicate JSON keys,
NaN/Infinity literals, dtypes but F64, shapes but 2-D, and data that is not
covered exactly once by the tensors (overlaps, holes, trailing bytes) are
refused, and so are tensors named by cells whose declared bytes exceed the
memory limit. Then it reads each tensor by its offset, hashing every byte
(SHA-256 of the header, and of the whole file). Every string taken from
the file appears in a message as ``ascii()`` shows it (one line, no control
characters). The writer is not part of the trusted core:
``fileio.bracketwriter`` takes the constants from here.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any, BinaryIO, NoReturn, Protocol, cast

import numpy as np
from flint import fmpq

from .cellspec import CAP_KINDS, LOWER_KINDS, UPPER_KINDS, CellSpec, Claim, TargetSpec
from .errors import LimitExceeded, MalformedInput
from .limits import (MAX_CELLS, MAX_FILE_BYTES, MAX_HEADER_BYTES, MAX_MATRIX_ENTRIES, MAX_MATRIX_SIDE, MAX_TENSOR_BYTES,
                     MAX_TENSORS)
from .oddmap import MAX_ODDMAP_DIM, dimension, labels_of
from .rational import parse_nonnegative

__all__ = ["FORMAT", "VERSION", "Target", "Claim", "Cell", "CellSpec", "BracketFile", "read_bracket_file",
           "header_facts", "show", "UPPER_KINDS", "LOWER_KINDS"]

FORMAT = "softrank-brackets"
VERSION = 1

#: Witness kinds and the fields each must have (tensor names, or ints): ``exact.cellspec``, the one
#: definition the producers and this reader share (``UPPER_KINDS``, ``LOWER_KINDS``).
#: Bytes read at a time when an unreferenced tensor is checked for NaN and Inf.
_CHUNK = 2**24
#: name -> (shape, begin, end) of every tensor of a file, validated.
_Layout = dict[str, tuple[tuple[int, int], int, int]]


class _Digest(Protocol):
    """What the reader needs of a hashlib object."""

    def update(self, data: bytes, /) -> None: ...


def show(value: object, limit: int = 60) -> str:
    """A value from a file, as one escaped line: ``ascii()`` of a string, JSON of anything else."""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=True, default=str)
        return value[:limit] + ("..." if len(value) > limit else "")
    return ascii(value[:limit]) + ("..." if len(value) > limit else "")


@dataclass(frozen=True)
class Target:
    """The matrix a cell is about: ``matrix`` itself, or ``softmax_row(logits)`` within ``slack``."""

    matrix: str
    logits: str | None = None
    slack: fmpq | None = None


@dataclass(frozen=True)
class Cell:
    """A validated cell: ``spec`` as the file writes it (``exact.cellspec``), with its tolerance and slack parsed."""

    spec: CellSpec
    eps: fmpq
    target: Target

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def eps_text(self) -> str:
        return self.spec.eps

    @property
    def lower(self) -> Claim:
        return self.spec.lower

    @property
    def upper(self) -> Claim:
        return self.spec.upper

    @property
    def convex_cap(self) -> Claim | None:
        return self.spec.convex_cap

    @property
    def provenance(self) -> dict[str, Any]:
        return dict(self.spec.provenance or {})


@dataclass(frozen=True)
class BracketFile:
    path: str
    cells: tuple[Cell, ...]
    tensors: dict[str, np.ndarray]            # name -> read-only float64 ndarray (the tensors the cells name)
    header_sha256: str = ""  # SHA-256 of the header length and the header (what ``header_facts`` reads)
    sha256: str = ""         # SHA-256 of the whole file: every byte was read, in order


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise MalformedInput(f"duplicate JSON key {show(key)}")
        out[key] = value
    return out


def _no_constants(name: str) -> NoReturn:
    raise MalformedInput(f"JSON literal {name} is not allowed")


def _finite(text: str) -> float:
    """A JSON number with a fraction or exponent, refused when it is beyond float range (1e400)."""
    value = float(text)
    if not math.isfinite(value):
        raise MalformedInput(f"JSON number {show(text, 40)} is beyond float range")
    return value


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants, parse_float=_finite)
    except MalformedInput:
        raise
    except (ValueError, RecursionError) as exc:
        raise MalformedInput(f"{what} is not valid JSON: {show(str(exc).splitlines()[0], 80)}") from None


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedInput(f"{what} must be an integer, got {show(value, 40)}")
    return value


def _keys(obj: object, what: str, required: Set[str], optional: Set[str] = frozenset()) -> None:
    if not isinstance(obj, dict):
        raise MalformedInput(f"{what} must be a JSON object")
    missing = required - obj.keys()
    unknown = obj.keys() - required - optional
    if missing:
        raise MalformedInput(f"{what}: missing key {show(sorted(missing)[0], 40)}")
    if unknown:
        raise MalformedInput(f"{what}: unknown key {show(sorted(unknown)[0], 40)}")


# ------------------------------------------------------------------ container
def _open(path: str) -> tuple[BinaryIO, int]:
    """A binary file object on a regular file (a FIFO or device is refused without blocking)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise MalformedInput(f"cannot read file: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise MalformedInput(f"{_kind(info.st_mode)}, not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        os.close(fd)
        raise LimitExceeded(f"file has {info.st_size} bytes, limit {MAX_FILE_BYTES}")
    return os.fdopen(fd, "rb"), info.st_size


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (for the message that refuses it)."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def _read_exactly(fh: BinaryIO, n: int, what: str) -> bytes:
    try:
        raw = fh.read(n)
    except OSError as exc:
        raise MalformedInput(f"cannot read file: {exc.strerror or exc}") from None
    if len(raw) != n:
        raise MalformedInput(f"truncated file: {what}")
    return raw


def _header(fh: BinaryIO, size: int, digest: _Digest) -> tuple[dict[str, Any], int]:
    """The header dict and the size of the data section; ``digest`` (a hashlib object) takes every byte read."""
    if size < 8:
        raise MalformedInput("truncated file: no header length")
    raw = _read_exactly(fh, 8, "no header length")
    n = int.from_bytes(raw, "little")
    if n > MAX_HEADER_BYTES:
        raise LimitExceeded(f"header of {n} bytes, limit {MAX_HEADER_BYTES}")
    if 8 + n > size:
        raise MalformedInput(f"truncated file: header of {n} bytes, file has {size}")
    digest.update(raw)
    raw = _read_exactly(fh, n, "header")
    digest.update(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedInput("header is not UTF-8") from None
    header = _json(text, "safetensors header")
    if not isinstance(header, dict):
        raise MalformedInput("safetensors header must be a JSON object")
    return header, size - 8 - n


def _layout(header: dict[str, Any], data_size: int) -> _Layout:
    """name -> (shape, begin, end), validated; the spans cover the data exactly once."""
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    if len(entries) > MAX_TENSORS:
        raise LimitExceeded(f"{len(entries)} tensors, limit {MAX_TENSORS}")
    layout: _Layout = {}
    for name, info in entries.items():
        what = f"tensor {show(name)}"
        _keys(info, what, {"dtype", "shape", "data_offsets"})
        if info["dtype"] != "F64":
            raise MalformedInput(f"{what} has dtype {show(info['dtype'], 20)}, expected F64")
        shape, offsets = info["shape"], info["data_offsets"]
        if not isinstance(shape, list) or len(shape) != 2:
            raise MalformedInput(f"{what} must be 2-D, has shape {show(shape, 40)}")
        m, n = (_int(s, f"{what} shape") for s in shape)
        if m < 0 or n < 0:
            raise MalformedInput(f"{what} has a negative side [{m}, {n}]")
        if max(m, n) > MAX_MATRIX_SIDE or m * n > MAX_MATRIX_ENTRIES:
            raise LimitExceeded(f"{what} has shape [{m}, {n}], beyond the limits "
                                f"(side {MAX_MATRIX_SIDE}, entries {MAX_MATRIX_ENTRIES})")
        if not isinstance(offsets, list) or len(offsets) != 2:
            raise MalformedInput(f"{what}: data_offsets must be [begin, end]")
        begin, end = (_int(o, f"{what} data_offsets") for o in offsets)
        if not 0 <= begin <= end <= data_size:
            raise MalformedInput(f"{what}: data [{begin}, {end}) outside the {data_size} data bytes (truncated file?)")
        if end - begin != 8 * m * n:
            raise MalformedInput(f"{what}: {end - begin} data bytes for shape [{m}, {n}] of F64")
        layout[name] = ((m, n), begin, end)
    covered = 0
    for begin, end, name in sorted((b, e, k) for k, (_, b, e) in layout.items()):
        if begin < covered:
            raise MalformedInput(f"tensor {show(name)} overlaps the tensor before it")
        if begin > covered:
            raise MalformedInput(f"data bytes [{covered}, {begin}) belong to no tensor")
        covered = end
    if covered != data_size:
        raise MalformedInput(f"{data_size - covered} trailing bytes after the last tensor")
    return layout


def _tensor_data(fh: BinaryIO, start: int, shape: tuple[int, int], begin: int, end: int, *, what: str, keep: bool,
                 digest: _Digest) -> np.ndarray | None:
    """The tensor as a read-only array (``keep``), or None after checking it chunk by chunk."""
    fh.seek(start + begin)
    pos = begin
    parts: list[np.ndarray] = []
    while pos < end or (keep and not parts):
        step = end - pos if keep else min(_CHUNK, end - pos)
        raw = _read_exactly(fh, step, f"{what} data")
        digest.update(raw)
        array = np.frombuffer(raw, dtype="<f8")
        if not np.isfinite(array).all():
            raise MalformedInput(f"{what} contains NaN or Inf")
        parts.append(array)
        pos += step
    return parts[0].reshape(shape).astype(np.float64, copy=False) if keep else None


# ------------------------------------------------------------------ claims
def _tensor(name: object, layout: _Layout, what: str, nonempty: bool = False) -> str:
    if not isinstance(name, str):
        raise MalformedInput(f"{what} must be a tensor name (string)")
    if name not in layout:
        raise MalformedInput(f"{what} names a missing tensor {show(name)}")
    if nonempty and 0 in layout[name][0]:
        raise MalformedInput(f"{what} {show(name)} is empty (shape {list(layout[name][0])})")
    return name


def _claim(obj: Any, what: str, kinds: Mapping[str, Mapping[str, str]], layout: _Layout) -> Claim:
    _keys(obj, what, {"rank", "witness"})
    rank = _int(obj["rank"], f"{what} rank")
    if rank < 0:
        raise MalformedInput(f"{what} rank must be >= 0, got {rank}")
    witness = obj["witness"]
    if not isinstance(witness, dict) or not isinstance(witness.get("kind"), str):
        raise MalformedInput(f"{what} witness must be an object with a string 'kind'")
    kind = witness["kind"]
    if kind not in kinds:
        raise MalformedInput(f"{what}: unknown witness kind {show(kind, 40)}")
    spec = kinds[kind]
    _keys(witness, f"{what} witness", {"kind", *spec})
    fields: dict[str, Any] = {}
    for key, typ in spec.items():
        if typ == "tensor":
            fields[key] = _tensor(witness[key], layout, f"{what} witness {key}")
        else:
            fields[key] = _int(witness[key], f"{what} witness {key}")
            if fields[key] < 0:
                raise MalformedInput(f"{what} witness {key} must be >= 0")
    return Claim(rank, kind, fields)


def _cell(obj: Any, index: int, layout: _Layout) -> Cell:
    what = f"cell {index}"
    _keys(obj, what, {"id", "eps", "target", "lower", "upper"}, {"provenance", "convex_cap"})
    if not isinstance(obj["id"], str):
        raise MalformedInput(f"{what}: id must be a string")
    what = f"cell {show(obj['id'])}"
    eps = parse_nonnegative(obj["eps"], f"{what} eps")
    target = obj["target"]
    if isinstance(target, dict) and "logits" in target:
        _keys(target, f"{what} target", {"matrix", "logits", "slack"})
        tgt = Target(_tensor(target["matrix"], layout, f"{what} target matrix", nonempty=True),
                     _tensor(target["logits"], layout, f"{what} target logits", nonempty=True),
                     parse_nonnegative(target["slack"], f"{what} slack"))
    else:
        _keys(target, f"{what} target", {"matrix"})
        tgt = Target(_tensor(target["matrix"], layout, f"{what} target matrix", nonempty=True))
    provenance = obj.get("provenance", {})
    if not isinstance(provenance, dict):
        raise MalformedInput(f"{what}: provenance must be a JSON object")
    lower = _claim(obj["lower"], f"{what} lower", LOWER_KINDS, layout)
    if lower.kind == "odd_map":
        _odd_map_shapes(lower.fields, layout[tgt.matrix][0], layout, f"{what} lower witness")
    upper = _claim(obj["upper"], f"{what} upper", UPPER_KINDS, layout)
    cap = None
    if "convex_cap" in obj:
        cap = _claim(obj["convex_cap"], f"{what} convex_cap", CAP_KINDS, layout)
        _cap_shapes(cap, layout[tgt.matrix][0], layout, f"{what} convex_cap witness")
    # every field is validated: only now the cell's typed spec is built
    slack = target["slack"] if tgt.logits is not None else None
    spec = CellSpec(obj["id"], obj["eps"], TargetSpec(tgt.matrix, tgt.logits, slack), lower, upper,
                    obj.get("provenance"), cap)
    return Cell(spec, eps, tgt)


def _cap_shapes(cap: Claim, target: tuple[int, int], layout: _Layout, what: str) -> None:
    """A convex cap's ``mu`` and ``blocks`` (or ``order``) are 1 x n; its ``e`` is m x k with k >= 1 for blocks,
    m x n for windows, whose width is in ``[1, n]`` (m x n the target)."""
    m, n = target
    f = cap.fields
    shapes = {key: layout[v][0] for key, v in f.items() if isinstance(v, str)}
    structure = "blocks" if cap.kind == "column_blocks" else "order"
    k = shapes["e"][1] if cap.kind == "column_blocks" else n
    if shapes[structure] != (1, n) or shapes["mu"] != (1, n) or shapes["e"] != (m, k) or k < 1:
        raise MalformedInput(f"{what} has {structure} {list(shapes[structure])}, mu {list(shapes['mu'])}, "
                             f"e {list(shapes['e'])}; the target is [{m}, {n}] (need [1, n], [1, n], "
                             f"{'[m, k >= 1]' if structure == 'blocks' else '[m, n]'})")
    if cap.kind == "cyclic_windows" and not 1 <= cast(int, f["width"]) <= n:
        raise MalformedInput(f"{what} width {f['width']} outside [1, {n}]")


def _cap_labels(cell: Cell, tensors: dict[str, np.ndarray]) -> None:
    """Every block label of a convex cap is an integer in ``[0, k)``, k the columns of its ``e``; an order is
    a permutation of the columns."""
    cap = cast(Claim, cell.convex_cap)
    if cap.kind == "cyclic_windows":
        order = tensors[cast(str, cap.fields["order"])].ravel()
        if not np.array_equal(np.sort(order), np.arange(order.size, dtype=np.float64)):
            raise MalformedInput(f"cell {show(cell.id)} convex_cap witness: order is not a permutation of the "
                                 f"{order.size} columns")
        return
    labels, k = tensors[cast(str, cap.fields["blocks"])], tensors[cast(str, cap.fields["e"])].shape[1]
    bad = (labels != np.floor(labels)) | (labels < 0) | (labels >= k)
    if bad.any():
        j = int(np.argmax(bad.ravel()))
        raise MalformedInput(f"cell {show(cell.id)} convex_cap witness: column {j} has block label "
                             f"{show(float(labels.ravel()[j]))}, need an integer in [0, {k})")


def _odd_map_shapes(fields: dict[str, Any], target: tuple[int, int], layout: _Layout, what: str) -> None:
    """An odd map's labels are (3^d - 1) x 2 with 1 <= d <= MAX_ODDMAP_DIM; its points have n columns."""
    (V, two), points = layout[fields["labels"]][0], layout[fields["points"]][0]
    d = dimension(V)
    if two != 2 or d is None:
        raise MalformedInput(f"{what} labels have shape [{V}, {two}], need [3^d - 1, 2] for some d >= 1")
    if d > MAX_ODDMAP_DIM:
        raise LimitExceeded(f"{what}: odd map of dimension {d}, limit {MAX_ODDMAP_DIM}")
    if points[1] != target[1]:
        raise MalformedInput(f"{what} points have {points[1]} columns, the target has {target[1]}")


def _odd_map_labels(cell: Cell, tensors: dict[str, np.ndarray], seen: set[tuple[str, int]]) -> None:
    """Every label is (integer row of the target, +1 or -1); each (labels, rows) pair is read once."""
    rows = tensors[cell.target.matrix].shape[0]
    key = (cast(str, cell.lower.fields["labels"]), rows)   # a tensor name: checked by _claim
    if key in seen:
        return
    try:
        labels = labels_of(tensors[key[0]])
    except ValueError as exc:
        raise MalformedInput(f"cell {show(cell.id)} lower witness: {exc}") from None
    bad = next((k for k, (i, _) in enumerate(labels) if not 0 <= i < rows), None)
    if bad is not None:
        raise MalformedInput(f"cell {show(cell.id)} lower witness: label {bad} names row {labels[bad][0]}, "
                             f"the target has {rows} rows")
    seen.add(key)


def _document(header: dict[str, Any]) -> list[Any]:
    """The claim document's cells (a non-empty JSON array), checked up to the cells themselves."""
    metadata = header.get("__metadata__")
    if not isinstance(metadata, dict) or "softrank" not in metadata:
        raise MalformedInput("no 'softrank' document in the safetensors metadata")
    if set(metadata) != {"softrank"}:
        extra = sorted(set(metadata) - {'softrank'})[0]
        raise MalformedInput(f"__metadata__ has a key besides 'softrank': {show(extra, 40)}")
    if not isinstance(metadata["softrank"], str):
        raise MalformedInput("the 'softrank' metadata value must be a JSON string")
    doc = _json(metadata["softrank"], "the 'softrank' document")
    _keys(doc, "the 'softrank' document", {"format", "version", "cells"})
    if doc["format"] != FORMAT:
        raise MalformedInput(f"unknown format {show(doc['format'], 40)}, expected {FORMAT!r}")
    if type(doc["version"]) is not int or doc["version"] != VERSION:      # 1.0, "1" and true are not version 1
        raise MalformedInput(f"unknown version {show(doc['version'], 20)}, this checker reads version {VERSION}")
    cells = doc["cells"]
    if not isinstance(cells, list):
        raise MalformedInput("'cells' must be a JSON array")
    if not cells:
        raise MalformedInput("'cells' is empty: nothing to verify")
    if len(cells) > MAX_CELLS:
        raise LimitExceeded(f"{len(cells)} cells, limit {MAX_CELLS}")
    return cells


def _names(cell: Cell) -> set[str | None]:
    names = {cell.target.matrix, cell.target.logits}
    for claim in (cell.lower, cell.upper, *((cell.convex_cap,) if cell.convex_cap else ())):
        names.update(v for v in claim.fields.values() if isinstance(v, str))
    return names - {None}


def read_bracket_file(path: str | os.PathLike[str], max_tensor_bytes: int = MAX_TENSOR_BYTES) -> BracketFile:
    """Read and validate a bracket file; raise ``MalformedInput`` with a one-line reason. The tensors the
    cells name are kept in memory: their declared bytes are checked against ``max_tensor_bytes`` first."""
    path = os.fspath(path)
    fh, size = _open(path)
    digest = hashlib.sha256()
    with fh:
        header, data_size = _header(fh, size, digest)
        header_sha256 = digest.hexdigest()
        cells = _document(header)
        layout = _layout(header, data_size)
        parsed = tuple(_cell(c, i, layout) for i, c in enumerate(cells))
        seen: set[Any] = set()
        for c in parsed:
            if c.id in seen:
                raise MalformedInput(f"duplicate cell id {show(c.id)}")
            seen.add(c.id)
        used: set[str | None] = set().union(*map(_names, parsed))
        kept = sum(end - begin for name, (_, begin, end) in layout.items() if name in used)
        if kept > max_tensor_bytes:
            raise LimitExceeded(f"the tensors that the cells name hold {kept} bytes, limit {max_tensor_bytes} "
                                "(raise it with --max-tensor-bytes)")
        start = size - data_size
        tensors: dict[str, np.ndarray] = {}
        for name, (shape, begin, end) in sorted(layout.items(), key=lambda item: item[1][1]):
            array = _tensor_data(fh, start, shape, begin, end, what=f"tensor {show(name)}", keep=name in used,
                                 digest=digest)
            if array is not None:
                tensors[name] = array
    seen = set()
    for c in parsed:
        if c.lower.kind == "odd_map":
            _odd_map_labels(c, tensors, seen)
        if c.convex_cap is not None:
            _cap_labels(c, tensors)
    return BracketFile(path, parsed, tensors, header_sha256, digest.hexdigest())


def header_facts(path: str | os.PathLike[str]) -> tuple[int, str]:
    """The number of cells of a bracket file and the SHA-256 of its header, from the header alone
    (raises ``MalformedInput``)."""
    fh, size = _open(os.fspath(path))
    digest = hashlib.sha256()
    with fh:
        return len(_document(_header(fh, size, digest)[0])), digest.hexdigest()

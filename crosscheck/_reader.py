"""The second checker's own reader of bracket files (docs/bracket-format.md, version 1).

Written from the format document, sharing no code with ``exact.bracketfile``.
Order of work, each step bounded before the next: open a regular file only
(a FIFO or a device is refused without blocking), check its size, read the
8-byte header length and the header, check the header's JSON nesting depth
*before* parsing it, parse it (no duplicate keys, no NaN/Infinity literals),
validate the claim document and the tensor table (dtypes, 2-D shapes within
the size limits, data covered exactly once), and only then read each tensor
at its offset, as little-endian float64, refusing NaN and Inf. Tensors that
no cell names are scanned in chunks and dropped.

Every violation raises ``Malformed`` with one line; every string from the
file appears in it as ``ascii()`` shows it.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from array import array
from dataclasses import dataclass, field
from fractions import Fraction
from collections.abc import Iterable
from typing import Any, BinaryIO, NoReturn

from ._errors import LimitReached, Malformed
from ._limits import (MAX_CELLS, MAX_FILE_BYTES, MAX_HEADER_BYTES, MAX_JSON_DEPTH, MAX_MATRIX_ENTRIES,
                      MAX_MATRIX_SIDE, MAX_ODDMAP_DIM, MAX_TENSORS)
from ._numbers import parse_nonnegative, show

__all__ = ["FORMAT", "VERSION", "Tensor", "Side", "Cell", "Document", "read", "odd_map_dimension"]

FORMAT = "softrank-brackets"
VERSION = 1
#: witness kind -> its fields ("t": a tensor name, "i": an integer >= 0).
UPPER = {"trivial": {}, "factors": {"P": "t", "Q": "t"}}
LOWER = {"trivial": {}, "reconstruction": {"R": "t", "X": "t", "L": "t"},
         "row_reconstruction": {"G": "t", "Z": "t", "M": "t"}, "frobenius": {"k": "i"},
         "odd_map": {"labels": "t", "points": "t"}}
#: The optional convex cap of a cell (a diagnostic, never a side).
CAP = {"column_blocks": {"blocks": "t", "mu": "t", "e": "t"},
       "cyclic_windows": {"order": "t", "width": "i", "mu": "t", "e": "t"}}
#: Bytes per read when an unnamed tensor is scanned for NaN and Inf.
_CHUNK = 2**24


@dataclass(frozen=True)
class Tensor:
    """A 2-D float64 tensor: ``values`` row-major (an ``array('d')``), ``shape`` (rows, cols)."""

    shape: tuple[int, int]
    values: array[float] = field(repr=False, compare=False)

    def row(self, i: int) -> array[float]:
        n = self.shape[1]
        return self.values[i * n:(i + 1) * n]


@dataclass(frozen=True)
class Side:
    rank: int
    kind: str
    fields: tuple[tuple[str, str | int], ...]            # ((name, tensor name or int), ...), sorted


@dataclass(frozen=True)
class Cell:
    id: str
    index: int
    eps: Fraction
    matrix: str
    logits: str | None
    slack: Fraction | None
    lower: Side
    upper: Side
    cap: Side | None = None


@dataclass(frozen=True)
class Document:
    path: str
    cells: tuple[Cell, ...]
    tensors: dict[str, Tensor]            # name -> Tensor, the tensors the cells name


#: name -> (shape, begin, end) of every tensor of a file
_Table = dict[str, tuple[tuple[int, int], int, int]]


# ------------------------------------------------------------------ JSON
#: A string without escapes, or one bracket: what the depth scan steps over (one match each).
_TOKEN = re.compile(r'"[^"]*"|[\[\]{}]')


def _depth(text: str, stop: int | None = None) -> int:
    r"""The nesting depth of JSON text (exact for valid JSON), in time and memory linear in its length;
    with ``stop``, the scan ends as soon as the depth passes it (the value returned is then ``stop + 1``),
    and a text with at most ``stop`` opening brackets is not scanned (the value is then at most ``stop``).

    Escapes are removed first (an escaped backslash, then an escaped quote: inside a JSON string a
    backslash always starts an escape, so pairing the backslashes of a run left to right is the parser's
    reading); a string is then a quote, no quote, a quote, which one pattern step skips whatever its
    length. Invalid JSON gets some depth; the parser then refuses it.

    >>> _depth('{"a": [1, {"b": "]]]{{\"\\"}], "c": []}')
    3
    >>> _depth("[" * 1000, stop=5)
    6
    """
    if stop is not None and text.count("[") + text.count("{") <= stop:
        return min(text.count("[") + text.count("{"), stop)  # cannot pass stop: no scan (a bound, not the depth)
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    depth = deepest = 0
    for match in _TOKEN.finditer(text):
        c = text[match.start()]
        if c == "[" or c == "{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop is not None and deepest > stop:
                    return deepest
        elif c == "]" or c == "}":
            depth -= 1
    return deepest


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise Malformed(f"duplicate JSON key {show(key)}")
        out[key] = value
    return out


def _constant(name: str) -> NoReturn:
    raise Malformed(f"JSON literal {name} is not allowed")


def _float(text: str) -> float:
    """A JSON number with a fraction or exponent; one beyond float range (``1e400``, which would read as
    infinity) is refused wherever it is, provenance included (docs/bracket-format.md section 1)."""
    value = float(text)
    if not math.isfinite(value):
        raise Malformed(f"JSON number {show(text, 40)} is beyond float range")
    return value


def _json(text: str, what: str) -> Any:
    if _depth(text, stop=MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise LimitReached(f"{what} nests deeper than {MAX_JSON_DEPTH}")
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float)
    except Malformed:
        raise
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"{what} is not valid JSON: {show(str(exc).splitlines()[0] if str(exc) else '', 80)}") from None


def _exact_keys(obj: Any, what: str, required: Iterable[str], optional: Iterable[str] = ()) -> None:
    if not isinstance(obj, dict):
        raise Malformed(f"{what} must be a JSON object")
    for key in sorted(set(required) - obj.keys()):
        raise Malformed(f"{what}: missing key {show(key, 40)}")
    for key in sorted(obj.keys() - set(required) - set(optional)):
        raise Malformed(f"{what}: unknown key {show(key, 40)}")


def _integer(value: Any, what: str) -> int:
    if type(value) is not int:                       # bool, float and str are not integers
        raise Malformed(f"{what} must be an integer, got {show(value, 40)}")
    return value


# ------------------------------------------------------------------ container
def _open(path: str) -> tuple[BinaryIO, int]:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise Malformed(f"cannot read file: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                                                 (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                                                 (stat.S_ISSOCK, "a socket")) if test(info.st_mode)), "a special file")
            raise Malformed(f"{kind}, not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise LimitReached(f"file has {info.st_size} bytes, limit {MAX_FILE_BYTES}")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb"), info.st_size


def _read(fh: BinaryIO, n: int, what: str) -> bytes:
    try:
        data: bytes = fh.read(n)
    except OSError as exc:
        raise Malformed(f"cannot read file: {exc.strerror or exc}") from None
    if len(data) != n:
        raise Malformed(f"truncated file: {what}")
    return data


def _doubles(raw: bytes) -> array[float]:
    values = array("d")
    values.frombytes(raw)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def _finite(values: array[float], what: str) -> None:
    if not all(map(math.isfinite, values)):
        raise Malformed(f"{what} contains NaN or Inf")


def _table(header: dict[str, Any], data_bytes: int) -> _Table:
    """name -> (shape, begin, end) for every tensor; the spans tile the data section."""
    names = [k for k in header if k != "__metadata__"]
    if len(names) > MAX_TENSORS:
        raise LimitReached(f"{len(names)} tensors, limit {MAX_TENSORS}")
    table: _Table = {}
    for name in names:
        what = f"tensor {show(name)}"
        info = header[name]
        _exact_keys(info, what, ("dtype", "shape", "data_offsets"))
        if info["dtype"] != "F64":
            raise Malformed(f"{what} has dtype {show(info['dtype'], 20)}, expected F64")
        shape = info["shape"]
        if not isinstance(shape, list) or len(shape) != 2:
            raise Malformed(f"{what} must be 2-D, has shape {show(shape, 40)}")
        rows, cols = (_integer(s, f"{what} shape") for s in shape)
        if rows < 0 or cols < 0:
            raise Malformed(f"{what} has a negative side [{rows}, {cols}]")
        if max(rows, cols) > MAX_MATRIX_SIDE or rows * cols > MAX_MATRIX_ENTRIES:
            raise LimitReached(f"{what} has shape [{rows}, {cols}], beyond the limits "
                               f"(side {MAX_MATRIX_SIDE}, entries {MAX_MATRIX_ENTRIES})")
        span = info["data_offsets"]
        if not isinstance(span, list) or len(span) != 2:
            raise Malformed(f"{what}: data_offsets must be [begin, end]")
        begin, end = (_integer(x, f"{what} data_offsets") for x in span)
        if not 0 <= begin <= end <= data_bytes:
            raise Malformed(f"{what}: data [{begin}, {end}) outside the {data_bytes} data bytes (truncated file?)")
        if end - begin != 8 * rows * cols:
            raise Malformed(f"{what}: {end - begin} data bytes for shape [{rows}, {cols}] of F64")
        table[name] = ((rows, cols), begin, end)
    at = 0
    for begin, end, name in sorted((b, e, k) for k, (_, b, e) in table.items()):
        if begin < at:
            raise Malformed(f"tensor {show(name)} overlaps another tensor")
        if begin > at:
            raise Malformed(f"data bytes [{at}, {begin}) belong to no tensor")
        at = end
    if at != data_bytes:
        raise Malformed(f"{data_bytes - at} trailing bytes after the last tensor")
    return table


# ------------------------------------------------------------------ claims
def odd_map_dimension(vertices: int) -> int | None:
    """The d >= 1 with ``3^d - 1 == vertices``, else None."""
    d = 1
    while 3**d - 1 < vertices:
        d += 1
    return d if 3**d - 1 == vertices else None


def _name(value: object, table: _Table, what: str, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise Malformed(f"{what} must be a tensor name (string)")
    if value not in table:
        raise Malformed(f"{what} names a missing tensor {show(value)}")
    if nonempty and 0 in table[value][0]:
        raise Malformed(f"{what} {show(value)} is empty")
    return value


def _side(obj: Any, what: str, kinds: dict[str, dict[str, str]], table: _Table) -> Side:
    _exact_keys(obj, what, ("rank", "witness"))
    rank = _integer(obj["rank"], f"{what} rank")
    if rank < 0:
        raise Malformed(f"{what} rank must be >= 0, got {rank}")
    witness = obj["witness"]
    if not isinstance(witness, dict) or not isinstance(witness.get("kind"), str):
        raise Malformed(f"{what} witness must be an object with a string 'kind'")
    kind = witness["kind"]
    if kind not in kinds:
        raise Malformed(f"{what}: unknown witness kind {show(kind, 40)}")
    _exact_keys(witness, f"{what} witness", ("kind", *kinds[kind]))
    fields: list[tuple[str, str | int]] = []
    for key, sort in sorted(kinds[kind].items()):
        if sort == "t":
            fields.append((key, _name(witness[key], table, f"{what} witness {key}")))
        else:
            value = _integer(witness[key], f"{what} witness {key}")
            if value < 0:
                raise Malformed(f"{what} witness {key} must be >= 0")
            fields.append((key, value))
    return Side(rank, kind, tuple(fields))


def _cell(obj: Any, index: int, table: _Table) -> Cell:
    _exact_keys(obj, f"cell {index}", ("id", "eps", "target", "lower", "upper"), ("provenance", "convex_cap"))
    if not isinstance(obj["id"], str):
        raise Malformed(f"cell {index}: id must be a string")
    what = f"cell {show(obj['id'])}"
    eps = parse_nonnegative(obj["eps"], f"{what} eps")
    target = obj["target"]
    logits: str | None
    slack: Fraction | None
    if isinstance(target, dict) and "logits" in target:
        _exact_keys(target, f"{what} target", ("matrix", "logits", "slack"))
        logits = _name(target["logits"], table, f"{what} target logits", nonempty=True)
        slack = parse_nonnegative(target["slack"], f"{what} slack")
    else:
        _exact_keys(target, f"{what} target", ("matrix",))
        logits = slack = None
    matrix = _name(target["matrix"], table, f"{what} target matrix", nonempty=True)
    if not isinstance(obj.get("provenance", {}), dict):
        raise Malformed(f"{what}: provenance must be a JSON object")
    lower = _side(obj["lower"], f"{what} lower", LOWER, table)
    upper = _side(obj["upper"], f"{what} upper", UPPER, table)
    if lower.kind == "odd_map":
        f: dict[str, Any] = dict(lower.fields)
        (vertices, two), points = table[f["labels"]][0], table[f["points"]][0]
        d = odd_map_dimension(vertices)
        if two != 2 or d is None:
            raise Malformed(f"{what} lower witness labels have shape [{vertices}, {two}], need [3^d - 1, 2], d >= 1")
        if d > MAX_ODDMAP_DIM:
            raise LimitReached(f"{what} lower witness: odd map of dimension {d}, limit {MAX_ODDMAP_DIM}")
        if points[1] != table[matrix][0][1]:
            raise Malformed(f"{what} lower witness points have {points[1]} columns, "
                            f"the target has {table[matrix][0][1]}")
    cap = None
    if "convex_cap" in obj:
        cap = _side(obj["convex_cap"], f"{what} convex_cap", CAP, table)
        g: dict[str, Any] = dict(cap.fields)
        (m, n), (me, k) = table[matrix][0], table[g["e"]][0]
        windows = cap.kind == "cyclic_windows"
        line = table[g["order" if windows else "blocks"]][0]
        if line != (1, n) or table[g["mu"]][0] != (1, n) or me != m or k < 1 or (windows and k != n):
            raise Malformed(f"{what} convex_cap witness does not fit the target [{m}, {n}]: blocks (or order) "
                            "and mu must be [1, n], e [m, k] with k >= 1 (k = n for windows)")
        if windows and not 1 <= g["width"] <= n:
            raise Malformed(f"{what} convex_cap witness: width {g['width']} outside [1, {n}]")
    return Cell(obj["id"], index, eps, matrix, logits, slack, lower, upper, cap)


def _claims(header: dict[str, Any]) -> list[Any]:
    meta = header.get("__metadata__")
    if not isinstance(meta, dict) or "softrank" not in meta:
        raise Malformed("no 'softrank' document in the safetensors metadata")
    if len(meta) != 1:
        raise Malformed("__metadata__ has a key besides 'softrank'")
    if not isinstance(meta["softrank"], str):
        raise Malformed("the 'softrank' metadata value must be a JSON string")
    doc = _json(meta["softrank"], "the 'softrank' document")
    _exact_keys(doc, "the 'softrank' document", ("format", "version", "cells"))
    if doc["format"] != FORMAT:
        raise Malformed(f"unknown format {show(doc['format'], 40)}, expected {FORMAT!r}")
    if type(doc["version"]) is not int or doc["version"] != VERSION:
        raise Malformed(f"unknown version {show(doc['version'], 20)}, this checker reads version {VERSION}")
    cells = doc["cells"]
    if not isinstance(cells, list):
        raise Malformed("'cells' must be a JSON array")
    if not cells:
        raise Malformed("'cells' is empty: nothing to verify")
    if len(cells) > MAX_CELLS:
        raise LimitReached(f"{len(cells)} cells, limit {MAX_CELLS}")
    return cells


def _odd_map_labels(cell: Cell, tensors: dict[str, Tensor]) -> None:
    """Every label is (integer row of the target, +1 or -1), else the file is malformed."""
    fields: dict[str, Any] = dict(cell.lower.fields)
    labels = tensors[fields["labels"]].values
    rows = tensors[cell.matrix].shape[0]
    for k in range(0, len(labels), 2):
        i, s = labels[k], labels[k + 1]
        if not (abs(i) < 2.0**53 and i == math.floor(i) and s in (1.0, -1.0)):
            raise Malformed(f"cell {show(cell.id)} lower witness: label {k // 2} is ({i!r}, {s!r}), "
                            "not (integer row, +1 or -1)")
        if not 0 <= i < rows:
            raise Malformed(f"cell {show(cell.id)} lower witness: label {k // 2} names row {int(i)}, "
                            f"the target has {rows} rows")


def _cap_labels(cell: Cell, tensors: dict[str, Tensor]) -> None:
    """Every block label of a convex cap is an integer in [0, k), k the columns of its e, and an order is a
    permutation of the columns, else malformed."""
    fields: dict[str, Any] = dict(cell.cap.fields) if cell.cap is not None else {}
    if "order" in fields:
        order = tensors[fields["order"]].values
        if sorted(order) != [float(j) for j in range(len(order))]:
            raise Malformed(f"cell {show(cell.id)} convex_cap witness: order is not a permutation of the columns")
        return
    k = tensors[fields["e"]].shape[1]
    for j, x in enumerate(tensors[fields["blocks"]].values):
        if not (x == math.floor(x) and 0 <= x < k):
            raise Malformed(f"cell {show(cell.id)} convex_cap witness: column {j} has block label {x!r}, "
                            f"not an integer in [0, {k})")


def read(path: str | os.PathLike[str]) -> Document:
    """Read and validate a bracket file; ``Malformed`` (one line) when it is not one."""
    path = os.fspath(path)
    fh, size = _open(path)
    with fh:
        if size < 8:
            raise Malformed("truncated file: no header length")
        n = int.from_bytes(_read(fh, 8, "no header length"), "little")
        if n > MAX_HEADER_BYTES:
            raise LimitReached(f"header of {n} bytes, limit {MAX_HEADER_BYTES}")
        if 8 + n > size:
            raise Malformed(f"truncated file: header of {n} bytes, file has {size}")
        try:
            text = _read(fh, n, "header").decode("utf-8")
        except UnicodeDecodeError:
            raise Malformed("header is not UTF-8") from None
        header = _json(text, "safetensors header")
        if not isinstance(header, dict):
            raise Malformed("safetensors header must be a JSON object")
        raw_cells = _claims(header)
        table = _table(header, size - 8 - n)
        cells = tuple(_cell(c, i, table) for i, c in enumerate(raw_cells))
        ids = set()
        for c in cells:
            if c.id in ids:
                raise Malformed(f"duplicate cell id {show(c.id)}")
            ids.add(c.id)
        named: set[str | None] = set()
        for c in cells:
            named.update((c.matrix, c.logits))
            sides = (c.lower, c.upper) + ((c.cap,) if c.cap is not None else ())
            named.update(v for side in sides for _, v in side.fields if isinstance(v, str))
        tensors: dict[str, Tensor] = {}
        for name, (shape, begin, end) in sorted(table.items(), key=lambda item: item[1][1]):
            fh.seek(8 + n + begin)
            what = f"tensor {show(name)}"
            if name in named:
                values = _doubles(_read(fh, end - begin, f"{what} data"))
                _finite(values, what)
                tensors[name] = Tensor(shape, values)
            else:
                for at in range(begin, end, _CHUNK):
                    _finite(_doubles(_read(fh, min(_CHUNK, end - at), f"{what} data")), what)
    for c in cells:
        if c.lower.kind == "odd_map":
            _odd_map_labels(c, tensors)
        if c.cap is not None:
            _cap_labels(c, tensors)
    return Document(path, cells, tensors)

"""Bracket files, format version 1: reader and validator (``docs/bracket-format.md``).

A bracket file is a safetensors file: 8 bytes little-endian header length N,
N bytes of JSON header, then the tensor data. The header's ``__metadata__``
has one key, ``softrank``, whose value is the JSON claim document. This
reader parses the container itself (no third-party parser in the trusted
core), refuses duplicate JSON keys, NaN/Infinity literals, overlapping or
out-of-range tensor data, every dtype but F64 and every shape but 2-D, and
checks every resource limit in ``exact.limits`` before the work it bounds.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np
from flint import fmpq

from .errors import LimitExceeded, MalformedInput
from .limits import MAX_CELLS, MAX_FILE_BYTES, MAX_HEADER_BYTES, MAX_MATRIX_ENTRIES, MAX_MATRIX_SIDE, MAX_TENSORS
from .rational import parse_nonnegative

__all__ = ["FORMAT", "VERSION", "Target", "Claim", "Cell", "BracketFile", "read_bracket_file",
           "UPPER_KINDS", "LOWER_KINDS"]

FORMAT = "softrank-brackets"
VERSION = 1

#: Witness kinds and the fields each must have: tensor names, or ints.
UPPER_KINDS = {"trivial": {}, "factors": {"P": "tensor", "Q": "tensor"}}
LOWER_KINDS = {
    "trivial": {},
    "reconstruction": {"R": "tensor", "X": "tensor", "L": "tensor"},
    "row_reconstruction": {"G": "tensor", "Z": "tensor", "M": "tensor"},
    "frobenius": {"k": "int"},
}


@dataclass(frozen=True)
class Target:
    """The matrix a cell is about: ``matrix`` itself, or ``softmax_row(logits)`` within ``slack``."""

    matrix: str
    logits: str | None = None
    slack: fmpq | None = None


@dataclass(frozen=True)
class Claim:
    """One side of a bracket: a rank and its witness (kind plus fields)."""

    rank: int
    kind: str
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Cell:
    id: str
    eps: fmpq
    eps_text: str
    target: Target
    lower: Claim
    upper: Claim
    provenance: dict


@dataclass(frozen=True)
class BracketFile:
    path: str
    cells: tuple
    tensors: dict            # name -> read-only float64 ndarray


def _no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise MalformedInput(f"duplicate JSON key {key[:60]!r}")
        out[key] = value
    return out


def _no_constants(name):
    raise MalformedInput(f"JSON literal {name} is not allowed")


def _json(text: str, what: str):
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except MalformedInput:
        raise
    except (ValueError, RecursionError) as exc:
        raise MalformedInput(f"{what} is not valid JSON: {str(exc).splitlines()[0][:80]}") from None


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedInput(f"{what} must be an integer, got {json.dumps(value)[:40]}")
    return value


def _keys(obj, what: str, required: set, optional: set = frozenset()):
    if not isinstance(obj, dict):
        raise MalformedInput(f"{what} must be a JSON object")
    missing = required - obj.keys()
    unknown = obj.keys() - required - optional
    if missing:
        raise MalformedInput(f"{what}: missing key {sorted(missing)[0]!r}")
    if unknown:
        raise MalformedInput(f"{what}: unknown key {sorted(unknown)[0][:40]!r}")


def _read_container(path: str):
    """Header dict and data bytes of a safetensors file, validated."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise LimitExceeded(f"file has {size} bytes, limit {MAX_FILE_BYTES}")
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise MalformedInput(f"cannot read file: {exc.strerror or exc}") from None
    if len(raw) < 8:
        raise MalformedInput("truncated file: no header length")
    n = int.from_bytes(raw[:8], "little")
    if n > MAX_HEADER_BYTES:
        raise LimitExceeded(f"header of {n} bytes, limit {MAX_HEADER_BYTES}")
    if 8 + n > len(raw):
        raise MalformedInput(f"truncated file: header of {n} bytes, file has {len(raw)}")
    try:
        text = raw[8:8 + n].decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedInput("header is not UTF-8") from None
    header = _json(text, "safetensors header")
    if not isinstance(header, dict):
        raise MalformedInput("safetensors header must be a JSON object")
    return header, memoryview(raw)[8 + n:]


def _read_tensors(header: dict, data) -> dict:
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    if len(entries) > MAX_TENSORS:
        raise LimitExceeded(f"{len(entries)} tensors, limit {MAX_TENSORS}")
    spans, tensors = [], {}
    for name, info in entries.items():
        what = f"tensor {name[:60]!r}"
        _keys(info, what, {"dtype", "shape", "data_offsets"})
        if info["dtype"] != "F64":
            raise MalformedInput(f"{what} has dtype {str(info['dtype'])[:20]}, expected F64")
        shape, offsets = info["shape"], info["data_offsets"]
        if not isinstance(shape, list) or len(shape) != 2:
            raise MalformedInput(f"{what} must be 2-D, has shape {json.dumps(shape)[:40]}")
        m, n = (_int(s, f"{what} shape") for s in shape)
        if m < 0 or n < 0:
            raise MalformedInput(f"{what} has a negative side [{m}, {n}]")
        if max(m, n) > MAX_MATRIX_SIDE or m * n > MAX_MATRIX_ENTRIES:
            raise LimitExceeded(f"{what} has shape [{m}, {n}], beyond the limits "
                                f"(side {MAX_MATRIX_SIDE}, entries {MAX_MATRIX_ENTRIES})")
        if not isinstance(offsets, list) or len(offsets) != 2:
            raise MalformedInput(f"{what}: data_offsets must be [begin, end]")
        begin, end = (_int(o, f"{what} data_offsets") for o in offsets)
        if not 0 <= begin <= end <= len(data):
            raise MalformedInput(f"{what}: data [{begin}, {end}) outside the {len(data)} data bytes (truncated file?)")
        if end - begin != 8 * m * n:
            raise MalformedInput(f"{what}: {end - begin} data bytes for shape [{m}, {n}] of F64")
        spans.append((begin, end, name))
        array = np.frombuffer(data, dtype="<f8", count=m * n, offset=begin).reshape(m, n).astype(np.float64)
        if not np.isfinite(array).all():
            raise MalformedInput(f"{what} contains NaN or Inf")
        array.flags.writeable = False
        tensors[name] = array
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise MalformedInput(f"tensors {n0[:40]!r} and {n1[:40]!r} overlap")
    return tensors


def _tensor(name, tensors: dict, what: str, nonempty: bool = False) -> str:
    if not isinstance(name, str):
        raise MalformedInput(f"{what} must be a tensor name (string)")
    if name not in tensors:
        raise MalformedInput(f"{what} names a missing tensor {name[:60]!r}")
    if nonempty and 0 in tensors[name].shape:
        raise MalformedInput(f"{what} {name[:60]!r} is empty (shape {list(tensors[name].shape)})")
    return name


def _claim(obj, what: str, kinds: dict, tensors: dict) -> Claim:
    _keys(obj, what, {"rank", "witness"})
    rank = _int(obj["rank"], f"{what} rank")
    if rank < 0:
        raise MalformedInput(f"{what} rank must be >= 0, got {rank}")
    witness = obj["witness"]
    if not isinstance(witness, dict) or not isinstance(witness.get("kind"), str):
        raise MalformedInput(f"{what} witness must be an object with a string 'kind'")
    kind = witness["kind"]
    if kind not in kinds:
        raise MalformedInput(f"{what}: unknown witness kind {kind[:40]!r}")
    spec = kinds[kind]
    _keys(witness, f"{what} witness", {"kind", *spec})
    fields = {}
    for key, typ in spec.items():
        if typ == "tensor":
            fields[key] = _tensor(witness[key], tensors, f"{what} witness {key}")
        else:
            fields[key] = _int(witness[key], f"{what} witness {key}")
            if fields[key] < 0:
                raise MalformedInput(f"{what} witness {key} must be >= 0")
    return Claim(rank, kind, fields)


def _cell(obj, index: int, tensors: dict) -> Cell:
    what = f"cell {index}"
    _keys(obj, what, {"id", "eps", "target", "lower", "upper"}, {"provenance"})
    if not isinstance(obj["id"], str):
        raise MalformedInput(f"{what}: id must be a string")
    what = f"cell {obj['id'][:60]!r}"
    eps = parse_nonnegative(obj["eps"], f"{what} eps")
    target = obj["target"]
    if isinstance(target, dict) and "logits" in target:
        _keys(target, f"{what} target", {"matrix", "logits", "slack"})
        tgt = Target(_tensor(target["matrix"], tensors, f"{what} target matrix", nonempty=True),
                     _tensor(target["logits"], tensors, f"{what} target logits", nonempty=True),
                     parse_nonnegative(target["slack"], f"{what} slack"))
    else:
        _keys(target, f"{what} target", {"matrix"})
        tgt = Target(_tensor(target["matrix"], tensors, f"{what} target matrix", nonempty=True))
    provenance = obj.get("provenance", {})
    if not isinstance(provenance, dict):
        raise MalformedInput(f"{what}: provenance must be a JSON object")
    return Cell(obj["id"], eps, obj["eps"], tgt,
                _claim(obj["lower"], f"{what} lower", LOWER_KINDS, tensors),
                _claim(obj["upper"], f"{what} upper", UPPER_KINDS, tensors), provenance)


def read_bracket_file(path) -> BracketFile:
    """Read and validate a bracket file; raise ``MalformedInput`` with a one-line reason."""
    path = os.fspath(path)
    header, data = _read_container(path)
    metadata = header.get("__metadata__")
    if not isinstance(metadata, dict) or "softrank" not in metadata:
        raise MalformedInput("no 'softrank' document in the safetensors metadata")
    if not isinstance(metadata["softrank"], str):
        raise MalformedInput("the 'softrank' metadata value must be a JSON string")
    doc = _json(metadata["softrank"], "the 'softrank' document")
    _keys(doc, "the 'softrank' document", {"format", "version", "cells"})
    if doc["format"] != FORMAT:
        raise MalformedInput(f"unknown format {str(doc['format'])[:40]!r}, expected {FORMAT!r}")
    if type(doc["version"]) is not int or doc["version"] != VERSION:      # 1.0, "1" and true are not version 1
        raise MalformedInput(f"unknown version {str(doc['version'])[:20]}, this checker reads version {VERSION}")
    cells = doc["cells"]
    if not isinstance(cells, list):
        raise MalformedInput("'cells' must be a JSON array")
    if len(cells) > MAX_CELLS:
        raise LimitExceeded(f"{len(cells)} cells, limit {MAX_CELLS}")
    tensors = _read_tensors(header, data)
    parsed = tuple(_cell(c, i, tensors) for i, c in enumerate(cells))
    seen = set()
    for c in parsed:
        if c.id in seen:
            raise MalformedInput(f"duplicate cell id {c.id[:60]!r}")
        seen.add(c.id)
    return BracketFile(path, parsed, tensors)

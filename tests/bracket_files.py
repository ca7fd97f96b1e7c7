"""Bracket files built byte by byte (the writer refuses most of the malformed ones), shared by the exact tier's
and the second checker's tests: the safetensors container, a claim document, the malformed cases (each with a
word its one-line message must contain), and the exact CLI in a fresh interpreter with its peak memory."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

from exact import limits

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "data" / "example.safetensors"

K = np.array([[0.75, 0.25], [0.25, 0.75]])


def container(header, data: bytes = b"", length: int | None = None) -> bytes:
    """A safetensors container: 8-byte little-endian header length, header, data."""
    if isinstance(header, dict):
        header = json.dumps(header)
    if isinstance(header, str):
        header = header.encode("utf-8")
    n = len(header) if length is None else length
    return n.to_bytes(8, "little") + header + data


def base_cell(**over) -> dict:
    cell = {"id": "c0", "eps": "1/4", "target": {"matrix": "A"},
            "lower": {"rank": 1, "witness": {"kind": "trivial"}},
            "upper": {"rank": 2, "witness": {"kind": "trivial"}}}
    cell.update(over)
    return cell


def doc(cells=None, **over) -> dict:
    d = {"format": "softrank-brackets", "version": 1, "cells": [base_cell()] if cells is None else cells}
    d.update(over)
    return d


def bracket_bytes(document=None, tensors=None, tensor_entries=None, softrank_text=None) -> bytes:
    """A bracket file from a claim document and float64 tensors (or raw tensor header entries)."""
    tensors = {"A": K} if tensors is None else tensors
    header, data = {}, b""
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr, dtype="<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(arr.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header.update(tensor_entries or {})
    text = json.dumps(doc() if document is None else document) if softrank_text is None else softrank_text
    header["__metadata__"] = {"softrank": text}
    return container(header, data)


def malformed_cases() -> dict[str, tuple[bytes, str]]:
    """name -> (file bytes, a word the one-line message must contain)."""
    rng = random.Random(20260101)
    valid = bracket_bytes()
    cases = {
        "random-bytes": (rng.randbytes(4096), "header"),
        "random-bytes-plausible-length": ((200).to_bytes(8, "little") + rng.randbytes(300), "header"),
        "empty": (b"", "truncated"),
        "truncated-in-length": (valid[:5], "truncated"),
        "truncated-in-header": (valid[:40], "truncated"),
        "truncated-data": (valid[:-8], "truncated"),
        "oversized-header-length": (container("{}", length=limits.MAX_HEADER_BYTES + 1), "limit"),
        "header-length-max-u64": (container("{}", length=2**64 - 1), "limit"),
        "non-json-header": (container("this is not json"), "JSON"),
        "header-not-object": (container("[1, 2]"), "object"),
        "header-not-utf8": (container(b"\xff\xfe{}"), "UTF-8"),
        "no-softrank-metadata": (container({"__metadata__": {"other": "x"}}), "softrank"),
        "softrank-not-json": (bracket_bytes(softrank_text="{cells: oops"), "JSON"),
        "json-nan-literal": (bracket_bytes(softrank_text=json.dumps(doc())[:-1] + ', "x": NaN}'), "NaN"),
        "unknown-format": (bracket_bytes(doc(format="softrank-ranks")), "format"),
        "unknown-version": (bracket_bytes(doc(version=2)), "version"),
        "version-as-string": (bracket_bytes(doc(version="1")), "version"),
        "version-true": (bracket_bytes(doc(version=True)), "version"),
        "version-float": (bracket_bytes(doc(version=1.0)), "version"),
        "cells-not-list": (bracket_bytes(doc(cells={"c0": base_cell()})), "array"),
        "unknown-lower-kind": (bracket_bytes(doc([base_cell(lower={"rank": 1, "witness": {"kind": "oracle"}})])),
                               "kind"),
        "upper-kind-from-lower": (bracket_bytes(doc([base_cell(upper={"rank": 1, "witness": {
            "kind": "frobenius", "k": 0}})])), "kind"),
        "witness-without-kind": (bracket_bytes(doc([base_cell(lower={"rank": 1, "witness": {}})])), "kind"),
        "unknown-cell-key": (bracket_bytes(doc([base_cell(extra=1)])), "unknown key"),
        "missing-eps": (bracket_bytes(doc([{k: v for k, v in base_cell().items() if k != "eps"}])), "eps"),
        "negative-rank": (bracket_bytes(doc([base_cell(lower={"rank": -1, "witness": {"kind": "trivial"}})])),
                          "rank"),
        "rank-not-int": (bracket_bytes(doc([base_cell(lower={"rank": 1.0, "witness": {"kind": "trivial"}})])),
                         "integer"),
        "frobenius-k-string": (bracket_bytes(doc([base_cell(lower={"rank": 1, "witness": {
            "kind": "frobenius", "k": "0"}})])), "integer"),
        "duplicate-cell-id": (bracket_bytes(doc([base_cell(), base_cell()])), "duplicate"),
        "eps-one-over-zero": (bracket_bytes(doc([base_cell(eps="1/0")])), "zero denominator"),
        "eps-minus-one": (bracket_bytes(doc([base_cell(eps="-1")])), ">= 0"),
        "eps-1e999999999": (bracket_bytes(doc([base_cell(eps="1e999999999")])), "exponent"),
        "eps-million-digits": (bracket_bytes(doc([base_cell(eps="7" * 10**6)])), "limit"),
        "eps-json-number": (bracket_bytes(doc([base_cell(eps=0.25)])), "string"),
        "eps-nan-text": (bracket_bytes(doc([base_cell(eps="nan")])), "rational"),
        "eps-inf-text": (bracket_bytes(doc([base_cell(eps="inf")])), "rational"),
        "eps-with-space": (bracket_bytes(doc([base_cell(eps=" 1/4")])), "rational"),
        "slack-negative": (bracket_bytes(doc([base_cell(target={"matrix": "A", "logits": "A", "slack": "-1/2"})])),
                           ">= 0"),
        "slack-without-logits": (bracket_bytes(doc([base_cell(target={"matrix": "A", "slack": "0"})])), "slack"),
        "missing-tensor": (bracket_bytes(doc([base_cell(target={"matrix": "B"})])), "missing tensor"),
        "missing-witness-tensor": (bracket_bytes(doc([base_cell(upper={"rank": 1, "witness": {
            "kind": "factors", "P": "A", "Q": "nope"}})])), "missing tensor"),
        "wrong-dtype-F32": (bracket_bytes(tensors={}, tensor_entries={
            "A": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}) + b"\0" * 16, "dtype"),
        "shape-1-D": (bracket_bytes(tensors={}, tensor_entries={
            "A": {"dtype": "F64", "shape": [4], "data_offsets": [0, 32]}}) + b"\0" * 32, "2-D"),
        "shape-3-D": (bracket_bytes(tensors={}, tensor_entries={
            "A": {"dtype": "F64", "shape": [1, 2, 2], "data_offsets": [0, 32]}}) + b"\0" * 32, "2-D"),
        "shape-empty": (bracket_bytes(tensors={}, tensor_entries={
            "A": {"dtype": "F64", "shape": [0, 2], "data_offsets": [0, 0]}}), "empty"),
        "offsets-wrong-size": (bracket_bytes(tensors={}, tensor_entries={
            "A": {"dtype": "F64", "shape": [2, 2], "data_offsets": [0, 24]}}) + b"\0" * 32, "bytes"),
        "offsets-negative": (bracket_bytes(tensors={}, tensor_entries={
            "A": {"dtype": "F64", "shape": [2, 2], "data_offsets": [-8, 24]}}) + b"\0" * 32, "outside"),
        "overlapping-tensors": (bracket_bytes(tensors={"A": K}, tensor_entries={
            "B": {"dtype": "F64", "shape": [2, 2], "data_offsets": [8, 40]}}) + b"\0" * 8, "overlap"),
        "nan-entry": (bracket_bytes(tensors={"A": np.array([[0.5, np.nan], [0.25, 0.75]])}), "NaN"),
        "inf-entry": (bracket_bytes(tensors={"A": np.array([[0.5, np.inf], [0.25, 0.75]])}), "Inf"),
        "minus-inf-in-witness": (bracket_bytes(
            doc([base_cell(upper={"rank": 1, "witness": {"kind": "factors", "P": "P", "Q": "P"}})]),
            tensors={"A": K, "P": np.array([[1.0], [-np.inf]])}), "Inf"),
    }
    # duplicate tensor names: the same JSON key twice in the safetensors header
    raw = K.astype("<f8").tobytes()
    entry = json.dumps({"dtype": "F64", "shape": [2, 2], "data_offsets": [0, 32]})
    meta = json.dumps({"softrank": json.dumps(doc())})
    cases["duplicate-tensor-names"] = (container(f'{{"A": {entry}, "A": {entry}, "__metadata__": {meta}}}', raw),
                                       "duplicate")
    dup_doc = json.dumps(doc())[:-1] + ', "version": 1}'
    cases["duplicate-json-key-in-document"] = (bracket_bytes(softrank_text=dup_doc), "duplicate")
    # the data is covered exactly once: no trailing bytes, no hole between tensors
    cases["trailing-bytes"] = (valid + b"\0" * 8, "trailing")
    cases["hole-between-tensors"] = (bracket_bytes(tensors={"A": K}, tensor_entries={
        "B": {"dtype": "F64", "shape": [1, 1], "data_offsets": [40, 48]}}) + b"\0" * 16, "no tensor")
    # __metadata__: exactly one key, softrank, with a string value
    header = {"A": {"dtype": "F64", "shape": [2, 2], "data_offsets": [0, 32]}}
    cases["metadata-extra-key"] = (container(dict(header, __metadata__={"softrank": json.dumps(doc()),
                                                                         "format": "pt"}), raw), "__metadata__")
    cases["zero-cells"] = (bracket_bytes(doc([])), "nothing to verify")
    # file strings with newlines and escapes print on one line
    cases["dtype-with-newline"] = (bracket_bytes(tensors={}, tensor_entries={
        "A": {"dtype": "F64\nforged: verified", "shape": [2, 2], "data_offsets": [0, 32]}}) + raw, "dtype")
    cases["version-with-newline"] = (bracket_bytes(doc(version="1\n0/0 cells verified")), "version")
    cases["tensor-name-with-escape"] = (bracket_bytes(doc([base_cell(target={"matrix": "B\x1b[2K\n"})])),
                                        "missing tensor")
    return cases


MALFORMED = malformed_cases()


def write_file(tmp_path, name, blob) -> str:
    p = tmp_path / name
    p.write_bytes(blob)
    return str(p)


def rss_run(*args, timeout=120):
    """``exact.cli.main`` in a fresh interpreter: (exit status, stderr, peak resident memory in MiB).

    The peak is the interpreter's own ``VmHWM`` (per address space): ``ru_maxrss`` would
    also count the parent's resident set at fork, which Linux carries across ``exec``.
    """
    code = ("import re, sys; from exact.cli import main; rc = main(sys.argv[1:]); "
            "hwm = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1); "
            "print(rc, int(hwm) / 1024)")
    proc = subprocess.run([sys.executable, "-c", code, "verify", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    rc, rss = proc.stdout.split()[-2:]
    return int(rc), proc.stderr, float(rss)

"""Write bracket files (format version 1, ``docs/bracket-format.md``): the producers' side.

The format is defined in one place, the trusted core's ``exact.bracketfile``
(``FORMAT``, ``VERSION``, the reader) and its typed cell ``exact.cellspec.CellSpec``;
this writer takes its constants from there, and every producer hands it
``CellSpec`` objects (a plain JSON object passes through unchanged: the
tests' hand-made, deliberately malformed files). Writing is not checking, so it lives outside the trusted core: a bug
here makes a file the reader refuses or a claim it refutes, never a false
claim verified. It needs only numpy, safetensors, ``exact`` and ``fileio.safeio``, so every
producer may import it: the float tier,
``oracles`` and ``proofs_checks`` (``tests/test_architecture.py``). The file
is written through ``fileio.safeio.write_bytes``: atomically, and never over
anything that is not a regular file (a link, a directory, a FIFO, a device
node is refused with ``fileio.safeio.SafeIOError``; the trust model of docs/panel.md).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save

from exact.bracketfile import FORMAT, VERSION
from exact.cellspec import CellSpec
from fileio.safeio import write_bytes

__all__ = ["FORMAT", "VERSION", "write_bracket_file", "rational_string"]


def rational_string(x) -> str:
    """Exact rational text for ``x``: a float enters through ``as_integer_ratio``.

    >>> rational_string(0.25)
    '1/4'
    >>> rational_string(Fraction(3, 4))
    '3/4'
    >>> rational_string(2)
    '2'
    """
    if isinstance(x, float):
        if not np.isfinite(x):
            raise ValueError(f"not a finite number: {x!r}")
        x = Fraction(*x.as_integer_ratio())
    q = Fraction(str(x)) if not isinstance(x, (int, Fraction)) else Fraction(x)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def write_bracket_file(path, cells: Sequence[CellSpec | Mapping[str, Any]], tensors: dict[str, np.ndarray], *,
                       root=None) -> Path:
    """Write ``cells`` (``CellSpec``; a raw CELL object of format v1 only in tests) and their 2-D float64 tensors.

    Every tensor name a cell refers to must be in ``tensors``; tensors are
    written C-contiguous as float64. ``root``: no symbolic link is followed
    between it and ``path`` (``fileio.safeio``; default the file's directory).
    Returns the path written; ``fileio.safeio.SafeIOError`` when the path is refused.
    """
    out = {}
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr, dtype=np.float64)
        if a.ndim != 2:
            raise ValueError(f"tensor {name!r} is not 2-D (shape {a.shape})")
        if not np.isfinite(a).all():
            raise ValueError(f"tensor {name!r} has NaN or Inf")
        out[name] = a
    doc = {"format": FORMAT, "version": VERSION,
           "cells": [c.to_json() if isinstance(c, CellSpec) else c for c in cells]}
    return write_bytes(Path(path), save(out, metadata={"softrank": json.dumps(doc)}), root=root)

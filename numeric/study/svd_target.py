"""The attention-SVD constructive-budget target (paper L.6: "attention-SVD constructive budget ... remain null").

Per cell, ``k_svd``: the smallest rank whose truncated SVD of A meets eps in
row-l1, found the way a bracket's upper side finds its SVD baseline and
trivial upper (``numeric.search.driver.svd_budget``: the float selection at
``(eps - slack)(1 - UPPER_SAFETY)``, the factors re-checked by the exact
tier, the trivial upper ``min(m, n)`` when none reaches eps). The target is
``k_svd / n`` (n = keys), the analogue of the primary ``U/n``.

A panel directory is untrusted input (docs/panel.md): the study does not read
``k_svd`` from the table. It recomputes it from the head file the audit binds
to the row by hash (``heads/<key>.safetensors``: its ``logits`` and ``matrix``
must hash to the exact pass's ``logits_sha256`` and ``target_sha256``, read
once into memory), and a table value (column ``svd_budget``, written by the
panel since this target exists) that differs from the recomputation is a
``TableDisagreement`` (one line, exit 1). A panel written before the column
existed gets the target all the same.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from numeric.panel.schema import PanelRow
from numeric.study.data import PanelDisagreement, StudyData, StudyError
from safetensors.numpy import load
from numeric.search.driver import svd_budget
from fileio.safeio import SafeIOError, read_bytes
from numeric.panel.audit import HEAD_BYTES, HEADS_DIR

__all__ = ["SVD_BUDGET", "TableDisagreement", "recorded_svd_budget", "head_tensors", "svd_targets", "svd_data"]

#: The panel table's column of the attention-SVD constructive budget (an int, absent in older panels).
SVD_BUDGET = "svd_budget"


class TableDisagreement(PanelDisagreement):
    """The panel table says another value than the study's recomputation (exit 1, as a record that
    disagrees with the exact pass)."""


def recorded_svd_budget(row: PanelRow) -> int | None:
    """The table's attention-SVD constructive budget of a row (None: the panel predates the column).
    The one read of the column ``svd_budget`` in the study.

    >>> row = PanelRow(family="f", model="m", layer=0, head=0, source="s", eps="1/4", status="ok")
    >>> recorded_svd_budget(replace(row, svd_budget=3)), recorded_svd_budget(row)
    (3, None)
    """
    v: object = row.svd_budget          # as read: a file may hold anything here
    if v is None or v == "":
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TableDisagreement(f"{row.cell_id}: the table's {SVD_BUDGET} {v!r} is not an integer")
    return v


def _key(row: PanelRow) -> str:
    f = str(row.file or "")
    if not (f.startswith("brackets/") and f.endswith(".safetensors")):
        raise StudyError(f"{row.cell_id}: names no bracket file of the panel ({f!r})")
    return f[len("brackets/"):-len(".safetensors")]


def _sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f8").tobytes()).hexdigest()


def head_tensors(panel_dir, row: PanelRow) -> tuple[np.ndarray, np.ndarray]:
    """(logits, matrix) of the row's head file, read once, each bound to the exact pass by its SHA-256
    (the row's ``logits_sha256`` and ``target_sha256``, set by the audit); ``StudyError`` otherwise."""


    root = Path(panel_dir)
    key = _key(row)
    rel = f"{HEADS_DIR}/{key}.safetensors"
    try:
        tensors = load(read_bytes(root / HEADS_DIR / f"{key}.safetensors", limit=HEAD_BYTES, root=root))
    except SafeIOError as e:
        raise StudyError(str(e)) from None
    except Exception as e:  # a malformed head file is bad input, one line
        raise StudyError(f"{rel} is not a safetensors file ({type(e).__name__})") from None
    H, A = tensors.get("logits"), tensors.get("matrix")
    for name, a, want in (("logits", H, row.logits_sha256), ("matrix", A, row.target_sha256)):
        if a is None or a.ndim != 2 or a.dtype != np.float64:
            raise StudyError(f"{rel} has no 2-D float64 {name!r} tensor")
        if _sha256(a) != want:
            raise StudyError(f"{row.cell_id}: the {name} of {rel} is not the one the exact pass verified "
                             "(sha256 differs)")
    assert H is not None and A is not None      # both checked above
    return H, A


def svd_targets(audited, eps) -> dict:
    """``{cell id: k_svd}`` of the audited rows ``[(panel dir, row)]`` at tolerance ``eps``, recomputed from
    their head files; a table value that differs is a ``TableDisagreement``."""

    e = Fraction(str(eps))
    out = {}
    for d, row in audited:
        cid = str(row.cell_id)
        H, A = head_tensors(d, row)
        try:
            k = svd_budget(A, e, logits=H)
        except ValueError as err:
            raise StudyError(f"{cid}: no attention-SVD budget ({str(err).splitlines()[0]})") from None
        told = recorded_svd_budget(row)
        if told is not None and told != k:
            raise TableDisagreement(f"{cid}: the table says {SVD_BUDGET} = {told}, recomputed from "
                                    f"{Path(d).name}/heads: {k}")
        out[cid] = k
    return out


def svd_data(data: StudyData, audited, eps) -> StudyData:
    """The study's table with the target ``k_svd / n`` (n: the row's keys) in place of its own."""
    rows = {str(r.cell_id): (d, r) for d, r in audited}
    missing = [c for c in data.cell_ids if c not in rows]
    if missing:
        raise StudyError(f"cell {missing[0]} of the study has no audited row")
    pairs = [rows[str(c)] for c in data.cell_ids]
    k = svd_targets(pairs, eps)
    y = np.array([k[str(c)] / float(rows[str(c)][1].n_cols) for c in data.cell_ids])
    return replace(data, y=y)

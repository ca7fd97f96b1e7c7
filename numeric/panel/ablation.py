"""Lower brackets without one lower family, from certificates the exact tier verifies (paper L.2).

The paper says the decoder ordering depends on the decoded-inverse lower
witness (K.3). :func:`ablated_lowers` recomputes each cell's L as if that
family did not exist, from certificates only:

- a cell whose verified lower certificate is of another family keeps its L;
- a cell whose certificate is of the dropped family (``provenance.search.lower_family``
  in its bracket file) takes the largest of (a) the verified L of another cell
  of the same file at a tolerance ``eps' >= eps`` whose certificate is of
  another family (``r_eps`` does not increase with eps), and (b) the direct
  families rebuilt from the file's own target: the trivial bound, the
  Frobenius tail (K.2) and the truncated pseudo-inverse (K.3). These are
  written to ``DIR/ablation/<file>`` with the target's logits and slack and
  verified by ``exact.verify.verify_file``; only verified ranks count.

The budgeted row-set searches are not re-run without the family, so the
ablated L is a lower bound on what a search without it would certify; the
report says so.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from exact.cellspec import CellSpec, Claim, TargetSpec
from numeric.panel.provenance import CellProvenance
from exact.bracketfile import read_bracket_file
from exact.rational import format_rational
from exact.verify import verify_file
from fileio.bracketwriter import write_bracket_file
from numeric.panel.audit import BRACKET_BYTES
from fileio.safeio import snapshot, write_bytes
from numeric.search.frobenius import frobenius, trivial
from numeric.search.inverse import pinv
from numeric.search.driver import lower_claim

__all__ = ["DECODED", "ABLATION_DIR", "Ablated", "ablated_lowers"]

DECODED = "reconstruction/decoded"   # numeric.search.inverse.decoded's family name
ABLATION_DIR = "ablation"
#: The float margin the fallback candidates are searched at, above eps + slack (the exact tier decides).
FALLBACK_MARGIN = 1e-9


@dataclass(frozen=True)
class Ablated:
    """One cell's L without the family: the rank, and where it came from."""

    L: int
    source: str          # "kept" | "other tolerance" | the fallback family | "none"


def _family(cell) -> str | None:
    """The lower family a bracket cell's certificate came from (its search provenance)."""
    return CellProvenance.from_json(cell.provenance).search.lower_family


def _lower_claim(c, prefix: str) -> tuple[Claim, dict]:
    """The candidate's lower side (``numeric.search.driver.lower_claim``) and its tensors, named under ``prefix``."""

    names = {} if c.kind in ("trivial", "frobenius") else {k: f"{prefix}/{k}" for k in c.tensors}
    return lower_claim(c, names), {names[k]: v for k, v in c.tensors.items() if k in names}


def _fallback(out: Path, bf, cell, tmpdir) -> tuple[int, str]:
    """The best verified direct certificate (trivial, K.2, pinv) on the cell's own target."""
    A = np.asarray(bf.tensors[cell.target.matrix], dtype=np.float64)
    slack = cell.target.slack
    eps_lo = float(Fraction(cell.eps_text)) + (float(Fraction(int(slack.p), int(slack.q))) if slack else 0.0)
    eps_lo *= 1 + FALLBACK_MARGIN
    U, S, Vt = np.linalg.svd(A)
    cands = [c for c in (trivial(A, eps_lo), frobenius(S, A.shape[0], eps_lo), pinv(U, S, Vt, eps_lo))
             if c is not None and c.rank > 0]
    if not cands:
        return 0, "none"
    tensors = {"A": A}
    target = TargetSpec("A")
    if cell.target.logits is not None:
        tensors["H"] = np.asarray(bf.tensors[cell.target.logits], dtype=np.float64)
        target = TargetSpec("A", "H", format_rational(slack))
    cells = []
    for i, c in enumerate(cands):
        lower, extra = _lower_claim(c, f"c{i}")
        tensors.update(extra)
        cells.append(CellSpec(f"{cell.id}/without-decoded/{c.family}", cell.eps_text, target, lower,
                              Claim.of(int(min(A.shape)), "trivial")))
    # verified from a private copy, then written into DIR (fileio.safeio: never over a link or a non-file)
    tmp = Path(tmpdir) / f"{len(list(Path(tmpdir).iterdir()))}.safetensors"
    write_bracket_file(tmp, cells, tensors)
    reports = verify_file(tmp)
    write_bytes(out / ABLATION_DIR / f"{cell.id.replace('/', '_')}.safetensors", tmp.read_bytes(), root=out)
    best = (0, "none")
    for c, rep in zip(cands, reports):
        if rep.lower.verified and rep.lower.rank > best[0]:
            best = (int(rep.lower.rank), c.family)
    return best


def ablated_lowers(out, rows: list, eps: Fraction, family: str = DECODED) -> dict:
    """``{cell_id: Ablated}`` for the verified ``rows`` at ``eps`` (rows of ``numeric.panel.audit``).

    Each bracket file is read from a private copy (``fileio.safeio.snapshot``: a regular file of ``out``,
    no link followed, the audit's size limit)."""
    with tempfile.TemporaryDirectory(prefix="softrank-ablation-") as tmpdir:
        return _ablated(Path(out), rows, eps, family, tmpdir)


def _ablated(out: Path, rows: list, eps: Fraction, family: str, tmpdir: str) -> dict:

    verified = [r for r in rows if r.status == "ok" and r.verified]
    result = {}
    files: dict = {}
    work = Path(tmpdir) / "work"
    work.mkdir()
    for r in verified:
        if Fraction(r.eps) != eps:
            continue
        if r.file not in files:
            copy = Path(tmpdir) / f"in{len(files)}.safetensors"
            snapshot(out / r.file, copy, limit=BRACKET_BYTES, root=out)
            bf = read_bracket_file(copy)
            files[r.file] = (bf, {c.id: c for c in bf.cells})
        bf, cells = files[r.file]
        cell = cells[r.cell_id]
        if _family(cell) != family:
            result[r.cell_id] = Ablated(int(r.L), "kept")
            continue
        others = [int(o.L) for o in verified if o.file == r.file and o.cell_id != r.cell_id
                  and Fraction(o.eps) >= eps and _family(cells[o.cell_id]) != family]
        best = Ablated(max(others), "other tolerance") if others else Ablated(0, "none")
        L, how = _fallback(out, bf, cell, work)
        result[r.cell_id] = best if best.L >= L else Ablated(L, how)
    return result

"""The report's sections about heads (``numeric.panel.report``): what the brackets are about, the head files
every row is bound to, and the re-extraction of ``--check-heads`` (``numeric.panel.binding``); and ``md``,
the escaping of every string from the panel directory that the report prints.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from numeric.panel.audit import head_arrays
from numeric.panel.binding import HEAD_TOLERANCE, HeadFile, check_heads
from numeric.panel.provenance import PanelRun, source_digest
from fileio.safeio import escape

__all__ = ["md", "ERROR_LINE", "DIGEST_CHARS", "heads_line", "head_files", "rebound", "check_panel_heads"]

#: Characters of one error line kept (stderr and report.md).
ERROR_LINE = 400
#: Hex digits of the sources digest shown in the header (the full one is in panel.json).
DIGEST_CHARS = 16
#: Hex digits of a head file's logits hash shown in the report.
HEAD_DIGEST_CHARS = 16


def md(x, limit: int | None = None) -> str:
    """A string from the panel directory, as Markdown text: printable ASCII, escaped, cut, no table bar."""
    return (escape(x) if limit is None else escape(x, limit)).replace("|", "\\|")


def heads_line(checks) -> str:
    """The report's second statement: whether the heads were re-extracted from their model, and so what the
    brackets are about (``numeric.panel.binding``)."""
    if checks is None:
        return ("**Heads not re-extracted:** the heads were not extracted again from their model for this "
                "report (`--check-heads` does that), so every bracket below is about the head files in "
                "`heads/` (the exact softmax of their stored logits); that they are the named model's heads "
                "is the panel's word.\n")
    bound, transferred, differs, unavailable = (sum(c.status == status for c in checks)
                                                 for status in ("bound", "transferred", "differs", "unavailable"))
    return (f"**Heads re-extracted on this machine** (`--check-heads`, {len(checks)} head files): "
            f"{bound} byte-identical (bound to the model), {transferred} within the "
            f"tolerance with their brackets transferred to the model's head (section \"Heads re-extracted\"), "
            f"{differs} differing beyond it, {unavailable} not re-extracted.\n")


def head_files(checked) -> list:
    if not checked.heads:
        return []
    L = ["## Head files\n", "The heads every rank above is bound to: SHA-256 of the `logits` tensor of "
         "`heads/<key>.safetensors` (first digits); re-extracting a head from its model must give these bytes.\n"]
    L.extend(f"- {md(k)}: {h[:HEAD_DIGEST_CHARS]}" for k, h in checked.heads.items())
    return L + [""]


def rebound(checks, run, tolerance: Fraction = HEAD_TOLERANCE) -> list:
    """The section of ``--check-heads``: each head file against its model (``numeric.panel.binding``)."""
    if checks is None:
        return []
    theirs = str((run if run is not None else PanelRun({})).run_code.source_sha256 or "unknown")
    mine = source_digest()
    code = (f"The panel's extracting code (`panel.json`: sources sha256 {md(theirs[:DIGEST_CHARS])}) is "
            + ("this machine's." if theirs == mine else
               f"not this machine's (sources sha256 {mine[:DIGEST_CHARS]}): a difference may come from the code."))
    L = ["## Heads re-extracted\n",
         "Each head extracted again from its model on this machine and compared with `heads/<key>.safetensors`. "
         "bound: identical logits and matrix bytes. transferred: delta >= ||A' - A0||_row1 (A0 the stored float64 "
         "matrix, A' the exact softmax of the re-extracted logits: the row-l1 distance of the two float64 "
         "matrices computed exactly plus the exact tier's proved slack of the new one), and each certified "
         "bracket moved to A' by the triangle inequality (docs/panel.md, trust model): r_(eps+delta)(A') <= U, "
         f"and r_(eps-delta)(A') >= L when eps > delta. A delta above the tolerance {tolerance} "
         "(`--head-tolerance`) is an error (differs), as is a head not re-extracted. Seconds: the head's share of "
         "its source's forward pass. " + code + "\n",
         "| head file | model | result | delta | brackets for the model's head | s |", "|---|---|---|---:|---|---:|"]
    for c in checks:
        delta = "-" if c.delta is None else ("0" if c.delta == 0 else f"{float(c.delta):.3g}")
        moved = "; ".join(t.text() for t in c.transfers)
        what = {"bound": "the brackets above", "transferred": moved}.get(
            c.status, "; ".join(x for x in (moved, md(c.note, ERROR_LINE)) if x) or "-")
        L.append(f"| {md(c.key)} | {md(c.model or '-')} | {c.status} | {delta} | {what} | {c.seconds:.2f} |")
    return L + [""]


def check_panel_heads(out: Path, checked, tolerance) -> list:
    """``numeric.panel.binding.check_heads`` on every head key the audit kept."""
    heads = []
    for key, rows in sorted(checked.by_key.items()):
        arrays = head_arrays(out, key)
        if arrays is None:
            continue
        heads.append(HeadFile(key, tuple(rows), *arrays))
    identity = dict(checked.run.identity) if checked.run is not None else None
    return check_heads(heads, identity, tolerance)

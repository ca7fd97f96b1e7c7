"""Compare a rebuilt run with its manifest, artifact by artifact.

Every bracket file of the rebuilt run is re-verified by the exact tier and bound to its head
(``numeric.panel.audit``, as for the report); its values are compared with the manifest's:

- ``identical``: the bracket file's canonical digest is the manifest's (its bytes, but the fields that
  measure wall time or name the checkout);
- ``same brackets``: other bytes, but at every tolerance the same verified L and U (another CPU's float32
  kernels moved the head's logits or the search's path, not the bracket the exact tier accepted);
- ``different``: an L or U differs (the cells and by how much), a cell is missing, or is not in the manifest.

A study (``study.json``): ``identical`` (canonical digest), ``same reading`` (the reading rule's verdicts
and the equivalence verdicts equal, every headline number within ``STUDY_TOLERANCE``), else ``different``.
Exit 1 when a verified bracket or a study reading differs, a cell is missing, or the audit found an
integrity error; 0 otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from numeric.replicate.manifest import panel_cells, study_entry
from fileio.safeio import escape

__all__ = ["STUDY_TOLERANCE", "Outcome", "compare_cells", "compare_study", "check_run"]

#: Largest difference of a study headline number still read as the same reading (absolute; the study's
#: resolution is 0.01 in the target's units).
STUDY_TOLERANCE = 1e-6
IDENTICAL, SAME, DIFFERENT = "identical", "same brackets", "different"


@dataclass
class Outcome:
    """The lines to print and the counts of a comparison."""

    lines: list = field(default_factory=list)
    counts: dict = field(default_factory=lambda: {IDENTICAL: 0, SAME: 0, DIFFERENT: 0})
    failed: bool = False

    def add(self, kind: str, text: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.failed = self.failed or kind == DIFFERENT
        self.lines.append(f"{kind}: {text}")


def _by_cell(rows) -> dict:
    out: dict = {}
    for key, eps, lo, up, lw, uw, hl, hf, bs, bc in rows:
        out.setdefault(key, {"head": hl, "head_file": hf, "bracket": bs, "canonical": bc, "brackets": {}})
        out[key]["brackets"][Fraction(eps)] = (lo, up, lw, uw)
    return out


def _delta(a: int, b: int) -> str:
    return f"{a}" if a == b else f"{a} -> {b} ({b - a:+d})"


def compare_cells(panel: str, manifest_rows, rebuilt: dict, expected: set | None, out: Outcome) -> None:
    """Compare the rebuilt ``{key: CellEntry}`` of ``panel`` with the manifest's rows (``expected``: the keys
    that must be there; None: every key of the manifest)."""
    want = _by_cell(manifest_rows)
    keys = set(want) if expected is None else set(expected)
    for key in sorted(keys - set(rebuilt)):
        out.add(DIFFERENT, f"{panel}/{key}: missing from the rebuilt run"
                + ("" if key in want else " (and not in the manifest)"))
    for key in sorted(rebuilt):
        got, ref = rebuilt[key], want.get(key)
        name = f"{panel}/{escape(key, 80)}"
        if ref is None:
            out.add(DIFFERENT, f"{name}: not in the manifest")
            continue
        mine = {Fraction(e): (lo, up, lw, uw) for e, lo, up, lw, uw in got.brackets}
        if got.bracket_canonical_sha256 == ref["canonical"]:
            whole = "byte for byte" if got.bracket_sha256 == ref["bracket"] else "but wall time and checkout"
            out.add(IDENTICAL, f"{name}: {len(mine)} bracket(s), {whole}")
            continue
        diffs = []
        for e in sorted(set(mine) | set(ref["brackets"])):
            a, b = ref["brackets"].get(e), mine.get(e)
            if a is None or b is None:
                diffs.append(f"eps {e}: {'only rebuilt' if a is None else 'only in the manifest'}")
            elif a[:2] != b[:2]:
                diffs.append(f"eps {e}: L {_delta(a[0], b[0])}, U {_delta(a[1], b[1])}")
        if diffs:
            out.add(DIFFERENT, f"{name}: " + "; ".join(diffs))
            continue
        notes = ["head logits " + ("identical" if got.head_logits_sha256 == ref["head"] else "differ")]
        kinds = sum(mine[e][2:] != ref["brackets"][e][2:] for e in mine)
        if kinds:
            notes.append(f"witness kinds differ at {kinds} tolerance(s)")
        out.add(SAME, f"{name}: {len(mine)} bracket(s) with the same verified L and U, other bytes ("
                + "; ".join(notes) + ")")


def _numbers(obj, path: str = ""):
    """(path, value) of every number, and (path, text) of every string, of a headline."""
    if isinstance(obj, dict):
        for k in sorted(obj):
            yield from _numbers(obj[k], f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _numbers(v, f"{path}[{i}]")
    else:
        yield path, obj


def compare_study(ref: dict, got: dict, out: Outcome) -> None:
    """Compare a rebuilt study's entry (``manifest.study_entry``) with the manifest's."""
    name = ref["out"]
    if got["study_canonical_sha256"] == ref["study_canonical_sha256"]:
        out.add(IDENTICAL, f"{name}/study.json (but wall time, checkout and paths)")
        return
    a, b = dict(_numbers(ref["headline"])), dict(_numbers(got["headline"]))
    worst, where, text = 0.0, "", []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            if abs(x - y) > worst:
                worst, where = abs(x - y), k
        elif x != y:
            text.append(f"{escape(k, 80)}: {escape(str(x), 40)} -> {escape(str(y), 40)}")
    if text or worst > STUDY_TOLERANCE:
        what = text[:3] + ([f"largest number move {worst:.3g} at {escape(where, 80)}"] if worst else [])
        out.add(DIFFERENT, f"{name}/study.json: " + "; ".join(what))
    else:
        out.add(SAME, f"{name}/study.json: the same reading, other bytes (numbers within {worst:.2g})")


def check_run(manifest: dict, rep, run: Path, *, workers: int | None = None, slice_keys: tuple = ()) -> Outcome:
    """Compare the run directory ``run`` with ``manifest`` (checked by ``read_manifest``); with ``slice_keys``
    only those cells of the first panel, and no study."""
    out = Outcome()
    panels = manifest["panels"][:1] if slice_keys else manifest["panels"]
    if slice_keys:
        missing = [k for k in slice_keys if k not in {r[0] for r in panels[0]["rows"]} | set(panels[0]["dropped"])]
        if missing:
            out.add(DIFFERENT, f"the slice's cell {missing[0]} is not in the manifest")
    for p in panels:
        d = run / p["dir"]
        if not d.is_dir():
            out.add(DIFFERENT, f"{p['dir']}: the rebuilt run has no such panel directory")
            continue
        cells, errors, dropped, _ = panel_cells(d, workers)
        for e in errors:
            out.add(DIFFERENT, f"{p['dir']}: integrity: {escape(e, 300)}")
        want_dropped = set(p["dropped"]) & set(slice_keys) if slice_keys else set(p["dropped"])
        for k in sorted(set(dropped) ^ want_dropped):
            out.add(DIFFERENT, f"{p['dir']}/{escape(k, 80)}: dropped by the screens in "
                    + ("the rebuilt run only" if k in dropped else "the manifest only"))
        expected = None if not slice_keys else set(slice_keys) - set(p["dropped"])
        compare_cells(p["dir"], p["rows"], cells, expected, out)
    if not slice_keys:
        for s in manifest["studies"]:
            if not (run / s["out"] / "study.json").is_file():
                out.add(DIFFERENT, f"{s['out']}/study.json: missing from the rebuilt run")
                continue
            compare_study(s, study_entry(run, s["out"]), out)
    return out

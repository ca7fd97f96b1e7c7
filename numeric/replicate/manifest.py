"""The manifest of a recorded run: what the run produced, read from its verified files.

``record(rep, out)`` reads a finished run directory the way the report does (``numeric.panel.audit``: every
bracket file re-verified by the exact tier, every row bound to its head file; the records the panel wrote
are not believed) and writes, per panel cell (a bracket file), its key, its head's SHA-256 (the ``logits``
tensor, as the exact pass binds it, and the head file's bytes), the bracket file's SHA-256 (its bytes, and
its canonical digest: the bytes but the fields that measure wall time or name the checkout) and per
tolerance the verified L and U and the witness kinds; per study the canonical digest of ``study.json``
(the keys that measure wall time, name the checkout or the machine's paths masked) and its headline
numbers. It refuses (exit 1) a run with an audit error, an unverified bracket or a missing cell.

A manifest is untrusted input when read back (``read_manifest``): size and depth limited, every field
checked; a malformed one is a one-line ``ManifestError`` (exit 2).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from fractions import Fraction
from pathlib import Path

from exact.errors import UserInputError
from numeric.panel import cli as panel_cli
from numeric.panel.audit import audit
from numeric.replicate.registry import OUT as FOLDER, Replicate
from numeric.replicate.run import read_stamp
from fileio.safeio import SafeIOError, escape, list_dir, read_bytes, read_json

__all__ = ["ManifestError", "RecordRefused", "MANIFESTS", "COLUMNS", "CellEntry", "manifest_path", "panel_cells",
           "expected_keys",
           "study_entry", "record", "read_manifest", "bracket_canonical_sha256", "study_canonical_sha256",
           "headline", "machine_facts", "not_recorded"]

MANIFESTS = Path(__file__).with_name("manifests")
FORMAT = 1
MANIFEST_BYTES = 4 << 20
BRACKET_BYTES = 1 << 30
STUDY_BYTES = 64 << 20
#: One row per (cell, tolerance).
COLUMNS = ("key", "eps", "L", "U", "lower_witness", "upper_witness", "head_logits_sha256", "head_file_sha256",
           "bracket_sha256", "bracket_canonical_sha256")
#: Fields of a bracket cell's provenance that measure wall time or name the git checkout.
CELL_VOLATILE = (("search", "seconds"), ("search", "code", "commit"), ("search", "code", "dirty"))
#: Keys of study.json masked wherever they occur (wall time, the checkout), and at the top (paths).
STUDY_VOLATILE = ("seconds", "commit", "dirty", "code_version")
STUDY_PATHS = (("command",), ("setup", "panel"))
KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}$")
HEX = re.compile(r"^[0-9a-f]{64}$")
EPS = re.compile(r"^[0-9]{1,12}(/[0-9]{1,12})?$")
WITNESS = re.compile(r"^[A-Za-z0-9_.:+-]{1,64}$")


class ManifestError(UserInputError):
    """A malformed manifest (exit 2)."""


class RecordRefused(ValueError):
    """The run directory is not a finished, exactly verified run (exit 1)."""


@dataclass(frozen=True)
class CellEntry:
    """One bracket file of a panel: its key, hashes and the verified (eps, L, U, lower, upper) rows."""

    key: str
    head_logits_sha256: str
    head_file_sha256: str
    bracket_sha256: str
    bracket_canonical_sha256: str
    brackets: tuple[tuple[str, int, int, str, str], ...]

    def rows(self) -> list[list]:
        return [[self.key, e, lo, up, lw, uw, self.head_logits_sha256, self.head_file_sha256, self.bracket_sha256,
                 self.bracket_canonical_sha256] for e, lo, up, lw, uw in self.brackets]


def manifest_path(name: str) -> Path:
    return MANIFESTS / f"{name}.json"


def _split_safetensors(raw: bytes) -> tuple[dict, bytes]:
    if len(raw) < 8:
        raise ValueError("too short")
    n = int.from_bytes(raw[:8], "little")
    if n > len(raw) - 8:
        raise ValueError("header past the end")
    header = json.loads(raw[8:8 + n])
    if not isinstance(header, dict):
        raise ValueError("header not an object")
    return header, raw[8 + n:]


def _mask(obj, path: tuple) -> None:
    for key in path[:-1]:
        obj = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(obj, dict) and path[-1] in obj:
        obj[path[-1]] = None


def bracket_canonical_sha256(raw: bytes) -> str:
    """SHA-256 of a bracket file but its cells' wall time and checkout (``CELL_VOLATILE``, set to null): the
    tensor table, the data section and the claim document, the latter written again with sorted keys."""
    header, data = _split_safetensors(raw)
    meta = header.get("__metadata__")
    doc = json.loads(meta["softrank"]) if isinstance(meta, dict) and isinstance(meta.get("softrank"), str) else {}
    for cell in doc.get("cells", []) if isinstance(doc, dict) and isinstance(doc.get("cells"), list) else []:
        for path in CELL_VOLATILE:
            _mask(cell.get("provenance") if isinstance(cell, dict) else None, path)
    table = {k: v for k, v in header.items() if k != "__metadata__"}
    h = hashlib.sha256(json.dumps(table, sort_keys=True).encode() + b"\0" + json.dumps(doc, sort_keys=True).encode()
                       + b"\0")
    h.update(data)
    return h.hexdigest()


def _mask_keys(obj) -> None:
    if isinstance(obj, dict):
        for k in list(obj):
            if k in STUDY_VOLATILE:
                obj[k] = None
            else:
                _mask_keys(obj[k])
    elif isinstance(obj, list):
        for v in obj:
            _mask_keys(v)


def study_canonical_sha256(doc: dict) -> str:
    """SHA-256 of ``study.json`` but the keys that measure wall time, name the checkout or the panel's path."""
    doc = json.loads(json.dumps(doc))
    _mask_keys(doc)
    for path in STUDY_PATHS:
        _mask(doc, path)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _number(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _estimate(e) -> dict:
    """The headline numbers of one estimate: Delta, rho and their intervals, the equivalence verdict."""
    if not isinstance(e, dict):
        return {}
    out: dict = {}
    for k in ("delta", "rho", "mae_base", "mae_aug"):
        if _number(e.get(k)) is not None:
            out[k] = _number(e.get(k))
    for k in ("delta_ci", "rho_ci"):
        v = e.get(k)
        if isinstance(v, list) and len(v) == 2 and all(_number(x) is not None for x in v):
            out[k] = [_number(x) for x in v]
    if isinstance(e.get("equivalence"), (str, bool)):
        out["equivalence"] = e["equivalence"]
    return out


def _comparisons(comps) -> dict:
    out: dict[str, dict[str, Any]] = {}
    for c in comps if isinstance(comps, list) else []:
        if isinstance(c, dict) and isinstance(c.get("name"), str):
            if c.get("reason"):
                out[c["name"]] = {"reason": str(c["reason"])}
            elif isinstance(c.get("estimates"), dict):
                out[c["name"]] = {str(f): _estimate(e) for f, e in sorted(c["estimates"].items())}
    return out


def headline(doc) -> dict:
    """The study's headline: its shape, the reading rule's verdicts, and per comparison (and other target, and
    the boosted check) the estimates of every family and the aggregate."""
    if not isinstance(doc, dict):
        raise ManifestError("study.json is not an object")
    got = doc.get("setup")
    setup = got if isinstance(got, dict) else {}
    shape = {k: setup[k] for k in ("target", "eps", "cells", "sources", "heads", "families") if k in setup}
    out = {"setup": shape, "reading": doc.get("reading") if isinstance(doc.get("reading"), dict) else {},
           "comparisons": _comparisons(doc.get("comparisons"))}
    if doc.get("gbm"):
        out["gbm"] = _comparisons(doc.get("gbm"))
    if isinstance(doc.get("targets"), list):
        out["targets"] = {str(t.get("target")): _comparisons(t.get("comparisons"))
                          for t in doc["targets"] if isinstance(t, dict)}
    return json.loads(json.dumps(out))


def machine_facts() -> dict:
    """The machine this manifest was recorded on."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / (1 << 20), 1)
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": model or platform.processor() or platform.machine(), "machine": platform.machine(),
            "cores": os.cpu_count(), "memory_gib": mem, "system": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def _file_sha(path: Path, root: Path, limit: int) -> tuple[str, bytes]:
    raw = read_bytes(path, limit=limit, root=root)
    return hashlib.sha256(raw).hexdigest(), raw


def panel_cells(panel: Path, workers: int | None = None) -> tuple[dict[str, CellEntry], list, list, dict]:
    """({key: CellEntry} of the verified brackets, the audit's errors, the keys of the cells the decoder
    screens dropped (a record, no bracket), panel.json's code and versions) of a panel directory, every value
    from the exact tier's pass (``numeric.panel.audit``)."""
    a = audit(panel, workers=workers, reverify=True)
    errors = list(a.errors)
    by_key: dict[str, list] = defaultdict(list)
    for r in a.rows:
        if not r.ok:
            continue
        if not r.verified:
            errors.append(f"{r.cell_id}: not verified by the exact tier")
            continue
        by_key[str(r.cell_id).split("/eps=")[0]].append(r)
    cells = {}
    for key, rows in sorted(by_key.items()):
        try:
            bsha, raw = _file_sha(panel / "brackets" / f"{key}.safetensors", panel, BRACKET_BYTES)
            canon = bracket_canonical_sha256(raw)
            hsha, _ = _file_sha(panel / "heads" / f"{key}.safetensors", panel, BRACKET_BYTES)
        except (SafeIOError, ValueError, KeyError, TypeError) as e:
            errors.append(f"{key}: {escape(str(e), 200)}")
            continue
        brackets = tuple(sorted(((str(Fraction(r.eps)), int(r.L), int(r.U), str(r.lower_witness),
                                  str(r.upper_witness)) for r in rows), key=lambda t: Fraction(t[0])))
        cells[key] = CellEntry(key, str(a.heads.get(key)), hsha, bsha, canon, brackets)
    try:
        records = {n[:-len(".json")] for n in list_dir(panel / "cells", root=panel, suffix=".json")}
    except SafeIOError as e:
        errors.append(str(e))
        records = set()
    dropped = sorted(records - set(by_key))     # a record without a bracket: a cell the screens dropped
    run = a.run
    code = {"code": dict(run.code) if run else None, "code_version": dict(run.code_version or {}) if run else None,
            "versions": dict(run.versions) if run else None, "effort": run.effort if run else None,
            "summary": dict(run.summary) if run and run.summary else None}
    return cells, errors, dropped, json.loads(json.dumps(code))


def expected_keys(args: tuple[str, ...], panel: Path) -> list[str]:
    """The cell keys a panel step's command runs (its roster, sources, domains; ``numeric.panel.cli``)."""
    parsed = panel_cli.build_parser().parse_args([*args, "--out", str(panel)])
    tasks, _, _ = panel_cli._tasks(parsed)
    return [t.key for t in tasks]


def study_entry(out: Path, step_out: str) -> dict:
    """The manifest entry of a study's output folder: ``study.json``'s digests and headline (``SafeIOError``,
    ``ManifestError`` on a bad file)."""
    path = out / step_out / "study.json"
    raw = read_bytes(path, limit=STUDY_BYTES, root=out)
    doc = read_json(path, limit=STUDY_BYTES, root=out)
    got = doc.get("setup") if isinstance(doc, dict) else None
    setup = got if isinstance(got, dict) else {}
    return {"out": step_out, "study_sha256": hashlib.sha256(raw).hexdigest(),
            "study_canonical_sha256": study_canonical_sha256(doc) if isinstance(doc, dict) else None,
            "seconds": _number(setup.get("seconds")), "headline": headline(doc)}


def _seconds(stamp: dict, out: str, code: dict | None) -> dict:
    """The measured time of a step: the replicate calls' sums, else the panel's last call when it ran every cell."""
    calls = stamp.get("steps", {}).get(out, {}).get("calls") if isinstance(stamp.get("steps"), dict) else None
    if isinstance(calls, list) and calls and all(isinstance(c, dict) and not c.get("slice") for c in calls):
        return {"wall_s": round(sum(float(c.get("wall_s", 0)) for c in calls), 1),
                "cpu_s": round(sum(float(c.get("cpu_s", 0)) for c in calls), 1), "calls": len(calls),
                "from": "replicate"}
    summary = (code or {}).get("summary") or {}
    if summary.get("skipped") == 0 and isinstance(summary.get("seconds"), (int, float)):
        return {"wall_s": round(float(summary["seconds"]), 1), "cpu_s": None, "calls": 1, "from": "panel.json"}
    return {}


def record(rep: Replicate, out: Path, *, workers: int | None = None) -> dict:
    """The manifest of the finished run ``out`` of ``rep`` (``RecordRefused`` when it is not finished and
    exactly verified; ``SafeIOError`` on an unreadable file)."""
    stamp = read_stamp(out)
    panels, problems = [], []
    for step in rep.steps:
        dirs = [step.out] if step.kind == "panel" else list(step.panels) if step.kind == "arms" else []
        for d in dirs:
            cells, errors, dropped, code = panel_cells(out / d, workers)
            problems += [f"{d}: {e}" for e in errors]
            if step.kind == "panel":
                expected = set(expected_keys(step.args, out / d))
                missing = sorted(expected - set(cells) - set(dropped))
                if missing:
                    problems.append(f"{d}: {len(missing)} of {len(expected)} cells not finished (first {missing[0]})")
            panels.append({"dir": d, "step": step.out, "cells": len(cells), "columns": list(COLUMNS),
                           "rows": [row for c in cells.values() for row in c.rows()], "dropped": dropped,
                           "run": {k: code[k] for k in ("code", "code_version", "versions", "effort")},
                           "measured": _seconds(stamp, d if step.kind == "panel" else step.out, code)})
    if problems:
        raise RecordRefused(f"{len(problems)} problem(s), first: {problems[0]}")
    studies = [study_entry(out, s.out) | {"panels": list(s.panels), "args": list(s.args),
                                          "measured": _seconds(stamp, s.out, None)} for s in rep.study_steps]
    for s in studies:
        if not s["measured"] and s["seconds"] is not None:
            s["measured"] = {"wall_s": s["seconds"], "cpu_s": None, "calls": 1, "from": "study.json"}
    return {"format": FORMAT, "name": rep.name, "status": "recorded",
            "steps": _steps(rep), "machine": machine_facts(), "panels": panels, "studies": studies}


def not_recorded(rep: Replicate) -> dict:
    """The placeholder manifest of a run not recorded yet."""
    return {"format": FORMAT, "name": rep.name, "status": "not recorded", "steps": _steps(rep)}


def _steps(rep: Replicate) -> list:
    return [{"kind": s.kind, "out": s.out, "args": list(s.args), "panels": list(s.panels)} for s in rep.steps]


# --- reading a manifest back (untrusted) -----------------------------------------------------------------------

def _need(cond: bool, what: str) -> None:
    if not cond:
        raise ManifestError(what)


def _check_row(row, where: str) -> tuple:
    _need(isinstance(row, list) and len(row) == len(COLUMNS), f"{where}: a row is not a list of {len(COLUMNS)}")
    key, eps, lo, up, lw, uw, hl, hf, bs, bc = row
    _need(isinstance(key, str) and bool(KEY.match(key)), f"{where}: a row's key is not a cell key")
    _need(isinstance(eps, str) and bool(EPS.match(eps)) and Fraction(eps) > 0, f"{where}: {key}: eps is not a rational")
    for v in (lo, up):
        _need(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1 << 20, f"{where}: {key}: L/U not counts")
    _need(lo <= up, f"{where}: {key}: L > U")
    for v in (lw, uw):
        _need(isinstance(v, str) and bool(WITNESS.match(v)), f"{where}: {key}: a witness kind is malformed")
    for v in (hl, hf, bs, bc):
        _need(isinstance(v, str) and bool(HEX.match(v)), f"{where}: {key}: a digest is not 64 hex digits")
    return tuple(row)


def _check_panel(p, i: int) -> dict:
    where = f"panel {i}"
    _need(isinstance(p, dict), f"{where} is not an object")
    _need(isinstance(p.get("dir"), str) and bool(FOLDER.match(p["dir"])), f"{where}: dir is not a folder name")
    where = f"panel {p['dir']}"
    _need(p.get("columns") == list(COLUMNS), f"{where}: columns are not {', '.join(COLUMNS)}")
    rows = p.get("rows")
    _need(isinstance(rows, list) and len(rows) <= 1 << 20, f"{where}: rows is not a list")
    checked = [_check_row(r, where) for r in rows]
    seen = set()
    for r in checked:
        _need((r[0], Fraction(r[1])) not in seen, f"{where}: {r[0]} at eps {r[1]} twice")
        seen.add((r[0], Fraction(r[1])))
    dropped = p.get("dropped", [])
    _need(isinstance(dropped, list) and all(isinstance(k, str) and KEY.match(k) for k in dropped),
          f"{where}: dropped is not a list of cell keys")
    measured, run = p.get("measured"), p.get("run")
    return {"dir": p["dir"], "rows": checked, "dropped": dropped,
            "measured": measured if isinstance(measured, dict) else {}, "run": run if isinstance(run, dict) else {}}


def _check_study(s, i: int) -> dict:
    _need(isinstance(s, dict) and isinstance(s.get("out"), str) and bool(FOLDER.match(s["out"])),
          f"study {i}: out is not a folder name")
    for k in ("study_sha256", "study_canonical_sha256"):
        _need(isinstance(s.get(k), str) and bool(HEX.match(s[k])), f"study {s['out']}: {k} is not 64 hex digits")
    _need(isinstance(s.get("headline"), dict), f"study {s['out']}: headline is not an object")
    return s


def read_manifest(path: Path, name: str) -> dict:
    """A manifest read back and checked (``ManifestError``, one line, on anything malformed)."""
    try:
        doc = read_json(path, limit=MANIFEST_BYTES)
    except SafeIOError as e:
        raise ManifestError(str(e)) from None
    _need(isinstance(doc, dict) and doc.get("format") == FORMAT, f"{path.name}: not a manifest of format {FORMAT}")
    _need(doc.get("name") == name, f"{path.name}: the manifest of another run ({escape(str(doc.get('name')), 40)})")
    _need(doc.get("status") in ("recorded", "not recorded"), f"{path.name}: status is not recorded / not recorded")
    if doc["status"] == "not recorded":
        return {"name": name, "status": "not recorded", "panels": [], "studies": []}
    panels, studies = doc.get("panels"), doc.get("studies", [])
    _need(isinstance(panels, list) and isinstance(studies, list), f"{path.name}: panels and studies are not lists")
    out = {"name": name, "status": "recorded", "panels": [_check_panel(p, i) for i, p in enumerate(panels)],
           "studies": [_check_study(s, i) for i, s in enumerate(studies)],
           "machine": doc.get("machine") if isinstance(doc.get("machine"), dict) else {}}
    dirs = [p["dir"] for p in out["panels"]]
    _need(len(set(dirs)) == len(dirs), f"{path.name}: a panel directory twice")
    return out

"""One panel cell: a (head, source) pair, extracted, searched, exported, verified.

``run_cell(task)`` extracts the head (``numeric.heads``), searches brackets at
each tolerance (``numeric.search.search_brackets`` with the task's effort and
the cell's seed), writes one bracket file, re-verifies it with the exact tier
(``exact.verify``), checks every upper factorisation directly (K.1 with the
slack of K.5) and writes the cell record (``numeric.panel.table``). Every
file is written atomically, the record last: a cell whose record exists is
complete.

``run_cell`` touches no process state (threads, environment, descriptors):
the entry points set that (``numeric.runtime``). Several cells may run
at once in threads of one process (a Dask worker): the model cache and the
extraction (a process-wide patch of the attention function) are locked, and
every file name belongs to one cell.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from exact.cellspec import CellSpec
import numpy as np
from safetensors.numpy import save

from exact.bracketfile import read_bracket_file
from exact.matrix import ExactMatrix
from exact.norms import row_l1_norm
from exact.rational import parse_rational
from exact.verify import verify_file
from numeric.geometry import cell_descriptors, native_features
from numeric.heads.extract import extract_heads, source_for
from numeric.heads.models import load_model
from numeric.heads.zoo.common import file_sha256
from numeric.panel import vcache
from numeric.panel.features import study_columns
from numeric.search.attack import SoundnessError
from numeric.search.driver import search_brackets, svd_budget
from numeric.heads.domains import DOMAINS, source_domain
from numeric.search.effort import DEFAULT_EFFORT, cell_seed
from numeric.panel.schema import ROW_SCHEMA, PanelRow
from numeric.panel.table import RecordError, atomic_write, read_record, record_path, write_record
from numeric.search.export import write_bracket_file

__all__ = ["CellTask", "run_cell", "finished_rows", "direct_upper_check", "family_label"]

#: Characters kept of an exception message in a table column.
ERROR_CHARS = 120
#: Digits of the per-tolerance seconds in the table (milliseconds).
SECONDS_DIGITS = 3


@dataclass(frozen=True)
class CellTask:
    """What one cell needs; ``identity`` is the run identity (JSON text, ``numeric.panel.provenance``)."""

    model: str
    layer: int
    head: int
    source: int
    eps: tuple          # exact rational strings
    out: str
    prefix: int
    block: int
    length: int
    min_mass: float
    screen: bool
    attack: bool
    geometry: bool
    device: str | None
    image_dir: str | None
    effort: str = DEFAULT_EFFORT
    identity: str = "{}"
    native: bool = False     # decoders: the native-causal matrix of the window, not the prefix block
    tag: str = ""            # several models in one run: the model's name, prefixed to the key
    image_size: int | None = None
    domain: str = ""         # the source's domain (numeric.heads.domains); "": the model's primary one

    @property
    def key(self) -> str:
        base = (f"L{self.layer}H{self.head}_s{self.source:02d}" + (f"_{self.domain}" if self.domain else "")
                + ("_nc" if self.native else ""))
        return f"{self.tag}_{base}" if self.tag else base

    def signature(self) -> dict:
        """What a finished record must match to be reused (JSON-normalised)."""
        return json.loads(json.dumps({
            "model": self.model, "eps": list(self.eps), "prefix": self.prefix, "block": self.block,
            "length": self.length, "min_mass": self.min_mass, "screen": self.screen, "attack": self.attack,
            "geometry": self.geometry, "effort": self.effort, "identity": json.loads(self.identity),
            "native": self.native, "image_size": self.image_size,
            **({"domain": self.domain} if self.domain else {})}))   # a primary-domain cell keeps its signature


_MODELS: dict = {}
_MODELS_LOCK = threading.Lock()
#: Extraction wraps the attention function of the model's module for the
#: length of one forward pass (``numeric.heads.extract.capture_attention``): a
#: process-wide patch, so two threads must not extract at once. The search,
#: the long part of a cell, runs unlocked.
_EXTRACT_LOCK = threading.Lock()


def _model(spec: str):
    with _MODELS_LOCK:
        if spec not in _MODELS:
            _MODELS[spec] = load_model(spec)
        return _MODELS[spec]


def _geometry_columns(cap) -> dict:
    """The descriptor columns of ``numeric.geometry``; a failure is recorded in the row, not raised."""
    cols = {}
    for fn, args, tag in ((cell_descriptors, (cap.logits, cap.matrix), "geometry"),
                          (native_features, (cap.Q, cap.K, cap.scale), "native")):
        try:
            cols.update({str(k): v for k, v in dict(fn(*args)).items()})
        except Exception as e:  # a descriptor failure must not lose the bracket
            cols[f"{tag}_error"] = f"{type(e).__name__}: {str(e)[:ERROR_CHARS]}"
    return cols


def _study_columns(lm, cap, task: CellTask) -> tuple[dict, dict]:
    """The held-out study's columns (``numeric.panel.features``); a failure is recorded, not raised."""
    try:
        return study_columns(lm, cap, task.layer, [_eps_key(e) for e in task.eps])
    except Exception as e:  # a descriptor failure must not lose the bracket
        return {"study_error": f"{type(e).__name__}: {str(e)[:ERROR_CHARS]}"}, {}


def direct_upper_check(cell: CellSpec, tensors: dict) -> bool | None:
    """||A - P Q^T||_row1 <= eps - slack, recomputed exactly from the file's tensors
    (K.1 with the slack of K.5), outside the certificate code. None when the
    upper witness is not a factorisation."""
    if cell.upper.kind != "factors":
        return None

    A = ExactMatrix.from_float64(tensors[cell.target.matrix])
    P = ExactMatrix.from_float64(tensors[cell.upper.fields["P"]])
    Q = ExactMatrix.from_float64(tensors[cell.upper.fields["Q"]])
    bound = parse_rational(cell.eps) - parse_rational(cell.target.slack or "0")
    return bool(row_l1_norm(A - P @ Q.T) <= bound)


def _eps_key(s) -> str:
    return str(Fraction(s))


def family_label(lm) -> str:
    """The panel's family of a model: ``encoder``, ``vit``, or ``decoder-<model_type>``
    (GPT-2 and Qwen2 are two families, as in the paper's Table 1)."""
    return f"decoder-{lm.model_type}" if lm.family == "decoder" else lm.family


def _status(task: CellTask, lm, cap) -> str:
    if lm.family == "decoder" and cap.mass < task.min_mass:
        return "dropped_mass"
    if lm.family == "decoder" and task.screen and not cap.nonlocal_head:
        return "dropped_local"
    return "ok"


def _save_head(path: Path, cap, out: Path, image_dir: str | None = None, spec: str | None = None) -> None:
    """The head's Q, K, logits and float attention matrix (the bracket file's target), for later study and
    for the report, which binds every row to this file by the hashes of its logits and matrix (atomic).
    Written for dropped cells too: a dropped row counts only with its head file (``numeric.panel.audit``).
    Its provenance is what re-extracting the head needs (``numeric.panel.binding``): the model's name and
    weights SHA-256 and the spec it was loaded by (a preset name or a directory), the layer and head, the
    source's token ids or pixel hash (and the image directory); the extracting code is the run identity's
    (``panel.json``, and every record's signature)."""
    # one metadata key: safetensors writes a metadata map in no fixed order, so two keys
    # would make the bytes of equal head files differ between runs (the scale is in the provenance)
    prov = dict(cap.provenance, **({"image_dir": str(image_dir)} if image_dir else {}),
                **({"model_spec": spec} if spec else {}))
    data = save({"Q": np.ascontiguousarray(cap.Q), "K": np.ascontiguousarray(cap.K),
                 "logits": np.ascontiguousarray(cap.logits), "matrix": np.ascontiguousarray(cap.matrix)},
                metadata={"provenance": json.dumps(prov, sort_keys=True)})
    atomic_write(path, data, root=out)


def _write_brackets(path: Path, res, out: Path) -> None:
    """The bracket file, written to a temporary name first and moved into place (``fileio.safeio``)."""
    write_bracket_file(path, res.cells, res.tensors, root=out)


def _verify(path: Path, out: Path) -> dict:
    """The exact pass on one bracket file, recorded for the audit (``numeric.panel.vcache``)."""
    try:
        bf = read_bracket_file(path)
        reports = verify_file(path)
    except Exception as e:  # fail closed: the file's cells count as unverified
        print(f"python -m numeric panel: {path}: exact verification failed: {e}", file=sys.stderr)
        return {}
    vcache.store(out, file_sha256(path), vcache.result_of(bf, reports))
    return {r.id: r for r in reports}


def _search_rows(task: CellTask, lm, cap, base: dict, seed: int) -> tuple[list[PanelRow], dict]:
    """Search, export, verify: one row per tolerance, and the search's run provenance."""

    out = Path(task.out)
    res = search_brackets(cap.matrix, [Fraction(e) for e in task.eps], logits=cap.logits, id_prefix=task.key,
                          device=task.device, attack=task.attack, provenance=cap.provenance,
                          effort=task.effort, seed=seed)
    path = out / "brackets" / f"{task.key}.safetensors"
    _write_brackets(path, res, out)
    _save_head(out / "heads" / f"{task.key}.safetensors", cap, out, task.image_dir, task.model)
    reports = _verify(path, out)
    # native-causal logits carry the finite mask (numeric.heads.blocks): no geometry (paper L.1)
    geometry = task.geometry and not task.native
    geo = _geometry_columns(cap) if geometry else {}
    study, study_eps = _study_columns(lm, cap, task) if geometry else ({}, {})
    by_eps = {_eps_key(c.eps): c for c in res.cells}
    rows = []
    for rec in res.results:
        e = _eps_key(rec.eps)
        cell = by_eps.get(e)
        rep = reports.get(cell.id) if cell else None
        direct = direct_upper_check(cell, res.tensors) if cell else None
        descriptors = {**geo, **study, **study_eps.get(e, {})}
        if task.domain and "b0_domain" in descriptors:   # B0's domain one-hot tells a second domain apart
            descriptors["b0_domain"] = DOMAINS[task.domain].b0_label
        row = PanelRow(**base, eps=e, L=rec.lower, U=rec.upper, lower_witness=rec.lower_witness,
                       upper_witness=rec.upper_witness, seconds=round(float(rec.seconds), SECONDS_DIGITS),
                       slack=float(rec.slack) if rec.slack is not None else None, status="ok",
                       verified=bool(rep and rep.verified), lower_verified=bool(rep and rep.lower.verified),
                       upper_verified=bool(rep and rep.upper.verified),
                       attack_run=bool(task.attack and rec.lower >= 2 and rec.attack_success is not None),
                       attack_success=bool(rec.attack_success),
                       direct_checked=direct is not None, direct_passed=bool(direct),
                       capped=bool(rec.capped),      # the search provenance's "capped" (the same flag)
                       cell_id=cell.id if cell else "", file=str(path.relative_to(out)), svd_rank=rec.svd_rank,
                       svd_budget=svd_budget(cap.matrix, rec.eps, logits=cap.logits), descriptors=descriptors)
        rows.append(row)
        if rec.attack_success:
            raise SoundnessError(f"SOUNDNESS BUG: rank-{rec.lower - 1} attack succeeded on {task.key} "
                                 f"at eps {e} where L = {rec.lower} was certified")
    return rows, res.provenance.to_json()


def run_cell(task: CellTask) -> list[PanelRow]:
    """Extract, search, export, verify one (head, source) cell; rows per eps."""

    lm = _model(task.model)
    src = source_for(lm, task.source, length=task.length, prefix=task.prefix, block=task.block,
                     image_dir=task.image_dir, image_size=task.image_size, domain=task.domain)
    t0 = time.perf_counter()
    with _EXTRACT_LOCK:
        cap = extract_heads(lm, src, [(task.layer, task.head)], prefix=task.prefix, block=task.block,
                            native=task.native)[0]
    kind = ("native-causal",) if task.native else ()     # prefix-block and full cells keep their seeds
    seed = cell_seed(lm.weights_sha256, task.layer, task.head, src.source_id, *kind)
    base = {"family": family_label(lm), "model": lm.name, "cell_kind": cap.kind, "layer": task.layer,
            "head": task.head, "source": src.source_id, "domain": source_domain(src.source_id),
            "n_rows": cap.matrix.shape[0], "n_cols": cap.matrix.shape[1],
            "mass": cap.mass, "min_mass": cap.min_mass, "local_mass": cap.local_mass,
            "hf_max_abs_diff": cap.hf_max_abs_diff, "effort": task.effort, "seed": seed}
    status = _status(task, lm, cap)
    if status != "ok":
        out = Path(task.out)
        _save_head(out / "heads" / f"{task.key}.safetensors", cap, out, task.image_dir, task.model)
        rows, search = [PanelRow(**base, eps=e, status=status) for e in task.eps], dict[str, Any]()
    else:
        rows, search = _search_rows(task, lm, cap, base, seed)
    write_record(task.out, task.key, {"schema": ROW_SCHEMA, "signature": task.signature(),
                                      "rows": [r.to_json() for r in rows], "search": search, "seed": seed,
                                      "seconds": time.perf_counter() - t0})
    return rows


def finished_rows(task: CellTask) -> list[PanelRow] | None:
    """The rows of a finished cell with the task's signature, or None (to be run)."""
    try:
        doc, rows = read_record(record_path(task.out, task.key))
    except RecordError:
        return None
    if doc["signature"] != task.signature():
        return None
    for r in rows:
        if r.ok and not (Path(task.out) / (r.file or "")).is_file():
            return None
    if not (Path(task.out) / "heads" / f"{task.key}.safetensors").is_file():   # a dropped cell's evidence
        return None
    return rows

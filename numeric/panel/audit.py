"""The report's source of truth: every bracket file of a panel re-verified, every row bound to its head
(the report's own re-verification; the trust model of docs/panel.md).

A panel directory is untrusted input: anyone who can write it can write any
record, bracket file or head file in it. ``audit(out)`` trusts nothing in it
but what the exact tier derives there and the hashes of the head files:

- every bracket file under ``DIR/brackets`` is copied once (``fileio.safeio.snapshot``:
  regular files only, a size limit, no link followed) and the copy is
  re-verified by the exact tier (``exact.verify``, one process per core);
  the records of an earlier pass (``DIR/verified``, ``numeric.panel.vcache``)
  are read only when the caller asks (``reverify=False``: the report's
  ``--trust-records``), and the report says so;
- every record and ``panel.json`` is read through ``fileio.safeio`` and
  checked against its schema (``numeric.panel.schema``);
- every row is bound to its head: the record ``cells/<key>.json`` names the
  file ``brackets/<key>.safetensors`` and the cell ``<key>/eps=<eps>``; the
  exact pass's logits and target hashes of that cell equal the SHA-256 of
  the ``logits`` and ``matrix`` tensors of ``heads/<key>.safetensors``; the
  row's layer and head are those of the key, and its labels (model, family,
  kind, layer, head, source) those of the cell's provenance where it has them;
- the shape, witness kinds, slack, ranks and verdicts of a checked row are
  the exact pass's (a record that says otherwise is an error);
- ``panel.json``'s identity (effort, package versions, project version) and
  tolerances equal those in every cell's provenance.

Everything that does not add up is an error (the report lists it and exits 1),
never skipped: a record that is unreadable, malformed or of another run
identity; a missing or malformed ``panel.json``; a bracket file that is missing,
unreadable or refused; a row whose cell is not in its file, or whose claims
disagree with the exact pass; a row named twice; a bracket file, or a cell in
one, that no record names; a head file missing, malformed or of other hashes;
two heads within ``numeric.panel.binding.DUPLICATE_ROW_L1`` of each other (one head filed twice); a dropped
row (a decoder cell the head screen dropped: no bracket) without its head file, or whose labels, mass or
effort are not those of its head file's provenance and of ``panel.json``: a record without its evidence is
never counted. ``Audit.confirmed`` counts the bracket cells whose provenance confirmed ``panel.json``'s
effort, package versions and project version (``Audit.refused``: the fields a cell contradicted), so that
the report prints only identity fields the bracket files confirm.
"""
from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import re
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from numeric.panel.provenance import RUN_BYTES, CellProvenance, CodeVersion, PanelRun
from numeric.panel.schema import PanelRow, SchemaError, check_record, check_run, record_key_ok
import numpy as np

import crosscheck
from exact.bracketfile import read_bracket_file
from exact.verify import verify_file
from numeric.panel import vcache
from numeric.panel.binding import DUPLICATE_ROW_L1, fingerprint, header_provenance, near_duplicates
from numeric.panel.cell import family_label
from numeric.panel.table import CELLS_DIR, RECORD_BYTES, RUN_NAME, sort_key
from numeric.panel.vcache import CAP_KEYS, CellPass, FilePass, result_of
from fileio.safeio import SafeIOError, escape, list_dir, read_f64_tensors, read_json, snapshot
from numeric.heads.domains import DOMAINS, primary_domain, row_domain, source_domain

__all__ = ["Audit", "audit", "verify_files", "BRACKETS_DIR", "HEADS_DIR", "BRACKET_BYTES",
           "HEAD_BYTES", "RECORD_BYTES", "RUN_BYTES", "bind_row"]

BRACKETS_DIR = "brackets"
HEADS_DIR = "heads"
#: Size limits of what the audit reads (bytes): a bracket file, a head file (a cell record and panel.json:
#: ``numeric.panel.table.RECORD_BYTES``, ``numeric.panel.provenance.RUN_BYTES``).
BRACKET_BYTES = 1 << 30
HEAD_BYTES = 1 << 30
NATIVE = "native-causal"
#: The keys of a cell's exact report that describe its convex cap.


@dataclass(frozen=True)
class Audit:
    """The checked rows (ranks and verdicts from the exact pass), the errors, ``panel.json`` (checked against
    its schema, else None), the number of bracket files whose pass came from a record, and per head key the
    SHA-256 of its logits."""

    rows: list[PanelRow]
    errors: list
    run: PanelRun | None
    from_records: int = 0
    heads: dict = field(default_factory=dict)
    files: int = 0
    #: The second checker's totals (``crosscheck.summary``) on the same snapshots, or None when not run.
    independent: dict | None = None
    #: Per head key, its checked rows (ok and dropped), for the re-extraction check (``numeric.panel.binding``).
    by_key: dict = field(default_factory=dict)
    #: Bracket cells whose provenance confirmed panel.json's identity; the identity fields some cell refused.
    confirmed: int = 0
    refused: frozenset = frozenset()
    #: Per (file, cell id) of a checked row, its convex cap as the exact pass judged it (``exact.cap``): the
    #: ``convex_cap*`` keys of the cell's report, all None without a cap.
    caps: dict = field(default_factory=dict)


def _verify_one(path: str) -> dict:
    """``{"cells": {cell id: report JSON}}`` or ``{"error": message}`` (run in a worker process)."""
    try:
        return result_of(read_bracket_file(path), verify_file(path))
    except Exception as e:  # an unreadable file is an error in the report, not a crash
        first = str(e).splitlines()[0] if str(e) else ""
        return {"error": f"{type(e).__name__}: {escape(first)}"}


def verify_files(paths, workers: int | None = None) -> dict:
    """Re-verify ``paths`` in parallel (one process per core; in-process for one file). ``paths``: a list,
    or ``{name: path}``; the result is keyed by name."""
    named = dict(paths) if isinstance(paths, dict) else {str(p): str(p) for p in paths}
    workers = min(workers or os.cpu_count() or 1, len(named))
    if workers <= 1:
        return {k: _verify_one(str(p)) for k, p in named.items()}
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        return dict(zip(named, pool.map(_verify_one, map(str, named.values()))))


def _read_run(out: Path, errors: list) -> PanelRun | None:
    path = out / RUN_NAME
    try:
        doc = read_json(path, limit=RUN_BYTES, root=out)
    except SafeIOError as e:
        errors.append(f"{e}: the run identity is unknown" if "is missing" in str(e) else str(e))
        return None
    try:
        check_run(doc)
    except SchemaError as e:
        errors.append(f"{RUN_NAME}: not a panel run record ({e})")
        return None
    return PanelRun.from_json(doc)


def _records(out: Path, run: PanelRun | None, errors: list) -> list[tuple[str, PanelRow]]:
    """All rows of the records whose identity is the run's, each with its record's key; the others are errors."""
    identity = run.identity if run is not None else None
    rows: list[tuple[str, PanelRow]] = []
    try:
        names = list_dir(out / CELLS_DIR, root=out, suffix=".json")
    except SafeIOError as e:
        errors.append(str(e))
        return rows
    for name in names:
        rel = f"{CELLS_DIR}/{escape(name)}"
        key = name[:-len(".json")]
        if not record_key_ok(key):
            errors.append(f"{rel}: not a record name (a key of letters, digits and ._+=-)")
            continue
        try:
            doc = read_json(out / CELLS_DIR / name, limit=RECORD_BYTES, root=out)
            record_rows = check_record(doc)
        except SafeIOError as e:
            errors.append(f"unreadable cell record: {e}")
            continue
        except SchemaError as e:
            errors.append(f"{rel}: unreadable cell record ({e})")
            continue
        if identity is not None and doc["signature"].get("identity") != identity:
            errors.append(f"{rel}: record of another run identity than panel.json")
            continue
        rows.extend((key, r) for r in record_rows)
    return rows


def _snapshots(out: Path, snapdir: str, errors: list) -> tuple[dict[str, str], dict[str, str | None]]:
    """({file: snapshot path}, {file: sha256}) of every bracket file; an unreadable one is an error result."""
    paths: dict[str, str] = {}
    digests: dict[str, str | None] = {}
    try:
        names = list_dir(out / BRACKETS_DIR, root=out, suffix=".safetensors")
    except SafeIOError as e:
        errors.append(str(e))
        return paths, digests
    for i, name in enumerate(names):
        rel = f"{BRACKETS_DIR}/{name}"
        dest = os.path.join(snapdir, f"{i}.safetensors")
        try:
            digests[rel] = snapshot(out / BRACKETS_DIR / name, dest, limit=BRACKET_BYTES, root=out)
            paths[rel] = dest
        except SafeIOError as e:
            digests[rel] = None
            paths[rel] = str(e)
    return paths, digests


def _independent(results: dict, paths: dict, workers) -> dict:
    """The second checker (``crosscheck``, which shares no code with ``exact``) on the same snapshots the
    exact pass read, compared with that pass (paper L.2: brackets independently re-derived)."""
    judged = {paths[f]: v for f, v in results.items() if "cells" in v and f in paths}
    totals = crosscheck.summary(crosscheck.agree_all(judged, workers))
    names = {snap: f for f, snap in paths.items()}
    totals["disagreements"] = [next((line.replace(snap, f) for snap, f in names.items() if snap in line), line)
                               for line in totals["disagreements"]]
    return totals


def _exact_pass(out: Path, workers, reverify: bool, errors: list,
                independent: bool = False) -> tuple[dict, int, dict | None]:
    """{file: result of the exact pass}, how many came from records, and the second checker's totals
    (``independent``; else None)."""
    with tempfile.TemporaryDirectory(prefix="softrank-audit-") as snapdir:
        paths, digests = _snapshots(out, snapdir, errors)
        results = {f: {"error": f"unreadable: {paths[f]}"} for f, d in digests.items() if d is None}
        if not reverify:
            for f, d in digests.items():
                if d is not None and (r := vcache.lookup(out, d)) is not None:
                    results[f] = r
        from_records = sum(1 for f in results if digests[f] is not None)
        todo = {str(out / f): paths[f] for f in digests if f not in results}     # by the file's own path
        for p, result in verify_files(todo, workers).items():
            f = Path(p).relative_to(out).as_posix()
            results[f] = result
            digest = digests[f]
            assert digest is not None       # an unreadable file has its error result already
            vcache.store(out, digest, result)     # a refused target (a link, a FIFO) is SafeIOError: exit 2
        second = _independent(results, paths, workers) if independent else None
    return results, from_records, second


def _head_tensors(out: Path, key: str) -> tuple[dict, tuple[np.ndarray, str], tuple[np.ndarray, str]]:
    """The header of ``heads/<key>.safetensors``, its 2-D float64 ``logits`` and ``matrix``, each as
    ``(array, sha256 of the stored bytes)``, streamed as bracket files are (only these two tensors'
    bytes are held); ``SafeIOError`` when the file is unreadable or lacks one of them."""
    header, raw = read_f64_tensors(out / HEADS_DIR / f"{key}.safetensors", ("logits", "matrix"),
                                   limit=HEAD_BYTES, root=out)
    tensors = {}
    for name in ("logits", "matrix"):
        if name not in raw or len(raw[name][0]) != 2:
            raise SafeIOError(f"{HEADS_DIR}/{key}.safetensors has no 2-D float64 {name!r} tensor (a head file "
                              "written before the panel's trust model has no matrix: re-run the panel)")
        shape, data = raw[name]
        tensors[name] = (np.frombuffer(data, dtype="<f8").reshape(shape).astype(np.float64),
                         hashlib.sha256(data).hexdigest())
    logits, matrix = (tensors[name] for name in ("logits", "matrix"))
    return header, logits, matrix


def head_arrays(out: Path, key: str) -> tuple[np.ndarray, np.ndarray, dict] | None:
    """The float64 ``logits`` and ``matrix`` of ``heads/<key>.safetensors`` (read again) and the provenance
    its metadata carries (``{}`` when none), or None when it is unreadable (its rows are then already
    errors of the audit)."""
    try:
        header, logits, matrix = _head_tensors(out, key)
    except SafeIOError:
        return None
    return logits[0], matrix[0], header_provenance(header) or {}


@dataclass(frozen=True)
class HeadEvidence:
    """What the audit holds of ``heads/<key>.safetensors``: the SHA-256 of its logits and matrix, the matrix's
    fingerprint (``numeric.panel.binding``) and the provenance its metadata carries; or, ``error``, why it is
    unreadable."""

    logits: str = ""
    matrix: str = ""
    fingerprint: Any = None
    provenance: dict = field(default_factory=dict)
    error: str | None = None


def _head(out: Path, key: str) -> HeadEvidence:
    """The evidence of ``heads/<key>.safetensors``, or its error."""
    try:        # streamed as bracket files are: the header first, then the two tensors only
        header, logits, matrix = _head_tensors(out, key)
    except SafeIOError as e:    # a malformed head file is an error of its rows
        return HeadEvidence(error=str(e))
    return HeadEvidence(logits[1], matrix[1], fingerprint(matrix[0]), header_provenance(header) or {})


def _family_label(prov: CellProvenance) -> str | None:
    """The row's family of a provenance (``numeric.panel.cell.family_label``)."""


    fam = prov.label("family")
    if not isinstance(fam, str):
        return None
    return family_label(SimpleNamespace(family=fam, model_type=prov.label("model_type")))


def _key_labels(key: str) -> tuple | None:
    """(layer, head, native, domain) named by a record key ``[tag_]L<l>H<h>_s<nn>[_domain][_nc]``
    (domain ``""``: the model's primary one, ``numeric.heads.domains``), or None."""

    m = re.search(r"(?:^|_)L(\d+)H(\d+)_s\d+(?:_(?!nc$)([a-z0-9-]+))?(_nc)?$", key)
    return (int(m.group(1)), int(m.group(2)), bool(m.group(4)), m.group(3) or "") if m else None


def _domain_mismatch(r: PanelRow, key_domain: str) -> bool:
    """Whether the row's source, its ``domain`` column and its key's domain disagree."""

    dom = source_domain(r.source)
    if row_domain(r.domain, r.source) != dom:
        return True
    if dom not in DOMAINS:          # a source id of no known domain: only under a primary key
        return key_domain != ""
    return key_domain != ("" if primary_domain(DOMAINS[dom].modality) == dom else dom)


def bind_names(key: str, r: PanelRow) -> str | None:
    """Why the row ``r`` of record ``key`` does not name its own file, cell and head, or None."""
    eps = str(Fraction(r.eps))
    if r.file != f"{BRACKETS_DIR}/{key}.safetensors":
        return f"the record {key} names the file {r.file}, not {BRACKETS_DIR}/{key}.safetensors"
    if r.cell_id != f"{key}/eps={eps}":
        return f"the record {key} names the cell {r.cell_id}, not {key}/eps={eps}"
    labels = _key_labels(key)
    if labels is None or labels[:2] != (r.layer, r.head) or labels[2] != (r.cell_kind == NATIVE):
        return f"the row says layer {r.layer} head {r.head} ({r.cell_kind}), its key {key} another head"
    if _domain_mismatch(r, labels[3]):
        return f"the row says source {r.source} (domain {r.domain}), its key {key} another domain"
    return None


def bind_row(key: str, r: PanelRow, rep: CellPass, head: HeadEvidence, run: PanelRun | None) -> str | None:
    """Why the row ``r`` of record ``key`` is not bound to its head and run, or None.

    ``rep``: the exact pass's report of the row's cell; ``head``: the hashes of ``heads/<key>``."""
    eps = str(Fraction(r.eps))
    if head.error is not None:
        return head.error
    if rep.logits_sha256 != head.logits:
        return f"the exact pass's logits are not those of {HEADS_DIR}/{key}.safetensors (sha256 differs)"
    if rep.target_sha256 != head.matrix:
        return f"the exact pass's target matrix is not that of {HEADS_DIR}/{key}.safetensors (sha256 differs)"
    prov = rep.provenance
    expected = {k: _family_label(prov) if k == "family" else prov.label(k)
                for k in ("model", "family", "cell_kind", "layer", "head", "source")}
    for k, v in expected.items():
        if v is not None and r.column(k) != v:
            return f"the row says {k} = {r.column(k)!r}, the file's provenance {v!r}"
    if r.effort is not None and r.effort != prov.search.effort:
        return f"the row says effort = {r.effort!r}, the file's provenance {prov.search.effort!r}"
    if run is not None:
        for what, mine, theirs in identity_mismatches(run, prov):
            return f"panel.json's {what} ({mine}) is not that of the file's provenance ({theirs})"
        if not any(Fraction(eps) == Fraction(e) for e in run.eps or []):
            return f"eps {eps} is not a tolerance of panel.json"
    return None


def identity_mismatches(run: PanelRun, prov: CellProvenance) -> list[tuple[str, Any, Any]]:
    """``(field, panel.json's value, the cell's)`` for each identity field (effort, package versions, project
    version) where ``panel.json`` and a bracket cell's provenance differ."""
    search = prov.search
    code = search.code or CodeVersion()
    return [(what, mine, theirs) for what, mine, theirs in (("effort", run.effort, search.effort),
                                                             ("package versions", run.versions, search.versions),
                                                             ("project version", run.project_version, code.version))
            if mine != theirs]


def bind_dropped(key: str, r: PanelRow, head: HeadEvidence, run: PanelRun | None) -> str | None:
    """Why a dropped row (no bracket: the head screen dropped its cell) of record ``key`` is not backed by its
    head file, or None: the file must exist, and the row's labels, mass and local mass must be those its
    provenance records (``numeric.heads.extract``), its effort that of ``panel.json``."""
    labels = _key_labels(key)
    if labels is None or labels[:2] != (r.layer, r.head) or labels[2] != (r.cell_kind == NATIVE):
        return f"the row says layer {r.layer} head {r.head} ({r.cell_kind}), its key {key} another head"
    if _domain_mismatch(r, labels[3]):
        return f"the row says source {r.source} (domain {r.domain}), its key {key} another domain"
    if head.error is not None:
        return f"no evidence: {head.error}"
    prov = head.provenance
    expected = {k: prov.get(k) for k in ("model", "cell_kind", "layer", "head", "source", "mass", "min_mass",
                                         "local_mass")}
    expected.update(family=_family_label(CellProvenance.from_json(prov)))
    for k, v in expected.items():
        if r.column(k) != v:
            return f"the row says {k} = {r.column(k)!r}, its head file's provenance {v!r}"
    if run is not None and r.effort is not None and r.effort != run.effort:
        return f"the row says effort = {r.effort!r}, panel.json {run.effort!r}"
    return None


def _check_row(out: Path, key: str, r: PanelRow, verdicts: dict[str, FilePass], heads: dict, run, *, errors: list,
               refused: set | None = None) -> PanelRow | None:
    """The row with the exact pass's ranks, verdicts, shape, witness kinds and slack, or None (an error)."""
    cid, f = r.cell_id or "", r.file or ""      # labels of 1+ characters in a row of status ok
    why = bind_names(key, r)
    if why is not None:
        errors.append(f"{cid}: not bound to its head: {why}")
        return None
    result = verdicts.get(f)
    if result is None:
        errors.append(f"{cid}: bracket file {f} is missing")
        return None
    if result.error is not None:
        errors.append(f"{cid}: bracket file {f} is unreadable: {result.error}")
        return None
    rep = result.cells.get(cid)
    if rep is None:
        errors.append(f"{cid}: no such cell in {f}")
        return None
    if Fraction(rep.eps) != Fraction(r.eps):
        errors.append(f"{cid}: the record says eps = {r.eps}, the file {rep.eps}")
        return None
    if key not in heads:
        heads[key] = _head(out, key)
    if run is not None and refused is not None:
        refused.update(what for what, _, _ in identity_mismatches(run, rep.provenance))
    why = bind_row(key, r, rep, heads[key], run)
    if why is not None:
        errors.append(f"{cid}: not bound to its head: {why}")
        return None
    slack = rep.slack
    checked = replace(r, L=rep.lower, U=rep.upper, lower_verified=rep.lower_verified,
                      upper_verified=rep.upper_verified, verified=bool(rep.lower_verified and rep.upper_verified),
                      n_rows=rep.shape[0], n_cols=rep.shape[1],
                      lower_witness=rep.lower_witness, upper_witness=rep.upper_witness,
                      slack=None if slack is None else float(Fraction(slack)), slack_exact=slack,
                      logits_sha256=rep.logits_sha256, target_sha256=rep.target_sha256)
    for k in ("L", "U", "verified", "lower_verified", "upper_verified", "n_rows", "n_cols", "slack"):
        if r.column(k) != checked.column(k):
            errors.append(f"{cid}: the record says {k} = {r.column(k)!r}, the exact pass {checked.column(k)!r}")
            return None
    for k in ("lower_witness", "upper_witness"):
        if r.column(k).split("/")[0] != checked.column(k):
            errors.append(f"{cid}: the record says {k} = {r.column(k)!r}, the exact pass {checked.column(k)!r}")
            return None
    return checked


def _duplicate_heads(out: Path, heads: dict, errors: list) -> None:
    """One error per pair of near-duplicate heads (``numeric.panel.binding.near_duplicates``)."""
    prints = {k: h.fingerprint for k, h in heads.items() if h.error is None}

    def matrix(key: str):
        arrays = head_arrays(out, key)
        return None if arrays is None else arrays[1]

    for a, b, d in near_duplicates(prints, matrix):
        errors.append(f"{HEADS_DIR}/{b}.safetensors and {HEADS_DIR}/{a}.safetensors hold the same head: their "
                      f"attention matrices are {d:.3g} apart (max row-l1; at most {DUPLICATE_ROW_L1:g} is one "
                      "head filed twice)")


def audit(out, workers: int | None = None, reverify: bool = True, independent: bool = False) -> Audit:
    """Re-verify a panel directory (or, ``reverify=False``, read the records of an earlier pass where they
    match, ``numeric.panel.vcache``) and check its records against that pass and its head files;
    ``independent``: also re-derive every bracket with the second checker and list each disagreement
    with the exact pass as an error."""
    out = Path(out)
    errors: list[str] = []
    run = _read_run(out, errors)
    rows = _records(out, run, errors)
    results, from_records, second = _exact_pass(out, workers, reverify, errors, independent)
    verdicts = {f: FilePass.from_json(v) for f, v in results.items()}
    if second is not None:
        errors.extend(f"independent checker: {line}" for line in second["disagreements"])
    checked, named, heads = [], set(), {}
    by_key: dict = {}
    caps: dict = {}
    refused: set[str] = set()
    for key, r in rows:
        if not r.ok:
            if key not in heads:
                heads[key] = _head(out, key)
            why = bind_dropped(key, r, heads[key], run)
            if why is not None:
                errors.append(f"{CELLS_DIR}/{key}.json: a {r.status} row not counted: {why}")
                continue
            checked.append(r)
            by_key.setdefault(key, []).append(r)
            continue
        name = (r.file, r.cell_id)
        if name in named:
            errors.append(f"{r.cell_id}: named by two rows")
            continue
        named.add(name)
        c = _check_row(out, key, r, verdicts, heads, run, errors=errors, refused=refused)
        if c is not None:
            checked.append(c)
            by_key.setdefault(key, []).append(c)
            fp = verdicts.get(c.file)
            cell = fp.cells.get(c.cell_id) if fp is not None and c.cell_id is not None else None
            caps[c.file, c.cell_id] = dict(cell.cap) if cell is not None else dict.fromkeys(CAP_KEYS)
    _duplicate_heads(out, heads, errors)
    for f, v in sorted(verdicts.items()):
        for cid in sorted(v.cells):
            if (f, cid) not in named:
                errors.append(f"{cid}: cell of {f} that no record names")
        if v.error is not None and not any(k[0] == f for k in named):
            errors.append(f"{f}: unreadable bracket file that no record names: {v.error}")
    checked.sort(key=sort_key)
    confirmed = sum(1 for r in checked if r.ok) if run is not None else 0
    return Audit(checked, [escape(e, 400) for e in errors], run, from_records,
                 {k: h.logits for k, h in sorted(heads.items()) if h.error is None}, len(verdicts), second,
                 by_key=by_key, confirmed=confirmed, refused=frozenset(refused), caps=caps)

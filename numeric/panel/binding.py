"""Heads bound to their model: the head files' provenance, near-duplicate heads, and the re-extraction
check with its bracket transfer (the trust model of docs/panel.md).

A bracket in a panel directory is about the head file ``heads/<key>.safetensors`` (the exact softmax of
its stored logits; the audit binds every row to that file by hashes, ``numeric.panel.audit``). Whether
that head is the model's is a second question, answered only by extracting it again:
:func:`check_heads` loads each model named by ``panel.json`` on this machine, rebuilds each source from
the row's labels (the token ids and pixel hash recorded in the head file are compared with the rebuilt
source), extracts the head (``numeric.heads.extract``) and compares it with the stored one.

- identical logits and matrix bytes: the head is *bound* to the model, and every bracket holds for it;
- different bytes (another CPU, BLAS or torch): ``delta`` is an upper bound on ``||A' - A0||_row1``,
  A0 the stored float64 matrix and A' the exact softmax of the re-extracted logits, and each bracket is
  *transferred* to A' (:func:`transfer`);
- a model that is not here (or is another model), a source that cannot be rebuilt, or ``delta`` above
  the tolerance (``HEAD_TOLERANCE``): the head is not bound, an error of the report.

``delta = ||A0 - A0'||_row1 + alpha'`` where A0' is the float64 softmax of the re-extracted logits: the
first term is computed exactly (both matrices are float64 arrays, so dyadic rationals;
``exact.norms.row_l1_norm``), the second is the exact tier's proved bound on ``||A' - A0'||_row1``
(``exact.slack.softmax_slack_bound``, arb balls), so ``||A' - A0||_row1 <= delta`` by the triangle
inequality. A certified ``L <= r_eps(.) <= U`` holds for A0 itself: the lower side was verified on A0
at ``eps + slack`` and the upper at ``eps - slack`` (K.5), and ``r_eps`` does not increase with eps.

Lemma (transfer; the triangle inequality of the row-l1 norm, as K.5 / Lemma 11 = G.2). If
``||A - A'||_row1 <= delta`` and ``L <= r_eps(A) <= U`` then ``r_{eps + delta}(A') <= U`` and, when
``eps - delta > 0``, ``r_{eps - delta}(A') >= L``. Proof: a B of rank ``r_eps(A)`` with
``||A - B|| <= eps`` has ``||A' - B|| <= eps + delta``; a B of rank ``r_{eps - delta}(A')`` with
``||A' - B|| <= eps - delta`` has ``||A - B|| <= eps``, so ``r_eps(A) <= r_{eps - delta}(A')``.

Near-duplicate heads (:func:`near_duplicates`): two heads of one shape whose float64 matrices are within
``DUPLICATE_ROW_L1`` in the max row-l1 norm are one head filed twice (bytes that differ by an ulp would
pass a comparison of hashes); each pair is one error line.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from exact.matrix import ExactMatrix
from exact.norms import row_l1_norm
from exact.slack import softmax_slack_bound
from numeric.heads.blocks import ExtractionError
from numeric.heads.domains import DOMAINS, primary_domain, source_domain
from numeric.heads.extract import BLOCK, ENCODER_LENGTH, PREFIX, extract_heads, source_for, source_modality
from numeric.heads.models import ModelInputError, load_model
from numeric.heads.sources import SourceError
from fileio.safeio import SafeIOError, json_depth

__all__ = ["DUPLICATE_ROW_L1", "HEAD_TOLERANCE", "Transfer", "HeadCheck", "header_provenance", "fingerprint",
           "near_duplicates", "transfer", "head_delta", "Extraction", "check_heads", "source_index"]

#: Two heads of one shape closer than this in the max row-l1 norm of the difference of their float64
#: attention matrices are one head filed twice (honest heads of different sources differ by O(0.1)).
DUPLICATE_ROW_L1 = 1e-6
#: A re-extracted head whose delta (an upper bound on the row-l1 distance of its attention matrix to the
#: stored one) exceeds this is not the stored head: an error, whatever the transferred brackets say.
HEAD_TOLERANCE = Fraction(1, 1000)
#: Seed of the fingerprint's probe vector (any fixed value).
FINGERPRINT_SEED = 20261203
#: Largest safetensors header parsed for the head file's provenance (bytes).
HEADER_BYTES = 64 << 20
NATIVE = "native-causal"


def header_provenance(header: Any) -> dict[str, Any] | None:
    """The provenance in a parsed safetensors header's metadata, or None (depth limited, never raises)."""
    try:
        meta = header.get("__metadata__") if isinstance(header, dict) else None
        text = meta.get("provenance") if isinstance(meta, dict) else None
        prov = json.loads(text) if isinstance(text, str) else None
        if not isinstance(prov, dict):
            return None
        json_depth(prov)
        return prov
    except (ValueError, RecursionError, MemoryError, SafeIOError):
        return None


def fingerprint(matrix: np.ndarray) -> np.ndarray:
    """``matrix @ r`` for a fixed probe ``r`` in [-1, 1]^n: ``|fp(A) - fp(B)|_inf <= ||A - B||_row1``, so
    two heads whose fingerprints differ by more than a bound differ by more than it in the row-l1 norm."""
    r = np.random.default_rng([FINGERPRINT_SEED, matrix.shape[1]]).uniform(-1.0, 1.0, matrix.shape[1])
    out: np.ndarray = np.asarray(matrix, dtype=np.float64) @ r
    return out


def near_duplicates(prints: Mapping[str, np.ndarray], load: Callable[[str], np.ndarray | None],
                    bound: float = DUPLICATE_ROW_L1) -> list[tuple[str, str, float]]:
    """Pairs ``(a, b, distance)`` of heads of one shape within ``bound`` in the max row-l1 norm.

    ``prints``: each head's :func:`fingerprint`; ``load``: its float64 matrix (None when unreadable). A pair
    is compared in full only when its fingerprints are within ``bound`` (plus a float margin), which every
    pair within ``bound`` is.

    >>> a = np.full((3, 3), 1 / 3); b = a.copy(); b[0, 0] = np.nextafter(b[0, 0], 1)
    >>> c = np.eye(3)
    >>> m = {"a": a, "b": b, "c": c}
    >>> [(x, y) for x, y, _ in near_duplicates({k: fingerprint(v) for k, v in m.items()}, m.get)]
    [('a', 'b')]
    """
    keys = sorted(prints)
    margin = 1e-9
    out = []
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            pa, pb = prints[a], prints[b]
            if pa.shape != pb.shape or float(np.max(np.abs(pa - pb), initial=0.0)) > bound + margin:
                continue
            ma, mb = load(a), load(b)
            if ma is None or mb is None or ma.shape != mb.shape:
                continue
            d = float(np.max(np.abs(ma - mb).sum(axis=1), initial=0.0))
            if d <= bound:
                out.append((a, b, d))
    return out


@dataclass(frozen=True)
class Transfer:
    """A certified ``L <= r_eps(A) <= U`` moved to a head A' within ``delta`` of A (the transfer lemma):
    ``r_{upper_eps}(A') <= U`` and, when ``lower_eps`` is not None, ``r_{lower_eps}(A') >= L``."""

    eps: Fraction
    delta: Fraction
    L: int
    U: int

    @property
    def upper_eps(self) -> Fraction:
        return self.eps + self.delta

    @property
    def lower_eps(self) -> Fraction | None:
        return self.eps - self.delta if self.eps - self.delta > 0 else None

    def text(self) -> str:
        up = f"r_(eps+delta)(A') <= {self.U}"
        low = f"r_(eps-delta)(A') >= {self.L}" if self.lower_eps is not None else "no lower bound (delta >= eps)"
        return f"eps {self.eps}: {up}, {low}"


def transfer(L: int, U: int, eps: Fraction | str, delta: Fraction) -> Transfer:
    """The transfer lemma (module docstring) on one certified bracket.

    >>> t = transfer(3, 5, "1/4", Fraction(1, 100))
    >>> t.upper_eps, t.lower_eps
    (Fraction(13, 50), Fraction(6, 25))
    >>> transfer(3, 5, "1/4", Fraction(1, 4)).lower_eps is None
    True
    """
    if delta < 0:
        raise ValueError("delta must be >= 0")
    return Transfer(Fraction(eps), Fraction(delta), L, U)


def head_delta(stored: np.ndarray, logits: np.ndarray, matrix: np.ndarray) -> Fraction | None:
    """An upper bound on ``||A' - stored||_row1``, A' the exact softmax of ``logits`` and ``matrix`` its
    float64 image: ``||matrix - stored||_row1`` exactly plus the exact tier's proved slack of ``matrix``
    (``exact.slack.softmax_slack_bound``); None when the slack is not proved or the shapes differ."""
    if stored.shape != matrix.shape or logits.shape != matrix.shape:
        return None
    alpha = softmax_slack_bound(np.ascontiguousarray(logits, dtype=np.float64),
                                np.ascontiguousarray(matrix, dtype=np.float64))
    if alpha is None:
        return None
    d = row_l1_norm(ExactMatrix.from_float64(np.ascontiguousarray(stored, dtype=np.float64))
                    - ExactMatrix.from_float64(np.ascontiguousarray(matrix, dtype=np.float64)))
    return Fraction(int(d.p), int(d.q)) + Fraction(int(alpha.p), int(alpha.q))


@dataclass(frozen=True)
class HeadCheck:
    """One head file against its model: ``status`` is ``bound`` (identical bytes), ``transferred`` (within
    the tolerance; ``transfers`` per bracket), ``differs`` (beyond it) or ``unavailable`` (not re-extracted:
    ``note`` says why); ``seconds``: this head's share of rebuilding its source and of the forward pass."""

    key: str
    status: str
    model: str = ""
    weights_sha256: str = ""
    delta: Fraction | None = None
    transfers: tuple = ()
    note: str = ""
    seconds: float = 0.0
    tolerance: Fraction = HEAD_TOLERANCE

    @property
    def ok(self) -> bool:
        return self.status in ("bound", "transferred")

    def error(self) -> str | None:
        """The report's error line for a head that is not bound, or None."""
        if self.ok:
            return None
        if self.status == "differs" and self.delta is None:
            return f"heads/{self.key}.safetensors is not the model's head: re-extracted from {self.model}: {self.note}"
        if self.status == "differs":
            return (f"heads/{self.key}.safetensors is not the model's head: re-extracted from {self.model}, it "
                    f"differs by delta = {float(self.delta or 0):.3g} > {self.tolerance} "
                    f"(row-l1 of the attention matrices){'; ' + self.note if self.note else ''}")
        return f"heads/{self.key}.safetensors was not re-extracted: {self.note}"


_SOURCE_INDEX = re.compile(r"_s(\d+)(?:_[a-z0-9-]+)?(?:_nc)?$")


def source_index(key: str) -> int | None:
    """The source index of a record key (``[tag_]L<l>H<h>_s<nn>[_domain][_nc]``), or None.

    >>> source_index("L0H1_s03"), source_index("docgpt2_L1H0_s12_code_nc"), source_index("x")
    (3, 12, None)
    """
    m = _SOURCE_INDEX.search(key)
    return int(m.group(1)) if m else None


@dataclass
class _Models:
    """The models of a run, loaded here once each (``numeric.heads.models.load_model``)."""

    specs: list
    loaded: dict = field(default_factory=dict)

    def get(self, name: str):
        """(loaded model, spec) whose name is ``name``, or (None, why)."""
        for spec in self.specs:
            if spec not in self.loaded:
                try:
                    self.loaded[spec] = load_model(spec)
                except (ModelInputError, OSError, ImportError) as e:
                    self.loaded[spec] = str(e).splitlines()[0] if str(e) else type(e).__name__
            lm = self.loaded[spec]
            if not isinstance(lm, str) and lm.name == name:
                return lm, spec
        why = "; ".join(f"{s}: {v}" for s, v in self.loaded.items() if isinstance(v, str))
        return None, f"model {name} is not here (panel.json names {', '.join(map(str, self.specs))}" + \
            (f"; {why}" if why else "") + ")"


def _domain_arg(lm, source: str) -> str:
    """``source_for``'s domain argument for a source id: ``""`` for the model's primary domain."""
    dom = source_domain(source)
    if dom not in DOMAINS:
        return ""
    return "" if primary_domain(source_modality(lm)) == dom else dom


@dataclass(frozen=True)
class Extraction:
    """What the re-extraction reads of ``panel.json``'s run identity (``numeric.panel.provenance``), read once:
    the model specs (strings only), the head screen's minimum mass and switch (as written: ``_status``
    converts them), the prefix, block and encoder length, and the image size; an absent key takes the
    panel's default."""

    specs: tuple[str, ...] = ()
    min_mass: Any = 0.0
    screen: Any = True
    prefix: Any = PREFIX
    block: Any = BLOCK
    length: Any = ENCODER_LENGTH
    image_size: Any = None

    @classmethod
    def from_identity(cls, identity: Mapping[str, Any] | None) -> Extraction:
        identity = identity or {}
        specs = identity.get("model")
        specs = [specs] if isinstance(specs, str) else [s for s in (specs or []) if isinstance(s, str)]
        return cls(tuple(specs), identity.get("min_mass", 0.0), identity.get("screen", True),
                   identity.get("prefix", PREFIX), identity.get("block", BLOCK),
                   identity.get("length") or ENCODER_LENGTH, identity.get("image_size"))


def _status(settings: Extraction, lm, cap) -> str:
    """The head screen's verdict on a re-extracted capture (``numeric.panel.cell._status``)."""
    if lm.family != "decoder":
        return "ok"
    if cap.mass < float(settings.min_mass):
        return "dropped_mass"
    if settings.screen and not cap.nonlocal_head:
        return "dropped_local"
    return "ok"


def _source_mismatch(src, prov: Mapping[str, Any]) -> str | None:
    """Why the rebuilt source is not the recorded one (token ids, pixel hash), or None."""
    if "token_ids" in prov and hasattr(src, "input_ids") and list(src.input_ids) != prov["token_ids"]:
        return "the rebuilt source's token ids are not those recorded in the head file"
    if "pixels_sha256" in prov and hasattr(src, "pixel_values"):
        got = hashlib.sha256(np.ascontiguousarray(src.pixel_values, dtype="<f4").tobytes()).hexdigest()
        if got != prov["pixels_sha256"]:
            return "the rebuilt image's pixel hash is not that recorded in the head file"
    return None


@dataclass(frozen=True)
class HeadFile:
    """What the check needs of one head key: its rows (checked by the audit), its stored logits and matrix,
    and the provenance its file records."""

    key: str
    rows: tuple
    logits: np.ndarray
    matrix: np.ndarray
    provenance: Mapping[str, Any]


def _compare(hf: HeadFile, cap, lm, spec: str, settings: Extraction, *, tolerance: Fraction,
             seconds: float) -> HeadCheck:
    base = {"key": hf.key, "model": f"{spec} ({lm.name})", "weights_sha256": lm.weights_sha256,
            "seconds": seconds, "tolerance": tolerance}
    status = _status(settings, lm, cap)
    row_status = {r.status for r in hf.rows}
    if row_status != {status}:
        return HeadCheck(status="differs", delta=None, note=f"the model's head screen says {status}, the "
                         f"record {', '.join(sorted(row_status))}", **base)
    same = (cap.logits.shape == hf.logits.shape and cap.matrix.shape == hf.matrix.shape
            and np.ascontiguousarray(cap.logits, "<f8").tobytes() == np.ascontiguousarray(hf.logits, "<f8").tobytes()
            and np.ascontiguousarray(cap.matrix, "<f8").tobytes() == np.ascontiguousarray(hf.matrix, "<f8").tobytes())
    if same:
        return HeadCheck(status="bound", delta=Fraction(0),
                         transfers=tuple(transfer(r.L, r.U, r.eps, Fraction(0)) for r in hf.rows if r.ok), **base)
    delta = head_delta(hf.matrix, cap.logits, cap.matrix)
    if delta is None:
        return HeadCheck(status="differs", note="the re-extracted head has another shape, or its slack is not "
                         "proved", **base)
    transfers = tuple(transfer(r.L, r.U, r.eps, delta) for r in hf.rows if r.ok)
    return HeadCheck(status="transferred" if delta <= tolerance else "differs", delta=delta, transfers=transfers,
                     **base)


def check_heads(heads: list[HeadFile], identity: Mapping[str, Any] | None,
                tolerance: Fraction = HEAD_TOLERANCE) -> list[HeadCheck]:
    """Re-extract every head of ``heads`` from its model on this machine and compare (module docstring).

    ``identity``: ``panel.json``'s run identity (model specs, lengths, prefix, block, image size, screen);
    one forward pass per (model, source, kind) serves all its heads."""
    settings = Extraction.from_identity(identity)
    specs = list(settings.specs)
    models = _Models(specs)
    out: dict[str, HeadCheck] = {}
    groups: dict[tuple, list[HeadFile]] = {}
    for hf in heads:
        r = hf.rows[0]
        index = source_index(hf.key)
        if not specs:
            out[hf.key] = HeadCheck(hf.key, "unavailable", note="panel.json names no model")
            continue
        if index is None:
            out[hf.key] = HeadCheck(hf.key, "unavailable", note=f"no source index in the key {hf.key}")
            continue
        groups.setdefault((r.model, r.source, index, r.cell_kind == NATIVE), []).append(hf)
    for (name, source, index, native), group in sorted(groups.items(), key=lambda kv: str(kv[0])):
        out.update(_check_group(models, name, source, index, native, group, settings=settings, tolerance=tolerance))
    return [out[hf.key] for hf in heads]


def _check_group(models: _Models, name: str, source: str, index: int, native: bool, group: list[HeadFile],
                 *, settings: Extraction, tolerance: Fraction) -> dict[str, HeadCheck]:
    """One forward pass of model ``name`` on source ``index`` for every head of ``group``."""
    def unavailable(note: str) -> dict[str, HeadCheck]:
        return {hf.key: HeadCheck(hf.key, "unavailable", note=note, tolerance=tolerance) for hf in group}

    lm, spec = models.get(name)
    if lm is None:
        return unavailable(spec)
    recorded = {hf.provenance.get("weights_sha256") for hf in group} - {None}
    if recorded and recorded != {lm.weights_sha256}:
        return unavailable(f"the model here ({spec}, weights sha256 {lm.weights_sha256[:16]}) is not the one the "
                           f"head files record ({', '.join(sorted(str(w)[:16] for w in recorded))})")
    prefix, block = settings.prefix, settings.block
    image_dir = next((hf.provenance.get("image_dir") for hf in group if hf.provenance.get("image_dir")), None)
    t0 = time.perf_counter()
    try:
        src = source_for(lm, index, length=settings.length, prefix=prefix, block=block,
                         image_dir=image_dir, image_size=settings.image_size, domain=_domain_arg(lm, source))
        if src.source_id != source:
            return unavailable(f"source {index} of {spec} is {src.source_id}, the row says {source}")
        why = next((w for hf in group if (w := _source_mismatch(src, hf.provenance)) is not None), None)
        if why is not None:
            return unavailable(why)
        caps = extract_heads(lm, src, [(hf.rows[0].layer, hf.rows[0].head) for hf in group], prefix=prefix,
                             block=block, native=native)
    except (ExtractionError, ModelInputError, SourceError, OSError) as e:
        return unavailable(f"extraction failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    seconds = (time.perf_counter() - t0) / len(group)
    return {hf.key: _compare(hf, cap, lm, spec, settings, tolerance=tolerance, seconds=seconds)
            for hf, cap in zip(group, caps)}

"""A bracket cell's search provenance, written and read back: one contract.

The search driver (``numeric.search.driver``) writes into every cell's
provenance, under ``"search"``, what produced the cell: the cell's own
outcome (:class:`CellSearch`: the witness families, the tolerances a witness
was carried from, the exact margins, the attack, the cell's seed) followed
by the run's identity (:class:`RunProvenance`: the effort preset and its
budgets, the seed, the search's safety tolerances, the threads, the package
versions and the code version, :class:`CodeVersion`). The caller's labels
(``numeric.heads.extract``: model, layer, head, source, ...) sit beside
``"search"``. :func:`cell_provenance` is the one serialiser of all this; the
key order it writes is part of the bracket file's bytes.

A finished run adds whether it was stopped and which cells a stop request
capped (:class:`RunOutcome`, ``SearchOutput.provenance``; the panel's cell
record keeps its JSON under ``"search"``).

Read back, :class:`CellProvenance` is the part of a cell's provenance that
the report checks rows against (``numeric.panel.audit``) and the verified
cache keeps (``numeric.panel.vcache``): the labels (:data:`CELL_LABELS`,
scalars only) and, of the search, :class:`SearchProvenance` (effort, lower
family, package versions, code version). Its keys are those the writer's
records name, so a renamed field breaks both sides together
(``tests/test_search_provenance.py``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["SEARCH", "CodeVersion", "SearchTolerances", "RunProvenance", "CellSearch", "RunOutcome",
           "cell_provenance", "SearchProvenance", "CellProvenance", "CELL_LABELS", "json_object"]

#: The key of a cell's provenance under which the search's record sits.
SEARCH = "search"


class _Record:
    """A written record: its JSON is its fields in declaration order (the written key order), values as
    they are."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}   # type: ignore[arg-type]


@dataclass(frozen=True)
class CodeVersion(_Record):
    """The project version, and the git commit and dirtiness of the checkout
    (``numeric.search.effort.code_version``; None where unknown: written as null)."""

    version: str | None = None
    commit: str | None = None
    dirty: bool | None = None


@dataclass(frozen=True, kw_only=True)
class SearchTolerances(_Record):
    """The float search's safety tolerances (``numeric.search.driver``, ``attack``, ``inputs``)."""

    lower_safety: float
    upper_safety: float
    attack_fraction: float
    stochastic_tol: float


@dataclass(frozen=True, kw_only=True)
class RunProvenance(_Record):
    """What produced a search run, the same for each of its cells: effort preset (and the preset it runs
    first, ``effort.BASE``) with its budgets, seed, tolerances, threads, package versions, code version."""

    effort: str
    base_effort: str | None
    budgets: Mapping[str, Any]
    seed: int
    tolerances: SearchTolerances
    threads: int
    versions: Mapping[str, str | None]
    code: CodeVersion

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out.update(budgets=dict(self.budgets), tolerances=self.tolerances.to_json(), versions=dict(self.versions),
                   code=self.code.to_json())
        return out


@dataclass(frozen=True, kw_only=True)
class CellSearch(_Record):
    """One tolerance's search outcome (``numeric.search.driver``): witness families, the tolerances a
    witness was carried from (``numeric.search.across``), wall time, device, exact margins (rational
    text), the rank-(L - 1) attack (None where not run), the tolerance's seed, and whether a stop
    request capped it."""

    lower_family: str
    upper_family: str
    svd_rank: int | None
    lower_from_eps: str | None
    upper_from_eps: str | None
    seconds: float
    device: str
    lower_margin: str | None
    upper_margin: str | None
    attack_rank: int | None
    attack_eps: str | None
    attack_error: float | None
    attack_success: bool | None
    cell_seed: int
    capped: bool


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """A finished search run: its provenance, whether a stop request ended it before every tolerance
    was searched, and the ids of the cells a stop request capped."""

    run: RunProvenance
    stopped: bool = False
    capped: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {**self.run.to_json(), "stopped": self.stopped, "capped": list(self.capped)}


def cell_provenance(cell: CellSearch, run: RunProvenance, labels: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A bracket cell's provenance: ``{"search": cell fields then run fields}``, then the caller's
    ``labels`` (which win on a clash, as they always have)."""
    prov: dict[str, Any] = {SEARCH: {**cell.to_json(), **run.to_json()}}
    prov.update(labels or {})
    return prov


# ---- read side -----------------------------------------------------------------------------------------


def _scalar(v: object) -> bool:
    return v is None or type(v) in (str, int, bool)


def json_object(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``doc[key]`` when it is a JSON object, else an empty one."""
    value = doc[key] if key in doc else None
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class SearchProvenance:
    """The fields of a cell's search record that the report checks (read back; None: absent or not a
    scalar). The names are :class:`CellSearch`'s and :class:`RunProvenance`'s."""

    effort: str | None = None
    lower_family: str | None = None
    versions: Mapping[str, Any] | None = None     # package -> version (None: absent)
    code: CodeVersion | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields that are set (an absent field and a null one read alike)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in ("effort", "lower_family") if getattr(self, k) is not None}
        if self.versions is not None:
            out["versions"] = dict(self.versions)
        if self.code is not None:
            out["code"] = {k: v for k, v in vars(self.code).items() if v is not None}
        return out


#: The labels of a bracket cell's provenance that a row must repeat (``numeric.heads.extract``).
CELL_LABELS = ("model", "model_type", "family", "cell_kind", "layer", "head", "source")


@dataclass(frozen=True)
class CellProvenance:
    """The provenance fields of a bracket cell kept with its exact pass (``numeric.panel.vcache``): the labels
    the report checks rows against (scalars only) and the search's run identity."""

    labels: Mapping[str, str | int | bool | None] = field(default_factory=dict)
    search: SearchProvenance = field(default_factory=SearchProvenance)

    @classmethod
    def from_json(cls, prov: object) -> CellProvenance:
        """The fields of a provenance object (anything else: none), scalars only; never raises."""
        prov = prov if isinstance(prov, dict) else {}
        labels = {k: prov[k] for k in CELL_LABELS if k in prov and _scalar(prov[k])}
        search = json_object(prov, SEARCH)
        versions = search["versions"] if "versions" in search else None
        if not (isinstance(versions, dict) and all(isinstance(k, str) and _scalar(v) for k, v in versions.items())):
            versions = None
        code = None
        if "code" in search and isinstance(search["code"], dict):
            c = search["code"]
            code = CodeVersion(**{k: c[k] for k in ("version", "commit", "dirty") if k in c and _scalar(c[k])})
        found = SearchProvenance(**{k: search[k] for k in ("effort", "lower_family") if k in search
                                    and _scalar(search[k])},
                                 versions=dict(versions) if versions is not None else None, code=code)
        return cls(labels, found)

    def label(self, key: str) -> str | int | bool | None:
        """A label (``CELL_LABELS``), None when the file's provenance has none."""
        return self.labels[key] if key in self.labels else None

    def to_json(self) -> dict[str, Any]:
        return {**self.labels, SEARCH: self.search.to_json()}

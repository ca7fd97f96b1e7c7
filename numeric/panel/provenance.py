"""What produced a panel directory: its run identity and ``panel.json``.

The run identity is everything, besides the roster, that can change a
cell's brackets: the model, the tolerances, the extraction settings, the
effort preset, the package versions and the code (project version and a
digest of the ``numeric`` and ``exact`` sources: a commit that changes only
documentation keeps it, an uncommitted edit of the code changes it).
``panel.json`` records it, with the search's named tolerances inside, the
git commit of the last run (``code_version``) and the last run's summary.

Resuming into a directory whose identity differs is refused (``PanelError``,
exit 2): cells from two identities are never mixed in one table. Choose a new
``--out`` to run with other settings, code or packages.

Read back, the provenance is typed: :class:`PanelRun` is ``panel.json``
(after ``numeric.panel.schema.check_run``), :class:`CellProvenance` the part
of a bracket cell's provenance that the report checks rows against (its
labels, and under ``search`` the effort, lower family, package versions and
code version of the search, :class:`SearchProvenance`). The cell records,
written and read, live with the writer in ``numeric.search.provenance``
(one contract); they are re-exported here.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exact.errors import UserInputError
from numeric.panel.table import RUN_NAME, atomic_write
from fileio.safeio import SafeIOError, read_json
from numeric.search import driver
from numeric.search.effort import package_versions, code_version
from numeric.search.provenance import (CELL_LABELS, CellProvenance, CodeVersion, SearchProvenance,
                                       json_object as _obj)

__all__ = ["PanelError", "source_digest", "sources_sha256", "run_identity", "check_resume", "write_run", "read_run",
           "PanelRun", "RunCode", "LastRun", "CellProvenance", "SearchProvenance", "CodeVersion", "CELL_LABELS"]

#: The packages whose sources make up the code identity.
SOURCE_PACKAGES = ("numeric", "exact")
#: Bump when the layout of ``panel.json`` changes.
RUN_FORMAT = 1
#: Largest ``panel.json`` read (bytes).
RUN_BYTES = 4 << 20


class PanelError(UserInputError):
    """Bad panel input (exit 2)."""


def source_digest() -> str:
    """SHA-256 of the ``numeric`` and ``exact`` Python sources (path and bytes, sorted).

    The git commit does not name uncommitted code; this digest does.
    """
    return sources_sha256(SOURCE_PACKAGES)


def sources_sha256(packages: Iterable[str], prefix: bytes = b"") -> str:
    """SHA-256 of ``prefix`` and the Python sources of ``packages`` (path and bytes, sorted)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256(prefix)
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _search_tolerances() -> dict[str, float]:
    """The search driver's named tolerances (``numeric.search.driver``)."""
    return {name: getattr(driver, name) for name in ("STOCHASTIC_TOL", "UPPER_SAFETY", "LOWER_SAFETY")}


def run_identity(*, model: str | list[str], eps: Iterable[str], prefix: int, block: int, length: int,
                 min_mass: float, screen: bool, attack: bool, geometry: bool, effort: str, native: bool = False,
                 image_size: int | None = None) -> dict[str, Any]:
    """The identity every cell of a directory shares (JSON-normalised); ``model`` is one
    spec, or the list of them when several models share the directory."""
    versions = package_versions()
    code = {"version": versions.get("softrank-verify"), "source_sha256": source_digest()}
    identity: dict[str, Any] = json.loads(json.dumps({
        "model": model, "eps": list(eps), "prefix": prefix, "block": block, "length": length,
        "min_mass": min_mass, "screen": screen, "attack": attack, "geometry": geometry, "effort": effort,
        "native": native, "image_size": image_size,
        "tolerances": _search_tolerances(), "versions": versions, "code": code}))
    return identity


def read_run(out: str | Path) -> dict[str, Any] | None:
    """``panel.json`` of a directory; None when absent; ``PanelError`` when unreadable."""
    path = Path(out) / RUN_NAME
    if not path.exists() and not path.is_symlink():
        return None
    try:
        doc = read_json(path, limit=RUN_BYTES)
    except SafeIOError as e:
        raise PanelError(f"{e}: remove it or choose a new --out") from None
    if not isinstance(doc, dict):
        raise PanelError(f"{path} is not a panel run record")
    return doc


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else k)
    return f"{path}: {json.dumps(a)} before, {json.dumps(b)} now"


def check_resume(out: str | Path, identity: dict[str, Any]) -> None:
    """Refuse to add cells of another identity to a directory (``PanelError``).

    A directory with cell records but no ``panel.json`` has an unknown
    identity and is refused too.
    """
    doc = read_run(out)
    if doc is None:
        if any((Path(out) / "cells").glob("*.json")):
            raise PanelError(f"{out} holds cells but no {RUN_NAME}: their settings are unknown; "
                             f"choose a new --out")
        return
    before = PanelRun.from_json(doc).identity
    if before != identity:
        raise PanelError(f"{out} was produced by another run identity ({_first_difference(before, identity)}); "
                         f"choose a new --out")


def write_run(out: str | Path, identity: dict[str, Any], *, argv: Iterable[str] | None = None,
              summary: dict[str, Any] | None = None) -> Path:
    """Write ``panel.json``: the identity, the command, the git commit and the last summary."""
    doc = {"format": RUN_FORMAT, "identity": identity, "argv": list(argv or []), "code_version": code_version(),
           "summary": summary}
    return atomic_write(Path(out) / RUN_NAME, json.dumps(doc, indent=1, sort_keys=True), root=out)


@dataclass(frozen=True)
class RunCode:
    """The code of a run as the report states it: ``panel.json``'s ``code_version`` (the last run's git
    commit and dirtiness) overlaid by its identity's ``code`` (project version, sources digest); None where
    ``panel.json`` has none."""

    version: str | None = None
    commit: str | None = None
    dirty: bool | str | None = None
    source_sha256: str | None = None


@dataclass(frozen=True)
class LastRun:
    """``panel.json``'s summary of the last run: cells computed, cells resumed, wall seconds."""

    run: int
    skipped: int
    seconds: float


@dataclass(frozen=True)
class PanelRun:
    """``panel.json`` of a directory, read back after ``numeric.panel.schema.check_run``: the run identity
    (as written, for comparisons) and its fields the report and the audit use."""

    identity: Mapping[str, Any]
    code_version: Mapping[str, Any] | None = None
    summary: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PanelRun:
        cv = doc["code_version"] if "code_version" in doc else None
        summary = doc["summary"] if "summary" in doc else None
        return cls(_obj(doc, "identity"), cv if isinstance(cv, dict) else None,
                   summary if isinstance(summary, dict) else None)

    def _field(self, key: str) -> Any:
        return self.identity[key] if key in self.identity else None

    @property
    def effort(self) -> str | None:
        effort: str | None = self._field("effort")
        return effort

    @property
    def versions(self) -> Mapping[str, Any]:
        return _obj(self.identity, "versions")

    @property
    def code(self) -> Mapping[str, Any]:
        """The identity's code (project version, sources digest)."""
        return _obj(self.identity, "code")

    @property
    def project_version(self) -> str | None:
        version: str | None = self.code["version"] if "version" in self.code else None
        return version

    @property
    def eps(self) -> list[str] | None:
        """The run's tolerances (rational text), None when ``panel.json`` has none."""
        eps: list[str] | None = self._field("eps")
        return eps

    @property
    def tolerances(self) -> Any:
        return self._field("tolerances")

    @property
    def run_code(self) -> RunCode:
        """The code that produced the run (:class:`RunCode`)."""
        code = dict(self.code_version or {}, **self.code)
        return RunCode(**{k: code[k] for k in ("version", "commit", "dirty", "source_sha256") if k in code})

    @property
    def last_run(self) -> LastRun | None:
        """The last run's counts, None when ``panel.json`` has none (``check_run`` checked their types)."""
        s = self.summary
        if s is None or "run" not in s:
            return None
        return LastRun(s["run"], s["skipped"], s["seconds"])

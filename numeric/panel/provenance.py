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
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from numeric.panel.table import RUN_NAME, atomic_write
from numeric.safeio import SafeIOError, read_json
from numeric.search import driver
from numeric.search.effort import package_versions, code_version

__all__ = ["PanelError", "source_digest", "sources_sha256", "run_identity", "check_resume", "write_run", "read_run"]

#: The packages whose sources make up the code identity.
SOURCE_PACKAGES = ("numeric", "exact")
#: Bump when the layout of ``panel.json`` changes.
RUN_FORMAT = 1
#: Largest ``panel.json`` read (bytes).
RUN_BYTES = 4 << 20


class PanelError(ValueError):
    """Bad panel input (exit 2)."""


def source_digest() -> str:
    """SHA-256 of the ``numeric`` and ``exact`` Python sources (path and bytes, sorted).

    The git commit does not name uncommitted code; this digest does.
    """
    return sources_sha256(SOURCE_PACKAGES)


def sources_sha256(packages, prefix: bytes = b"") -> str:
    """SHA-256 of ``prefix`` and the Python sources of ``packages`` (path and bytes, sorted)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256(prefix)
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _search_tolerances() -> dict:
    """The search driver's named tolerances (``numeric.search.driver``)."""
    return {name: getattr(driver, name) for name in ("STOCHASTIC_TOL", "UPPER_SAFETY", "LOWER_SAFETY")}


def run_identity(*, model, eps, prefix: int, block: int, length: int, min_mass: float, screen: bool,
                 attack: bool, geometry: bool, effort: str, native: bool = False,
                 image_size: int | None = None) -> dict:
    """The identity every cell of a directory shares (JSON-normalised); ``model`` is one
    spec, or the list of them when several models share the directory."""
    versions = package_versions()
    code = {"version": versions.get("softrank-verify"), "source_sha256": source_digest()}
    return json.loads(json.dumps({
        "model": model, "eps": list(eps), "prefix": prefix, "block": block, "length": length,
        "min_mass": min_mass, "screen": screen, "attack": attack, "geometry": geometry, "effort": effort,
        "native": native, "image_size": image_size,
        "tolerances": _search_tolerances(), "versions": versions, "code": code}))


def read_run(out) -> dict | None:
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


def _first_difference(a, b, path="") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else k)
    return f"{path}: {json.dumps(a)} before, {json.dumps(b)} now"


def check_resume(out, identity: dict) -> None:
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
    before = doc.get("identity")
    if before != identity:
        raise PanelError(f"{out} was produced by another run identity ({_first_difference(before or {}, identity)}); "
                         f"choose a new --out")


def write_run(out, identity: dict, *, argv=None, summary: dict | None = None) -> Path:
    """Write ``panel.json``: the identity, the command, the git commit and the last summary."""
    doc = {"format": RUN_FORMAT, "identity": identity, "argv": list(argv or []), "code_version": code_version(),
           "summary": summary}
    return atomic_write(Path(out) / RUN_NAME, json.dumps(doc, indent=1, sort_keys=True), root=out)

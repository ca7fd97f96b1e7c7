"""Effort presets, per-cell seeds and run provenance (issue 12).

A bracket depends on the input, the code, the seed and the effort preset,
and on nothing else: budgets count work (steps, LP solves, rows tried),
never seconds. This module names the presets, derives the seed of a cell
from its identity, and records what produced a run.

>>> parse_effort("default")
'default'
>>> cell_seed("minilm", 0, 3, 1) == cell_seed("minilm", 0, 3, 1)
True
>>> cell_seed("minilm", 0, 3, 1) == cell_seed("minilm", 0, 3, 2)
False
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import subprocess
from pathlib import Path

__all__ = ["EFFORTS", "DEFAULT_EFFORT", "parse_effort", "cell_seed", "package_versions", "code_version"]

#: The effort presets, cheapest first. The budgets of each live with the
#: searches that spend them; the name is what a file records.
EFFORTS = ("quick", "default", "thorough")
DEFAULT_EFFORT = "default"
#: Packages whose versions can change a float result (issue 12 item 3).
VERSIONED = ("numpy", "torch", "python-flint", "highspy", "scipy", "transformers", "softrank-verify")


def parse_effort(text) -> str:
    """A known preset name, or ``ValueError`` with a one-line message."""
    if not isinstance(text, str) or text not in EFFORTS:
        raise ValueError(f"unknown effort {text!r}: choose one of {', '.join(EFFORTS)}")
    return text


def cell_seed(*identity) -> int:
    """A 63-bit seed derived from a cell's identity (model, layer, head, source, eps, ...).

    The identity's ``repr`` is hashed with SHA-256, so the seed is the same
    on every machine and in every process (Python's ``hash`` is salted).
    """
    digest = hashlib.sha256(repr(tuple(identity)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def package_versions() -> dict:
    """Installed versions of the packages that can change a float result (``None`` if absent)."""
    out = {}
    for name in VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def code_version() -> dict:
    """The project version and, when the source is a git checkout, its commit and dirtiness."""
    root = Path(__file__).resolve().parents[2]
    info = {"version": package_versions()["softrank-verify"], "commit": None, "dirty": None}
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return info
    info["commit"], info["dirty"] = commit, bool(status.strip())
    return info

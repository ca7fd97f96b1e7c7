"""Export brackets with the Neumann certificate and re-verify them with ``python -m exact verify``.

The lower bound ``r_eps(A) = n`` of G.1 is the Neumann argument: if
``||A - I||_row1 = delta`` then every B with ``||A - B|| <= eps`` has
``||B - I|| <= eps + delta``, invertible when that is below 1. As an exact
certificate the tier accepts, this is the reconstruction witness (K.3) with
``R = X = L = I_n``: then ``E = A - I``, ``F = 0``, ``eta = delta``, and the
test ``||R|| eps < 1 - eta`` is exactly ``eps + delta < 1``. The paper's
condition ``delta < (1 - eps)/2`` implies it. The upper bound is the trivial
cap ``B = A`` (rank n).

The target is the exact softmax of the stored (float-exact) logits; the stored
matrix is its float64 image and the slack (K.5) is the exact tier's own arb
bound (``exact.slack.softmax_slack_bound``), rounded up to a grid.
"""
from __future__ import annotations

from fractions import Fraction

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import numpy as np
from flint import fmpq

from exact.cellspec import CellSpec, Claim, TargetSpec
from fileio.bracketwriter import rational_string, write_bracket_file
from exact.slack import _float_row_bounds, softmax_slack_bound

__all__ = ["neumann_cell", "verify_with_exact", "export_dir", "export_to", "SLACK_GRID"]

#: Slacks are rounded up to a multiple of 2^-40: far above the ~1e-16 float64
#: rounding of a softmax row, far below any tolerance used here.
SLACK_GRID = fmpq(1, 2 ** 40)

REPO_ROOT = Path(__file__).resolve().parents[1]


_EXPORT: ContextVar[Path | None] = ContextVar("proofs_checks_export", default=None)


@contextmanager
def export_to(directory: Path | None) -> Iterator[None]:
    """Keep the bracket files written in the block in ``directory`` (``--export DIR``); ``None`` changes
    nothing. Held in a ``ContextVar`` (the process's environment is left alone); outside every block,
    ``$PROOFS_CHECKS_OUT`` is read as before."""
    reset = _EXPORT.set(directory) if directory is not None else None
    try:
        yield
    finally:
        if reset is not None:
            _EXPORT.reset(reset)


def _kept() -> str | None:
    """The directory kept bracket files go to: the current ``export_to``'s, else $PROOFS_CHECKS_OUT, else None."""
    directory = _EXPORT.get()
    return str(directory) if directory is not None else (os.environ.get("PROOFS_CHECKS_OUT") or None)


def export_dir() -> Path:
    """Where kept bracket files go: ``export_to``'s directory or $PROOFS_CHECKS_OUT if set, else a fresh
    temp dir (not removed)."""
    out = _kept()
    if out:
        p = Path(out)
        p.mkdir(parents=True, exist_ok=True)
        return p
    return Path(tempfile.mkdtemp(prefix="proofs_checks_"))


def float_softmax(H: np.ndarray) -> np.ndarray:
    """Float64 softmax (the stored image only; the claim is about the exact softmax)."""
    Z = H - H.max(axis=1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True)


def slack_bound(H: np.ndarray, A0: np.ndarray) -> fmpq:
    """Rigorous upper bound on ``||softmax_row(H) - A0||_row1`` (``exact.slack``), rounded up to SLACK_GRID."""
    H = np.ascontiguousarray(H, dtype=np.float64)
    A0 = np.ascontiguousarray(A0, dtype=np.float64)
    # the exact tier's own vectorised float64 bound (proved error terms) first; arb if it fails
    dev = _float_row_bounds(H, A0)
    up: fmpq | None
    if np.isfinite(dev).all():
        up = fmpq(*float(dev.max()).as_integer_ratio())
    else:
        up = softmax_slack_bound(H, A0)
    if up is None:
        raise ValueError("the softmax slack bound is not finite")
    steps = (up / SLACK_GRID).ceil() + 1
    return SLACK_GRID * steps


def neumann_cell(cell_id: str, H: np.ndarray, eps: fmpq, tensors: dict, provenance: dict) -> CellSpec:
    """A cell claiming ``r_eps(softmax_row(H)) = n`` with R = X = L = I_n; adds its tensors."""
    n = H.shape[0]
    A0 = float_softmax(H)
    slack = slack_bound(H, A0)
    ident = f"I_{n}"
    tensors.setdefault(ident, np.eye(n))
    tensors[f"H_{cell_id}"] = H
    tensors[f"A_{cell_id}"] = A0
    return CellSpec(cell_id, rational_string(_frac(eps)),
                    TargetSpec(f"A_{cell_id}", f"H_{cell_id}", rational_string(_frac(slack))),
                    Claim.of(n, "reconstruction", R=ident, X=ident, L=ident), Claim.of(n, "trivial"),
                    dict(provenance, source="proofs_checks", lemma="G.1 Neumann, K.3 with R=X=L=I"))


def _frac(q: fmpq):
    return Fraction(int(q.p), int(q.q))


def verify_with_exact(path: Path, timeout: float = 120) -> dict:
    """Run ``python -m exact verify PATH --json`` in a subprocess; return its JSON and exit code."""
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", str(path), "--json"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        doc = {"cells": [], "all_verified": False, "error": (proc.stderr or proc.stdout).strip()[:300]}
    doc["returncode"] = proc.returncode
    return doc


def write_and_verify(name: str, cells: list, tensors: dict) -> tuple[Path, dict]:
    """Write one bracket file ``NAME.safetensors`` and re-verify it with the exact tier.

    Into ``export_to``'s directory (``--export DIR``) or ``$PROOFS_CHECKS_OUT`` when set, where it is kept;
    else into a temporary directory removed after the verification (only the path's name is reported).
    """
    if _kept():
        path = export_dir() / f"{name}.safetensors"
        write_bracket_file(path, cells, tensors)
        return path, verify_with_exact(path)
    with tempfile.TemporaryDirectory(prefix="proofs_checks_") as tmp:
        path = Path(tmp) / f"{name}.safetensors"
        write_bracket_file(path, cells, tensors)
        return path, verify_with_exact(path)

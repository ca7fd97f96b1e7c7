"""What every training script shares: determinism, the learning-rate schedule,
the optimiser, file hashes and the manifest written beside the weights.

>>> [round(lr_at(s, 10, 2, 1.0), 3) for s in (0, 1, 2, 6, 9)]
[0.5, 1.0, 1.0, 0.55, 0.134]
"""
from __future__ import annotations

import hashlib
import json
import math
import platform
from pathlib import Path

from exact.errors import UserInputError
from numeric._optional import require
from numeric.runtime import quiet_transformers

__all__ = ["THREADS", "MANIFEST", "WEIGHTS_DIR", "quiet_transformers",
           "TrainingError", "ManifestError", "verify_manifest", "lr_at",
           "make_optimizer",
           "train_step", "file_sha256", "write_manifest"]

THREADS = 2                 # the reproduction budget: 2 CPU cores
MANIFEST = "manifest.json"
#: The shipped models' directories (read at call time: tests point it elsewhere).
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
FINAL_LR_FRACTION = 0.1     # cosine decay ends at a tenth of the peak rate
WEIGHT_DECAY = 0.01         # AdamW's usual small decay
ADAM_BETAS = (0.9, 0.95)    # GPT-style betas for short runs
GRAD_CLIP = 1.0             # clip the global gradient norm (the usual transformer setting)
HASH_CHUNK = 1 << 20


class TrainingError(UserInputError):
    """A training request that cannot run (bad recipe, bad data; exit 2)."""


class ManifestError(UserInputError):
    """Shipped files that do not match their manifest (exit 2)."""


def lr_at(step: int, steps: int, warmup: int, peak: float) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to ``FINAL_LR_FRACTION * peak``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak * (FINAL_LR_FRACTION + (1 - FINAL_LR_FRACTION) * 0.5 * (1 + math.cos(math.pi * t)))


def make_optimizer(model, lr: float):
    torch = require("torch")

    return torch.optim.AdamW(model.parameters(), lr=lr, betas=ADAM_BETAS, weight_decay=WEIGHT_DECAY)


def train_step(model, optimizer, lr: float, loss) -> float:
    """One optimiser step on ``loss`` at rate ``lr``; returns the loss value."""
    torch = require("torch")

    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
    optimizer.step()
    return float(loss.detach())


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(out: Path, record: dict) -> dict:
    """Add the sha256 of every file in ``out`` and the software versions; write ``manifest.json``."""
    tokenizers = require("tokenizers")
    torch = require("torch")
    transformers = require("transformers")

    files = {p.name: file_sha256(p) for p in sorted(Path(out).iterdir()) if p.is_file() and p.name != MANIFEST}
    doc = dict(record)
    doc["files"] = files
    doc["software"] = {"python": platform.python_version(), "torch": torch.__version__,
                       "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    (Path(out) / MANIFEST).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc


def verify_manifest(directory: Path) -> dict:
    """The manifest of ``directory`` after checking every listed file's sha256.

    Raises :class:`ManifestError` (one line) when the manifest is missing or
    unreadable, a listed file is missing, or a hash differs: stale or damaged
    weights are never loaded.
    """
    directory = Path(directory)
    path = directory / MANIFEST
    if not path.is_file():
        raise ManifestError(f"{directory} has no {MANIFEST}")
    try:
        doc = json.loads(path.read_text())
        files = dict(doc["files"])
    except (ValueError, KeyError, TypeError):
        raise ManifestError(f"{path} is not a manifest (JSON with a 'files' table)") from None
    if not files:
        raise ManifestError(f"{path} lists no files")
    for name, want in sorted(files.items()):
        f = directory / name
        if not f.is_file():
            raise ManifestError(f"{f} is missing (listed in {MANIFEST})")
        got = file_sha256(f)
        if got != want:
            raise ManifestError(f"{f} has sha256 {got[:16]}..., its manifest says {str(want)[:16]}... "
                                "(stale or damaged; retrain or reinstall)")
    return doc

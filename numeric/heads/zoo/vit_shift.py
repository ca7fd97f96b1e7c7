"""Train ``digitvit-rot90``: ``digitvit`` fine-tuned on rotated digits, the
second ViT arm (paper Appendix L.3).

The paper's two ViT arms are one architecture at two training stages (an
ImageNet-21k checkpoint and its ImageNet-1k fine-tune) read on the same
images. The project's analogue: the shipped ``digitvit`` (the first arm) and
this fine-tune of it on a shifted task, every 8 x 8 digit rotated 90 degrees
counter-clockwise (``numpy.rot90``: an exact permutation of the pixels, no
interpolation) before the pixel pipeline of :mod:`numeric.heads.zoo.digits`;
labels, split and pixels are otherwise ``digitvit``'s. Both arms are read on
the same sources, the upright held-out digits (``sources: digits`` in both
manifests), so that their cells pair one to one.

The base weights are checked against ``digitvit``'s manifest before they are
read (a mismatch stops the run, exit 2), and the base's file hashes go into
this model's manifest. The run is deterministic: fixed seed, ``THREADS_SHIFT``
(one) torch thread, deterministic kernels, batches from a seeded generator.
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from numeric.heads.zoo import common
from numeric.heads.zoo import digits as D
from numeric.heads.zoo.common import (ManifestError, TrainingError, lr_at, make_optimizer,
                                      train_step, verify_manifest, write_manifest)
from numeric._optional import require
from numeric.runtime import deterministic_torch
from numeric.heads.zoo.vit import evaluate

__all__ = ["NAME", "BASE", "THREADS_SHIFT", "SHIFTS", "ShiftRecipe", "RECIPE", "tiny_recipe", "shifted",
           "train_shift", "train_shifted_vit"]

NAME = "digitvit-rot90"
BASE = "digitvit"
THREADS_SHIFT = 1   # one thread: a few CPU-seconds per 100 steps, and no thread-count dependence


def _rot90(images: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.rot90(images, 1, axes=(1, 2)))


#: The shifted tasks by name: a map of 8 x 8 digits [n, 8, 8] -> [n, 8, 8].
SHIFTS = {"rot90": _rot90}


@dataclass(frozen=True)
class ShiftRecipe:
    shift: str = "rot90"
    steps: int = 400     # 300 reached 92 % on rotated held-out digits (lr 1e-3)
    batch: int = 32
    lr: float = 1e-3     # a third of digitvit's peak: a fine-tune, not a restart
    warmup: int = 10
    seed: int = 20260104
    heldout_limit: int = 0   # evaluate on the first N held-out images (0: all 360)


RECIPE = ShiftRecipe()


def tiny_recipe() -> ShiftRecipe:
    """A seconds-long variant for tests (the real base, 4 small steps, 60 held-out images)."""
    return replace(RECIPE, steps=4, batch=8, warmup=2, heldout_limit=60)


def shifted(images: np.ndarray, shift: str = RECIPE.shift) -> np.ndarray:
    """The shifted task's 8 x 8 digits.

    >>> shifted(np.arange(4.0).reshape(1, 2, 2))[0].tolist()
    [[1.0, 3.0], [0.0, 2.0]]
    """
    return SHIFTS[shift](np.asarray(images))


def _base_model(base_dir: Path):
    """``digitvit`` after its manifest check; (classifier, the base manifest)."""
    ViTForImageClassification = require("transformers").ViTForImageClassification

    try:
        doc = verify_manifest(base_dir)
    except ManifestError as e:
        raise TrainingError(f"base model {BASE}: {e}") from None
    if doc.get("name") != BASE:
        raise TrainingError(f"{base_dir} holds {doc.get('name')!r}, not the base model {BASE!r}")
    model = ViTForImageClassification.from_pretrained(base_dir, local_files_only=True)
    return model, doc


def train_shift(r: ShiftRecipe, base_dir: Path, *, log=None):
    """Fine-tune the base on shifted digits; returns (model, metrics, base manifest).

    Deterministic: seed ``r.seed``, ``THREADS_SHIFT`` torch threads, deterministic kernels
    (``numeric.runtime.deterministic_torch``, restored after the training)."""
    with deterministic_torch(r.seed, THREADS_SHIFT) as gen:
        return _train_shift(r, gen, base_dir, log=log)


def _train_shift(r: ShiftRecipe, gen, base_dir: Path, *, log=None):
    torch = require("torch")

    model, base_doc = _base_model(base_dir)
    x, y = D.digits()
    tr, held = D.split()
    if r.heldout_limit:
        held = held[:r.heldout_limit]
    size = int(model.config.image_size)
    held_shift = D.pixels(shifted(x[held], r.shift), size)
    held_upright = D.pixels(x[held], size)
    initial = evaluate(model, held_shift, y[held])
    initial_upright = evaluate(model, held_upright, y[held])
    model.train()
    opt = make_optimizer(model, r.lr)
    losses = []
    for step in range(r.steps):
        pick = tr[torch.randint(0, len(tr), (r.batch,), generator=gen).numpy()]
        px = torch.from_numpy(D.pixels(shifted(x[pick], r.shift), size))
        out = model(pixel_values=px, labels=torch.from_numpy(y[pick].astype(np.int64)))
        losses.append(train_step(model, opt, lr_at(step, r.steps, r.warmup, r.lr), out.loss))
        if log is not None and (step % 50 == 0 or step == r.steps - 1):
            log(step, losses[-1])
    loss, acc = evaluate(model, held_shift, y[held])
    loss_up, acc_up = evaluate(model, held_upright, y[held])
    metrics = {"heldout_loss_initial": initial[0], "heldout_accuracy_initial": initial[1], "heldout_loss": loss,
               "heldout_accuracy": acc, "upright_heldout_loss_initial": initial_upright[0],
               "upright_heldout_accuracy_initial": initial_upright[1], "upright_heldout_loss": loss_up,
               "upright_heldout_accuracy": acc_up,
               "train_loss_last100": float(np.mean(losses[-min(100, len(losses)):])),
               "train_images": int(len(tr)), "heldout_images": int(len(held))}
    return model.eval(), metrics, base_doc


def train_shifted_vit(out: Path, *, steps: int | None = None, tiny: bool = False, command: str = "",
                      base_dir: Path | None = None) -> dict:
    """Train ``digitvit-rot90`` and write its directory (weights, config, image processor, manifest)."""
    transformers = require("transformers")

    common.quiet_transformers()
    r = tiny_recipe() if tiny else RECIPE
    if steps is not None:
        r = replace(r, steps=steps)
    base_dir = Path(base_dir) if base_dir is not None else common.WEIGHTS_DIR / BASE
    start, cpu0 = time.perf_counter(), time.process_time()
    model, metrics, base_doc = train_shift(r, base_dir, log=lambda s, loss: print(
        f"{NAME} step {s}: loss {loss:.4f}", file=sys.stderr, flush=True))
    size = int(model.config.image_size)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    transformers.ViTImageProcessor(size={"height": size, "width": size}, image_mean=[0.5],
                                   image_std=[0.5], do_rescale=True).save_pretrained(out)
    record = {"name": NAME, "architecture": "ViTForImageClassification", "sources": "digits",
              "base": {"name": BASE, "files": base_doc["files"], "command": base_doc.get("command", "")},
              "recipe": asdict(r), "seed": r.seed, "threads": THREADS_SHIFT, "command": command,
              "metrics": metrics, "wall_seconds": round(time.perf_counter() - start, 1),
              "cpu_seconds": round(time.process_time() - cpu0, 1),
              "data": {"name": "sklearn.datasets.load_digits", "sha256": D.DIGITS_SHA256,
                       "heldout": f"stratified {D.HELDOUT_FRACTION:g}, seed {D.SPLIT_SEED}",
                       "shift": f"{r.shift}: each 8x8 image rotated 90 degrees counter-clockwise "
                                "(numpy.rot90), labels unchanged",
                       "pixels": f"0..16 -> [0, 1], bilinear to {size}x{size}, (x - 0.5) / 0.5",
                       "panel_sources": "the upright held-out digits (digits:k), as digitvit's",
                       "tiny": tiny}}
    return write_manifest(out, record)

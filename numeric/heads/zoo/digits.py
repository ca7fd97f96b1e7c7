"""The ViT's data: scikit-learn's ``load_digits`` (1,797 8x8 handwritten digits,
values 0..16), its held-out split and the pixel pipeline.

An 8x8 digit is scaled to [0, 1], upsampled bilinearly to ``IMAGE_SIZE`` and
normalised to [-1, 1]. With ``PATCH`` 4 the ViT sees 11 x 11 = 121 patches plus
the class token: 122 tokens, the nearest ViT shape to the panel's common
128 x 128 (a square grid gives 1 + g^2 tokens: 122 or 145).

The split is stratified, ``HELDOUT_FRACTION`` of each class, drawn with
``SPLIT_SEED``; the data are checked against ``DIGITS_SHA256`` first.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from numeric.heads.zoo.corpus import DataError
from numeric._optional import require

__all__ = ["IMAGE_SIZE", "PATCH", "DIGITS_SHA256", "digits", "split", "pixels", "heldout_pixels"]

IMAGE_SIZE = 44         # 8 px upsampled 5.5x: 11 x 11 patches of 4 px (see above)
PATCH = 4
DIGIT_MAX = 16.0        # load_digits' grey levels are 0..16
HELDOUT_FRACTION = 0.2  # 360 of the 1,797 images are held out
SPLIT_SEED = 20260102
# sha256 of load_digits' images (uint8, row-major) followed by its labels (uint8), scikit-learn 1.9.1
DIGITS_SHA256 = "87ff0c9e40dc7e2c0e34e7257799c2e3f3aec1a016363bb11cad869ec428a826"


def _digits_sha256(x: np.ndarray, y: np.ndarray) -> str:
    return hashlib.sha256(x.astype(np.uint8).tobytes() + y.astype(np.uint8).tobytes()).hexdigest()


@lru_cache(maxsize=1)
def digits() -> tuple[np.ndarray, np.ndarray]:
    """(images [n, 8, 8] float64 in 0..16, labels [n]) after the hash check."""
    try:
        d = load_digits()
        x, y = np.asarray(d.images), np.asarray(d.target)
    except Exception as e:  # a missing or damaged package data file
        raise DataError(f"cannot read scikit-learn's digits data: {str(e).splitlines()[0]}") from None
    got = _digits_sha256(x, y)
    if got != DIGITS_SHA256:
        raise DataError(f"scikit-learn's digits data has sha256 {got[:16]}..., expected {DIGITS_SHA256[:16]}...")
    return x, y


@lru_cache(maxsize=1)
def split() -> tuple[np.ndarray, np.ndarray]:
    """(training indices, held-out indices) into :func:`digits`, stratified by label."""
    x, y = digits()
    tr, held = train_test_split(np.arange(len(y)), test_size=HELDOUT_FRACTION, random_state=SPLIT_SEED,
                                stratify=y)
    return np.sort(tr), np.sort(held)


def pixels(images: np.ndarray, size: int = IMAGE_SIZE) -> np.ndarray:
    """8x8 digits [n, 8, 8] -> pixel values [n, 1, size, size] float32 in [-1, 1].

    >>> pixels(np.full((1, 8, 8), 16.0), 12).shape
    (1, 1, 12, 12)
    """
    torch = require("torch")

    t = torch.from_numpy(np.asarray(images, dtype=np.float32) / DIGIT_MAX)[:, None]
    up = torch.nn.functional.interpolate(t, size=(size, size), mode="bilinear", align_corners=False)
    return ((up - 0.5) / 0.5).numpy()


def heldout_pixels(index: int, size: int = IMAGE_SIZE) -> tuple[np.ndarray, int, int]:
    """Held-out image ``index``: (pixel values [1, size, size], label, index into load_digits)."""
    x, y = digits()
    held = split()[1]
    if not 0 <= index < len(held):
        raise DataError(f"digit source {index} outside the {len(held)} held-out images")
    k = int(held[index])
    return pixels(x[k:k + 1], size)[0], int(y[k]), k

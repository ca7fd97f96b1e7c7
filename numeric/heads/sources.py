"""Deterministic inputs ("sources") for the learned-head panel (paper section 6).

Text sources are token windows of the shipped corpus
``numeric/heads/corpus/stdlib_docstrings.txt`` (CPython standard-library
docstrings, see ``numeric/heads/corpus/build_corpus.py``). Source ``k`` starts at
token ``k * stride`` of the tokenised corpus, where the stride spreads
``MAX_SOURCES`` windows evenly over it; so source ``k`` is the same window
whatever ``--sources N`` is, and a 2-source demo is a prefix of the 64-source
study.

Source ``k`` of the second text domain, ``code`` (``numeric.heads.domains``),
is the same window rule on ``numeric/heads/corpus/stdlib_code.txt`` (the
standard-library source code of the same modules), labelled ``code:k``.

Image sources (ViT) are either the files of a user's image directory, in
sorted name order, or deterministic synthetic images (smooth random fields from
a seeded generator), labelled ``synthetic:k`` so they are never mistaken for
ImageNet, or, for the ``digitvit`` preset, its held-out digits (``digits:k``,
the k-th held-out image of scikit-learn's ``load_digits``, see
:mod:`numeric.heads.zoo.digits`); their second domain ``digits-rot90:k`` is
the same image rotated 90 degrees counter-clockwise before the pixel pipeline.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from exact.errors import UserInputError
from numeric.heads.zoo.corpus import DataError
from numeric.heads.zoo.digits import digits, heldout_pixels, pixels
from numeric.heads.zoo.vit_shift import shifted
from numeric.heads.domains import DOMAINS

__all__ = [
    "CORPUS_PATH", "CODE_CORPUS_PATH", "TEXT_CORPORA", "MAX_SOURCES", "SourceError", "TextSource", "ImageSource",
    "corpus_text", "corpus_sha256", "text_source", "image_source", "digit_source",
]

CORPUS_PATH = Path(__file__).resolve().parent / "corpus" / "stdlib_docstrings.txt"
CODE_CORPUS_PATH = CORPUS_PATH.with_name("stdlib_code.txt")
#: The text domains' shipped corpora (``numeric.heads.domains``).
TEXT_CORPORA = {"docs": CORPUS_PATH, "code": CODE_CORPUS_PATH}
MAX_SOURCES = 64  # the paper's source count per family (section 6)
IMAGE_SEED = 20240501  # seed of the synthetic image generator (any fixed value)
IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".ppm")
# Synthetic images: a sum of SYNTH_MODES plane waves per channel with integer
# frequencies 1..SYNTH_MAX_FREQ cycles per side -- smooth, low-frequency fields
# like natural images' dominant spectrum, cheap and seeded.
SYNTH_MODES = 6
SYNTH_MAX_FREQ = 5
# Added to the normaliser so that an all-zero field (impossible with these
# seeds, but not excluded by construction) divides by a positive number.
SYNTH_NORM_FLOOR = 1e-12


class SourceError(UserInputError):
    """A source that cannot be built (too short a corpus, bad image; exit 2)."""


@dataclass(frozen=True)
class TextSource:
    """One token window: ``input_ids`` [token] with the model's special tokens."""

    source_id: str
    input_ids: tuple
    span: tuple          # (first, last + 1) in the tokenised corpus
    corpus_sha256: str


@dataclass(frozen=True)
class ImageSource:
    """One image as ``pixel_values`` [channel, height, width] float32."""

    source_id: str
    pixel_values: np.ndarray
    origin: str


def _corpus(domain: str) -> Path:
    if domain not in TEXT_CORPORA:
        raise SourceError(f"no text corpus for domain {domain!r} (text domains: {', '.join(TEXT_CORPORA)})")
    return TEXT_CORPORA[domain]


def corpus_text(domain: str = "docs") -> str:
    return _corpus(domain).read_text(encoding="utf-8")


@lru_cache(maxsize=4)
def corpus_sha256(domain: str = "docs") -> str:
    return hashlib.sha256(_corpus(domain).read_bytes()).hexdigest()


@lru_cache(maxsize=8)
def _corpus_ids(tokenizer, domain: str = "docs") -> tuple:
    enc = tokenizer(corpus_text(domain), add_special_tokens=False, return_attention_mask=False,
                    verbose=False)
    return tuple(enc["input_ids"])


@lru_cache(maxsize=8)
def _special_frame(tokenizer) -> tuple[tuple, tuple]:
    """The special tokens the tokeniser puts before and after one sequence.

    Found by probing: the ids of a word with and without special tokens.
    """
    probe = "hello"
    inner = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    outer = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    for i in range(len(outer) - len(inner) + 1):
        if outer[i:i + len(inner)] == inner:
            return tuple(outer[:i]), tuple(outer[i + len(inner):])
    raise SourceError("cannot locate the special-token frame of this tokeniser")


def text_source(tokenizer, index: int, length: int, *, special_tokens: bool = True,
                domain: str = "docs") -> TextSource:
    """Source ``index`` of text ``domain`` (``docs``: ``text:k``; ``code``: ``code:k``) as exactly
    ``length`` token ids.

    With ``special_tokens`` (encoders) the model's own markers ([CLS] ... [SEP]
    for BERT) are added and count towards ``length``. Decoders take the raw
    window (GPT-2 and Qwen2 add no BOS by default).
    """

    if not 0 <= index < MAX_SOURCES:
        raise SourceError(f"source index {index} outside 0..{MAX_SOURCES - 1}")
    ids = _corpus_ids(tokenizer, domain)
    head, tail = _special_frame(tokenizer) if special_tokens else ((), ())
    body = length - len(head) - len(tail)
    if body < 1:
        raise SourceError(f"sequence length {length} leaves no room for text")
    if len(ids) < body:
        raise SourceError(f"corpus has {len(ids)} tokens, fewer than the {body} a source needs")
    stride = (len(ids) - body) // (MAX_SOURCES - 1)
    start = index * stride
    window = list(ids[start:start + body])
    full = list(head) + window + list(tail)
    if len(full) != length:
        raise SourceError(f"tokeniser produced {len(full)} tokens, expected {length}")
    return TextSource(source_id=f"{DOMAINS[domain].prefix}:{index}", input_ids=tuple(int(t) for t in full),
                      span=(start, start + body), corpus_sha256=corpus_sha256(domain))


def _synthetic_image(index: int, size: int, channels: int) -> np.ndarray:
    """A smooth random field in [-1, 1]: low-frequency Fourier modes, seeded."""
    rng = np.random.default_rng([IMAGE_SEED, index])
    y, x = np.mgrid[0:size, 0:size] / size
    img = np.zeros((channels, size, size))
    for c in range(channels):
        for _ in range(SYNTH_MODES):
            fx, fy = rng.integers(1, SYNTH_MAX_FREQ + 1, size=2)
            phase = rng.uniform(0, 2 * np.pi)
            img[c] += rng.normal() * np.cos(2 * np.pi * (fx * x + fy * y) + phase)
    img /= np.abs(img).max() + SYNTH_NORM_FLOOR
    return img.astype(np.float32)


def image_source(index: int, size: int, channels: int = 3, *, image_dir=None,
                 mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)) -> ImageSource:
    """Source ``index`` as pixel values: the ``index``-th file of ``image_dir``
    (sorted), resized to ``size`` and normalised with ``mean``/``std``, or a
    synthetic image when no directory is given."""
    if index < 0:
        raise SourceError(f"source index {index} is negative")
    if image_dir is None:
        return ImageSource(f"synthetic:{index}", _synthetic_image(index, size, channels), "synthetic")
    files = sorted(p for p in Path(image_dir).iterdir() if p.suffix.lower() in IMAGE_EXTS)
    if index >= len(files):
        raise SourceError(f"image directory {image_dir} has {len(files)} images, source {index} requested")

    try:
        with Image.open(files[index]) as im:
            # Image.BICUBIC: kept by Pillow's runtime for pillow>=9 (Resampling is 9.1+), absent from its stubs
            bicubic = Image.BICUBIC  # type: ignore[attr-defined]
            arr: np.ndarray = np.asarray(im.convert("RGB").resize((size, size), bicubic), dtype=np.float32) / 255.0
    except Exception as e:  # any decoder failure is bad input
        raise SourceError(f"cannot read image {files[index]}: {e}") from None
    arr = (arr - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return ImageSource(f"image:{files[index].name}", arr.transpose(2, 0, 1)[:channels].copy(), str(files[index]))


#: The digit domains: the map applied to the 8 x 8 digits before the pixel pipeline (None: upright).
DIGIT_DOMAINS = {"digits": None, "digits-rot90": "rot90"}


def digit_source(index: int, size: int, domain: str = "digits") -> ImageSource:
    """Held-out digit ``index`` at ``size`` x ``size``, one channel, in [-1, 1]; ``domain``
    ``digits-rot90``: the 8 x 8 digit rotated 90 degrees counter-clockwise first (``numpy.rot90``,
    the shift of the second ViT arm, ``numeric.heads.zoo.vit_shift``)."""

    if domain not in DIGIT_DOMAINS:
        raise SourceError(f"no digit domain {domain!r} (digit domains: {', '.join(DIGIT_DOMAINS)})")
    if index < 0:
        raise SourceError(f"source index {index} is negative")
    try:
        px, label, k = heldout_pixels(index, size)
        shift = DIGIT_DOMAINS[domain]
        if shift is not None:

            px = pixels(shifted(digits()[0][k:k + 1], shift), size)[0]
    except DataError as e:
        raise SourceError(str(e)) from None
    how = "" if shift is None else f", {shift}"
    return ImageSource(f"{domain}:{index}", px, f"sklearn load_digits image {k} (label {label}, held out{how})")

"""Heads of a Hugging Face model object the caller holds, captured as the panel captures them.

``attention(model, tokenizer_or_inputs, text_or_ids, layers=..., heads=...)``
wraps the model (``numeric.heads.models.wrap_model``), runs one forward pass
under ``numeric.heads.extract.extract_heads`` and returns, per head, the
pre-softmax logits with the model's own scale and mask and their float64
row softmax, checked against the model's ``output_attentions``. Nothing here
re-implements the capture: encoders and ViTs give the full n x n matrix,
decoders the common-prefix block of the panel (queries P .. 2P-1 over keys
0 .. P-1 with P = n // 2, MATH.md section 6) or, with ``native=True``, the
full causal matrix.

The capture intercepts the eager attention function, so the model must run
with ``attn_implementation="eager"``; a model loaded with SDPA or flash
attention is refused with a line saying how to load it eagerly. The model's
training flag is restored afterwards.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from numeric.heads.blocks import ExtractionError
from numeric.heads.extract import HeadCapture, extract_heads
from numeric.heads.models import ModelInputError, wrap_model
from numeric.heads.sources import ImageSource, SourceError, TextSource
from numeric.runtime import pinned_threads
from softrank.errors import UserInputError

__all__ = ["Attention", "attention", "EAGER_HINT"]

EAGER_HINT = ('load it with from_pretrained(..., attn_implementation="eager") or call '
              'model.set_attn_implementation("eager") first')


@dataclass(frozen=True, eq=False)
class Attention:
    """Captured heads ``[layer, head, query, key]`` of one input.

    ``matrices``: float64 row softmax of ``logits`` (read-only);
    ``logits``: the model's own scaled, masked scores of each head's block;
    ``captures``: the ``numeric.heads.extract.HeadCapture`` of each head,
    layer-major (projections Q, K, scale, the difference from the model's own
    probabilities, provenance); ``softrank.bracket(att)`` brackets every head.
    """

    layers: tuple[int, ...]
    heads: tuple[int, ...]
    matrices: np.ndarray
    logits: np.ndarray
    captures: tuple[HeadCapture, ...]
    model: str
    family: str
    kind: str

    @property
    def hf_max_abs_diff(self) -> float | None:
        """Largest difference between our float64 softmax and the model's own probabilities."""
        diffs = [c.hf_max_abs_diff for c in self.captures if c.hf_max_abs_diff is not None]
        return max(diffs) if diffs else None

    def __repr__(self) -> str:
        return (f"Attention(model={self.model!r}, family={self.family!r}, kind={self.kind!r}, "
                f"layers={list(self.layers)}, heads={list(self.heads)}, shape={tuple(self.matrices.shape)})")


def _select(value: int | Iterable[int] | None, count: int, what: str) -> tuple[int, ...]:
    if value is None:
        return tuple(range(count))
    items = [value] if isinstance(value, (int, np.integer)) else list(value)
    if not items:
        raise UserInputError(f"no {what} selected")
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < count:
            raise UserInputError(f"{what[:-1]} {v!r} is outside the model's {count} {what}")
    if len(set(items)) != len(items):
        raise UserInputError(f"a {what[:-1]} is listed twice")
    return tuple(int(v) for v in items)


def _eager(model: object) -> None:
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if impl not in (None, "eager"):
        raise UserInputError(f"{type(model).__name__} runs attn_implementation={impl!r}, which returns no attention "
                             f"matrices to capture: {EAGER_HINT}")


def _ids(x: Any) -> tuple[int, ...]:
    a = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
    if a.ndim == 2 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
        raise UserInputError(f"token ids must be one non-empty sequence of integers, got shape {a.shape} "
                             f"and dtype {a.dtype} (one sequence at a time)")
    return tuple(int(v) for v in a)


def _text_source(tokenizer_or_inputs: Any, text_or_ids: Any) -> TextSource:
    inputs = tokenizer_or_inputs
    if hasattr(inputs, "keys") and "input_ids" in inputs:
        if text_or_ids is not None:
            raise UserInputError("give the model inputs or a tokenizer with a text, not both")
        if "attention_mask" in inputs and not np.all(np.asarray(_ids(inputs["attention_mask"])) == 1):
            raise UserInputError("the inputs have padding (attention_mask with zeros): pass one unpadded sequence")
        ids = _ids(inputs["input_ids"])
    elif isinstance(text_or_ids, str):
        if inputs is None or not callable(inputs):
            raise UserInputError("a text needs the model's tokenizer as the second argument")
        ids = _ids(inputs(text_or_ids)["input_ids"])
    elif text_or_ids is not None:
        ids = _ids(text_or_ids)
    else:
        raise UserInputError("give a text (with a tokenizer), token ids, or the model inputs (input_ids)")
    digest = hashlib.sha256(np.asarray(ids, dtype=np.int64).tobytes()).hexdigest()
    return TextSource(f"ids:sha256={digest[:16]}", ids, (0, len(ids)), digest)


def _image_source(processor_or_inputs: Any, image: Any) -> ImageSource:
    inputs = processor_or_inputs
    if hasattr(inputs, "keys") and "pixel_values" in inputs:
        if image is not None:
            raise UserInputError("give the model inputs or a processor with an image, not both")
        image = inputs["pixel_values"]
    elif inputs is not None and callable(inputs) and image is not None and not hasattr(image, "shape"):
        image = inputs(images=image, return_tensors="np")["pixel_values"]
    if image is None:
        raise UserInputError(
            "a vision model needs pixel_values [channel, height, width] or an image with its processor")
    px = image.detach().cpu().float().numpy() if hasattr(image, "detach") else np.asarray(image)
    if px.ndim == 4 and px.shape[0] == 1:
        px = px[0]
    if px.ndim != 3 or px.dtype.kind != "f" or not np.isfinite(px).all():
        raise UserInputError(f"pixel_values must be one finite float image [channel, height, width], got shape "
                             f"{px.shape} and dtype {px.dtype}")
    px = np.ascontiguousarray(px, dtype=np.float32)
    digest = hashlib.sha256(px.tobytes()).hexdigest()
    return ImageSource(f"pixels:sha256={digest[:16]}", px, f"in-memory pixels sha256={digest}")


def attention(model: Any, tokenizer_or_inputs: Any = None, text_or_ids: Any = None,
              layers: int | Iterable[int] | None = None, heads: int | Iterable[int] | None = None, *,
              native: bool = False) -> Attention:
    """Capture heads of ``model`` on one input, as the panel does.

    ``model``: a ``transformers`` model object (BERT-style encoder, GPT-2,
    Qwen2, Llama or Mistral decoder, ViT or DeiT) running eager attention.
    Text models: ``attention(model, tokenizer, "some text")``, or token ids as
    the third argument, or ``attention(model, tokenizer(text))`` with the
    inputs dict. ViT: ``attention(model, processor, image)`` or
    ``attention(model, {"pixel_values": px})``. ``layers``, ``heads``: an int
    or a list (default all). Decoders: the common-prefix block with
    P = n // 2, or with ``native=True`` the full causal n x n matrix.
    """
    if not hasattr(model, "config") or not hasattr(model, "modules"):
        raise UserInputError(f"expected a transformers model object, got {type(model).__name__}")
    _eager(model)
    processor = tokenizer_or_inputs if not hasattr(tokenizer_or_inputs, "keys") else None
    training = bool(getattr(model, "training", False))
    name = getattr(model.config, "name_or_path", "") or type(model).__name__
    try:
        loaded = wrap_model(model, processor, name=str(name))
        layer_ids = _select(layers, loaded.num_layers, "layers")
        head_ids = _select(heads, loaded.num_heads, "heads")
        source: TextSource | ImageSource
        kw: dict[str, Any] = {}
        if loaded.family == "vit":
            source = _image_source(tokenizer_or_inputs, text_or_ids)
            if native:
                raise UserInputError("native=True is for decoders; a vision model gives its full attention matrix")
        else:
            source = _text_source(tokenizer_or_inputs, text_or_ids)
            n = len(source.input_ids)
            if loaded.family == "decoder" and n < 2:
                raise UserInputError(f"a decoder's block needs at least 2 tokens, got {n}")
            if loaded.family == "decoder":
                kw = {"prefix": n // 2, "block": n // 2}
        # one thread, as the panel's workers: the forward pass (and so the matrix) does not depend on the
        # thread state the process happens to be in
        with pinned_threads():
            caps = extract_heads(loaded, source, [(ly, h) for ly in layer_ids for h in head_ids], native=native,
                                 **kw)
    except (ModelInputError, ExtractionError, SourceError) as exc:
        hint = f"; {EAGER_HINT}" if "eager" in str(exc) or "capture" in str(exc) else ""
        raise UserInputError(f"{str(exc).splitlines()[0]}{hint}") from None
    finally:
        model.train(training)
    shape = (len(layer_ids), len(head_ids)) + caps[0].logits.shape
    logits = np.stack([c.logits for c in caps]).reshape(shape)
    matrices = np.stack([c.matrix for c in caps]).reshape(shape)
    logits.setflags(write=False)
    matrices.setflags(write=False)
    return Attention(layer_ids, head_ids, matrices, logits, tuple(caps), loaded.name, loaded.family, caps[0].kind)

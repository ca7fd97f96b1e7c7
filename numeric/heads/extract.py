"""Extract attention heads from Hugging Face models (paper section 6, Appendix L).

For every requested head this returns the pre-softmax logits with the model's
own scaling and mask, their float64 softmax, the query and key projections
``Q``, ``K`` (float64 ``[token, head_dim]``, after RoPE where the model has it)
and the scale, so that ``logits = scale * Q K^T`` (plus a mask that is zero on
the extracted block).

How: while the model runs with ``attn_implementation="eager"``, the module
global ``eager_attention_forward`` of the attention class's own module is
wrapped. Every attention layer of BERT, GPT-2, Qwen2 and ViT calls it with the
module, the projected ``query`` and ``key`` ``[batch, head, token, head_dim]``,
the additive mask and the scaling, so the capture sees exactly what the model
multiplies; the wrapper records them and calls the original. The softmax is
recomputed on our side in float64 and compared with the model's own
``output_attentions=True`` probabilities (:attr:`HeadCapture.hf_max_abs_diff`).

Targets by family:
  encoder: full self-attention over the n tokens, n x n;
  vit:     full self-attention over the class token and the patches;
  decoder: the common-prefix conditional block (MATH.md section 6): queries
           ``P .. P+B-1`` over keys ``0 .. P-1``, each row the softmax of its
           prefix logits (= the causal row renormalised over the prefix). The
           retained prefix mass ``sum_{j<P} A_ij`` of the causal row is
           recorded, and a locality screen: the mean causal mass within
           ``LOCAL_WINDOW`` tokens behind the query; with ``native=True`` the
           full causal matrix of the window instead (``numeric.heads.blocks``).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from numeric.heads.blocks import (LOCAL_MASS_MAX, LOCAL_WINDOW, ExtractionError, Target, decoder_block,
                                  full_block, native_block)
from numeric.heads.models import LoadedModel, ModelInputError
from numeric._optional import require
from numeric.heads.sources import SourceError, digit_source, image_source, text_source
from numeric.heads.domains import domains_of

__all__ = [
    "PREFIX", "BLOCK", "ENCODER_LENGTH", "LOCAL_WINDOW", "LOCAL_MASS_MAX",
    "ExtractionError", "HeadCapture", "hf_tolerance", "capture_attention", "softmax_rows",
    "extract_heads", "parse_heads", "source_modality",
]

PREFIX = 128          # P: common-prefix length (paper section 6 / MATH.md 6)
BLOCK = 128           # queries P .. P+127 (paper: 128 x 128 decoder blocks)
ENCODER_LENGTH = 256  # BERT-base panel shape, 256 x 256 (paper section 6)
HF_TOLERANCE = 1e-5   # the tests' bound on |our float64 softmax - HF probabilities| (tiny float32 models)
HF_ABS_FLOOR = 1e-6   # absolute floor of the run-time bound (float32 softmax rounding of p <= 1)
HF_SAFETY = 2.0       # the run-time bound allows twice the first-order rounding estimate


@dataclass(frozen=True)
class HeadCapture:
    """One head on one source. Shapes: logits/matrix ``[query, key]``."""

    layer: int
    head: int
    module_path: str
    logits: np.ndarray       # float64 [query, key], finite
    matrix: np.ndarray       # float64 softmax_row(logits)
    Q: np.ndarray            # float64 [query, head_dim]
    K: np.ndarray            # float64 [key, head_dim]
    scale: float
    mass: float              # mean retained prefix mass (1 for full attention)
    min_mass: float
    local_mass: float | None  # decoders: mean causal mass within LOCAL_WINDOW
    nonlocal_head: bool | None
    hf_max_abs_diff: float | None
    provenance: dict = field(default_factory=dict)
    kind: str = "full"       # numeric.heads.blocks.KINDS


def softmax_rows(h: np.ndarray) -> np.ndarray:
    """Row softmax in float64 (max-shifted); ``-inf`` entries give 0."""
    h = np.asarray(h, dtype=np.float64)
    m = np.max(h, axis=1, keepdims=True)
    e = np.exp(h - m)
    return e / e.sum(axis=1, keepdims=True)


def parse_heads(text: str) -> list[tuple[int, int]]:
    """``"0.1,3.5"`` -> ``[(0, 1), (3, 5)]`` (LAYER.HEAD).

    >>> parse_heads("0.1, 5.11")
    [(0, 1), (5, 11)]
    """
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        parts = item.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"head {item!r} is not LAYER.HEAD (for example 3.5)")
        out.append((int(parts[0]), int(parts[1])))
    if not out:
        raise ValueError("no heads given")
    if len(set(out)) != len(out):
        raise ValueError("a head is listed twice")
    return out


def hf_tolerance(q: np.ndarray, k: np.ndarray, scale: float, unit_roundoff: float) -> float:
    """Bound on |model probabilities - our float64 softmax| from the model's rounding.

    The model's logit ``scale * q_i . k_j`` in working precision u is off by at
    most ``gamma * scale * sum_t |q_it k_jt|`` with ``gamma ~ (d + 2) u``
    (Higham, dot products: d roundings in the sum, one for the scaling, one for
    the mask); a logit perturbation of at most delta moves each softmax
    probability by at most ``exp(2 delta) - 1 ~ 2 delta``. We allow
    ``HF_SAFETY`` times that, plus ``HF_ABS_FLOOR``.
    """
    d = q.shape[1]
    worst = float(np.max(np.abs(q) @ np.abs(k).T)) * abs(scale)
    return HF_ABS_FLOOR + HF_SAFETY * 2.0 * (d + 2) * unit_roundoff * worst


@dataclass
class _Call:
    module: Any     # the model's attention module (torch is loaded lazily: Any to the checker)
    query: Any      # torch [batch, head, token, dim]
    key: Any        # torch [batch, kv_head, token, dim]
    mask: Any       # torch additive mask or None
    scaling: float


@contextlib.contextmanager
def capture_attention(model):
    """Record every eager attention call of ``model`` (in call order).

    Yields the list that fills during a forward pass. The original functions
    are restored on exit.
    """
    calls: list[_Call] = []
    modules: dict[str, Any] = {}       # the modules whose eager attention function is swapped
    for sub in model.modules():
        mod = sys.modules.get(type(sub).__module__)
        if mod is not None and hasattr(mod, "eager_attention_forward"):
            modules[mod.__name__] = mod
    if not modules:
        raise ExtractionError(f"{type(model).__name__} has no eager attention function to capture")
    originals = {name: m.eager_attention_forward for name, m in modules.items()}

    def make(orig):
        def wrapper(module, query, key, value, attention_mask, scaling=None, *, dropout=0.0, **kw):
            s = scaling if scaling is not None else query.size(-1) ** -0.5
            calls.append(_Call(module, query.detach(), key.detach(),
                               None if attention_mask is None else attention_mask.detach(), float(s)))
            return orig(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kw)
        return wrapper

    try:
        for name, m in modules.items():
            m.eager_attention_forward = make(originals[name])
        yield calls
    finally:
        for name, m in modules.items():
            m.eager_attention_forward = originals[name]


def _forward(loaded: LoadedModel, source):
    """One forward pass with ``output_attentions``; the model's probabilities (or None)."""
    torch = require("torch")

    model = loaded.model
    device = next(model.parameters()).device       # a model the caller holds may live on a GPU
    with torch.no_grad():
        if loaded.family == "vit":
            px = torch.from_numpy(np.asarray(source.pixel_values, dtype=np.float32))[None]
            out = model(pixel_values=px.to(device=device, dtype=model.dtype), output_attentions=True)
        else:
            ids = torch.tensor([list(source.input_ids)], dtype=torch.long, device=device)
            kw = {"use_cache": False} if loaded.family == "decoder" else {}
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True, **kw)
    return getattr(out, "attentions", None)


def _module_paths(model) -> dict:
    return {id(m): name for name, m in model.named_modules()}


def _check_request(loaded: LoadedModel, source, heads, prefix: int, block: int) -> None:
    """Refuse heads outside the model and decoder blocks longer than the source."""
    for layer, head in heads:
        if not (0 <= layer < loaded.num_layers and 0 <= head < loaded.num_heads):
            raise ExtractionError(f"head {layer}.{head} outside the model's {loaded.num_layers} layers "
                                  f"x {loaded.num_heads} heads")
    n_tokens = (len(source.input_ids) if hasattr(source, "input_ids") else None)
    if loaded.family == "decoder":
        if prefix < 1 or block < 1:
            raise ExtractionError("prefix and block must be positive")
        if n_tokens is not None and n_tokens < prefix + block:
            raise ExtractionError(f"sequence of {n_tokens} tokens is shorter than prefix {prefix} + block {block}")


def _check_calls(loaded: LoadedModel, calls, att, compare: bool) -> None:
    """One captured attention call per layer, and the model's probabilities when compared."""
    if not calls:
        raise ExtractionError(f"model {loaded.name} produced no attention calls to capture "
                              "(unsupported attention path)")
    if len(calls) != loaded.num_layers:
        raise ExtractionError(f"captured {len(calls)} attention calls for {loaded.num_layers} layers")
    if compare and (att is None or len(att) != loaded.num_layers or att[0] is None):
        raise ExtractionError(f"model {loaded.name} returns no attention probabilities (output_attentions)")


@dataclass(frozen=True)
class _Head:
    """One head of one captured call: projections ``q`` [query, dim], ``k``
    [key, dim] (float64), the full causal-or-not logits with the model's mask,
    and that mask (or None)."""

    q: np.ndarray
    k: np.ndarray
    kv_head: int
    full: np.ndarray
    mask: np.ndarray | None


def _head_logits(c: _Call, layer: int, head: int, prefix_block: tuple[int, int] | None) -> _Head:
    """The head's projections and full logits ``scaling q k^T + mask``; causal
    when ``prefix_block = (prefix, block)`` is given (decoders)."""
    torch = require("torch")

    q = c.query[0, head].to(torch.float64).cpu().numpy()
    groups = getattr(c.module, "num_key_value_groups", 1) or 1
    kv_head = head // groups
    if c.key.shape[1] * groups != c.query.shape[1]:
        raise ExtractionError(f"layer {layer}: {c.query.shape[1]} query heads vs {c.key.shape[1]} key heads")
    k = c.key[0, kv_head].to(torch.float64).cpu().numpy()
    n = q.shape[0]
    full = c.scaling * (q @ k.T)
    mask = None
    if c.mask is not None:
        if c.mask.dtype == torch.bool:  # True = attend
            mk = np.where(c.mask.cpu().numpy(), 0.0, -np.inf)
        else:
            mk = c.mask.to(torch.float64).cpu().numpy()
        mask = np.broadcast_to(mk, (mk.shape[0], mk.shape[1], n, k.shape[0]))[0, min(head, mk.shape[1] - 1)]
        full = full + mask
    if prefix_block is not None:
        prefix, block = prefix_block
        if n < prefix + block:
            raise ExtractionError(f"sequence of {n} tokens is shorter than prefix {prefix} + block {block}")
        causal = np.triu(np.ones((n, n), dtype=bool), k=1)
        full = np.where(causal, -np.inf, full)
    return _Head(q, k, kv_head, full, mask)


def _compare_hf(att, layer: int, head: int, probs: np.ndarray, h: _Head, c: _Call) -> float:
    """Max |model probabilities - our float64 softmax|; above ``hf_tolerance`` is an error."""
    torch = require("torch")

    hf = att[layer][0, head].to(torch.float64).cpu().numpy()
    hf_diff = float(np.max(np.abs(hf - probs)))
    tol = hf_tolerance(h.q, h.k, c.scaling, torch.finfo(c.query.dtype).eps / 2)
    if not np.isfinite(hf_diff) or hf_diff > tol:
        raise ExtractionError(f"layer {layer} head {head}: capture differs from the model's attention "
                              f"probabilities by {hf_diff:.3g} (> {tol:.3g})")
    return hf_diff


def _provenance(loaded: LoadedModel, source, layer: int, head: int, module: str, kv_head: int,
                *, t: Target, dtype: str, scaling: float, hf_diff) -> dict:
    """What a report needs to trace one capture back to its model, weights and input."""
    prov = {
        "model": loaded.name, "model_type": loaded.model_type, "weights_sha256": loaded.weights_sha256,
        "family": loaded.family, "cell_kind": t.kind, "layer": layer, "head": head, "module": module,
        "kv_head": kv_head, "source": source.source_id, "block": t.span,
        "mass": float(t.row_mass.mean()), "min_mass": float(t.row_mass.min()),
        "attn_implementation": "eager (captured eager_attention_forward)", "dtype": dtype,
        "scale": scaling, "hf_max_abs_diff": hf_diff,
    }
    if hasattr(source, "input_ids"):
        prov.update({"token_span": list(source.span), "corpus_sha256": source.corpus_sha256,
                     "token_ids": list(source.input_ids)})
    else:
        pixels = np.ascontiguousarray(source.pixel_values, dtype="<f4").tobytes()
        prov.update({"image": source.origin, "pixels_sha256": hashlib.sha256(pixels).hexdigest()})
    if t.local is not None:
        prov.update({"local_mass": t.local, "nonlocal": bool(t.nonlocal_head), "local_window": LOCAL_WINDOW})
    return prov


def extract_heads(loaded: LoadedModel, source, heads, *, prefix: int = PREFIX, block: int = BLOCK,
                  compare: bool = True, native: bool = False) -> list[HeadCapture]:
    """Run ``source`` through the model once and capture ``heads`` [(layer, head)].

    Decoders give the common-prefix block, or with ``native`` the full causal
    matrix of the window (``numeric.heads.blocks``); ``native`` is refused for
    other families.

    The capture is checked against the model's ``output_attentions`` (max
    absolute difference recorded; above :func:`hf_tolerance` is an error).
    """
    _check_request(loaded, source, heads, prefix, block)
    if native and loaded.family != "decoder":
        raise ExtractionError(f"native-causal cells are for decoders; model {loaded.name} is {loaded.family}")
    with capture_attention(loaded.model) as calls:
        att = _forward(loaded, source)
    _check_calls(loaded, calls, att, compare)
    paths = _module_paths(loaded.model)
    dtype = str(next(loaded.model.parameters()).dtype).replace("torch.", "")
    decoder = loaded.family == "decoder"
    out = []
    for layer, head in heads:
        c = calls[layer]
        h = _head_logits(c, layer, head, (prefix, block) if decoder else None)
        probs = softmax_rows(h.full)
        hf_diff = _compare_hf(att, layer, head, probs, h, c) if compare else None
        if decoder:
            cut = native_block if native else decoder_block
            t = cut(h.q, h.k, h.mask, probs, c.scaling, layer, prefix=prefix, block=block)
        else:
            t = full_block(h.q, h.k, h.mask, c.scaling, layer)
        if not np.all(np.isfinite(t.logits)):
            raise ExtractionError(f"layer {layer} head {head}: non-finite logits")
        prov = _provenance(loaded, source, layer, head, paths.get(id(c.module), "?"), h.kv_head, t=t, dtype=dtype,
                           scaling=c.scaling, hf_diff=hf_diff)
        out.append(HeadCapture(layer=layer, head=head, module_path=prov["module"], logits=t.logits,
                               matrix=softmax_rows(t.logits), Q=t.Q, K=t.K, scale=c.scaling, mass=prov["mass"],
                               min_mass=prov["min_mass"], local_mass=t.local, nonlocal_head=t.nonlocal_head,
                               hf_max_abs_diff=hf_diff, provenance=prov, kind=t.kind))
    return out


def source_modality(loaded: LoadedModel, image_dir=None) -> str:
    """Which domains (``numeric.heads.domains``) the model reads: ``text``, ``digits`` (a ViT whose
    manifest names the held-out digits as its sources), ``images`` (an image directory) or ``synthetic``."""
    if loaded.family != "vit":
        return "text"
    if image_dir is not None:
        return "images"
    return "digits" if (loaded.extra.get("manifest") or {}).get("sources") == "digits" else "synthetic"


def source_for(loaded: LoadedModel, index: int, *, length: int | None = None, prefix: int = PREFIX,
               block: int = BLOCK, image_dir=None, image_size: int | None = None, domain: str = ""):
    """The panel's source ``index`` for this model's family (see numeric.heads.sources) in ``domain``
    (``numeric.heads.domains``; ``""``: the model's primary domain).

    A ViT takes only its configured ``image_size`` (None: that size); a
    decoder only ``prefix + block`` within its positions.
    """

    modality = source_modality(loaded, image_dir)
    names = [d.name for d in domains_of(modality)]
    domain = domain or names[0]
    if domain not in names:
        raise SourceError(f"model {loaded.name} reads the domains {', '.join(names)}, not {domain!r}")
    if loaded.family == "vit":
        cfg = loaded.model.config
        size = int(cfg.image_size)
        if image_size is not None and image_size != size:
            patch = int(cfg.patch_size)
            raise ExtractionError(f"image size {image_size}: model {loaded.name} takes only {size} x {size} images "
                                  f"({(size // patch) ** 2} patches of {patch} px plus the class token)")
        if modality == "digits":
            return digit_source(index, size, domain)
        norm = {}
        pre = Path(loaded.path) / "preprocessor_config.json" if loaded.path else None
        if pre is not None and pre.is_file():  # the checkpoint's own normalisation
            doc = json.loads(pre.read_text())
            norm = {k: tuple(doc[f"image_{k}"]) for k in ("mean", "std") if f"image_{k}" in doc}
        return image_source(index, size, int(getattr(cfg, "num_channels", 3)), image_dir=image_dir, **norm)
    if loaded.processor is None:
        raise ModelInputError(f"model {loaded.name} has no tokenizer")
    cfg = loaded.model.config
    max_pos = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    if loaded.family == "decoder":
        if prefix < 1 or block < 1:
            raise ExtractionError(f"prefix {prefix} and block {block} must be positive")
        n = prefix + block
        if max_pos is not None and n > max_pos:
            raise ExtractionError(f"prefix {prefix} + block {block} = {n} tokens exceeds the model's "
                                  f"{max_pos} positions")
        return text_source(loaded.processor, index, n, special_tokens=False, domain=domain)
    n = length or ENCODER_LENGTH
    if max_pos is not None and n > max_pos:
        raise ExtractionError(f"sequence length {n} exceeds the model's {max_pos} positions")
    return text_source(loaded.processor, index, n, special_tokens=True, domain=domain)

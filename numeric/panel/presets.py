"""Rosters, presets and the pre-flight check of ``python -m numeric panel`` (paper section 6, L.1, L.4).

Every roster is a rule fixed before any bracket is seen:

- ``--demo``: 8 MiniLM heads by hand over all 6 layers, 1 source at 128 tokens
  (``--demo full``: 2 sources at 256 tokens);
- ``--preset study`` (the held-out study): in every layer the heads ``k H // 4``;
- ``--preset common-shape`` (the architecture audit, Appendix L.4): every
  family at the common 128 x 128 shape (MiniLM with 128 tokens, the decoders'
  128 x 128 common-prefix blocks, the ViT at the nearest shape it allows:
  ``digitvit`` 122 x 122), ``K`` heads per model spread evenly over its
  layer-major list of heads (:func:`spread_roster`), 4 sources, eps 1/4;
- the ViT two-arm qualification (Appendix L.3, ``python -m numeric.panel.arms``):
  ``digitvit`` and its fine-tune on rotated digits ``digitvit-rot90``, every
  head, the same ``ARMS_SOURCES`` held-out digits, the paper's three tolerances.

:func:`preflight` checks a model's config against the request before any
work: heads inside the model, the decoder window or encoder length within its
positions, the ViT image size the one it takes; each failure is a one-line
``PanelError`` naming the limit (exit 2).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from numeric.heads.extract import ENCODER_LENGTH
from numeric.heads.models import PRESETS, preset_path, family_of
from numeric.heads.zoo.common import MANIFEST, ManifestError, verify_manifest
from numeric.panel.provenance import PanelError
from numeric.heads.domains import primary_domain
from numeric.heads.domains import DomainError, resolve_domains

__all__ = ["DEMO_HEADS", "DEMO_SOURCES", "DEMOS", "DEFAULT_DEMO", "DEFAULT_EPS", "STUDY_PER_LAYER", "STUDY_SOURCES",
           "STUDY_EPS",
           "COMMON_MODELS", "COMMON_PER_FAMILY", "COMMON_SOURCES", "COMMON_EPS", "COMMON_LENGTH",
           "VIT_ARMS", "ARMS_SOURCES", "ARMS_EPS", "ARMS_EFFORT",
           "ModelShape", "read_config", "model_shape", "preflight", "study_roster", "spread_roster",
           "model_domains"]

# The demo roster: 8 MiniLM heads spread over all 6 layers (layers 0 and 5
# twice), chosen once by hand before any result was seen.
DEMO_HEADS = ((0, 1), (0, 7), (1, 3), (2, 5), (3, 8), (4, 2), (5, 4), (5, 11))
DEMO_SOURCES = 2
#: The named demos: (sources, MiniLM tokens) on the demo roster. ``--demo`` alone is the small one
#: (a few minutes on 2 cores); ``--demo full`` is the 16-cell panel at the encoders' default 256 tokens.
DEMOS = {"small": (1, 128), "full": (DEMO_SOURCES, ENCODER_LENGTH)}
DEFAULT_DEMO = "small"
DEFAULT_EPS = "0.1,0.25,0.5"  # the paper's three tolerances (section 6)
# The held-out study's preset (docs/study.md), fixed before its run:
# in every layer the heads k * H // STUDY_PER_LAYER, k = 0..3 (MiniLM: 0, 3, 6, 9),
# on STUDY_SOURCES sources at eps STUDY_EPS.
STUDY_PER_LAYER = 4
STUDY_SOURCES = 16
STUDY_EPS = "1/4"
# The common-shape preset (the family comparison, Appendix L.4): one model per family, fixed before its run.
COMMON_MODELS = ("minilm", "docgpt2", "docqwen2", "digitvit")
COMMON_PER_FAMILY = 4
COMMON_SOURCES = 4
COMMON_EPS = "1/4"
COMMON_LENGTH = 128   # MiniLM tokens at the common shape ([CLS] text [SEP])
# The ViT two-arm qualification (Appendix L.3), fixed before its run:
# the two arms, every head of each, the same sources, the paper's three tolerances.
VIT_ARMS = ("digitvit", "digitvit-rot90")
ARMS_SOURCES = 4
ARMS_EPS = DEFAULT_EPS
ARMS_EFFORT = "quick"


@dataclass(frozen=True)
class ModelShape:
    """What the pre-flight check reads from a model's ``config.json``."""

    family: str            # encoder | decoder | vit
    layers: int
    heads: int
    positions: int | None  # text models: positions; None when the config has none
    image_size: int | None  # ViT
    patch_size: int | None  # ViT


def _check_manifest(path: Path) -> None:
    """A directory with a manifest (a zoo model, or a copy of one) must match it before any work."""
    if (path / MANIFEST).is_file():
        try:
            verify_manifest(path)
        except ManifestError as e:
            raise PanelError(str(e)) from None


def _model_dir(model: str) -> Path:

    return preset_path(model) if model in PRESETS else Path(model).expanduser()


def model_domains(model: str, names: list, image_dir=None) -> list:
    """The domains (``numeric.heads.domains``) of ``names`` that ``model`` reads, in registry order,
    with its primary domain as ``""`` (its cells keep their keys); ``[]`` when it reads none of them.
    A ViT reads the held-out digits when its manifest says so (``numeric.heads.extract.source_modality``)."""

    family = model_shape(model).family
    if family != "vit":
        modality = "text"
    elif image_dir is not None:
        modality = "images"
    else:
        man = _model_dir(model) / "manifest.json"
        try:
            sources = json.loads(man.read_text()).get("sources") if man.is_file() else None
        except ValueError:
            raise PanelError(f"{man} is not JSON") from None
        modality = "digits" if sources == "digits" else "synthetic"
    try:
        found = resolve_domains(names, modality)
    except DomainError as e:
        raise PanelError(str(e)) from None

    return ["" if d == primary_domain(modality) else d for d in found]


def read_config(model: str) -> dict:
    """``config.json`` of a preset (a zoo preset checked against its manifest first) or a directory."""
    if model in PRESETS:
        path = preset_path(model)
    else:
        path = Path(model).expanduser()
        if not path.exists():
            raise PanelError(f"model path {model!r} does not exist (presets: {', '.join(PRESETS)})")
        _check_manifest(path)
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise PanelError(f"model path {model!r} has no config.json")
    try:
        return json.loads(cfg_path.read_text())
    except ValueError:
        raise PanelError(f"{cfg_path} is not JSON") from None


def model_shape(model: str) -> ModelShape:
    cfg = read_config(model)
    family = family_of(cfg.get("model_type", "?"))
    layers = cfg.get("num_hidden_layers") or cfg.get("n_layer")
    heads = cfg.get("num_attention_heads") or cfg.get("n_head")
    if not layers or not heads:
        raise PanelError(f"model {model!r} has no attention layers in its config")
    return ModelShape(family, int(layers), int(heads), cfg.get("max_position_embeddings") or cfg.get("n_positions"),
                      cfg.get("image_size"), cfg.get("patch_size"))


def _vit_limit(model: str, shape: ModelShape) -> str:
    size, patch = shape.image_size, shape.patch_size
    if size and patch:
        g = int(size) // int(patch)
        return f"model {model} takes only {size} x {size} images ({g} x {g} patches of {patch} px + the class token)"
    return f"model {model} takes only {size} x {size} images"


def preflight(model: str, heads, *, prefix: int, block: int, length: int, image_size: int | None = None,
              native: bool = False) -> ModelShape:
    """Check one model and its head roster against the request (``PanelError`` naming the limit)."""
    shape = model_shape(model)
    for layer, head in heads:
        if not (0 <= layer < shape.layers and 0 <= head < shape.heads):
            raise PanelError(f"head {layer}.{head} outside model {model}'s {shape.layers} layers x "
                             f"{shape.heads} heads (layers 0..{shape.layers - 1}, heads 0..{shape.heads - 1})")
    if shape.family == "decoder":
        if prefix < 1 or block < 1:
            raise PanelError(f"--prefix {prefix} and --block {block} must be positive")
        if shape.positions and prefix + block > shape.positions:
            raise PanelError(f"prefix {prefix} + block {block} = {prefix + block} tokens exceeds model {model}'s "
                             f"{shape.positions} positions")
    elif shape.family == "encoder" and shape.positions and length > shape.positions:
        raise PanelError(f"sequence length {length} exceeds model {model}'s {shape.positions} positions")
    if shape.family == "vit" and image_size is not None and image_size != shape.image_size:
        raise PanelError(f"image size {image_size}: {_vit_limit(model, shape)}")
    return shape


def study_roster(model: str) -> list:
    """The study preset's heads: in every layer, ``k * H // STUDY_PER_LAYER`` for k < STUDY_PER_LAYER."""
    shape = model_shape(model)
    if shape.heads < STUDY_PER_LAYER:
        raise PanelError(f"--preset study needs >= {STUDY_PER_LAYER} heads per layer; the model has {shape.heads}")
    return [(l, k * shape.heads // STUDY_PER_LAYER) for l in range(shape.layers) for k in range(STUDY_PER_LAYER)]


def spread_roster(model: str, per_model: int) -> list:
    """``per_model`` heads spread evenly over the model's layer-major head list:
    flat index ``(2 i + 1) N // (2 K)`` for ``i < K`` (N heads in all, K = ``per_model``).

    4 of the 16 heads of ``docgpt2``: 0.2, 1.2, 2.2, 3.2; 4 of MiniLM's 72: 0.9, 2.3, 3.9, 5.3.
    """
    shape = model_shape(model)
    total = shape.layers * shape.heads
    if not 1 <= per_model <= total:
        raise PanelError(f"--per-family {per_model}: model {model} has {total} heads (1..{total})")
    flat = [(2 * i + 1) * total // (2 * per_model) for i in range(per_model)]
    return [divmod(f, shape.heads) for f in flat]

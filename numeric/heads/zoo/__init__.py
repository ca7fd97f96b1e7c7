"""The project's own small trained models, their data and training scripts.

Owns: ``corpus`` (the decoders' training text: standard-library docstrings,
shipped gzipped under ``data/``, hash-checked), ``tokenizer`` (byte-level BPE),
``digits`` (scikit-learn's digits for the ViT: split and pixels), ``lm`` (GPT-2
and Qwen2 training), ``vit`` (ViT training), ``common`` (determinism, schedule,
manifests), ``train`` (the CLI: ``python -m numeric.heads.zoo train NAME``,
``... verify NAME``) and ``weights/`` (the shipped models, one directory each
with a ``manifest.json``). docs/models.md tells how each was trained.

May import: numpy, torch, transformers, tokenizers, scikit-learn, safetensors
(never another ``numeric`` subpackage). ``numeric.heads.models`` loads the
shipped models as presets.
"""

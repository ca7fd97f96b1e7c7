"""Getting heads out of models: loading, logit capture, sources, the corpus.

Owns: ``models`` (loading checkpoints and presets, weight hashes),
``extract`` (capturing per-head logits and the float softmax), ``sources``
(token windows of the shipped corpus, image sources) and ``corpus/``.

May import: numpy, torch, transformers, safetensors and ``exact`` (never
another ``numeric`` subpackage).
"""

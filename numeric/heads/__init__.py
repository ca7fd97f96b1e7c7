"""Getting heads out of models: loading, logit capture, sources, the corpus.

Owns: ``models`` (loading checkpoints and presets, weight hashes),
``extract`` (capturing per-head logits and the float softmax), ``sources``
(token windows of the shipped corpus, image sources), ``corpus/`` and ``zoo/``
(the small trained models shipped as presets, with their training scripts).

May import: numpy, torch, transformers, tokenizers, scikit-learn, safetensors and ``exact`` (never
another ``numeric`` subpackage).
"""

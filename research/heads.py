"""The MiniLM heads the research scripts read: the heads of the quality suite (``bench/suites/quality.py``,
``TUNED``), in the order of the former quality script, at 256 tokens on text source 0."""
from __future__ import annotations

#: (layer, head) of all-MiniLM-L6-v2, spread over layers; scripts take a prefix.
MINILM_HEADS = [(0, 0), (1, 3), (2, 5), (3, 7), (4, 2), (5, 9), (2, 0), (4, 11), (1, 8), (3, 1), (5, 4), (0, 6)]


def minilm_cases(heads: int):
    """``(name, A, H, eps)`` of the first ``heads`` heads: softmax target, logits, the three tolerances."""
    from numeric.heads.extract import extract_heads, source_for
    from numeric.heads.models import load_model

    lm = load_model("minilm")
    src = source_for(lm, 0, length=256)
    for cap, (layer, head) in zip(extract_heads(lm, src, MINILM_HEADS[:heads]), MINILM_HEADS[:heads]):
        yield f"minilm/l{layer}h{head}", cap.matrix, cap.logits, [0.1, 0.25, 0.5]

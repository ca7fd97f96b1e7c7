"""Save the MiniLM logits the annealing measurements use, once, with ``np.savez``.

Keys: ``q{n}_l{layer}h{head}`` for the heads of the quality suite (``bench/suites/quality.py``, ``TUNED``) (the eight at 256
tokens, the first two at 128 and 512), and ``demo{source}_l{layer}h{head}`` for the demo
roster of ``numeric/panel/presets.py`` (256 tokens). Read back with ``allow_pickle=False``
by ``bench/cpu_compare.py``, ``bench/effort_compare.py`` and ``research/anneal_tune.py``.

    python -m bench.save_heads /tmp/up27/heads.npz
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np


def main(argv=None) -> int:
    from numeric.heads.extract import extract_heads, source_for
    from numeric.heads.models import load_model
    from numeric.panel.presets import DEMO_HEADS, DEMO_SOURCES
    from bench.suites.quality import TUNED as MINILM_HEADS

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m bench.save_heads OUT.npz", file=sys.stderr)
        return 2
    lm = load_model("minilm")
    out = {}
    for length in (128, 256, 512):
        heads = MINILM_HEADS[:8] if length == 256 else MINILM_HEADS[:2]
        for cap, (layer, head) in zip(extract_heads(lm, source_for(lm, 0, length=length), heads), heads):
            out[f"q{length}_l{layer}h{head}"] = cap.logits
    for s in range(DEMO_SOURCES):
        for cap, (layer, head) in zip(extract_heads(lm, source_for(lm, s, length=256), list(DEMO_HEADS)), DEMO_HEADS):
            out[f"demo{s}_l{layer}h{head}"] = cap.logits
    np.savez(argv[0], **out)
    print(f"{argv[0]}: {len(out)} heads")
    return 0


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

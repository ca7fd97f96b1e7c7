"""Tiny saved models and the panel's command line, shared by the panel's, the study's and the families' tests:
``save_tiny`` writes a two-layer GPT-2, BERT or ViT (torch and transformers are imported when it runs), ``cli``
runs ``python -m numeric`` in a fresh interpreter, ``cli_in_process`` and ``in_process`` through the same
``main`` in this process, and ``one_line_error`` checks a bad input's one line and exit 2."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VOCAB = 30522
SMALL = ["--prefix", "16", "--block", "16", "--eps", "0.25,0.5", "--quiet", "--no-geometry"]


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "numeric", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def cli_in_process(capsys, *args) -> subprocess.CompletedProcess:
    """``python -m numeric ARGS`` through the module form's own ``main``, in this process (a fresh
    interpreter imports torch: seconds of CPU per case), as a ``CompletedProcess``."""
    from numeric.__main__ import main

    capsys.readouterr()  # drop what earlier steps printed
    try:
        rc = main([str(a) for a in args])
    except SystemExit as exc:                 # argparse exits: the module form does the same
        rc = exc.code if isinstance(exc.code, int) else 1
    cap = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), int(rc), cap.out, cap.err)


def save_tiny(path: Path, kind: str, **overrides) -> Path:
    import torch
    import transformers
    from transformers import AutoTokenizer

    from numeric.heads.models import minilm_path

    torch.manual_seed(1)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, **overrides)
        model = transformers.GPT2Model(cfg)
    elif kind == "bert":
        cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, max_position_embeddings=64, **overrides)
        model = transformers.BertModel(cfg, add_pooling_layer=False)
    elif kind == "vit":
        cfg = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64, **overrides)
        transformers.ViTModel(cfg, add_pooling_layer=False).save_pretrained(path)
        return path
    else:
        raise AssertionError(kind)
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True).save_pretrained(path)
    return path


def one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def in_process(capsys, *args):
    """``python -m numeric panel ARGS`` in this process (the model stays cached)."""
    from numeric.panel.cli import main

    capsys.readouterr()  # drop what the fixtures printed (saving bars)
    rc = main([str(a) for a in args])
    return rc, capsys.readouterr()

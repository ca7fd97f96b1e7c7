"""Train a shipped model and write its directory: weights, config, tokenizer, manifest.

    python -m numeric.heads.zoo train docgpt2 --out numeric/heads/zoo/weights/docgpt2
    python -m numeric.heads.zoo train docqwen2 --out numeric/heads/zoo/weights/docqwen2
    python -m numeric.heads.zoo train digitvit --out numeric/heads/zoo/weights/digitvit
    python -m numeric.heads.zoo train digitvit-rot90 --out numeric/heads/zoo/weights/digitvit-rot90
    python -m numeric.heads.zoo verify docgpt2          # or a directory

Training is deterministic (fixed seed, ``THREADS`` torch threads, deterministic
kernels): on one machine the same command writes the same bytes. ``--steps``
shortens a run; ``--tiny`` swaps in a seconds-long toy architecture (tests).
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from exact.errors import ExitCode, OneLineParser
from numeric.heads.zoo import common
from numeric.heads.zoo.common import (THREADS, WEIGHTS_DIR, ManifestError, TrainingError, quiet_transformers,
                                      verify_manifest, write_manifest)
from numeric.heads.zoo.lm import RECIPES, tiny_recipe, train_lm
from numeric.heads.zoo.tokenizer import train_tokenizer
from numeric.heads.zoo.vit import train_digit_vit
from numeric.heads.zoo.vit_shift import train_shifted_vit
from numeric.heads.zoo.corpus import CORPUS_PATH, CORPUS_SHA256, HELDOUT_EVERY, DataError, read_corpus, split_paragraphs

__all__ = ["MODELS", "WEIGHTS_DIR", "train_decoder", "quiet_transformers", "main"]

MODELS = ("docgpt2", "docqwen2", "digitvit", "digitvit-rot90")
ARCHITECTURES = {"docgpt2": "GPT2LMHeadModel", "docqwen2": "Qwen2ForCausalLM", "digitvit": "ViTForImageClassification",
                 "digitvit-rot90": "ViTForImageClassification"}
TINY_TEXT_LINES = 400  # --tiny trains on the first 400 paragraphs only


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def train_decoder(name: str, out: Path, *, steps: int | None = None, corpus: Path = CORPUS_PATH,
                  tiny: bool = False, command: str = "") -> dict:
    """Train decoder ``name`` on the corpus and write its directory; returns the manifest."""
    quiet_transformers()
    text = read_corpus(corpus, CORPUS_SHA256)
    recipe = tiny_recipe(name) if tiny else RECIPES[name]
    if steps is not None:
        recipe = replace(recipe, steps=steps)
    if tiny:
        text = "".join(text.splitlines(keepends=True)[:TINY_TEXT_LINES])
    train_text, held_text = split_paragraphs(text)
    start = time.perf_counter()
    tokenizer = train_tokenizer(train_text, recipe.vocab)
    model, metrics = train_lm(recipe, tokenizer, train_text, held_text,
                              log=lambda s, loss: _say(f"{name} step {s}: loss {loss:.4f}"))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    record = {"name": name, "architecture": ARCHITECTURES[name], "recipe": asdict(recipe), "seed": recipe.seed,
              "threads": THREADS, "command": command, "metrics": metrics,
              "wall_seconds": round(time.perf_counter() - start, 1),
              "data": {"file": "numeric/heads/zoo/data/stdlib_text.txt.gz", "text_sha256": CORPUS_SHA256,
                       "heldout": f"every {HELDOUT_EVERY}th paragraph", "tiny": tiny,
                       "built_by": "python -m numeric.heads.zoo.corpus (CPython 3.11.7 standard library)"}}
    return write_manifest(out, record)


def _train(args, command: str) -> dict:
    if args.name == "digitvit":
        return train_digit_vit(args.out, steps=args.steps, tiny=args.tiny, command=command)
    if args.name == "digitvit-rot90":   # digitvit fine-tuned on rotated digits (the second ViT arm, L.3)
        return train_shifted_vit(args.out, steps=args.steps, tiny=args.tiny, command=command)
    return train_decoder(args.name, args.out, steps=args.steps, corpus=args.corpus, tiny=args.tiny,
                         command=command)


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m numeric.heads.zoo", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="verb", required=True)
    t = sub.add_parser("train", help="train one model and write its directory")
    t.add_argument("name", choices=MODELS)
    t.add_argument("--out", type=Path, required=True, help="directory to write")
    t.add_argument("--steps", type=int, default=None, help="optimiser steps (default: the recipe's)")
    t.add_argument("--corpus", type=Path, default=CORPUS_PATH, help="gzipped corpus (decoders; hash-checked)")
    t.add_argument("--tiny", action="store_true", help="toy architecture and data, for tests")
    v = sub.add_parser("verify", help="check a shipped model's files against its manifest")
    v.add_argument("model", help="preset name or model directory")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        if args.verb == "verify":
            path = common.WEIGHTS_DIR / args.model if args.model in MODELS else Path(args.model)
            doc = verify_manifest(path)
            print(f"{path}: {len(doc['files'])} files match {doc.get('name', '?')}'s manifest")
            return ExitCode.OK
        if args.steps is not None and args.steps < 1:
            raise TrainingError(f"--steps must be positive, got {args.steps}")
        doc = _train(args, "python -m numeric.heads.zoo " + shlex.join(argv))
    except (DataError, TrainingError, ManifestError) as e:
        print(f"error: {e}", file=sys.stderr)
        return ExitCode.MALFORMED
    print(f"{args.out}: {doc['metrics']}")
    return ExitCode.OK

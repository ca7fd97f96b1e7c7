"""Train the two decoders, ``docgpt2`` (GPT-2) and ``docqwen2`` (Qwen2), on the
standard-library docstrings (:mod:`numeric.heads.zoo.corpus`).

Both see the same tokens in the same order (same tokenizer, seed and batches),
so the two families differ in architecture only: GPT-2 has learned absolute
positions and one key per query head; Qwen2 has rotary positions, grouped-query
attention (2 key heads for 4 query heads), RMSNorm and a gated MLP.

A batch is ``BATCH`` windows of ``CONTEXT`` tokens at offsets drawn from a
seeded generator; the loss is the model's own shifted cross-entropy in nats.
The held-out loss is taken over consecutive non-overlapping windows of the
held-out paragraphs, and compared with the unigram entropy: the cross-entropy
of the held-out tokens under the training text's token frequencies
(add-one smoothed), the loss of a model that ignores context.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from numeric.heads.zoo.common import THREADS, TrainingError, lr_at, make_optimizer, train_step
from numeric._optional import require
from numeric.runtime import deterministic_torch

__all__ = ["LMRecipe", "RECIPES", "tiny_recipe", "build_lm", "unigram_entropy", "heldout_loss", "train_lm"]


@dataclass(frozen=True)
class LMRecipe:
    """Architecture and schedule of one decoder run."""

    arch: str            # "gpt2" | "qwen2"
    vocab: int = 2048    # tokenizer.VOCAB_SIZE
    width: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2    # Qwen2 only: grouped-query attention, 2 query heads per key head
    context: int = 256   # covers the panel's prefix 128 + block 128
    steps: int = 250     # 0.5 M tokens, ~1.4 passes over the 0.37 M training tokens
    batch: int = 8
    lr: float = 2e-3     # peak AdamW rate, large for a 1 M-parameter model
    warmup: int = 25
    seed: int = 20260101
    eval_windows: int = 32  # held-out windows evaluated (32 x 256 = 8 k tokens)


RECIPES = {"docgpt2": LMRecipe("gpt2"), "docqwen2": LMRecipe("qwen2")}


def tiny_recipe(name: str) -> LMRecipe:
    """A seconds-long variant for tests: same architecture, a sliver of the size."""
    return replace(RECIPES[name], vocab=300, width=32, layers=1, heads=2, kv_heads=1, context=32, steps=30,
                   batch=4, lr=3e-3, warmup=5, eval_windows=8)


def build_lm(r: LMRecipe, eos_id: int):
    """A freshly initialised causal LM for recipe ``r`` (dropout off: deterministic)."""
    transformers = require("transformers")

    if r.arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=r.vocab, n_positions=r.context, n_embd=r.width, n_layer=r.layers,
                                      n_head=r.heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                      bos_token_id=eos_id, eos_token_id=eos_id)
        return transformers.GPT2LMHeadModel(cfg)
    if r.arch == "qwen2":
        cfg = transformers.Qwen2Config(vocab_size=r.vocab, hidden_size=r.width, intermediate_size=4 * r.width,
                                       num_hidden_layers=r.layers, num_attention_heads=r.heads,
                                       num_key_value_heads=r.kv_heads, max_position_embeddings=r.context,
                                       tie_word_embeddings=True, attention_dropout=0.0,
                                       bos_token_id=eos_id, eos_token_id=eos_id)
        return transformers.Qwen2ForCausalLM(cfg)
    raise TrainingError(f"unknown decoder architecture {r.arch!r} (gpt2, qwen2)")


def unigram_entropy(train_ids: np.ndarray, held_ids: np.ndarray, vocab: int) -> float:
    """Cross-entropy (nats) of ``held_ids`` under add-one smoothed unigram counts of ``train_ids``.

    >>> round(unigram_entropy(np.array([0, 1]), np.array([0, 1]), 2), 4)  # uniform: log 2
    0.6931
    """
    counts = np.bincount(train_ids, minlength=vocab).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[held_ids].mean())


def heldout_loss(model, ids: np.ndarray, context: int, windows: int) -> float:
    """Mean next-token loss (nats) over the first ``windows`` non-overlapping windows of ``ids``."""
    torch = require("torch")

    n = min(windows, len(ids) // context)
    if n < 1:
        raise TrainingError(f"held-out text has {len(ids)} tokens, fewer than one {context}-token window")
    x = torch.from_numpy(ids[:n * context].reshape(n, context).astype(np.int64))
    model.eval()
    with torch.no_grad():
        loss = float(model(input_ids=x, labels=x).loss)
    model.train()
    return loss


def _batch(ids, r: LMRecipe, gen):
    torch = require("torch")

    starts = torch.randint(0, len(ids) - r.context, (r.batch,), generator=gen)
    return torch.stack([ids[s:s + r.context] for s in starts.tolist()])


def train_lm(r: LMRecipe, tokenizer, train_text: str, held_text: str, *, log=None):
    """Train recipe ``r``; returns (model, metrics). ``log(step, loss)`` sees every 50th step.

    Deterministic: seed ``r.seed``, ``THREADS`` torch threads, deterministic kernels
    (``numeric.runtime.deterministic_torch``, restored after the training)."""
    with deterministic_torch(r.seed, THREADS) as gen:
        return _train_lm(r, gen, tokenizer, train_text, held_text, log=log)


def _train_lm(r: LMRecipe, gen, tokenizer, train_text: str, held_text: str, *, log=None):
    torch = require("torch")

    tr = np.asarray(tokenizer(train_text)["input_ids"], dtype=np.int64)
    held = np.asarray(tokenizer(held_text)["input_ids"], dtype=np.int64)
    if len(tr) <= r.context:
        raise TrainingError(f"training text has {len(tr)} tokens, fewer than the context {r.context}")
    model = build_lm(r, tokenizer.convert_tokens_to_ids(tokenizer.eos_token))
    model.train()
    opt = make_optimizer(model, r.lr)
    ids = torch.from_numpy(tr)
    initial = heldout_loss(model, held, r.context, r.eval_windows)
    losses = []
    for step in range(r.steps):
        x = _batch(ids, r, gen)
        losses.append(train_step(model, opt, lr_at(step, r.steps, r.warmup, r.lr), model(input_ids=x, labels=x).loss))
        if log is not None and (step % 50 == 0 or step == r.steps - 1):
            log(step, losses[-1])
    final = heldout_loss(model, held, r.context, r.eval_windows)
    tail = losses[-min(100, len(losses)):]
    metrics = {"heldout_loss_initial": initial, "heldout_loss": final,
               "unigram_entropy": unigram_entropy(tr, held, r.vocab),
               "train_loss_last100": float(np.mean(tail)), "train_tokens": int(len(tr)),
               "heldout_tokens": int(len(held)), "heldout_tokens_evaluated":
               int(min(r.eval_windows, len(held) // r.context) * r.context)}
    return model.eval(), metrics

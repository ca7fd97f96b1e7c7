"""A byte-level BPE tokenizer for the decoders, trained with ``tokenizers``.

Byte-level (GPT-2's scheme): every string encodes, no unknown token. The one
special token ends a text. The result is a ``PreTrainedTokenizerFast``, saved
beside the weights and loaded by ``AutoTokenizer`` offline.
"""
from __future__ import annotations

from numeric._optional import require
from numeric.runtime import environment

__all__ = ["EOS", "VOCAB_SIZE", "train_tokenizer"]

EOS = "<|endoftext|>"
VOCAB_SIZE = 2048   # small: 1.3 MB of text, and the tied embedding stays 0.26 M parameters
MIN_FREQUENCY = 2   # a merge must occur twice in the training text


def train_tokenizer(text: str, vocab_size: int = VOCAB_SIZE):
    """Train byte-level BPE on ``text`` (single-threaded, so merge ties break the same way)."""
    with environment(RAYON_NUM_THREADS="1"):   # read when tokenizers starts its pool: one thread
        return _train(text, vocab_size)


def _train(text: str, vocab_size: int):
    tokenizers = require("tokenizers")
    Tokenizer = tokenizers.Tokenizer
    decoders = tokenizers.decoders
    models = tokenizers.models
    pre_tokenizers = tokenizers.pre_tokenizers
    trainers = tokenizers.trainers
    PreTrainedTokenizerFast = require("transformers").PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=MIN_FREQUENCY, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(text.splitlines(), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=EOS,
                                   model_max_length=1 << 20)

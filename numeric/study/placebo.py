"""The study's placebo permutations of an added block (paper L.6; ``docs/study.md``, placebos).

A placebo row refits a comparison with its added block permuted, so that the block keeps its
marginal distribution (and, for ``heads``, its head structure) but loses every link to the
target; ``numeric.study.compare`` runs ``PERMUTATIONS`` of each, from their own random streams.
"""
from __future__ import annotations

import numpy as np

from numeric.study.demean import head_means

__all__ = ["PLACEBO_MODES", "permuted"]

#: Placebo modes: rows permuted within a family; head means permuted between heads (with each
#: head's deviations shuffled over its own sources); G permuted over the sources of each head.
PLACEBO_MODES = ("rows", "heads", "within-head")


def permuted(block: np.ndarray, heads: np.ndarray, mode: str, rng: np.random.Generator) -> np.ndarray:
    """One placebo permutation of ``block [n, q]`` (one family's rows, heads ``heads``).

    ``rows``: rows permuted (the paper's placebo; destroys head structure). ``heads``: the head
    means permuted between heads, each head's within-head deviations kept in the head but
    shuffled over its sources: the block keeps its head structure (it still tells heads apart,
    so it reproduces a head-identity gain) and loses every link to the target. ``within-head``:
    the block permuted over the sources of each head (head means kept: paper L.6's within-head
    permutation)."""
    n = block.shape[0]
    if mode == "rows":
        return block[rng.permutation(n)]
    labels, inv = np.unique(heads, return_inverse=True)
    shuffle = np.arange(n)
    for h in range(labels.size):
        idx = np.flatnonzero(inv == h)
        shuffle[idx] = idx[rng.permutation(idx.size)]
    if mode == "within-head":
        return block[shuffle]
    if mode != "heads":
        raise ValueError(f"unknown placebo mode {mode!r}")
    means = head_means(block, heads, np.ones(n, dtype=bool))
    first = np.array([np.flatnonzero(inv == h)[0] for h in range(labels.size)])
    moved = means[first][rng.permutation(labels.size)][inv]     # head h gets head pi(h)'s mean
    return moved + (block - means)[shuffle]

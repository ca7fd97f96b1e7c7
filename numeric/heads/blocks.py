"""The attention block a cell is about, cut from one head's captured logits (paper section 6, L.1).

Three kinds (``Target.kind``):

  ``full``           encoders and ViT: self-attention over all n tokens, n x n;
  ``prefix-block``   decoders, the common-prefix conditional block (MATH.md
                     section 6): queries ``P .. P+B-1`` over keys ``0 .. P-1``,
                     each row the softmax of its prefix logits, i.e. the causal
                     row renormalised over the prefix; B x P;
  ``native-causal``  decoders, the full causal matrix of the ``P + B``-token
                     window, lower triangular, n x n (the paper's extra
                     integrity cells, L.1).

A native-causal target keeps finite logits (the bracket format refuses Inf,
``docs/bracket-format.md``): every masked entry ``j > i`` is set to the row's
largest unmasked logit minus ``NATIVE_MASK_GAP``. Its exact softmax weight is
below ``exp(-1024) < 1e-444`` per entry, so its float64 softmax is exactly the
lower-triangular causal matrix and the certified matrix (the exact softmax of
the stored logits) is within ``n exp(-1024)`` of the true causal one in every
row's l1 norm; the proved slack (K.5) covers the float64 image.

Decoders also get the head screen of ``docs/panel.md``: the retained prefix
mass ``sum_{j<P} A_ij`` of the causal rows of the block, and the locality
screen, the mean causal mass within ``LOCAL_WINDOW`` tokens behind the query
(queries ``P .. P+B-1`` for both decoder kinds, so a head is screened alike in both).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exact.errors import UserInputError

__all__ = ["LOCAL_WINDOW", "LOCAL_MASS_MAX", "NATIVE_MASK_GAP", "KINDS", "ExtractionError", "Target",
           "decoder_block", "native_block", "full_block"]

LOCAL_WINDOW = 8      # tokens behind the query that count as "local" (project choice)
LOCAL_MASS_MAX = 0.5  # a head is local when over half its causal mass is that close (project choice)
#: Masked logits of a native-causal target sit this far below the row's largest
#: logit: exp(-1024) underflows float64 (whose smallest subnormal is exp(-744.4)).
NATIVE_MASK_GAP = 1024.0
KINDS = ("full", "prefix-block", "native-causal")


class ExtractionError(UserInputError):
    """Extraction cannot proceed (no attention captured, short sequence; exit 2)."""


@dataclass(frozen=True)
class Target:
    """The extracted block: logits [query, key] and its projections, the
    retained prefix mass per row, the locality screen (decoders), the span and the kind."""

    logits: np.ndarray
    Q: np.ndarray
    K: np.ndarray
    row_mass: np.ndarray
    local: float | None
    nonlocal_head: bool | None
    span: dict
    kind: str


def _local_mass(probs: np.ndarray, prefix: int, block: int) -> float:
    """Mean causal mass within ``LOCAL_WINDOW`` tokens behind the queries ``prefix .. prefix+block-1``."""
    n = probs.shape[1]
    idx = np.arange(prefix, prefix + block)
    cols = np.arange(n)
    near = (cols[None, :] <= idx[:, None]) & (cols[None, :] > idx[:, None] - LOCAL_WINDOW)
    return float(np.mean((probs[prefix:prefix + block] * near).sum(axis=1)))


def decoder_block(q, k, mask, probs: np.ndarray, scaling: float, layer: int, *, prefix: int, block: int) -> Target:
    """Queries ``prefix .. prefix+block-1`` over keys ``0 .. prefix-1`` (MATH.md section 6).

    ``q``, ``k``: the head's projections [token, dim]; ``mask``: the model's
    additive mask or None; ``probs``: the causal softmax of the full window.
    """
    rows = slice(prefix, prefix + block)
    if mask is not None and np.any(mask[rows, :prefix] != 0):
        raise ExtractionError(f"layer {layer}: the model masks part of the prefix block")
    local = _local_mass(probs, prefix, block)
    return Target(logits=scaling * (q[rows] @ k[:prefix].T), Q=q[rows], K=k[:prefix],
                  row_mass=probs[rows, :prefix].sum(axis=1), local=local, nonlocal_head=local <= LOCAL_MASS_MAX,
                  span={"queries": [prefix, prefix + block], "keys": [0, prefix]}, kind="prefix-block")


def native_block(q, k, mask, probs: np.ndarray, scaling: float, layer: int, *, prefix: int, block: int) -> Target:
    """The full causal matrix of the window, masked logits finite (``NATIVE_MASK_GAP``)."""
    n = q.shape[0]
    causal = np.tril(np.ones((n, n), dtype=bool))
    if mask is not None and np.any(mask[causal] != 0):
        raise ExtractionError(f"layer {layer}: the model masks part of the causal window")
    raw = scaling * (q @ k.T)
    top = np.max(np.where(causal, raw, -np.inf), axis=1, keepdims=True)
    logits = np.where(causal, raw, top - NATIVE_MASK_GAP)
    local = _local_mass(probs, prefix, block)
    return Target(logits=logits, Q=q, K=k, row_mass=np.ones(n), local=local, nonlocal_head=local <= LOCAL_MASS_MAX,
                  span={"queries": [0, n], "keys": [0, n], "causal": True, "mask_gap": NATIVE_MASK_GAP},
                  kind="native-causal")


def full_block(q, k, mask, scaling: float, layer: int) -> Target:
    """Full self-attention over all n tokens (encoders, ViT)."""
    if mask is not None and np.any(mask != 0):
        raise ExtractionError(f"layer {layer}: the model masks part of the full attention")
    n = q.shape[0]
    return Target(logits=scaling * (q @ k.T), Q=q, K=k, row_mass=np.ones(n), local=None,
                  nonlocal_head=None, span={"queries": [0, n], "keys": [0, n]}, kind="full")

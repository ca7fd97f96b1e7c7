"""Target slack for logit targets (K.5, Lemma 11 = G.2).

``target_slack(logits, matrix)`` returns the rational bound that the exact
tier proves (``exact.slack.softmax_slack_bound``: arb enclosures of
``||softmax_row(H) - A0||_row1``) and a float at or above it, for the
float search: upper side at ``eps - slack``, lower side at ``eps + slack``.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["target_slack"]


def target_slack(logits: np.ndarray, matrix: np.ndarray):
    """(slack as flint.fmpq proved by the exact tier, a float upper bound of it).

    Raises ValueError when the enclosure is not finite.
    """
    from exact.slack import softmax_slack_bound

    q = softmax_slack_bound(logits, matrix)
    if q is None:
        raise ValueError("the softmax slack bound is not finite (logits too large?)")
    f = float(q)
    f = math.nextafter(f, math.inf) if f > 0 else 0.0   # float(q) may round down by half an ulp
    return q, f

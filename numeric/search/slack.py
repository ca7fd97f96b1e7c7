"""Target slack for logit targets (K.5, Lemma 11 = G.2).

``target_slack(logits, matrix)`` returns a rational slack that the exact
tier proves on its fast path, and the same value as a float, for the float
search: upper side at ``eps - slack``, lower side at ``eps + slack``.

The slack written is the exact tier's own float64 bound
(``exact.slack.SlackProof``: every row bounded with a proved error term, a
few ulps above the true distance, about 1e-13 on a 256-wide row), rounded up
to 8 significant bits. ``python -m exact verify`` then proves it from the
float bound alone, with no arb enclosure; the tight arb bound
(``softmax_slack_bound``, about 1e-16) would send every row to arb, since
the float bound of a row is never below it. The difference, about 1e-13, is
far below the search's own safety margins (``UPPER_SAFETY``, ``LOWER_SAFETY``
in ``driver.py``). Where no float bound is proved (a non-IEEE machine, a row
whose exponent range is out of reach), the arb bound is written, as before.
"""
from __future__ import annotations

import math

import numpy as np
from flint import fmpq

from exact.slack import SlackProof, softmax_slack_bound

__all__ = ["target_slack", "round_up_short"]

#: Significant bits of the slack written (a short rational in the file).
SLACK_BITS = 8


def round_up_short(x: float, bits: int = SLACK_BITS) -> float:
    """The least float with ``bits`` significant bits at or above ``x >= 0`` (exact: powers of two only).

    >>> round_up_short(0.1) == 205 / 2048 and round_up_short(0.375) == 0.375 and round_up_short(0.0) == 0.0
    True
    """
    if x <= 0:
        return 0.0
    mantissa, exponent = math.frexp(x)
    return math.ldexp(math.ceil(math.ldexp(mantissa, bits)), exponent - bits)


def target_slack(logits: np.ndarray, matrix: np.ndarray) -> tuple[fmpq, float]:
    """(slack as flint.fmpq that the exact tier proves, the same value as a float).

    Raises ValueError when no bound is finite.
    """
    fast = SlackProof(logits, matrix).fast
    if fast.size and np.isfinite(fast).all():
        f = round_up_short(float(fast.max()))
        return fmpq(*f.as_integer_ratio()), f
    q = softmax_slack_bound(logits, matrix)
    if q is None:
        raise ValueError("the softmax slack bound is not finite (logits too large?)")
    f = float(q)
    f = math.nextafter(f, math.inf) if f > 0 else 0.0   # float(q) may round down by half an ulp
    return q, f

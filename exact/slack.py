"""Target slack (K.5, Lemma 11 = G.2).

If ``||A - A0||_row1 <= alpha`` then
``r_{eps+alpha}(A0) <= r_eps(A) <= r_{eps-alpha}(A0)``: a lower certificate
for A0 at ``eps + alpha`` and an upper one at ``eps - alpha`` bracket A at
eps. When A is the exact softmax of stored logits (transcendental), alpha
must be proved: this module encloses ``softmax_row(H)`` with arb balls and
returns a rigorous upper bound on ``||softmax_row(H) - A0||_row1``.

>>> import numpy as np
>>> H = np.zeros((2, 2)); A0 = np.full((2, 2), 0.5)
>>> softmax_slack_bound(H, A0) == 0
True
"""
from __future__ import annotations

from flint import arb, ctx, fmpq, fmpz

from .matrix import check_float64_matrix

__all__ = ["softmax_slack_bound", "ARB_PRECISION"]

#: Working precision of the enclosures, in bits: 64 bits leaves the bound
#: about 2^-60 above the true distance, far below any float64 rounding.
ARB_PRECISION = 64


def _arb_upper_to_fmpq(x: arb) -> fmpq | None:
    """The exact rational value of the upper endpoint of an arb ball (None if not finite)."""
    if not x.is_finite():
        return None
    mantissa, exponent = x.upper().man_exp()
    exponent = int(exponent)
    if exponent >= 0:
        return fmpq(mantissa * fmpz(2) ** exponent)
    return fmpq(mantissa, fmpz(2) ** (-exponent))


def softmax_slack_bound(logits, matrix) -> fmpq | None:
    """A rigorous upper bound on ``||softmax_row(logits) - matrix||_row1``.

    Per row: enclose ``e_j = exp(h_j)`` (arb exponents do not overflow, so no
    shift by the row maximum is needed), ``Z = sum_j e_j`` and
    ``sum_j |e_j - a_j Z| / Z``; the floats ``a_j`` enter arb exactly. Returns None when an
    enclosure is not finite (the caller refuses). Inputs are validated float64.
    """
    H = check_float64_matrix(logits, "logits", allow_empty=False)
    A0 = check_float64_matrix(matrix, "matrix", allow_empty=False)
    if H.shape != A0.shape:
        raise ValueError(f"logits {H.shape} and matrix {A0.shape} differ in shape")
    old = ctx.prec
    ctx.prec = ARB_PRECISION
    try:
        worst = arb(0)
        for hrow, arow in zip(H.tolist(), A0.tolist()):
            exps = [arb(h).exp() for h in hrow]           # a float enters arb exactly; no overflow in arb
            Z = sum(exps, arb(0))
            dev = sum([abs(e - Z * a) for e, a in zip(exps, arow)], arb(0)) / Z
            worst = worst.max(dev)                       # encloses the larger of the two
        return _arb_upper_to_fmpq(worst)
    finally:
        ctx.prec = old

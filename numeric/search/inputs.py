"""Input checks of the search: tolerances and matrices (one tolerance parser).

``parse_eps`` reads one tolerance as an exact Fraction, ``parse_eps_list``
a comma-separated list of them (the bracket CLI and the panel share it),
``validate_matrix`` a float64 matrix. Every failure is a ``ValueError``
with a one-line message; the command lines turn it into exit status 2.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["STOCHASTIC_TOL", "parse_eps", "parse_eps_list", "validate_matrix"]

#: Row sums of a row-stochastic float64 matrix are 1 within n ulps; we accept
#: 1e-6 (a float32 softmax cast to float64 passes, a wrong normalisation does not).
STOCHASTIC_TOL = 1e-6


def parse_eps(e: object) -> Fraction:
    """A tolerance as an exact Fraction: floats by their shortest decimal (0.1 -> 1/10).

    >>> parse_eps(0.1), parse_eps("1/4"), parse_eps(Fraction(1, 2))
    (Fraction(1, 10), Fraction(1, 4), Fraction(1, 2))
    """
    if isinstance(e, bool):
        raise ValueError(f"eps {e!r} is not a number")
    if isinstance(e, float):
        if not np.isfinite(e):
            raise ValueError(f"eps {e!r} is not finite")
        q = Fraction(repr(e))
    elif hasattr(e, "p") and hasattr(e, "q"):          # flint.fmpq
        q = Fraction(int(e.p), int(e.q))
    else:
        try:
            q = Fraction(str(e).strip())
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"eps {e!r} is not a rational number") from None
    if not (0 < q <= 1):
        raise ValueError(f"eps {e} is outside (0, 1]")
    return q


def parse_eps_list(text: str) -> list[str]:
    """The tolerances of a comma-separated list, as given (stripped); ValueError if empty, bad or repeated.

    >>> parse_eps_list("0.1, 1/4,0.5")
    ['0.1', '1/4', '0.5']
    >>> parse_eps_list("0.25,1/4")
    Traceback (most recent call last):
    ValueError: repeated tolerances in '0.25,1/4'
    """
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise ValueError("no tolerances given")
    values = [parse_eps(t) for t in items]
    if len(set(values)) != len(values):
        raise ValueError(f"repeated tolerances in {text!r}")
    return items


def validate_matrix(matrix: object, what: str = "matrix", stochastic: bool = True,
                    row_tol: float = STOCHASTIC_TOL) -> np.ndarray:
    """Check a 2-D finite float64 array (row-stochastic within ``row_tol`` unless told otherwise);
    ValueError otherwise. ``row_tol`` is wider only for a matrix stored in half precision
    (``softrank``'s inputs: a softmax rounded to 16 bits has row sums within 2^-11 of 1)."""
    a = np.asarray(matrix)
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D, got shape {a.shape}")
    if a.dtype != np.float64:
        raise ValueError(f"{what} must be float64, got {a.dtype}")
    if a.size == 0:
        raise ValueError(f"{what} is empty")
    if not np.isfinite(a).all():
        raise ValueError(f"{what} has NaN or Inf entries")
    if stochastic:
        if (a < 0).any():
            raise ValueError(f"{what} has negative entries: not row-stochastic")
        dev = np.abs(a.sum(axis=1) - 1.0)
        if dev.max() > row_tol:
            raise ValueError(f"{what} is not row-stochastic: row {int(dev.argmax())} sums to "
                             f"{a.sum(axis=1)[dev.argmax()]!r}")
    return np.ascontiguousarray(a)

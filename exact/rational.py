"""Exact rationals: parsing the file grammar, entering floats, printing.

A rational is an ``fmpq``. Strings are parsed straight to rationals (never
through a float); floats enter exactly through ``as_integer_ratio``.

>>> parse_rational("1/4") == fmpq(1, 4)
True
>>> parse_rational("0.25") == parse_rational("25e-2") == fmpq(1, 4)
True
>>> format_rational(fmpq(6, 8))
'3/4'
>>> float_to_fmpq(0.1) == fmpq(3602879701896397, 2**55)
True
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

from flint import fmpq, fmpz

from .errors import LimitExceeded, MalformedInput
from .limits import MAX_DECIMAL_EXPONENT, MAX_NUMBER_CHARS

__all__ = ["parse_rational", "parse_nonnegative", "float_to_fmpq", "format_rational", "to_fmpq", "to_fraction"]

_FRACTION = re.compile(r"([+-]?)([0-9]+)(?:/([0-9]+))?")
_DECIMAL = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?")


def parse_rational(text: object) -> fmpq:
    """Parse ``"p/q"``, an integer, or an exact decimal (``"0.25"``, ``"1e-3"``).

    Raises ``MalformedInput`` for anything else, a zero denominator, or more
    than ``MAX_NUMBER_CHARS`` characters; ``LimitExceeded`` for a decimal
    exponent beyond ``MAX_DECIMAL_EXPONENT``.

    >>> [str(parse_rational(t)) for t in ("-1/4", "-0.25", "2.5e2", "-3e0", "1e-3")]
    ['-1/4', '-1/4', '250', '-3', '1/1000']
    >>> parse_rational("1/0")
    Traceback (most recent call last):
    ...
    exact.errors.MalformedInput: not a rational number: '1/0' (zero denominator)
    """
    if not isinstance(text, str):
        raise MalformedInput(f"expected a rational as a string, got {type(text).__name__}")
    if len(text) > MAX_NUMBER_CHARS:
        raise LimitExceeded(f"number has {len(text)} characters, limit {MAX_NUMBER_CHARS}")
    m = _FRACTION.fullmatch(text)
    if m:
        sign, p, q = m.groups()
        if q is not None and int(q) == 0:
            raise MalformedInput(f"not a rational number: {text[:40]!a} (zero denominator)")
        value = fmpq(int(p), int(q) if q is not None else 1)
        return -value if sign == "-" else value
    m = _DECIMAL.fullmatch(text)
    if m and (m.group(2) or m.group(3)):
        sign, whole, frac, exp = m.groups()
        frac = frac or ""
        e = int(exp) if exp is not None else 0
        if abs(e) > MAX_DECIMAL_EXPONENT:
            raise LimitExceeded(f"decimal exponent {e} beyond the limit {MAX_DECIMAL_EXPONENT}: {text[:40]!a}")
        digits = int((whole or "0") + frac)
        e -= len(frac)
        value = fmpq(digits * 10**e, 1) if e >= 0 else fmpq(digits, 10**(-e))
        return -value if sign == "-" else value
    raise MalformedInput(f"not a rational number: {text[:40]!a}")


def parse_nonnegative(text: str, what: str) -> fmpq:
    """``parse_rational`` that also refuses a negative value, naming ``what``."""
    value = parse_rational(text)
    if value < 0:
        raise MalformedInput(f"{what} must be >= 0, got {text[:40]!a}")
    return value


def float_to_fmpq(x: float) -> fmpq:
    """The exact dyadic value of a finite float."""
    if not math.isfinite(x):
        raise MalformedInput(f"not a finite number: {x!r}")
    p, q = float(x).as_integer_ratio()
    return fmpq(p, q)


def to_fmpq(x: object) -> fmpq:
    """An exact ``fmpq`` from an int, Fraction, fmpq, fmpz, float (exactly) or rational string."""
    if isinstance(x, fmpq):
        return x
    if isinstance(x, (int, fmpz)):
        return fmpq(x)
    if isinstance(x, Fraction):
        return fmpq(x.numerator, x.denominator)
    if isinstance(x, float):
        return float_to_fmpq(x)
    if isinstance(x, str):
        return parse_rational(x)
    raise MalformedInput(f"cannot read {type(x).__name__} as an exact rational")


def to_fraction(q: fmpq) -> Fraction:
    """The same rational as a ``fractions.Fraction``."""
    return Fraction(int(q.p), int(q.q))


def format_rational(q: object) -> str:
    """Canonical text ``p/q`` (or ``p`` for integers).

    >>> format_rational(fmpq(6, 2)), format_rational(fmpq(-3, 4))
    ('3', '-3/4')
    """
    q = to_fmpq(q)
    return str(q.p) if q.q == 1 else f"{q.p}/{q.q}"

"""Exact numbers: the file's rational grammar, floats, and printing (``fractions.Fraction`` only).

A rational in a file is a JSON string: ``"p/q"``, an integer ``"3"``, or an
exact decimal ``"0.25"``, ``"1e-3"``, ``"-2.5E+2"`` (docs/bracket-format.md
section 2). It is parsed straight to a Fraction, character by character,
never through a float. A float enters exactly through ``as_integer_ratio``.

>>> parse("1/4"), parse("-0.25"), parse("2.5e2"), parse("1e-3"), parse(".5"), parse("3.")
(Fraction(1, 4), Fraction(-1, 4), Fraction(250, 1), Fraction(1, 1000), Fraction(1, 2), Fraction(3, 1))
>>> parse("1/0")
Traceback (most recent call last):
...
crosscheck._errors.Malformed: not a rational number: '1/0' (zero denominator)
>>> text(Fraction(6, 8)), text(Fraction(4))
('3/4', '4')
"""
from __future__ import annotations

from fractions import Fraction

from ._errors import LimitReached, Malformed
from ._limits import MAX_DECIMAL_EXPONENT, MAX_NUMBER_CHARS

__all__ = ["parse", "parse_nonnegative", "text", "show"]

_DIGITS = frozenset("0123456789")


def _digits(s: str) -> bool:
    return bool(s) and all(c in _DIGITS for c in s)


def _bad(s: str, why: str = "") -> Malformed:
    return Malformed(f"not a rational number: {s[:40]!a}{why}")


def parse(s: object) -> Fraction:
    """A rational string of the file grammar as a Fraction; ``Malformed`` otherwise."""
    if not isinstance(s, str):
        raise Malformed(f"expected a rational as a string, got {type(s).__name__}")
    if len(s) > MAX_NUMBER_CHARS:
        raise LimitReached(f"number has {len(s)} characters, limit {MAX_NUMBER_CHARS}")
    body, negative = s, False
    if body[:1] in ("+", "-"):
        negative, body = body[0] == "-", body[1:]
    if "/" in body:                                           # p/q
        p, _, q = body.partition("/")
        if not (_digits(p) and _digits(q)):
            raise _bad(s)
        if int(q) == 0:
            raise _bad(s, " (zero denominator)")
        value = Fraction(int(p), int(q))
    else:                                                     # digits [. digits] [e|E [+-] digits]
        mantissa, exponent = body, 0
        for mark in ("e", "E"):
            if mark in mantissa:
                mantissa, _, e = mantissa.partition(mark)
                sign = -1 if e[:1] == "-" else 1
                e = e[1:] if e[:1] in ("+", "-") else e
                if not _digits(e):
                    raise _bad(s)
                exponent = sign * int(e)
                break
        whole, dot, frac = mantissa.partition(".")
        if not (whole or frac) or (whole and not _digits(whole)) or (frac and not _digits(frac)):
            raise _bad(s)
        if abs(exponent) > MAX_DECIMAL_EXPONENT:
            raise LimitReached(f"decimal exponent {exponent} beyond the limit {MAX_DECIMAL_EXPONENT}: {s[:40]!a}")
        exponent -= len(frac)
        digits = int((whole or "0") + frac)
        value = Fraction(digits * 10**exponent) if exponent >= 0 else Fraction(digits, 10**-exponent)
    return -value if negative else value


def parse_nonnegative(s: object, what: str) -> Fraction:
    value = parse(s)
    if value < 0:
        raise Malformed(f"{what} must be >= 0, got {str(s)[:40]!a}")
    return value


def text(q: Fraction | int | None) -> str | None:
    """Canonical ``p/q`` (or ``p``) of an exact rational; None stays None."""
    if q is None:
        return None
    q = Fraction(q)
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def show(value: object, limit: int = 60) -> str:
    """A value from a file as one printable line: ``ascii()`` of a string, else its repr, cut."""
    out = ascii(value[:limit]) if isinstance(value, str) else ascii(value)[:limit]
    return out + ("..." if isinstance(value, str) and len(value) > limit else "")

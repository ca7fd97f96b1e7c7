"""The record every check returns, the registry, and the exact helpers they share.

A check is a function returning a frozen :class:`CheckResult`. It passes only
when every exact comparison it makes comes out true; an arb comparison counts
only when it is *certainly* true (python-flint returns False when undecided),
and an exception inside a check is a failure (fail closed, see ``run_check``).
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

from flint import arb, fmpq, fmpq_mat, fmpz

from exact.precision import arb_precision

__all__ = ["CheckResult", "Recorder", "register", "REGISTRY", "run_check",
           "Q", "qmat", "row1", "centring", "qstr", "arb_upper_fmpq", "arb_lower_fmpq",
           "arb_mid_fmpq", "arb_precision", "ARB_PREC", "thorough", "is_thorough"]

#: Default arb working precision (bits) for the enclosures in these checks:
#: 128 bits leaves every ball about 2^-120 wide, far below the gaps decided.
ARB_PREC = 128


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome: the paper's label, pass/fail, its exact numbers."""

    label: str
    name: str
    passed: bool
    summary: str
    numbers: dict = field(default_factory=dict)
    failures: tuple = ()
    table: tuple = ()          # optional rows (dicts) printed under the summary
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"label": self.label, "name": self.name, "passed": self.passed,
                "summary": self.summary, "numbers": self.numbers,
                "failures": list(self.failures), "table": list(self.table),
                "seconds": round(self.seconds, 3)}


class Recorder:
    """Collects the exact facts a check asserts; a check passes iff none failed."""

    def __init__(self):
        self.failures: list[str] = []
        self.count = 0
        self.sanity_results: dict[str, bool] = {}

    def require(self, ok, what: str) -> bool:
        """Record ``what``; ``ok`` must be the bool True (an undecided arb test is False)."""
        self.count += 1
        if ok is not True:
            self.failures.append(what)
            return False
        return True

    def sanity(self, ok, what: str) -> None:
        """A fact that holds by construction (e.g. a gauge leaves H unchanged): printed under
        ``numbers["sanity"]``, never deciding a pass (it could not fail)."""
        self.sanity_results[what] = bool(ok)


@dataclass(frozen=True)
class _Entry:
    label: str
    name: str
    func: Callable[[], tuple[Any, ...]]      # (summary, numbers, recorder[, table])


REGISTRY: list[_Entry] = []


def register(label: str, name: str):
    """Decorator: add a check ``func() -> (summary, numbers, recorder[, table])``."""
    def deco(func):
        REGISTRY.append(_Entry(label, name, func))
        func.label, func.check_name = label, name
        return func
    return deco


def run_check(entry: _Entry) -> CheckResult:
    """Run one check; an exception is a failure with its message (fail closed)."""
    t0 = time.perf_counter()
    try:
        out = entry.func()
        summary, numbers, rec = out[:3]
        table = tuple(out[3]) if len(out) > 3 else ()
        if rec.sanity_results:
            numbers = dict(numbers, sanity=dict(rec.sanity_results))
        passed = rec.count > 0 and not rec.failures
        failures = tuple(rec.failures) if rec.count else ("no facts were checked",)
    except Exception as exc:  # a crash is a failed check, never a pass
        summary, numbers, table = f"crashed: {type(exc).__name__}: {exc}", {}, ()
        passed, failures = False, (f"{type(exc).__name__}: {exc}",)
    return CheckResult(entry.label, entry.name, passed, summary, numbers, failures,
                       table, time.perf_counter() - t0)


# ---------------------------------------------------------------- exact helpers

def Q(x) -> fmpq:
    """An exact rational from int, "p/q" string, Fraction or fmpq (never a float)."""
    if isinstance(x, fmpq):
        return x
    if isinstance(x, float):
        raise TypeError("floats are not exact input here; use as_integer_ratio")
    if isinstance(x, str):
        f = Fraction(x)
        return fmpq(f.numerator, f.denominator)
    if isinstance(x, Fraction):
        return fmpq(x.numerator, x.denominator)
    return fmpq(x)


def qmat(rows) -> fmpq_mat:
    """An fmpq_mat from a list of rows of exact entries."""
    rows = [[Q(v) for v in r] for r in rows]
    return fmpq_mat(len(rows), len(rows[0]), [v for r in rows for v in r])


def row1(M: fmpq_mat) -> fmpq:
    """``||M||_row1 = max_i sum_j |M_ij|``, exact (MATH.md section 1)."""
    best = fmpq(0)
    for i in range(M.nrows()):
        s = fmpq(0)
        for j in range(M.ncols()):
            v = M[i, j]
            s += v if v >= 0 else -v
        best = max(best, s)
    return best


def centring(k: int) -> fmpq_mat:
    """``P_k = I_k - 1 1^T / k`` (MATH.md section 3)."""
    return fmpq_mat(k, k, [fmpq(int(i == j)) - fmpq(1, k) for i in range(k) for j in range(k)])


def qstr(x) -> str:
    """Exact text of a rational: "p/q" or "p"."""
    x = Q(x) if not isinstance(x, fmpq) else x
    return str(x.p) if x.q == 1 else f"{x.p}/{x.q}"


def _dyadic(a: arb) -> fmpq:
    mantissa, exp = a.man_exp()
    exponent = int(exp)
    if exponent >= 0:
        return fmpq(mantissa * fmpz(2) ** exponent)
    return fmpq(mantissa, fmpz(2) ** (-exponent))


def arb_upper_fmpq(a: arb) -> fmpq:
    """The exact rational upper endpoint of a finite arb ball."""
    if not a.is_finite():
        raise ArithmeticError("enclosure is not finite")
    return _dyadic(a.mid()) + _dyadic(a.rad())     # mid and rad are exact dyadics


def arb_lower_fmpq(a: arb) -> fmpq:
    """The exact rational lower endpoint of a finite arb ball."""
    if not a.is_finite():
        raise ArithmeticError("enclosure is not finite")
    return _dyadic(a.mid()) - _dyadic(a.rad())


def arb_mid_fmpq(a: arb) -> fmpq:
    """The exact rational midpoint of an arb ball (a hint, never a bound)."""
    return _dyadic(a.mid())


_THOROUGH: ContextVar[bool] = ContextVar("proofs_checks_thorough", default=False)


@contextmanager
def thorough(on: bool = True) -> Iterator[None]:
    """Run the checks of the block on their larger instances (``--thorough``) when ``on``; the default
    instances outside it. Held in a ``ContextVar``: another thread, or code after the block, is unchanged."""
    reset = _THOROUGH.set(on)
    try:
        yield
    finally:
        _THOROUGH.reset(reset)


def is_thorough() -> bool:
    """Whether the current ``thorough`` block asks for the larger instances."""
    return _THOROUGH.get()

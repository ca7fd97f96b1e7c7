"""What ``softrank.bracket`` accepts: attention matrices and tolerances, checked up front.

A matrix is a numpy array or a torch tensor (any device) of shape (n, n) or
(..., n, n), in float64, float32, float16 or bfloat16. Every one of these
converts to float64 exactly (each is a subset of float64), and the dtype and
device it came from are recorded in the provenance of every cell. Refused,
each with a one-line ``UserInputError``: a tensor that requires gradients,
an integer, boolean, complex or wider-than-float64 dtype, a non-square or
empty shape, NaN or Inf, a negative entry, and a row whose sum is off 1 by
more than ``row_tolerance(dtype)``.

The row-sum tolerance is the one documented for captured softmax: a
softmax stored in a precision with unit roundoff u has every entry within
relative u of the exact one, so its rows sum to 1 within u. We allow
``ROW_SUM_ULPS`` = 8 units, and never less than the float tier's 1e-6
(``numeric.search.inputs.STOCHASTIC_TOL``):

>>> [row_tolerance(d) for d in ("float64", "float32", "float16", "bfloat16")]
[1e-06, 1e-06, 0.00390625, 0.03125]
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from numeric.search.inputs import STOCHASTIC_TOL, parse_eps
from softrank.errors import UserInputError
from numeric._optional import require

__all__ = ["ROW_SUM_ULPS", "UNIT_ROUNDOFF", "Matrices", "row_tolerance", "as_matrices", "parse_tolerances"]

#: Units of roundoff a stored softmax row may miss 1 by (module docstring).
ROW_SUM_ULPS = 8
#: Unit roundoff of the dtypes that convert to float64 exactly.
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def row_tolerance(dtype: str) -> float:
    """How far a row sum of a matrix stored in ``dtype`` may be from 1."""
    return max(STOCHASTIC_TOL, ROW_SUM_ULPS * UNIT_ROUNDOFF[dtype])


@dataclass(frozen=True, eq=False)
class Matrices:
    """Checked float64 matrices ``[..., n, n]`` (read-only) and where they came from."""

    array: np.ndarray
    dtype: str
    device: str
    row_tol: float

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape[:-2])

    def provenance(self) -> dict[str, Any]:
        """What the cells record about the input's conversion."""
        exact = "float64 as given" if self.dtype == "float64" else f"{self.dtype} -> float64, exact"
        return {"input_dtype": self.dtype, "input_device": self.device, "conversion": exact,
                "row_sum_tol": self.row_tol, "batch_shape": list(self.batch_shape)}


def _from_torch(A: Any, what: str) -> tuple[np.ndarray, str, str]:
    torch = require("torch")

    if A.requires_grad:
        raise UserInputError(f"{what} requires gradients: pass {what}.detach() (a search is not differentiable)")
    dtype = str(A.dtype).replace("torch.", "")
    if dtype not in UNIT_ROUNDOFF:
        raise UserInputError(f"{what} has dtype {dtype}: expected float64, float32, float16 or bfloat16"
                             + (" (an integer dtype holds no probabilities)" if not A.is_floating_point() else ""))
    try:
        t = A.detach().to("cpu")
        if t.dtype == torch.bfloat16:
            t = t.to(torch.float32)           # exact: bfloat16 is float32 with a shorter mantissa
        return t.numpy().astype(np.float64), dtype, str(A.device)
    except (RuntimeError, NotImplementedError) as exc:    # meta or sparse tensors
        raise UserInputError(f"{what} cannot be read as a dense tensor: {str(exc).splitlines()[0][:100]}") from None


def _from_numpy(A: object, what: str) -> tuple[np.ndarray, str, str]:
    try:
        a = np.asarray(A)
    except (TypeError, ValueError) as exc:
        raise UserInputError(f"{what} is not an array: {str(exc).splitlines()[0][:100]}") from None
    if a.dtype.kind in "iub":
        raise UserInputError(f"{what} has integer dtype {a.dtype}: expected float64, float32 or float16 probabilities")
    name = a.dtype.name
    if a.dtype.kind != "f" or name not in UNIT_ROUNDOFF:
        raise UserInputError(f"{what} has dtype {name}: expected float64, float32 or float16")
    return a.astype(np.float64), name, "cpu"


def as_matrices(A: object, what: str = "A", stochastic: bool = True) -> Matrices:
    """``A`` as checked float64 matrices; ``UserInputError`` with one line otherwise.

    >>> as_matrices(np.full((2, 3, 3), 1 / 3, dtype=np.float32)).batch_shape
    (2,)
    >>> as_matrices(np.ones((2, 3)))
    Traceback (most recent call last):
    softrank.errors.UserInputError: A is not square: its last two dimensions are 2 x 3
    """
    is_torch = type(A).__module__.split(".")[0] == "torch" and hasattr(A, "requires_grad")
    a, dtype, device = _from_torch(A, what) if is_torch else _from_numpy(A, what)
    if a.ndim < 2:
        raise UserInputError(f"{what} must have shape (n, n) or (..., n, n), got shape {a.shape}")
    if a.shape[-1] != a.shape[-2]:
        raise UserInputError(f"{what} is not square: its last two dimensions are {a.shape[-2]} x {a.shape[-1]}")
    if a.size == 0:
        raise UserInputError(f"{what} is empty (shape {a.shape})")
    bad = ~np.isfinite(a)
    if bad.any():
        raise UserInputError(f"{what} has NaN or Inf entries (first at index {list(np.argwhere(bad)[0])})")
    tol = row_tolerance(dtype)
    if stochastic:
        if (a < 0).any():
            raise UserInputError(f"{what} has negative entries (first at index {list(np.argwhere(a < 0)[0])}): "
                                 "rows must be probability vectors")
        dev = np.abs(a.sum(axis=-1) - 1.0)
        if dev.max() > tol:
            at = np.unravel_index(int(dev.argmax()), dev.shape)
            raise UserInputError(f"{what} rows are not probability vectors: row {list(map(int, at))} sums to "
                                 f"{a.sum(axis=-1)[at]!r} (tolerance {tol:g} for {dtype})")
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return Matrices(a, dtype, device, tol)


def parse_tolerances(eps: object) -> tuple[object, ...]:
    """The tolerances as given (one or a sequence), each a rational in (0, 1], none repeated.

    >>> parse_tolerances(0.25), parse_tolerances(("0.1", Fraction(1, 2)))
    ((0.25,), ('0.1', Fraction(1, 2)))
    """
    if isinstance(eps, np.ndarray):
        eps = eps.tolist()
    items = tuple(eps) if isinstance(eps, (list, tuple)) else (eps,)
    if not items:
        raise UserInputError("no tolerances given")
    values: list[Fraction] = []
    for e in items:
        try:
            values.append(parse_eps(e))
        except ValueError as exc:
            raise UserInputError(_eps_message(e, str(exc))) from None
    if len(set(values)) != len(values):
        raise UserInputError(f"repeated tolerances in {items!r}")
    return items


def _eps_message(e: object, message: str) -> str:
    """``parse_eps``'s message, with the reason for the range when eps is 1 < eps < 2."""
    try:
        q = Fraction(str(e))
    except (ValueError, ZeroDivisionError):
        return message
    if 1 < q < 2:
        return (f"{message}: every eps >= 1 gives r_eps(A) = 0 (B = 0 is within row-l1 distance 1 of a "
                "row-stochastic A), so there is nothing to search")
    if not 0 < q < 2:
        return f"{message} (eps is a row-l1 distance between probability vectors, which is at most 2)"
    return message

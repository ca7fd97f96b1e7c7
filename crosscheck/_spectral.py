"""The Frobenius tail (K.2): a proved upper bound on the top-k singular energy.

``F_k(A)^2 = sum_{i>k} sigma_i(A)^2 = ||A||_F^2 - sum_{i<=k} lambda_i(S)`` with
``S = A^T A`` (or ``A A^T``, the smaller), p x p. An upper bound on the sum of
the k largest eigenvalues of S, from exact products only:

* a hint V (p x p): eigenvectors of S from numpy, rounded to the grid
  ``2^-50`` (entries of at most 51 bits); nothing below trusts it.
* ``G = V^T V`` and ``H = V^T S V``, exactly; ``g = ||G - I||_row1``. If
  ``g < 1``, V is invertible and, G - I being symmetric,
  ``lambda_min(G) >= 1 - ||G - I||_2 >= 1 - g``.
* The eigenvalues of S are those of the pencil (H, G) (``S x = l x`` with
  ``x = V y``). Courant-Fischer for the pencil, with ``y^T H y >= 0`` and
  ``y^T G y >= (1 - g) |y|^2``: ``lambda_i(S) <= lambda_i(H) / (1 - g)``.
* Weyl, with the exactly computed residual ``H - diag(H)``:
  ``lambda_i(H) <= d_(i) + ||H - diag(H)||_2 <= d_(i) + ||H - diag(H)||_row1``,
  ``d_(i)`` the i-th largest diagonal entry.

So ``sum_{i<=k} lambda_i(S) <= (sum of the k largest d + k ||H - diag H||_row1) / (1 - g)``,
and ``F_k(A)^2 > m eps^2`` is proved when ``||A||_F^2`` minus that bound exceeds
``m eps^2`` (``||M||_F^2 <= m ||M||_row1^2``). Every quantity that does not depend
on k or eps is made once per target (``Energies``).

>>> from crosscheck._dyadic import Dyadic
>>> e = Energies(Dyadic.identity(3), None)       # sigma = 1, 1, 1
>>> e.tail_lower_bound(2) > Fraction(3, 4)        # F_2^2 = 1 > 3 (1/2)^2
True
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np                                # a hint only: never trusted

from ._dyadic import Dyadic, residual
from ._limits import Meter

__all__ = ["Energies", "HINT_BITS"]

#: The eigenvector hint is rounded to multiples of 2^-HINT_BITS.
HINT_BITS = 50


class Energies:
    """``||A||_F^2`` and the pieces of the top-k energy bound of one target."""

    def __init__(self, A: Dyadic, meter: Meter | None):
        self.A, self.meter = A, meter
        self._done = False

    def _compute(self) -> None:

        A = self.A
        S = residual(None, [A.T, A] if A.shape[1] <= A.shape[0] else [A, A.T], self.meter)
        p = S.shape[0]
        top = S.max_abs()
        scale = top.bit_length() - 1 if top else 0        # S / 2^scale has entries near 1 (no overflow)
        unit = 1 << scale
        floats = np.array([[x / unit for x in r] for r in S.rows], dtype=np.float64)
        _, vectors = np.linalg.eigh(floats)
        ok = bool(np.isfinite(vectors).all())
        grid = np.rint(vectors * 2.0**HINT_BITS) if ok else np.zeros((p, p))
        V = Dyadic(grid.astype(np.int64).tolist(), HINT_BITS, p)
        self.g = residual(Dyadic.identity(p), [V.T, V], self.meter).norm() if ok else Fraction(1)
        H = residual(None, [V.T, S, V], self.meter)
        self.diagonal = sorted((Fraction(H.rows[i][i], 1 << H.shift) for i in range(p)), reverse=True)
        self.off = Fraction(max((sum(map(abs, r)) - abs(r[i]) for i, r in enumerate(H.rows)), default=0),
                            1 << H.shift)
        self.energy = A.frobenius_sq()
        self._done = True

    def top_upper_bound(self, k: int) -> Fraction | None:
        """A proved upper bound on ``sum_{i<=k} sigma_i(A)^2``, or None when the hint fails (g >= 1)."""
        if k == 0:
            return Fraction(0)
        if not self._done:
            self._compute()
        if self.g >= 1:
            return None
        return (sum(self.diagonal[:k], Fraction(0)) + k * self.off) / (1 - self.g)

    def tail_lower_bound(self, k: int) -> Fraction | None:
        """A proved lower bound on ``F_k(A)^2``, or None."""
        if k == 0:
            return self.A.frobenius_sq()
        top = self.top_upper_bound(k)
        return None if top is None else self.energy - top

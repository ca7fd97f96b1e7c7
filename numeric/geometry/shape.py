"""The logit-SVD family of Appendix J.2 and its prefactor-free shape scores.

For retained ranks r, ``T_r`` is the rank-r truncated SVD of C; the cell
reports ``kappa(T_r)`` and ``tau(T_r)`` from the same T (H.2: size and
residual must come from the same T) and a shape score with Theorem 1's
unknown constant ``C_r`` set to one. The scores are diagnostics, never
certificates.
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["SVD_RANKS", "shape_score", "intrinsic_profile_score"]

# Retained ranks of the logit-SVD family (J.2) reported as columns. Powers of
# two up to 32 span the interaction ranks seen on 64-dim heads at a cost of
# one MEB optimisation each; ranks >= rank(C) are skipped (T_r = C there).
SVD_RANKS = (1, 2, 4, 8, 16, 32)


def shape_score(kappa: float, tau: float, eps: float, r: int) -> float:
    """Prefactor-free log cover size ``(r/2) log(1 + kappa) - r log(eps - tau)``.

    Theorem 1's ``N_r(kappa, e)`` is of order ``kappa^(r/2)`` at fixed r and
    error e = eps - tau; the unknown constant C_r is dropped (set to one), so
    this is a *shape diagnostic*, never a certificate. ``inf`` when tau >= eps.

    >>> shape_score(0.0, 0.0, 1.0, 3)
    0.0
    >>> shape_score(1.0, 0.5, 0.5, 1)
    inf
    """
    if not tau < eps:
        return math.inf
    return 0.5 * r * math.log1p(max(kappa, 0.0)) - r * math.log(eps - tau)


def _number(row: dict, key: str) -> float:
    """``float(row[key])``, or NaN when missing or unparsable (CSV rows hold strings)."""
    try:
        value: Any = row.get(key)
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def intrinsic_profile_score(row: dict, eps: float) -> float:
    """Best prefactor-free shape score over the J.2 family in a descriptor row.

    Uses the same-T pairs (svd_r{r}_kappa, svd_r{r}_tau) and (kappa_upper, 0)
    at r = rank(C); 0.0 when tau0 <= eps (Theorem 1's rank-one branch).
    Values may be strings (a CSV row); missing or unparsable ones are skipped.

    >>> intrinsic_profile_score({"tau0": "0.1"}, 0.25)
    0.0
    """
    eps = float(eps)
    tau0 = _number(row, "tau0")
    if math.isfinite(tau0) and tau0 <= eps:
        return 0.0
    best = math.inf
    k, rank = _number(row, "kappa_upper"), _number(row, "c_rank")
    if math.isfinite(k) and math.isfinite(rank):
        best = shape_score(k, 0.0, eps, int(rank))
    for r in SVD_RANKS:
        k, t = _number(row, f"svd_r{r}_kappa"), _number(row, f"svd_r{r}_tau")
        if math.isfinite(k) and math.isfinite(t):
            best = min(best, shape_score(k, t, eps, r))
    return best

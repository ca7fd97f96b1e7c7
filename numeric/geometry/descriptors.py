"""The intrinsic profile of one attention cell as a flat dict (MATH.md section 3).

For the target ``A = softmax_row(H)`` of stored float64 logits ``H`` this
assembles the paper's intrinsic profile, every piece of it invariant under
Q/K gauges because it depends on ``H`` only through ``C = P_m H P_n``
(:mod:`numeric.geometry.interaction`): the residual q and ``tau``
(:mod:`~numeric.geometry.residual`), a bracket on the size ``kappa`` (double
difference, gauge-optimised MEB radius product: :mod:`~numeric.geometry.gauge`),
the logit-SVD family of J.2 (:mod:`~numeric.geometry.shape`) and, next to
every number claimed as a bound, its rigorous version
(:mod:`~numeric.geometry.bounds`). These are descriptor bounds, not rank
certificates; ranks only ever come from the exact tier.

Reproducibility: the size problems run on C rounded to a
fixed dyadic grid (``canonical_interaction``), so logits that differ by
rounding give bit-identical size descriptors; the exactly computed ones (q,
tau, double difference) are continuous in C.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from flint import arb

from numeric.runtime import one_blas_thread
from numeric.geometry.bounds import (
    double_centre,
    double_difference_exact,
    exact_image,
    float_down,
    float_up,
    kappa_upper,
    tail_upper,
    tau_enclosure,
)
from numeric.geometry.gauge import GAUGE_CONVERGED_RTOL, GAUGE_EXACT_RTOL, KappaBracket, kappa_factors
from numeric.geometry.interaction import canonical_interaction, visible_interaction
from numeric.geometry.residual import QResidual, double_difference, residual_q, tau_of_q
from numeric.geometry.shape import SVD_RANKS, intrinsic_profile_score
from numeric.heads.extract import softmax_rows
from numeric.search.norms import row_l1_norm

__all__ = ["RANK_RTOL", "cell_descriptors"]

# Singular values below this fraction of the largest are treated as zero when
# factoring C. Dropping them is sound: the dropped part is charged to the
# rigorous kappa upper bound through subadditivity (bounds.kappa_upper's tail).
RANK_RTOL = 1e-11


def _check_inputs(logits, matrix) -> np.ndarray:
    """The logits (or ``log matrix``) as a finite 2-D float64 array; ValueError otherwise."""
    if logits is None:
        if matrix is None:
            raise ValueError("cell_descriptors needs logits or a strictly positive matrix")
        A = np.asarray(matrix)
        if A.dtype != np.float64 or A.ndim != 2:
            raise ValueError(f"matrix must be a 2-D float64 array, got {A.dtype} with shape {A.shape}")
        if not np.isfinite(A).all() or (A <= 0).any():
            raise ValueError("matrix must be finite and strictly positive to take log A (pass logits)")
        return np.log(A)
    H = np.asarray(logits)
    if H.dtype != np.float64 or H.ndim != 2:
        raise ValueError(f"logits must be a 2-D float64 array, got {H.dtype} with shape {H.shape}")
    if H.size == 0:
        raise ValueError("logits are empty")
    if not np.isfinite(H).all():
        raise ValueError("logits contain NaN or Inf (masked entries are outside the common-support theorem)")
    if matrix is not None:
        A = np.asarray(matrix)
        if A.shape != H.shape:
            raise ValueError(f"matrix shape {A.shape} differs from logits shape {H.shape}")
    return H


def cell_descriptors(logits, matrix=None, *, ranks=SVD_RANKS, certify: bool = True, eps=None) -> dict:
    """The intrinsic profile of one cell as a flat dict of floats and ints.

    ``logits``, ``matrix``: float64 m x n with ``matrix = softmax_row(logits)``
    (matrix is only compared with the logits; pass ``logits=None`` to use
    ``log(matrix)``). Columns (MATH.md section 3, paper J.2):

    - ``q_residual``: q(C); ``tau0 = 2 tanh(q(C)/4)`` (Theorem 1's rank-one branch);
    - ``kappa_lower`` (double difference / 4), ``kappa_upper`` (gauge-optimised
      MEB radius product), ``kappa_dual`` (weighted nuclear norm, weak
      duality), ``kappa_balanced`` (no gauge), ``kappa_gap``;
    - ``c_rank``, ``c_sigma1``, ``c_frobenius``;
    - for r in ``ranks``: ``svd_r{r}_kappa`` (upper), ``svd_r{r}_kappa_lower``,
      ``svd_r{r}_tau`` = tau(T_r), ``svd_r{r}_shape = (r/2) log(1 + kappa)``;
      for r >= rank(C), T_r = C (tau 0);
    - with ``certify``: ``*_cert`` rigorous bounds (``q_residual_lower_cert``,
      ``q_residual_upper_cert``, ``tau0_lower_cert``, ``tau0_upper_cert``,
      ``kappa_lower_cert``, ``kappa_upper_cert``, ``svd_r{r}_tau_cert``,
      ``svd_r{r}_kappa_cert``): floats rounded outward from exact rationals
      and arb balls;
    - with ``eps``: ``profile_score``, the best prefactor-free shape score;
    - ``canon_grid``, ``canon_margin``, ``kappa_resolved``, ``kappa_steps``,
      ``geometry_seconds``: diagnostics of the computation (see
      :func:`~numeric.geometry.interaction.canonical_interaction`).

    Gauge invariant: depends on the logits only through C. The size problems
    run on the canonical (rounded) C, so logits that differ by rounding (a
    dense gauge) give bit-identical size descriptors whenever C moves by less
    than ``canon_margin * max|C|``; problems solved on it are re-solved on C.

    >>> A = np.array([[0.8, 0.2], [0.2, 0.8]])  # H.2: q(C) = ln 4, kappa(C) = ln 2
    >>> d = cell_descriptors(np.log(A), A, ranks=(1,))
    >>> round(d["q_residual"], 12) == round(math.log(4), 12), round(d["kappa_upper"], 12) == round(math.log(2), 12)
    (True, True)
    >>> d["kappa_lower_cert"] <= math.log(2) <= d["kappa_upper_cert"]
    True
    """
    with one_blas_thread():
        return _cell_descriptors(logits, matrix, ranks=ranks, certify=certify, eps=eps)


@dataclass(frozen=True)
class _SizeProblem:
    """The factored C of one cell: the balanced factors behind ``kb`` and the
    SVD of the canonical C that the J.2 family truncates."""

    rank: int
    kb: KappaBracket
    X0: np.ndarray = field(repr=False)
    Y0: np.ndarray = field(repr=False)
    Ur: np.ndarray = field(repr=False)
    sr: np.ndarray = field(repr=False)
    Vtr: np.ndarray = field(repr=False)


def _cell_descriptors(logits, matrix, *, ranks, certify, eps) -> dict:
    t0 = time.perf_counter()
    H = _check_inputs(logits, matrix)
    m, n = H.shape
    out: dict = {"geom_m": m, "geom_n": n}
    if logits is not None and matrix is not None:
        A = np.asarray(matrix, dtype=np.float64)
        out["softmax_mismatch"] = row_l1_norm(softmax_rows(H) - A)
    C = visible_interaction(H)
    Cx = double_centre(exact_image(H)) if certify else None
    q = residual_q(C, exact=Cx)
    out["q_residual"] = q.value
    out["tau0"] = tau_of_q(q.value)
    dd, idx = double_difference(C)
    out["kappa_lower"] = dd / 4.0
    size = _size_problem(C, dd, out)
    if certify:
        _certify_cell(out, q, Cx, idx, size)
    for r in ranks:
        _family_member(out, r, C, Cx, size)
    if eps is not None:
        out["profile_score"] = intrinsic_profile_score(out, float(eps))
    out["geometry_seconds"] = time.perf_counter() - t0  # a diagnostic column, never a budget
    return out


def _size_problem(C: np.ndarray, dd: float, out: dict) -> _SizeProblem:
    """Bracket ``kappa(C)`` (gauge optimisation on the canonical C) into ``out``.

    The size problems run on the canonical (rounded) C, truncated at the rank
    of C itself, so that inputs differing by rounding give bit-identical
    factors and optimiser paths (CANON_BITS); the exact tail C - X0 Y0^T in the
    certificate pays for the rounding.
    """
    U, s, Vt = np.linalg.svd(C, full_matrices=False)
    rank = int((s > s[0] * RANK_RTOL).sum()) if s.size and s[0] > 0 else 0
    Cr, grid, margin = canonical_interaction(C)
    out["canon_grid"] = grid
    out["canon_margin"] = margin
    Ur, sr, Vtr = np.linalg.svd(Cr, full_matrices=False)
    root = np.sqrt(sr[:rank])
    X0 = Ur[:, :rank] * root
    Y0 = Vtr[:rank].T * root
    kb = kappa_factors(X0, Y0, dd=dd)
    out["kappa_resolved"] = 0
    if rank and kb.upper - kb.dual <= GAUGE_CONVERGED_RTOL * kb.upper:
        # solved on the canonical input: the optimum is a property of C, so
        # re-solve on C's own factors to full accuracy (GAUGE_EXACT_RTOL).
        root = np.sqrt(s[:rank])
        X0, Y0 = U[:, :rank] * root, Vt[:rank].T * root
        kb = kappa_factors(X0, Y0, dd=dd, gap_rtol=GAUGE_EXACT_RTOL)
        out["kappa_resolved"] = 1
    out["kappa_upper"] = kb.upper
    out["kappa_dual"] = kb.dual
    out["kappa_balanced"] = kb.balanced
    out["kappa_gap"] = (kb.upper - kb.lower) / kb.upper if kb.upper > 0 else 0.0
    out["kappa_steps"] = kb.steps
    out["c_rank"] = rank
    out["c_sigma1"] = float(s[0]) if s.size else 0.0
    out["c_frobenius"] = float(np.sqrt((s**2).sum()))
    return _SizeProblem(rank, kb, X0, Y0, Ur, sr, Vtr)


def _certify_cell(out: dict, q: QResidual, Cx, idx, size: _SizeProblem) -> None:
    """The rigorous columns of q, tau0 and kappa(C) (numeric.geometry.bounds)."""
    assert q.lower is not None and q.upper is not None      # certified: exact endpoints
    out["q_residual_lower_cert"] = float_down(q.lower)
    out["q_residual_upper_cert"] = float_up(q.upper)
    lo, hi = tau_enclosure(q.lower, q.upper)
    out["tau0_lower_cert"] = float_down(lo)
    out["tau0_upper_cert"] = float_up(hi)
    out["kappa_lower_cert"] = float_down(double_difference_exact(Cx, idx) / 4)
    if size.rank:
        tail = tail_upper(Cx - exact_image(size.X0) @ exact_image(size.Y0).T)
    else:
        tail = tail_upper(Cx)
    out["kappa_upper_cert"] = float_up(kappa_upper(size.X0, size.Y0, size.kb, tail))


def _family_member(out: dict, r: int, C: np.ndarray, Cx, size: _SizeProblem) -> None:
    """The J.2 columns of rank r: size and residual of the same ``T_r`` (H.2)."""
    key = f"svd_r{r}"
    certify = Cx is not None
    if r >= size.rank:
        out[f"{key}_kappa"] = size.kb.upper
        out[f"{key}_kappa_lower"] = size.kb.lower
        out[f"{key}_tau"] = 0.0
        out[f"{key}_shape"] = 0.5 * size.rank * math.log1p(size.kb.upper)
        if certify:
            # the family member is T = C itself: q(C - C) = 0 exactly.
            out[f"{key}_tau_cert"] = 0.0
            out[f"{key}_kappa_cert"] = out["kappa_upper_cert"]
        return
    # T_r: the rank-r truncated SVD of the canonical C (J.2); the same T
    # for size and residual (H.2), bit-identical for inputs that round alike.
    root_r = np.sqrt(size.sr[:r])
    Xr, Yr = size.Ur[:, :r] * root_r, size.Vtr[:r].T * root_r
    Rx = Cx - exact_image(Xr) @ exact_image(Yr).T if certify else None
    qr = residual_q(C - Xr @ Yr.T, exact=Rx)
    kbr = kappa_factors(Xr, Yr)
    out[f"{key}_kappa"] = kbr.upper
    out[f"{key}_kappa_lower"] = kbr.lower
    out[f"{key}_tau"] = tau_of_q(qr.value)
    out[f"{key}_shape"] = 0.5 * r * math.log1p(kbr.upper)
    if certify:
        assert qr.lower is not None and qr.upper is not None
        out[f"{key}_tau_cert"] = float_up(tau_enclosure(qr.lower, qr.upper)[1])
        out[f"{key}_kappa_cert"] = float_up(kappa_upper(Xr, Yr, kbr, arb(0)))

"""Interaction geometry: intrinsic C, its canonical form, kappa/q/tau, native features.

Owns the descriptors of one cell, one concept per module:

- ``interaction``: the visible interaction ``C = P_m H P_n`` and its canonical
  (dyadic-grid) form;
- ``residual``: the residual q as a maximum cycle mean, ``tau = 2 tanh(q/4)``,
  the double difference;
- ``meb``: the minimum-enclosing-ball solver;
- ``gauge``: gauge optimisation, the bracket on kappa;
- ``bounds``: the rigorous descriptor bounds (``exact.matrix``, fmpq, arb);
- ``shape``: the J.2 logit-SVD family's ranks and shape scores;
- ``descriptors``: the per-cell assembly ``cell_descriptors``;
- ``native``: the native (coordinate-dependent) features and the gauge audit;
- ``blas``: the scoped one-BLAS-thread limit;
- ``core``: the former single module, re-exporting the names above (one release).

May import: numpy, threadpoolctl, python-flint, ``exact`` and the float
helpers of ``numeric.heads`` and ``numeric.search``. Never ``numeric.panel``.
"""
from numeric.runtime import one_blas_thread
from numeric.geometry.descriptors import cell_descriptors
from numeric.geometry.gauge import KappaBracket, kappa_factors
from numeric.geometry.interaction import canonical_interaction, visible_interaction
from numeric.geometry.meb import meb_radius
from numeric.geometry.native import AUDIT_RATIOS, diagonal_gauge, geometric_gauge, native_features
from numeric.geometry.residual import QResidual, double_difference, residual_q, tau_of_q
from numeric.geometry.shape import SVD_RANKS, intrinsic_profile_score, shape_score

__all__ = [
    "SVD_RANKS", "cell_descriptors", "intrinsic_profile_score", "shape_score",
    "visible_interaction", "canonical_interaction", "residual_q", "QResidual", "tau_of_q",
    "double_difference", "kappa_factors", "KappaBracket", "meb_radius", "one_blas_thread",
    "native_features", "diagonal_gauge", "geometric_gauge", "AUDIT_RATIOS",
]

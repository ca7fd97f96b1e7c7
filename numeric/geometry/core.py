"""Former single module of ``numeric.geometry``, kept for one release.

Every public name it had lives in one of the concept modules now (see the
package docstring and docs/geometry.md); this module re-exports them so that
``from numeric.geometry.core import cell_descriptors`` keeps working. New code
imports from ``numeric.geometry``. Removed: the hand-written exact arithmetic
(``IntRat``, ``tanh_bounds``), replaced by ``exact.matrix.ExactMatrix`` and
arb in :mod:`numeric.geometry.bounds`.
"""
from numeric.runtime import one_blas_thread
from numeric.geometry.descriptors import RANK_RTOL, cell_descriptors
from numeric.geometry.gauge import KappaBracket, kappa_factors
from numeric.geometry.interaction import CANON_BITS, canonical_interaction, visible_interaction
from numeric.geometry.meb import meb_radius
from numeric.geometry.residual import QResidual, double_difference, residual_q, tau_of_q
from numeric.geometry.shape import SVD_RANKS, intrinsic_profile_score, shape_score

__all__ = [
    "SVD_RANKS",
    "RANK_RTOL",
    "CANON_BITS",
    "cell_descriptors",
    "visible_interaction",
    "canonical_interaction",
    "residual_q",
    "QResidual",
    "double_difference",
    "kappa_factors",
    "KappaBracket",
    "meb_radius",
    "tau_of_q",
    "shape_score",
    "intrinsic_profile_score",
    "one_blas_thread",
]

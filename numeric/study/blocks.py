"""The study's feature blocks (docs/study.md) as column lists.

A block is a tuple of column names of the panel table. ``B0 < B1 < B2`` are
nested baselines; ``G`` (the paper's native block) and ``I`` (the intrinsic
block) are the blocks under test. Categorical columns (family, domain) enter
as one-hot indicators; a column constant over the study's rows carries no
information and is dropped by the model's scaler (zero variance).

>>> "b1_logit_rank" in block_columns("B1") and "b0_depth" in block_columns("B1") and "family" in B0
True
>>> block_columns("B1+G") == block_columns("B1") + G
True
"""
from __future__ import annotations

__all__ = ["B0", "B1_EXTRA", "WEIGHT", "B2_EXTRA", "G", "I", "CATEGORICAL", "BLOCKS", "block_columns", "gauged_column"]

#: One-hot categorical columns of B0: family and domain.
CATEGORICAL = ("family", "b0_domain")
#: Structural and nuisance columns (relative depth, retained prefix mass, n; family and domain one-hot).
B0 = ("b0_depth", "mass", "n_cols") + CATEGORICAL
WEIGHT = tuple(f"b1_{m}_{s}" for m in ("wq", "wk", "wqk")
                for s in ("sv1", "sv2", "sv3", "stable_rank", "eff_rank"))
_CLOUD = tuple(f"b1_{c}_{s}" for c in ("q", "k") for s in ("norm_mean", "cos_mean", "anisotropy"))
_CENTRED = ("b1_dc_sv1", "b1_dc_sv2", "b1_dc_sv3", "b1_dc_stable_rank", "b1_dc_eff_rank", "b1_dc_top1_share")
_RESIDUAL = ("b1_logit_err_r1", "b1_logit_err_r2", "b1_logit_err_r4", "b1_logit_err_r8")
_CONCENTRATION = tuple(f"b1_{s}_{t}" for t in ("min", "q10", "q50") for s in ("entropy", "top1", "top4")) + (
    "b1_support_max", "b1_support_q90", "b1_support_q50")
#: B1 adds weight spectra, query/key statistics, double-centred logits, the
#: logit-residual profile, the logit-rank proxy and the concentration descriptors.
B1_EXTRA = WEIGHT + _CLOUD + _CENTRED + _RESIDUAL + ("b1_logit_rank",) + _CONCENTRATION
#: B2 adds the normalised attention spectrum.
B2_EXTRA = ("b2_a_sv2", "b2_a_sv4", "b2_a_sv8", "b2_a_sv16", "b2_a_sv32", "b2_a_stable_rank", "b2_a_eff_rank")
#: The paper's historical native block (numeric.geometry.native).
G = ("svd_interaction_dim", "log1p_gamma_native", "width_spectrum_gap", "native_shape", "native_residual_tau")
#: The intrinsic block; the profile score enters as its finite value and a finiteness flag.
I = ("kappa_lower", "kappa_upper", "q_residual", "tau0", "profile_score", "profile_finite")

BLOCKS = {"B0": B0, "B1": B0 + B1_EXTRA, "B2": B0 + B1_EXTRA + B2_EXTRA, "G": G, "I": I}


def block_columns(spec: str) -> tuple:
    """The columns of ``"B1+G+I"``-style specs (blocks joined by ``+``, in order)."""
    cols: list[str] = []
    for name in spec.split("+"):
        if name not in BLOCKS:
            raise KeyError(f"unknown block {name!r}")
        cols.extend(c for c in BLOCKS[name] if c not in cols)
    return tuple(cols)


def gauged_column(col: str, ratio: int) -> str | None:
    """The panel column holding ``col`` recomputed under the diagonal gauge of ``ratio``
    (None: not recomputed under the gauge; the ungauged value stands).

    >>> gauged_column("native_shape", 4), gauged_column("q_residual", 16), gauged_column("kappa_upper", 4)
    ('native_shape_g4', 'iaudit_q_residual_g16', 'iaudit_kappa_upper_g4')
    >>> all(gauged_column(c, 16) for c in G + I)
    True
    """
    if col in G and col != "log1p_gamma_native":
        return f"{col}_g{ratio}"
    if col == "log1p_gamma_native":
        return f"gamma_native_g{ratio}"   # log1p applied by the caller
    if col in I:
        return f"iaudit_{col}_g{ratio}"   # profile_*: computed by numeric.study.load from the gauged profile
    return None

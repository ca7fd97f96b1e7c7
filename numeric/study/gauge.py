"""The gauge audit at study resolution (paper L.7).

Each fitted model that uses G or I is cross-fitted on the panel's columns and
then also fed, on its held-out rows, the same columns recomputed under the
diagonal Q/K gauges of condition ratio 4 and 16 (``numeric.geometry.native``
and ``numeric.panel.features``). The audit reports how far the held-out
predictions move against the study resolution ``RESOLUTION`` (0.02 in U/n).
A gauge leaves A unchanged, so an intrinsic block must not move them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numeric.geometry import AUDIT_RATIOS
from numeric.study.blocks import block_columns, gauged_column
from numeric.study.data import StudyData
from numeric.study.fit import FOLDS, cross_fit
from numeric.study.intervals import RESOLUTION

__all__ = ["RESOLUTION", "GAUGE_MODELS", "GaugeMove", "replacement", "gauge_audit", "missing_gauge_columns"]

#: Models audited: every model of the comparisons that contains G or I.
GAUGE_MODELS = ("B0+G", "B1+G", "B2+G", "B0+I", "B1+I", "B1+G+I")


@dataclass(frozen=True)
class GaugeMove:
    """Held-out prediction moves of one model under one gauge ratio."""

    model: str
    ratio: int
    max_move: float
    median_move: float
    over_resolution: float   # fraction of cells moved by more than RESOLUTION
    max_feature_move: float  # largest move of an audited input column


def replacement(data: StudyData, cols, ratio: int) -> dict:
    """``{column: values under the gauge}`` for the audited columns among ``cols``."""
    out = {}
    for c in cols:
        g = gauged_column(c, ratio)
        if g is None:
            continue
        v = data.numeric[g]
        out[c] = np.log1p(v) if c == "log1p_gamma_native" else v
    return out


def missing_gauge_columns(data: StudyData, models=GAUGE_MODELS, ratios=AUDIT_RATIOS) -> list:
    """The gauged columns the audit needs and the table lacks (a shipped table may not carry them)."""
    need = {gauged_column(c, r) for spec in models for c in block_columns(spec) for r in ratios}
    return sorted(g for g in need if g is not None and g not in data.numeric)


def gauge_audit(data: StudyData, models=GAUGE_MODELS, ratios=AUDIT_RATIOS, folds: int = FOLDS) -> list:
    """Prediction moves of each model under each gauge (per family cross-fitting, source folds); empty when
    the table lacks a gauged column (``missing_gauge_columns``)."""
    out: list = []
    if missing_gauge_columns(data, models, ratios):
        return out
    for spec in models:
        cols = block_columns(spec)
        for ratio in ratios:
            rep = replacement(data, cols, ratio)
            moves = np.zeros(len(data))
            for f in np.unique(data.families):
                r = np.flatnonzero(data.families == f)
                if np.unique(data.sources[r]).size < 2:
                    continue   # one source: nothing to cross-fit, no move measured
                cf = cross_fit(data.matrix(cols, r), data.y[r], data.sources[r], folds,
                               X_alt=data.matrix(cols, r, replace=rep))
                moves[r] = np.abs(cf.pred_alt - cf.pred)
            feat = max((float(np.nanmax(np.abs(v - data.numeric[c]))) for c, v in rep.items()), default=0.0)
            out.append(GaugeMove(spec, int(ratio), float(moves.max()), float(np.median(moves)),
                                 float(np.mean(moves > RESOLUTION)), feat))
    return out

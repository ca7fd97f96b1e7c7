"""The study's other targets (paper L.6): the attention-SVD constructive budget
(``numeric.study.svd_target``) and the native-causal cells of the decoder families
(``numeric.study.native_target``), each with its comparisons and the calibrated intervals of
``numeric.study.compare``. Reported in ``study.json`` under ``targets`` and in ``study.md``'s
section "Other targets"; a target the panel cannot give has its rows with a one-line reason.
"""
from __future__ import annotations

from numeric.study.blocks import block_columns
from numeric.study.compare import Comparison, ComparisonResult, compare
from numeric.study.data import StudyData
from numeric.study.native_target import native_comparisons, native_data
from numeric.study.svd_target import svd_data

__all__ = ["svd_comparisons", "other_targets"]


def svd_comparisons() -> list:
    """The comparisons on the attention-SVD budget (names prefixed ``attention-SVD budget:``)."""
    def c(base, added, what):
        add = tuple(x for x in block_columns(added) if x not in block_columns(base))
        return Comparison(f"attention-SVD budget: {base} vs {base}+{what}", block_columns(base), add)

    return [c("B1", "G", "G"), c("B1", "I", "I"), c("B1", "B2", "attention spectra (B2)")]


def _skipped(comparisons, reason: str, replicates: int, seed: int) -> list:
    return [ComparisonResult(c, {}, replicates, seed, reason) for c in comparisons]


def other_targets(data: StudyData, audited, *, eps, target_values, **kw) -> list:
    """``[{"target", "cells", "note", "results"}]`` of the two targets; ``audited``: ``[(panel dir, row)]`` of
    the audited rows at ``eps``; ``target_values``: rows -> the study's target; ``kw``: ``compare``'s options
    (replicates, seed, folds, jobs, permutations)."""
    svd = svd_data(data, audited, eps)
    out = [{"target": "k_svd / n: the attention-SVD constructive budget over the keys", "cells": len(svd),
            "note": "recomputed from the head files the audit binds by hash; the table's svd_budget checked",
            "results": compare(svd, svd_comparisons(), **kw)}]
    native, note = native_data(data, audited, target_values)
    comps = native_comparisons()
    results = (_skipped(comps, f"skipped: {note}", kw.get("replicates", 0), kw["seed"]) if native is None
               else compare(native, comps, **kw))
    out.append({"target": "the study's target of the native-causal cells (decoders), common-prefix predictors",
                "cells": 0 if native is None else len(native), "note": note, "results": results})
    return out

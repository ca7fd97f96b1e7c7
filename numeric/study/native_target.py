"""Native-causal targets of the decoder families (paper L.6: "common-prefix geometry also adds no detectable
information to native-causal GPT-2/Qwen2 targets, while attention spectra do add information there").

A native-causal cell (``python -m numeric panel --native``; ``numeric.heads.blocks.native_block``) is the
full lower-triangular causal matrix of the ``P + B`` window whose common-prefix block is the decoder's
study cell. It is bracketed and verified by the exact tier like every other cell (the audit re-verifies
it; its ranks are the exact pass's) but carries no geometry columns (paper L.1). Here its target (the
study's ``--target`` of its own L, U and n) is predicted from the predictors of its common-prefix cell:
the same model, layer, head and source, paired by those labels. The comparisons: common-prefix geometry
after B1 and after B2 (``B1 vs B1+G``, ``B2 vs B2+G``), and the common-prefix attention spectra after B1
(``B1 vs B2``: the paper's "attention spectra allowed").

A panel without native-causal cells, or whose native cells have no common-prefix partner among the study's
rows (a partner the decoder screens dropped), gets these rows skipped with a one-line reason; a native cell
without a partner is counted in the target's note, never dropped silently.
"""
from __future__ import annotations

import numpy as np

from numeric.study.blocks import block_columns
from numeric.study.compare import Comparison
from numeric.panel.schema import PanelRow
from numeric.study.data import StudyData

__all__ = ["NATIVE", "native_comparisons", "native_data", "pair_key"]

NATIVE = "native-causal"


def native_comparisons() -> list:
    """The comparisons on native-causal targets (names prefixed ``native-causal:``)."""
    def c(base, added, what):
        add = tuple(x for x in block_columns(added) if x not in block_columns(base))
        return Comparison(f"native-causal: {base} vs {base}+{what}", block_columns(base), add)

    return [c("B1", "G", "G"), c("B2", "G", "G"), c("B1", "B2", "attention spectra (B2)")]


def pair_key(row: PanelRow) -> tuple:
    """The labels that pair a native-causal cell with its common-prefix cell."""
    return (row.model, row.family, row.layer, row.head, row.source)


def native_data(data: StudyData, audited, target_values) -> tuple[StudyData | None, str]:
    """(the table of native-causal targets with their common-prefix predictors, or None; a one-line note).

    ``audited``: ``[(panel dir, row)]`` of every audited row at the study's tolerance; ``target_values``:
    ``rows -> array`` of the study's target (``numeric.study.load.target_values`` with its ``--target``)."""
    native = [r for _, r in audited if r.native]
    if not native:
        return None, ("the panel has no native-causal cells (run the decoder families with "
                      "python -m numeric panel --native)")
    index = {}
    by_id = {str(c): i for i, c in enumerate(data.cell_ids)}
    for _, r in audited:
        if r.cell_kind == "prefix-block" and str(r.cell_id) in by_id:
            index[pair_key(r)] = by_id[str(r.cell_id)]
    paired = [(r, index[pair_key(r)]) for r in native if pair_key(r) in index]
    unpaired = len(native) - len(paired)
    note = f"{len(paired)} native-causal cells paired with their common-prefix cells"
    if unpaired:
        note += f"; {unpaired} without a common-prefix study cell (dropped by a decoder screen?) not used"
    if not paired:
        return None, (f"no native-causal cell has a common-prefix partner among the study's cells "
                      f"({len(native)} unpaired)")
    idx = np.array([i for _, i in paired])
    rows = [r for r, _ in paired]
    sub = StudyData({k: v[idx] for k, v in data.numeric.items()}, {k: v[idx] for k, v in data.categorical.items()},
                    np.asarray(target_values(rows), dtype=np.float64), data.sources[idx], data.heads[idx],
                    data.families[idx], np.array([str(r.cell_id) for r in rows]))
    return sub, note

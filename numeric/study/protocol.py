"""The study's comparisons (issue 15 item 4; the protocol in docs/study.md).

Each comparison is ``base`` vs ``base + block`` with the blocks of
``numeric.study.blocks``. The placebo block is G with its rows permuted within
each family (a fixed permutation drawn from the study's seed): it keeps G's
marginal distribution and destroys its link to the cell.

>>> [c.name for c in comparisons()][:3]
['B1 vs B1+G', 'B2 vs B2+G', 'B0 vs B0+G']
"""
from __future__ import annotations

import numpy as np

from numeric.study.blocks import G, block_columns
from numeric.study.compare import Comparison
from numeric.study.data import StudyData

__all__ = ["PLACEBO", "PRIMARY", "comparisons", "with_placebo"]

#: Prefix of the placebo columns (G permuted within family).
PLACEBO = "placebo:"
#: The paper's primary comparison (Table 4).
PRIMARY = "B1 vs B1+G"


def with_placebo(data: StudyData, seed: int) -> StudyData:
    """``data`` plus the row-permuted G columns (one permutation per family, all G columns alike)."""
    rng = np.random.default_rng(seed)
    perm = np.arange(len(data))
    for f in np.unique(data.families):
        idx = np.flatnonzero(data.families == f)
        perm[idx] = idx[rng.permutation(idx.size)]
    for c in G:
        data = data.with_column(PLACEBO + c, data.numeric[c][perm])
    return data


def _c(base: str, added: str, name: str | None = None, **kw) -> Comparison:
    add = tuple(x for x in block_columns(added) if x not in block_columns(base))
    return Comparison(name or f"{base} vs {base}+{added}", block_columns(base), add, **kw)


def comparisons() -> list:
    """The comparisons of the protocol, primary first."""
    placebo = tuple(PLACEBO + c for c in G)
    return [
        _c("B1", "G"), _c("B2", "G"), _c("B0", "G"),
        Comparison("B1 vs B1+placebo G", block_columns("B1"), placebo),
        _c("B1", "G", "B1 vs B1+G, within-head demeaned", demean=True),
        _c("B1", "G", "B1 vs B1+G, leave one head out", clusters="head"),
        _c("B1", "I"), _c("B0", "I"), _c("B1+G", "I"),
        _c("B1", "I", "B1 vs B1+I, within-head demeaned", demean=True),
        _c("B1", "I", "B1 vs B1+I, leave one head out", clusters="head"),
    ]

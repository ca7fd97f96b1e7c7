"""The study's comparisons and its reading rule (docs/study.md).

Each comparison is ``base`` vs ``base + block`` with the blocks of
``numeric.study.blocks``. The placebo rows add the block permuted
(``numeric.study.compare.permuted``), ``PERMUTATIONS`` times from their own
random stream: rows within a family (the paper's placebo), head means between
heads (the head-level placebo: it keeps the block's power to tell heads apart
and loses its link to the target), and within each head over its sources
(paper L.6's within-head permutation of G against B0).

The reading rule (``reading``): a block's gain after B1 counts as geometry
only when (1) its primary interval excludes 0 from below, (2) the head-level
placebo's does not (head identity alone does not produce a gain), and (3) the
within-head demeaned row agrees (its interval excludes 0 from below too).

>>> [c.name for c in comparisons()][:3]
['B1 vs B1+G', 'B2 vs B2+G', 'B0 vs B0+G']
"""
from __future__ import annotations

from numeric.study.blocks import block_columns
from numeric.study.compare import AGGREGATE, Comparison

__all__ = ["PRIMARY", "comparisons", "reading", "placebo_name", "demeaned_name"]

#: The paper's primary comparison (Table 4).
PRIMARY = "B1 vs B1+G"


def _c(base: str, added: str, name: str | None = None, **kw) -> Comparison:
    add = tuple(x for x in block_columns(added) if x not in block_columns(base))
    return Comparison(name or f"{base} vs {base}+{added}", block_columns(base), add, **kw)


def placebo_name(block: str, mode: str = "heads", base: str = "B1") -> str:
    what = {"heads": "head means permuted", "rows": "rows permuted", "within-head": "permuted within heads"}[mode]
    return f"{base} vs {base}+placebo {block} ({what})"


def demeaned_name(block: str) -> str:
    return f"B1 vs B1+{block}, within-head demeaned"


def comparisons() -> list:
    """The comparisons of the protocol, primary first."""
    out = [_c("B1", "G"), _c("B2", "G"), _c("B0", "G")]
    for block in ("G", "I"):
        if block == "I":
            out += [_c("B1", "I"), _c("B0", "I"), _c("B1+G", "I")]
        out += [_c("B1", block, placebo_name(block), placebo="heads"),
                _c("B1", block, demeaned_name(block), demean=True),
                _c("B1", block, f"B1 vs B1+{block}, leave one head out", clusters="head")]
        if block == "G":
            out += [_c("B1", "G", placebo_name("G", "rows"), placebo="rows"),
                    _c("B0", "G", "B0 vs B0+G, leave one head out", clusters="head"),
                    _c("B0", "G", placebo_name("G", "within-head", "B0"), placebo="within-head")]
    return out


def _gain(result) -> bool | None:
    if result is None or result.reason:
        return None
    return result.estimates[AGGREGATE].delta_ci[0] > 0


def reading(results, block: str) -> str:
    """The reading rule's verdict on ``block`` (G or I) after B1, from the results' aggregates."""
    by = {r.comparison.name: r for r in results}
    primary, placebo, demeaned = (_gain(by.get(n)) for n in
                                  (f"B1 vs B1+{block}", placebo_name(block), demeaned_name(block)))
    if primary is None:
        return "not run"
    if not primary:
        return "no gain"
    if placebo is None or demeaned is None:
        return "gain, not attributable: a head analysis was skipped"
    if placebo:
        return "gain, not counted: the head-level placebo gains too (head identity)"
    if not demeaned:
        return "gain, not counted: the within-head demeaned row does not agree"
    return "gain counted as geometry"

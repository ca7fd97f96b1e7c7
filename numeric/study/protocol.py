"""The study's comparisons and its reading rule (docs/study.md).

Each comparison is ``base`` vs ``base + block`` with the blocks of
``numeric.study.blocks``. The placebo rows add the block permuted
(``numeric.study.compare.permuted``), ``PERMUTATIONS`` times from their own
random stream: rows within a family (the paper's placebo), head means between
heads (the head-level placebo: it keeps the block's power to tell heads apart
and loses its link to the target), and within each head over its sources
(paper L.6's within-head permutation of G against B0).

The reading rule (``reading``), on the study's one aggregate (rho, the
equal-weighted mean of the family rhos, and its calibrated interval), rests
on the within-head demeaned row: a block's gain after B1 counts as geometry
exactly when the demeaned row's rho interval excludes 0 from below.
Demeaning removes every head-level column and the head means of the target,
so head identity alone can never pass it, while a genuine within-head gain
passes it whatever else the block tells about heads. The primary row
(B1 vs B1+G) is read beside it: a primary gain that the demeaned row does not
confirm is "not counted (head-level only)". The head-level placebo is
reported, not part of the rule: whether the placebo's own interval excludes 0
says what head identity can give, not whether the block beats it.

>>> [c.name for c in comparisons()][:3]
['B1 vs B1+G', 'B2 vs B2+G', 'B0 vs B0+G']
"""
from __future__ import annotations

from scipy import stats

from numeric.study.blocks import block_columns
from numeric.study.compare import AGGREGATE, Comparison

__all__ = ["PRIMARY", "comparisons", "reading", "placebo_name", "demeaned_name", "COUNTED", "power_at",
           "POWER_RHO"]

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


#: The verdict of a gain that the rule counts.
COUNTED = "gain counted as geometry"
#: The relative gain at which the study states each reading's power (the self-check's planted gain).
POWER_RHO = 0.08


def _gain(result, family: str = AGGREGATE) -> bool | None:
    if result is None or result.reason or family not in result.estimates:
        return None
    return result.estimates[family].rho_ci[0] > 0


def reading(results, block: str, family: str = AGGREGATE) -> str:
    """The reading rule's verdict on ``block`` (G or I) after B1, on rho's interval of ``family``
    (default the aggregate, the study's reading; a family's is that family's rows alone)."""
    by = {r.comparison.name: r for r in results}
    primary, demeaned = (_gain(by.get(n), family) for n in (f"B1 vs B1+{block}", demeaned_name(block)))
    if demeaned:
        return COUNTED
    if primary is None and demeaned is None:
        return "not run"
    if not primary:
        return "no gain"
    if demeaned is None:
        return "gain, not attributable: the within-head demeaned row was skipped"
    return "gain, not counted: the within-head demeaned row does not agree (head-level only)"


def readings(results, blocks=("G", "I")) -> dict:
    """``{block: {"verdict", "rho", "rho_ci", "power", "primary": {...}, "families": {family: {...}}}}``: the
    reading rule's verdict on each block after B1 for the aggregate (the study's reading) and for each
    family (that family's rows alone), each beside the rho, interval and power at ``POWER_RHO``
    (``power_at``) of the row the rule rests on (the demeaned row) and of the primary row."""
    by = {r.comparison.name: r for r in results}
    out = {}
    for b in blocks:
        rows = [by.get(n) for n in (demeaned_name(b), f"B1 vs B1+{b}")]
        ests = [{} if r is None or r.reason else r.estimates for r in rows]

        def stats_of(e):
            return {"rho": None if e is None else e.rho, "rho_ci": None if e is None else list(e.rho_ci),
                    "power": None if e is None else power_at(e)}

        def one(f, ests=ests, b=b):
            return ({"verdict": reading(results, b, f)} | stats_of(ests[0].get(f))
                    | {"primary": stats_of(ests[1].get(f))})
        fams = [f for f in (ests[0] or ests[1]) if f != AGGREGATE]
        out[b] = one(AGGREGATE) | {"families": {f: one(f) for f in fams}}
    return out


def power_at(estimate, rho: float = POWER_RHO) -> float:
    """The power of "lower limit > 0" at a true relative gain ``rho``, from the row's own calibrated
    standard error of rho and its degrees of freedom (the self-check measures that this se matches
    the sampling sd: ``--calibrate``'s se/sd): ``P(T > t_{0.975} - rho / se)``, T ~ t(df).

    >>> from numeric.study.intervals import Estimate
    >>> e = Estimate(1.0, 1.0, 0.0, 0.0, (0, 0), (0, 0), 0.0, 30, "", rho_se=0.02)
    >>> round(power_at(e), 2)
    0.97
    """
    se, df = float(getattr(estimate, "rho_se", float("nan"))), max(int(estimate.df), 1)
    if not se > 0:
        return float("nan")
    return float(stats.t.sf(stats.t.ppf(0.975, df) - rho / se, df))

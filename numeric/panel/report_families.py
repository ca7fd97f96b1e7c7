"""The report's family comparison: the head screen, the architecture audit (L.4) and Table 1 (L.1-L.2).

All from checked rows (``numeric.panel.audit``: ranks and verdicts of the
exact pass) at the report's tolerance, common-prefix and full cells only
(native-causal cells are integrity cells, counted apart). A *family* is one
model: its ``family`` column (``encoder``, ``decoder-gpt2``, ``decoder-qwen2``,
``vit``) and its name; two models are never pooled (the paper's ViT arms).

- Screen: cells per family dropped by the retained-mass threshold and by the
  locality screen (``docs/panel.md``).
- Architecture audit: median ``U/n`` and ``L/n`` (n = min(rows, columns)) per
  family, each with a 95 % percentile bootstrap interval over sources (the
  sources are resampled with replacement, ``BOOTSTRAP`` draws, seed
  ``BOOTSTRAP_SEED``), beside the paper's figures.
- Identification gate: resolved fraction (L = U); ordering coverage, the
  fraction of the family's cell pairs whose brackets do not overlap (so their
  order is certified); certified ties (both resolved at one value) shown
  apart; the gate passes when both fractions reach the threshold (the
  paper's 50 % by default). Coverage is also given without the
  decoded-inverse lower family (``numeric.panel.ablation``).
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import combinations

import numpy as np

from numeric.panel.ablation import DECODED, ablated_lowers
from numeric.panel.schema import STATUSES

__all__ = ["GATE", "BOOTSTRAP", "BOOTSTRAP_SEED", "families_section", "GateRow", "gate_table", "bootstrap_median",
           "ordering"]

GATE = 0.5              # the paper's pre-specified 50 % (section 6, L.2)
BOOTSTRAP = 2000        # resamples of the sources
BOOTSTRAP_SEED = 20261130
CI_LEVEL = 0.95
NATIVE = "native-causal"
OK = STATUSES[0]        # a searched cell (the other statuses: dropped by a screen)
#: The paper's common-shape figures (Appendix L.4) and Table 1 summary (section 6, L.2).
PAPER_N = 128
PAPER_U_OVER_N = {"encoder": "0.14-0.17", "vit": "0.14-0.17", "decoder": "0.04-0.05"}
PAPER_U_OVER_L = "2.6-3.8 across arms"
PAPER_RESOLVED = {"encoder": "219/512 (43 %), below the gate"}


def _label(r) -> str:
    return f"{r.family} ({r.model})"


def _paper_key(family: str) -> str:
    return "decoder" if family.startswith("decoder") else family


def _common_n(rs) -> int | None:
    """The n = min(rows, columns) shared by all of a family's cells, or None when they differ."""
    ns = {min(int(r.n_rows), int(r.n_cols)) for r in rs}
    return ns.pop() if len(ns) == 1 else None


def bootstrap_median(values_by_source: dict, rng: np.random.Generator, draws: int = BOOTSTRAP) -> tuple:
    """(median, low, high): the median over all cells, and its percentile interval when
    the sources are resampled with replacement (``values_by_source``: source -> values)."""
    groups = [np.asarray(v, dtype=float) for v in values_by_source.values() if len(v)]
    flat = np.concatenate(groups)
    med = float(np.median(flat))
    if len(groups) < 2:
        return med, None, None
    stats = np.empty(draws)
    for b in range(draws):
        pick = rng.integers(0, len(groups), size=len(groups))
        stats[b] = np.median(np.concatenate([groups[i] for i in pick]))
    tail = (1 - CI_LEVEL) / 2 * 100
    return med, float(np.percentile(stats, tail)), float(np.percentile(stats, 100 - tail))


def ordering(brackets: list) -> tuple[int, int, int]:
    """(pairs, pairs with disjoint brackets, certified ties) over ``brackets`` [(L, U)]."""
    pairs = disjoint = ties = 0
    for (l1, u1), (l2, u2) in combinations(brackets, 2):
        pairs += 1
        if u1 < l2 or u2 < l1:
            disjoint += 1
        elif l1 == u1 == l2 == u2:
            ties += 1
    return pairs, disjoint, ties


def _by_family(rows) -> dict:
    fams = defaultdict(list)
    for r in rows:
        fams[_label(r)].append(r)
    return dict(sorted(fams.items()))


def _screens(all_rows) -> list:
    cells = {}
    for r in all_rows:
        if r.cell_kind == NATIVE:
            continue
        cells[(_label(r), r.layer, r.head, str(r.source))] = r.status
    counts: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    for (fam, *_), status in cells.items():
        counts[fam][status] += 1
    if not any(_paper_key(fam) == "decoder" for fam in counts):
        L = ["### Cells per family\n",
             "The head screens (retained mass, local heads; `docs/panel.md`) are for decoders; "
             "this run has none.\n",
             "| family | cells | searched |", "|---|---:|---:|"]
        L += [f"| {fam} | {sum(c.values())} | {c[OK]} |" for fam, c in sorted(counts.items())]
        return L + [""]
    L = ["### Head screen (decoders; `docs/panel.md`)\n",
         "| family | cells | searched | dropped: retained mass | dropped: local head |", "|---|---:|---:|---:|---:|"]
    for fam, c in sorted(counts.items()):
        total = sum(c.values())
        L.append(f"| {fam} | {total} | " + " | ".join(str(c[status]) for status in STATUSES) + " |")
    return L + [""]


def _ci(x) -> str:
    med, lo, hi = x
    return f"{med:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None else f"{med:.3f} (one source: no interval)"


def _audit(fams: dict, rng) -> list:
    """The audit table; the paper's ``U/128`` column (its common 128 x 128 shape, L.4) only beside a family
    whose cells are all at n = 128, and named in a sentence when no family is."""
    paper_n = {fam: _common_n(rs) == PAPER_N for fam, rs in fams.items()}
    with_paper = any(paper_n.values())
    L = ["### Architecture audit at a common shape (Appendix L.4)\n",
         "Median over the family's cells; in brackets the 95 % bootstrap interval over sources "
         f"({BOOTSTRAP} resamples). n = min(rows, columns). U is a checked constructive budget, not a minimum.\n"]
    if not with_paper:
        shapes = ", ".join(sorted({f"{r.n_rows} x {r.n_cols}" for rs in fams.values() for r in rs}))
        L.append(f"The paper's common-shape figures are U/{PAPER_N} at {PAPER_N} x {PAPER_N} "
                 f"(encoder and vision operators {PAPER_U_OVER_N['encoder']}, decoder blocks "
                 f"{PAPER_U_OVER_N['decoder']}); this run's shape ({shapes}) is another, so they are not "
                 "set beside it.\n")
    L += ["| family | shape | cells | sources | median U/n | median L/n |" + (f" paper U/{PAPER_N} |" if with_paper
                                                                              else ""),
          "|---|---|---:|---:|---:|---:|" + ("---|" if with_paper else "")]
    for fam, rs in fams.items():
        fam_shapes = sorted({f"{r.n_rows} x {r.n_cols}" for r in rs})
        by_src_u, by_src_l = defaultdict(list), defaultdict(list)
        for r in rs:
            n = min(int(r.n_rows), int(r.n_cols))
            by_src_u[str(r.source)].append(r.U / n)
            by_src_l[str(r.source)].append(r.L / n)
        u, l_ = bootstrap_median(by_src_u, rng), bootstrap_median(by_src_l, rng)
        row = f"| {fam} | {', '.join(fam_shapes)} | {len(rs)} | {len(by_src_u)} | {_ci(u)} | {_ci(l_)} |"
        if with_paper:
            paper = PAPER_U_OVER_N.get(_paper_key(rs[0].family), "not given") if paper_n[fam] else \
                f"- (not at n = {PAPER_N})"
            row += f" {paper} |"
        L.append(row)
    return L + [""]


@dataclass(frozen=True)
class GateRow:
    """One family's row of Table 1: cells, resolved (L = U) and their fraction, ordered pairs (``pairs``, of
    them ``disjoint``, and ``ties``), ordering coverage, median U/L, cells whose lower certificate is the
    decoded inverse, whether it passes the gate; with the ablation, the coverage and resolved count without
    the decoded-inverse family (else None)."""

    family: str
    cells: int
    resolved: int
    resolved_fraction: float
    pairs: int
    disjoint: int
    ties: int
    coverage: float | None
    median_U_over_L: float | None
    decoded: int
    gate: bool
    coverage_without_decoded: float | None = None
    resolved_without_decoded: int | None = None


def gate_table(fams: dict, gate: float = GATE, lowers: dict | None = None) -> list[GateRow]:
    """One :class:`GateRow` per family: cells, resolved, ordering coverage (and without the decoded-inverse
    family when ``lowers`` {cell_id: Ablated} is given), ties, median U/L, gate."""
    out = []
    for fam, rs in fams.items():
        pairs, disjoint, ties = ordering([(r.L, r.U) for r in rs])
        resolved = sum(r.L == r.U for r in rs)
        ratios = [r.U / r.L for r in rs if r.L > 0]
        cov = disjoint / pairs if pairs else None
        row = GateRow(fam, len(rs), resolved, resolved / len(rs), pairs, disjoint, ties, cov,
                      statistics.median(ratios) if ratios else None,
                      sum(1 for r in rs if lowers and lowers[r.cell_id].source != "kept"),
                      cov is not None and resolved / len(rs) >= gate and cov >= gate)
        if lowers is not None:
            _, d2, _ = ordering([(lowers[r.cell_id].L, r.U) for r in rs])
            row = replace(row, coverage_without_decoded=d2 / pairs if pairs else None,
                          resolved_without_decoded=sum(lowers[r.cell_id].L == r.U for r in rs))
        out.append(row)
    return out


def _num(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _table1(table: list, gate: float, eps) -> list:
    L = [f"### Table 1: identification at eps = {eps}\n",
         f"Gate: resolved fraction >= {gate:.0%} and ordering coverage >= {gate:.0%} (`docs/panel.md`). "
         "Ordering coverage: of the family's cell pairs, those whose verified brackets do not overlap; "
         "ties: pairs resolved at the same rank (their equality is certified too, but they are not counted "
         "as ordered).\n",
         "| family | cells | resolved (L = U) | ordering coverage | ties | median U/L | gate |",
         "|---|---:|---:|---:|---:|---:|---|"]
    fail = "FAIL" if len(table) > 1 else "below"      # one family: a reading, not a verdict on the run
    for t in table:
        L.append(f"| {t.family} | {t.cells} | {t.resolved} ({_pct(t.resolved_fraction)}) | "
                 f"{_pct(t.coverage)} ({t.disjoint}/{t.pairs}) | {t.ties} | "
                 f"{_num(t.median_U_over_L)} | "
                 f"{'pass' if t.gate else fail} |")
    paper = (f"Paper (section 6, L.2): median U/L {PAPER_U_OVER_L}; BERT {PAPER_RESOLVED['encoder']}; the other "
             "four arms pass.\n")
    if len(table) < 2:
        return L + ["", "Overall gate: not assessed. The identification gate compares families (the paper's "
                    "arms: encoders, decoders, vision operators), and this run has one; the row above says "
                    "whether that family alone reaches the threshold. A panel of several families "
                    f"(`docs/panel.md`) is judged by it. {paper}"]
    overall = all(t.gate for t in table)
    return L + ["", f"Overall gate (every family passes): **{'pass' if overall else 'FAIL'}**. {paper}"]


def _without_decoded(table: list) -> list:
    L = ["### Ordering coverage without the decoded-inverse lower family\n",
         f"Each cell whose verified lower certificate is the decoded inverse (`{DECODED}`) takes instead the best "
         "certificate of another family: another tolerance of its file (eps' >= eps), or the trivial, Frobenius "
         "(K.2) or truncated pseudo-inverse (K.3) certificate rebuilt on its stored target and verified by the "
         "exact tier (`DIR/ablation/`). The budgeted row-set searches are not re-run, so these L are lower bounds "
         "on what a search without the family would certify (`numeric/panel/ablation.py`).\n",
         "| family | cells with a decoded-inverse L | resolved | resolved without | coverage | coverage without |",
         "|---|---:|---:|---:|---:|---:|"]
    for t in table:
        L.append(f"| {t.family} | {t.decoded} | {t.resolved} | {t.resolved_without_decoded} | "
                 f"{_pct(t.coverage)} | {_pct(t.coverage_without_decoded)} |")
    return L + [""]


def _native(all_rows, eps) -> list:
    nat = [r for r in all_rows if r.cell_kind == NATIVE and r.status == "ok"]
    if not nat:
        return []
    L = ["### Native-causal cells (integrity cells, paper L.1)\n",
         "| family | brackets | verified | median U/n at this eps |", "|---|---:|---:|---:|"]
    for fam, rs in _by_family(nat).items():
        at = [r.U / min(int(r.n_rows), int(r.n_cols)) for r in rs
              if r.verified and Fraction(r.eps) == eps]
        L.append(f"| {fam} | {len(rs)} | {sum(bool(r.verified) for r in rs)} | "
                 f"{f'{statistics.median(at):.3f}' if at else '-'} |")
    return L + [""]


def families_section(out, all_rows: list, verified_rows: list, eps: Fraction, gate: float = GATE) -> str:
    """The section's Markdown ('' when the rows have no verified cell at ``eps``)."""
    rows = [r for r in verified_rows if Fraction(r.eps) == eps and r.cell_kind != NATIVE]
    if not rows:
        return ""
    fams = _by_family(rows)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    lowers = ablated_lowers(out, rows, eps)
    table = gate_table(fams, gate, lowers)
    L = ["## Families\n"] + _screens(all_rows) + _audit(fams, rng) + _table1(table, gate, eps)
    L += _without_decoded(table) + _native(all_rows, eps)
    return "\n".join(L)

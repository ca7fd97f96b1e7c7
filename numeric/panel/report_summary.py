"""The report's summary of a panel: one record, rendered as the report's integrity and tolerance sections.

:class:`Summary` holds the per-eps figures over the verified brackets and the integrity counts of the
checked rows (``numeric.panel.audit``: ranks and verdicts from the exact pass). It renders itself:
``to_markdown()`` is the report's "Errors", "Integrity", per-tolerance and reference-tolerance sections
(``numeric.panel.report`` writes them into ``report.md``), ``to_dict()`` / ``to_json()`` the same
figures as JSON (rows by their JSON, ``numeric.panel.schema.PanelRow.to_json``).
"""
from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from fractions import Fraction
from typing import Any

from numeric.panel.schema import PanelRow

__all__ = ["REFERENCE_EPS", "MASS_DIGITS", "EpsSummary", "Summary", "summarise", "fmt"]

REFERENCE_EPS = Fraction(1, 4)  # the paper's table tolerance (section 6, Table 1)
#: Digits of the prefix mass in the tables (a fraction in [0, 1]).
MASS_DIGITS = 3


def fmt(x: object, digits: int = 2) -> str:
    """A table's figure: ``-`` for none, a float to ``digits`` places, anything else as text."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _slack(x: object) -> str:
    return f"{x:.2g}" if isinstance(x, float) else fmt(x)


def _bracket(r: PanelRow) -> tuple[int, int, float]:
    """(L, U, seconds) of a row of status ``ok`` (``numeric.panel.schema.check_row`` requires them)."""
    if r.L is None or r.U is None or r.seconds is None:
        raise TypeError(f"{r.cell_id}: a bracket row without L, U or seconds")
    return r.L, r.U, r.seconds


@dataclass(frozen=True)
class EpsSummary:
    """The verified brackets at one tolerance: their count, how many are closed (L = U), and the medians
    of L, U, U/L (None without a bracket of L > 0) and seconds per bracket."""

    brackets: int
    closed: int
    median_L: float
    median_U: float
    median_U_over_L: float | None
    median_seconds: float

    @classmethod
    def of(cls, rs: Sequence[PanelRow]) -> EpsSummary:
        """The figures of verified rows (each with its ``L``, ``U`` and ``seconds``)."""
        b = [_bracket(r) for r in rs]
        ratios = [U / L for L, U, _ in b if L > 0]
        return cls(len(rs), sum(L == U for L, U, _ in b), statistics.median(L for L, _, _ in b),
                   statistics.median(U for _, U, _ in b), statistics.median(ratios) if ratios else None,
                   statistics.median(float(s) for _, _, s in b))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _per_eps(verified: Iterable[PanelRow]) -> dict[Fraction, EpsSummary]:
    by_eps: defaultdict[Fraction, list[PanelRow]] = defaultdict(list)
    for r in verified:
        by_eps[Fraction(r.eps)].append(r)
    return {e: EpsSummary.of(by_eps[e]) for e in sorted(by_eps)}


#: The row lists of a summary (``Summary.to_dict`` writes each as its rows' JSON).
ROW_LISTS = ("unverified", "dropped", "capped", "verified_rows")


@dataclass(frozen=True)
class Summary:
    """Per-eps figures over verified brackets, and the integrity counts, of checked rows.

    ``rows``: every row; ``brackets``: those of status ``ok``; ``verified``: of them, verified on both sides;
    ``unverified``, ``dropped`` (by the mass or locality screen), ``capped`` (a stop request ended the
    search) and ``verified_rows``: the rows themselves; the attack and direct-check counts over the
    brackets; ``per_eps``: :class:`EpsSummary` per tolerance, ascending.
    """

    rows: int
    brackets: int
    verified: int
    unverified: tuple[PanelRow, ...]
    dropped: tuple[PanelRow, ...]
    capped: tuple[PanelRow, ...]
    attacks_run: int
    attack_successes: int
    direct_checked: int
    direct_passed: int
    per_eps: Mapping[Fraction, EpsSummary]
    verified_rows: tuple[PanelRow, ...]

    @classmethod
    def of(cls, rows: Sequence[PanelRow]) -> Summary:
        """The summary of checked rows (``numeric.panel.audit``: ranks and verdicts of the exact pass)."""
        ok = [r for r in rows if r.ok]
        verified = tuple(r for r in ok if r.verified)
        return cls(rows=len(rows), brackets=len(ok), verified=len(verified),
                   unverified=tuple(r for r in ok if not r.verified), dropped=tuple(r for r in rows if not r.ok),
                   capped=tuple(r for r in ok if r.capped), attacks_run=sum(bool(r.attack_run) for r in ok),
                   attack_successes=sum(bool(r.attack_success) for r in ok),
                   direct_checked=sum(bool(r.direct_checked) for r in ok),
                   direct_passed=sum(bool(r.direct_checked) and bool(r.direct_passed) for r in ok),
                   per_eps=_per_eps(verified), verified_rows=verified)

    def shown(self, show: Callable[[PanelRow], PanelRow]) -> Summary:
        """The same summary with every listed row passed through ``show`` (the report escapes labels)."""
        return replace(self, unverified=tuple(map(show, self.unverified)), dropped=tuple(map(show, self.dropped)),
                       capped=tuple(map(show, self.capped)), verified_rows=tuple(map(show, self.verified_rows)))

    def integrity_errors(self) -> list[str]:
        """The integrity table's failures as errors: a successful rank-(L-1) attack, a failed direct check."""
        errs = []
        for r in self.verified_rows + self.unverified:
            if r.attack_success:
                errs.append(f"{r.cell_id}: a rank-{_bracket(r)[0] - 1} attack succeeded where L = {r.L} was verified "
                            "(the panel's own record)")
            if r.direct_checked and not r.direct_passed:
                errs.append(f"{r.cell_id}: the upper factorisation failed its direct check (the panel's own record)")
        return errs

    # ---------------------------------------------------------------- Markdown
    def integrity_markdown(self, errors: Sequence[str] = (), from_records: int = 0) -> list[str]:
        """The report's lines of the errors (as given, already escaped), the integrity table, and the
        unverified and capped brackets; ``from_records``: bracket files whose exact pass was read from
        records (``--trust-records``)."""
        L = []
        if errors:
            L.append(f"## Errors ({len(errors)})\n")
            L.append("Records or files that are missing, unreadable or disagree with the exact pass:\n")
            L.extend(f"- {e}" for e in errors)
            L.append("")
        exact = ("brackets re-verified exactly (both sides)" if not from_records else
                 f"brackets verified by the exact pass (both sides; the pass of {from_records} bracket files read "
                 "from records in `verified/`, not run for this report)")
        L += ["## Integrity\n", "| check | passed | of |\n|---|---:|---:|",
              f"| {exact} | {self.verified} | {self.brackets} |",
              f"| targeted rank-(L-1) attacks without success | {self.attacks_run - self.attack_successes} "
              f"| {self.attacks_run} |",
              f"| upper factorisations checked directly (exact max row-l1 of A - P Q^T) | "
              f"{self.direct_passed} | {self.direct_checked} |",
              f"| searches within their work budgets (not ended by a stop request) | "
              f"{self.brackets - len(self.capped)} | {self.brackets} |\n"]
        for title, rows in (("Unverified brackets (not used below)", self.unverified),
                            ("Capped searches (a stop request ended them; brackets still verified "
                             "but not reproducible)", self.capped)):
            if rows:
                L.append(f"{title}:\n")
                L.extend(f"- {r.cell_id} ({r.file}): lower verified {r.lower_verified}, "
                         f"upper verified {r.upper_verified}" for r in rows)
                L.append("")
        return L

    def tables_markdown(self) -> list[str]:
        """The report's lines of the per-tolerance table and the brackets at ``REFERENCE_EPS``."""
        L = ["## Summary per tolerance (verified brackets)\n",
             "| eps | brackets | closed (L = U) | median L | median U | median U/L | median s/bracket |",
             "|---|---:|---:|---:|---:|---:|---:|"]
        for e, d in self.per_eps.items():
            L.append(f"| {e} | {d.brackets} | {d.closed} | {fmt(d.median_L, 1)} | "
                     f"{fmt(d.median_U, 1)} | {fmt(d.median_U_over_L)} | {fmt(d.median_seconds)} |")
        L.append("")
        ref = [r for r in self.verified_rows if Fraction(r.eps) == REFERENCE_EPS]
        if ref:
            L += [f"## Brackets at eps = {REFERENCE_EPS} (the paper's table tolerance)\n",
                  "| family | head | source | n | L | U | lower witness | upper witness | slack | mass |",
                  "|---|---|---|---:|---:|---:|---|---|---:|---:|"]
            L.extend(f"| {r.family} | {r.layer}.{r.head} | {r.source} | {r.n_rows}x{r.n_cols} | "
                     f"{r.L} | {r.U} | {r.lower_witness} | {r.upper_witness} | {_slack(r.slack)} | "
                     f"{fmt(r.mass, MASS_DIGITS)} |" for r in ref)
            L.append("")
        return L

    def to_markdown(self, errors: Sequence[str] = (), from_records: int = 0) -> str:
        """The summary's sections of ``report.md``: ``integrity_markdown`` then ``tables_markdown``."""
        return "\n".join(self.integrity_markdown(errors, from_records) + self.tables_markdown())

    # ---------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON: the counts, ``per_eps`` keyed by eps text, and the listed rows' JSON."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ROW_LISTS:
                value = [r.to_json() for r in value]
            elif f.name == "per_eps":
                value = {str(e): d.to_dict() for e, d in value.items()}
            out[f.name] = value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)


def summarise(rows: Sequence[PanelRow]) -> Summary:
    """Per-eps figures over verified brackets, and the integrity counts (:meth:`Summary.of`)."""
    return Summary.of(rows)

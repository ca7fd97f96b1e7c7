"""The study's results object: one record from which ``study.json`` and ``study.md`` are both rendered.

In the manner of statsmodels' results classes, ``StudyResults`` holds everything the study reports (the
command, the setup, the reading rule's verdicts, the comparisons, the gauge audit, and the optional
boosted check, other targets and domain transfer) and renders itself: ``to_json()`` is ``study.json``
and ``to_markdown()`` is ``study.md``. ``from_json`` parses a ``study.json`` (untrusted input, like a
panel) back into the record, so ``study.md`` is a function of ``study.json`` alone: re-rendering a
written study gives its ``study.md`` byte for byte (``tests/test_study_results.py``).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from numeric.panel.table import jsonable
from numeric.study.compare import AGGREGATE
from numeric.study.data import StudyError
from numeric.study.intervals import MARGIN, RESOLUTION
from numeric.study.protocol import POWER_RHO
from numeric.study.transfer import transfer_markdown

__all__ = ["StudyResults", "comparison_records"]

#: The setup keys every study states (``study.md``'s first paragraph reads them).
SETUP_KEYS = ("panel", "target", "eps", "cells", "sources", "heads", "families", "folds", "replicates",
              "permutations", "seed", "seconds")


def comparison_records(results) -> list[dict[str, Any]]:
    """The JSON records of ``compare``'s results (one per comparison, estimates per family)."""
    return [dict(asdict(r.comparison), estimates={f: asdict(e) for f, e in r.estimates.items()},
                 reason=getattr(r, "reason", None), placebo=getattr(r, "placebo", None),
                 note=getattr(r, "note", None)) for r in results]


@dataclass(frozen=True)
class StudyResults:
    """Everything one study reports; ``to_json`` / ``to_markdown`` render ``study.json`` / ``study.md``.

    ``comparisons``, ``gbm`` and each target's ``comparisons`` are ``comparison_records``; ``reading`` is
    ``numeric.study.protocol.readings``; ``gauge`` the gauge audit's rows; ``transfer`` the domain-transfer
    section (``numeric.study.transfer.transfer_section``) or None.
    """

    command: str
    setup: dict[str, Any]
    reading: dict[str, Any]
    comparisons: list[dict[str, Any]]
    gauge: list[dict[str, Any]]
    gbm: list[dict[str, Any]] | None = None
    targets: list[dict[str, Any]] | None = None
    transfer: list[Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        """``study.json``'s document (keys in the file's order; optional sections only when present)."""
        doc: dict[str, Any] = {"command": self.command, "setup": self.setup, "reading": self.reading,
                               "comparisons": self.comparisons, "gauge": self.gauge}
        if self.transfer is not None:
            doc["transfer"] = self.transfer
        if self.gbm is not None:
            doc["gbm"] = self.gbm
        if self.targets is not None:
            doc["targets"] = self.targets
        return doc

    def to_json(self) -> str:
        """``study.json``'s text."""
        return json.dumps(self.to_dict(), indent=1, default=jsonable)

    def to_markdown(self) -> str:
        """``study.md``'s text."""
        extra = (transfer_markdown(self.transfer),) if self.transfer is not None else ()
        return _markdown(self.to_dict(), extra)

    @classmethod
    def from_dict(cls, doc: Any) -> "StudyResults":
        """The record of a parsed ``study.json`` (``StudyError``, one line, when it is not one)."""
        if not isinstance(doc, dict):
            raise StudyError("study.json: not an object")
        for key, kind in (("command", str), ("setup", dict), ("comparisons", list), ("gauge", list)):
            if not isinstance(doc.get(key), kind):
                raise StudyError(f"study.json: {key!r} missing or not a {kind.__name__}")
        missing = [k for k in SETUP_KEYS if k not in doc["setup"]]
        if missing:
            raise StudyError(f"study.json: setup lacks {', '.join(missing)}")
        for key in ("gbm", "targets", "transfer"):
            if doc.get(key) is not None and not isinstance(doc[key], list):
                raise StudyError(f"study.json: {key!r} is not a list")
        reading = doc.get("reading", {})
        if not isinstance(reading, dict):
            raise StudyError("study.json: 'reading' is not an object")
        out = cls(doc["command"], doc["setup"], reading, doc["comparisons"], doc["gauge"], doc.get("gbm"),
                  doc.get("targets"), doc.get("transfer"))
        try:
            out.to_markdown()       # a record that does not render is refused here, not half-way through a write
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise StudyError(f"study.json: malformed ({type(exc).__name__}: {str(exc)[:60]})") from None
        return out

    @classmethod
    def from_json(cls, text: str) -> "StudyResults":
        """The record of ``study.json``'s text (``StudyError`` on bad JSON or a bad document)."""
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise StudyError(f"study.json: not JSON ({str(exc)[:80]})") from None
        return cls.from_dict(doc)


def _fmt(x: float) -> str:
    return f"{x:+.4f}"


def _ci(t) -> str:
    return f"[{t[0]:+.4f}, {t[1]:+.4f}]"


def _boot(e) -> str:
    return _ci(e["boot_rho_ci"]) if e.get("boot_rho_ci") else "-"


def _ci_or_note(t, note) -> str:
    return "- (descriptive)" if note else _ci(t)


def _table(doc: dict) -> list:
    lines = ["| comparison | family | MAE base | MAE +block | Delta | 95% CI | rho | 95% CI | "
             f"rho: different / equivalent (|rho| < {MARGIN}) | rho, bootstrap 95% CI (secondary) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in doc["comparisons"]:
        if c.get("reason"):
            lines.append(f"| {c['name']} | - | {c['reason']} | | | | | | | |")
            continue
        fams = [f for f in c["estimates"] if f != AGGREGATE] + [AGGREGATE]
        name = c["name"]
        note = c.get("note")
        if c.get("placebo"):
            p = c["placebo"]
            name += f" (mean of {p['permutations']} permutations; {p['significant']} alone with lower limit > 0)"
        if note:
            name += f" ({note})"
        for f in fams if len(fams) > 2 else [AGGREGATE]:
            e = c["estimates"][f]
            # the aggregate is rho's (the mean of the family rhos): its Delta is not a statistic the study reads
            dl = (("-", "-") if f == AGGREGATE and len(fams) > 2
                  else (_fmt(e["delta"]), _ci_or_note(e["delta_ci"], note)))
            lines.append(f"| {name} | {f} | {e['mae_base']:.4f} | {e['mae_aug']:.4f} | {dl[0]} | {dl[1]} | "
                         f"{_fmt(e['rho'])} | {_ci_or_note(e['rho_ci'], note)} | {e['equivalence']} | {_boot(e)} |")
    return lines


def _readings(doc: dict) -> list:
    """The reading rule's verdicts as the rule returns them, each beside its power (aggregate, then per family)."""
    lines = [f"| block after B1 | family | verdict | demeaned rho | 95% CI | power at rho {POWER_RHO} | primary rho | "
             f"95% CI | power at rho {POWER_RHO} |", "|---|---|---|---|---|---|---|---|---|"]

    def cells(r):
        ci = _ci(r["rho_ci"]) if r.get("rho_ci") else "-"
        rho = _fmt(r["rho"]) if r.get("rho") is not None else "-"
        pw = f"{r['power']:.2f}" if r.get("power") is not None else "-"
        return f"{rho} | {ci} | {pw}"

    def row(b, f, r):
        return f"| {b} | {f} | {r['verdict']} | {cells(r)} | {cells(r.get('primary', {}))} |"

    for b, r in doc.get("reading", {}).items():
        lines.append(row(b, "aggregate (the study's reading)", r))
        lines += [row(b, f, fr) for f, fr in r.get("families", {}).items()]
    return lines


def _gauge_table(doc: dict) -> list:
    lines = [f"| model | gauge ratio | max move | median move | cells moved > {RESOLUTION} | max input move |",
             "|---|---|---|---|---|---|"]
    for g in doc["gauge"]:
        lines.append(f"| {g['model']} | {g['ratio']} | {g['max_move']:.3g} | {g['median_move']:.3g} | "
                     f"{100 * g['over_resolution']:.1f}% | {g['max_feature_move']:.3g} |")
    return lines


def _markdown(doc: dict, extra: tuple = ()) -> str:
    s = doc["setup"]
    boot = (f"secondary: percentile source-cluster bootstrap, {s['replicates']} resamples; " if s["replicates"]
            else "secondary bootstrap off; ")
    trusted = bool(s.get("trusted_records"))
    banner = [f"**{s['banner']}.**", ""] if s.get("banner") else []
    head = [f"# Held-out study of {s['panel']}", ""] + banner + [
            f"`{doc['command']}`", "",
            *(["**Trusted records** (`--trust-records`): the exact pass of the panel's bracket files was read "
               "from the records in `verified/`, not run for this study, and no second checker ran; anyone who "
               "can write the panel directory can forge those records, so the targets below are the records' "
               "claims.", ""] if trusted else []),
            f"Target {s['target']} at eps {s['eps']}: {s['cells']} "
            f"{'cells (their exact pass read from records)' if trusted else 'verified cells'}, {s['sources']} sources, "
            f"{s['heads']} heads, families {', '.join(s['families'])}. Ridge (penalty by inner leave-one-out "
            f"CV), {s['folds']}-fold source cross-fitting. 95% intervals on the point fit's paired held-out "
            f"losses: cluster-robust (sources; heads and sources for leave one head out) averaged with a "
            f"first-order delete-one-source (head) jackknife, calibrated by "
            f"`python -m numeric study --calibrate`; placebos averaged over {s['permutations']} permutations; "
            + boot + f"seed {s['seed']}. "
            f"Aggregate: the mean of the family rhos, the study's one aggregate (every reading and equivalence "
            f"test is on rho). {s['seconds']:.1f} s.", "",
            "## Readings (the reading rule's verdicts)", "",
            "A block's gain after B1 counts as geometry when the 95% interval of the within-head demeaned row's "
            "rho excludes 0 from below (head identity cannot pass the demeaned row); a primary gain it does not "
            "confirm is not counted (head-level only). The aggregate row is the study's reading; a family's row "
            f"applies the same rule to that family's rows alone. Power: the chance that a row's interval excludes "
            f"0 at a true rho of {POWER_RHO}, from the row's own calibrated se. Equivalence: the 90% interval of rho "
            "inside "
            f"(-{MARGIN}, +{MARGIN}) and the 95% interval not excluding 0 (different first).", ""]
    head += _readings(doc)
    head += [line for c in s.get("caution", []) for line in ("", f"**Caution:** {c}.")]
    head += ["", "## Gains (Delta = MAE(base) - MAE(base + block), rho = Delta / MAE(base))", ""]
    gauge = ["", f"## Gauge audit (held-out prediction moves; resolution {RESOLUTION} in the target's units, "
                 f"{s['target']})", ""]
    gbm = []
    if doc.get("gbm"):
        gbm = ["", f"## Robustness: gradient-boosted model ({s['gbm_replicates']} resamples, same seed)", ""]
        gbm += _table({"comparisons": doc["gbm"]})
    tail = ["", f"**{s['banner']}.**"] if s.get("banner") else []
    return "\n".join(head + _table(doc) + _targets_section(doc)
                     + [line for lines in extra for line in [""] + list(lines)]
                     + gauge + _gauge_table(doc) + gbm
                     + ["", "![gains](figures/gains.png)", "", "![held-out](figures/heldout.png)"] + tail + [""])




def _targets_section(doc: dict) -> list:
    """Markdown of ``doc["targets"]`` (``numeric.study.targets``)."""
    lines = []
    for t in doc.get("targets", []):
        lines += ["", f"## Other target: {t['target']}", "", f"{t['cells']} cells; {t['note']}.", ""]
        lines += _table({"comparisons": t["comparisons"]})
    return lines



"""Write the study's outputs: ``study.json``, ``study.md``, ``predictions.csv``, ``figures/*.png``.

Every number in ``study.md`` is in ``study.json``; the command that
reproduces them is at the top of both. Every file and directory is written
through ``fileio.safeio`` with ``root=out``: atomically, never over a link, a
directory, a FIFO or a device, and no link below ``out`` is followed (a
``figures`` planted as a link elsewhere is refused); ``check_outputs`` refuses
such a target before the study does any work.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from numeric.panel.table import jsonable
from numeric.runtime import pyplot
from fileio.safeio import check_output_dir, check_target, make_dirs, write_bytes, write_text
from numeric.study.blocks import block_columns
from numeric.study.compare import AGGREGATE
from numeric.study.data import StudyData
from numeric.study.fit import FOLDS, cross_fit
from numeric.study.intervals import MARGIN, RESOLUTION
from numeric.study.protocol import POWER_RHO

__all__ = ["PREDICTION_MODELS", "OUTPUTS", "predictions", "check_outputs", "write_outputs"]

#: Models whose cross-fitted held-out predictions are written per cell.
PREDICTION_MODELS = ("B0", "B1", "B2", "B0+G", "B1+G", "B2+G", "B0+I", "B1+I", "B1+G+I")


#: The files the study writes, relative to its output directory.
OUTPUTS = ("study.json", "predictions.csv", "figures/gains.png", "figures/heldout.png", "study.md")


def check_outputs(out) -> None:
    """Refuse (``fileio.safeio.SafeIOError``, one line) before any work an output directory where a file the
    study would write exists and is not a regular file, or a link lies below ``out`` on its way."""
    out = Path(out)
    check_output_dir(out)             # a link at DIR/study is refused, never followed
    for name in OUTPUTS:
        check_target(out / name, root=out)


def predictions(data: StudyData, folds: int = FOLDS) -> dict:
    """``{model: held-out prediction per row}`` (per family, source folds; NaN in a family of one source)."""
    out = {}
    for spec in PREDICTION_MODELS:
        cols = block_columns(spec)
        pred = np.full(len(data), np.nan)
        for f in np.unique(data.families):
            r = np.flatnonzero(data.families == f)
            if np.unique(data.sources[r]).size < 2:
                continue   # one source: no cross-fitting (NaN)
            pred[r] = cross_fit(data.matrix(cols, r), data.y[r], data.sources[r], folds).pred
        out[spec] = pred
    return out


def _predictions_csv(data: StudyData, preds: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["cell_id", "family", "head", "source", "target"] + [f"pred_{m}" for m in preds])
    for i in range(len(data)):
        w.writerow([data.cell_ids[i], data.families[i], data.heads[i], data.sources[i], repr(float(data.y[i]))]
                   + [repr(float(preds[m][i])) for m in preds])
    return buf.getvalue()


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


def _save(fig, path: Path, root: Path) -> None:
    """The figure as PNG at ``path`` (``fileio.safeio``; no link followed below ``root``)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    pyplot().close(fig)
    make_dirs(path.parent, root=root)
    write_bytes(path, buf.getvalue(), root=root)


#: Models drawn in the held-out scatter figure.
SCATTER_MODELS = ("B1", "B1+G", "B1+I")


def _scatter(data: StudyData, preds: dict, path: Path, root: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(SCATTER_MODELS), figsize=(4 * len(SCATTER_MODELS), 4), sharey=True)
    lo, hi = float(data.y.min()), float(data.y.max())
    for ax, m in zip(axes, SCATTER_MODELS):
        ax.scatter(data.y, preds[m], s=6, alpha=0.6)
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
        ax.set_title(f"{m}: held-out MAE {np.nanmean(np.abs(preds[m] - data.y)):.4f}")
        ax.set_xlabel("target")
    axes[0].set_ylabel("held-out prediction")
    fig.tight_layout()
    _save(fig, path, root)


def _figure(doc: dict, path: Path, root: Path) -> None:
    plt = pyplot()
    comps = [c for c in doc["comparisons"] if not c.get("reason")]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(comps) + 1))
    for i, c in enumerate(comps):
        e = c["estimates"][AGGREGATE]
        ax.hlines(i, *e["rho_ci"], color="k", lw=1.2)
        ax.plot(e["rho"], i, "o", color="k")
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(range(len(comps)), [c["name"] for c in comps])
    ax.invert_yaxis()
    ax.set_xlabel("relative gain rho (aggregate, calibrated 95% interval)")
    fig.tight_layout()
    _save(fig, path, root)


def _results(results) -> list:
    return [dict(asdict(r.comparison), estimates={f: asdict(e) for f, e in r.estimates.items()},
                 reason=getattr(r, "reason", None), placebo=getattr(r, "placebo", None),
                 note=getattr(r, "note", None)) for r in results]


def _targets_section(doc: dict) -> list:
    """Markdown of ``doc["targets"]`` (``numeric.study.targets``)."""
    lines = []
    for t in doc.get("targets", []):
        lines += ["", f"## Other target: {t['target']}", "", f"{t['cells']} cells; {t['note']}.", ""]
        lines += _table({"comparisons": t["comparisons"]})
    return lines


def write_outputs(out, data: StudyData, results, gauge, setup: dict, command: str, gbm=None,
                  reading: dict | None = None, targets=None, sections: dict | None = None) -> dict:
    """Write the files under ``out`` (``fileio.safeio``, ``root=out``); return the JSON document (``gbm``: the
    boosted check, or None; ``reading``: the reading rule's verdict per block; ``targets``:
    ``numeric.study.targets.other_targets``; ``sections``: further rows of the study,
    ``{json key: (JSON value, Markdown lines)}``, e.g. the domain transfer, ``numeric.study.transfer``)."""
    out = Path(out)
    check_outputs(out)
    doc = {"command": command, "setup": setup, "reading": reading or {}, "comparisons": _results(results),
           "gauge": [asdict(g) for g in gauge]}
    doc.update({k: v for k, (v, _) in (sections or {}).items()})
    if gbm is not None:
        doc["gbm"] = _results(gbm)
    if targets is not None:
        doc["targets"] = [{k: v for k, v in t.items() if k != "results"} | {"comparisons": _results(t["results"])}
                          for t in targets]
    make_dirs(out, root=out.parent)   # the directory itself opened without following a link
    write_text(out / "study.json", json.dumps(doc, indent=1, default=jsonable), root=out)
    preds = predictions(data, setup["folds"])
    write_text(out / "predictions.csv", _predictions_csv(data, preds), root=out)
    _figure(doc, out / "figures" / "gains.png", out)
    _scatter(data, preds, out / "figures" / "heldout.png", out)
    write_text(out / "study.md", _markdown(doc, tuple(lines for _, lines in (sections or {}).values())), root=out)
    return doc

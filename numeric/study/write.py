"""Write the study's outputs: ``study.json``, ``study.md``, ``predictions.csv``, ``figures/*.png``.

``study.json`` and ``study.md`` are rendered from one ``StudyResults``
(``numeric.study.results``): every number in ``study.md`` is in
``study.json``; the command that reproduces them is at the top of both. Every file and directory is written
through ``fileio.safeio`` with ``root=out``: atomically, never over a link, a
directory, a FIFO or a device, and no link below ``out`` is followed (a
``figures`` planted as a link elsewhere is refused); ``check_outputs`` refuses
such a target before the study does any work.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from numeric.runtime import pyplot
from fileio.safeio import check_output_dir, check_target, make_dirs, write_bytes, write_text
from numeric.study.blocks import block_columns
from numeric.study.compare import AGGREGATE
from numeric.study.data import StudyData
from numeric.study.fit import FOLDS, cross_fit
from numeric.study.results import StudyResults

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


def write_outputs(out, data: StudyData, results: StudyResults) -> StudyResults:
    """Write the files under ``out`` (``fileio.safeio``, ``root=out``): ``study.json`` and ``study.md`` from
    ``results`` (``StudyResults.to_json``, ``to_markdown``), the held-out predictions of ``data`` and the
    figures; return ``results``."""
    out = Path(out)
    check_outputs(out)
    make_dirs(out, root=out.parent)   # the directory itself opened without following a link
    write_text(out / "study.json", results.to_json(), root=out)
    preds = predictions(data, int(results.setup["folds"]))
    write_text(out / "predictions.csv", _predictions_csv(data, preds), root=out)
    _figure(results.to_dict(), out / "figures" / "gains.png", out)
    _scatter(data, preds, out / "figures" / "heldout.png", out)
    write_text(out / "study.md", results.to_markdown(), root=out)
    return results

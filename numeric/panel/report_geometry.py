"""The report section on interaction geometry.

``geometry_section(rows, outdir)`` takes the panel table rows (``PanelRow``: the descriptor
columns of ``numeric.geometry.cell_descriptors`` and
``numeric.geometry.native_features`` next to ``L``, ``U``, ``family``, ``layer``,
``head``, ``eps``), writes PNG plots into ``outdir`` and returns Markdown.
Brackets are plotted against the intrinsic size (kappa) and residual
(tau0) per family, and against the native features; the gauge audit is
summarised as a table. Ranks shown are the L and U of the audited rows (the
exact pass's); the descriptors, their ``*_cert`` columns included, are the
panel's records, never re-checked here, and descriptive, and the prefactor-free scores are shape
diagnostics only (the cover constants C_r are unknown).
"""
from __future__ import annotations

import io
import math
from fractions import Fraction
from pathlib import Path

import numpy as np

from numeric.geometry import intrinsic_profile_score, SVD_RANKS
from numeric.panel.figures import log_x
from numeric.panel.schema import PanelRow
from numeric.runtime import pyplot
from fileio.safeio import make_dirs, write_bytes

__all__ = ["geometry_section", "spearman"]

# The paper's headline tolerance (Table 1); the plots use it when the panel
# has it, otherwise the median tolerance present.
HEADLINE_EPS = 0.25
#: Two float tolerances within this are the same table tolerance (they come from exact rationals).
EPS_MATCH = 1e-12
DPI = 110

_INTRINSIC = (("kappa_upper", "intrinsic size kappa(C) (upper)", True),
              ("tau0", "residual tau(0) = 2 tanh(q(C)/4)", False))
_NATIVE = (
    ("gamma_native", "native radius product Gamma", True),
    ("svd_interaction_dim", "normalised native SVD dimension", False),
    ("width_spectrum_gap", "width-vs-spectrum gap", False),
)


def _col(r: PanelRow, name: str):
    """A column of a row (``PanelRow.column``); ``eps`` as a float."""
    return float(Fraction(r.eps)) if name == "eps" else r.column(name)


def _num(x):
    """A float image of a table value; exact rationals such as "1/4" parse too."""
    try:
        return float(Fraction(x)) if isinstance(x, str) else float(x)
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan


def _ranks(a: np.ndarray) -> np.ndarray:
    order = np.argsort(a, kind="mergesort")
    r = np.empty(len(a))
    r[order] = np.arange(len(a))
    # average ties
    for v in np.unique(a):
        idx = a == v
        if idx.sum() > 1:
            r[idx] = r[idx].mean()
    return r


def spearman(x, y) -> float:
    """Spearman rank correlation (ties averaged); nan with fewer than 3 pairs.

    >>> round(spearman([1, 2, 3, 4], [10, 20, 30, 25]), 12)
    0.8
    """
    x = np.asarray([_num(v) for v in x])
    y = np.asarray([_num(v) for v in y])
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3:
        return math.nan
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def _pick_eps(rows) -> float | None:
    eps = sorted({_num(_col(r, "eps")) for r in rows if math.isfinite(_num(_col(r, "eps")))})
    if not eps:
        return None
    for e in eps:
        if abs(e - HEADLINE_EPS) < EPS_MATCH:
            return e
    return eps[len(eps) // 2]


def _fmt(v, nd=3) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.{nd}g}"


def _png(fig, path: Path) -> None:
    """The figure as PNG at ``path`` (``fileio.safeio``: atomic, never over a link or a non-regular file)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    write_bytes(path, buf.getvalue())


def _scatter(path: Path, rows, columns, eps) -> bool:
    plt = pyplot()
    families = sorted({r.family for r in rows})
    fig, axes = plt.subplots(1, len(columns), figsize=(5 * len(columns), 4), squeeze=False)
    drew = False
    for ax, (col, label, logx) in zip(axes[0], columns):
        for k, fam in enumerate(families):
            sel = [r for r in rows if r.family == fam]
            x = np.array([_num(_col(r, col)) for r in sel])
            U = np.array([_num(_col(r, "U")) for r in sel])
            L = np.array([_num(_col(r, "L")) for r in sel])
            ok = np.isfinite(x) & np.isfinite(U)
            if logx:
                ok &= x > 0
            if not ok.any():
                continue
            drew = True
            colour = f"C{k % 10}"
            ax.scatter(x[ok], U[ok], s=14, color=colour, label=f"{fam} U")
            okl = ok & np.isfinite(L)
            ax.vlines(x[okl], L[okl], U[okl], color=colour, alpha=0.35, linewidth=1)
            ax.scatter(x[okl], L[okl], s=10, marker="_", color=colour)
        if logx:
            log_x(ax)
        ax.set_xlabel(label)
        ax.set_ylabel(f"rank bracket [L, U] at eps = {eps:g}")
    if drew:
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        _png(fig, path)
    plt.close(fig)
    return drew


def _family_curves(path: Path, rows, eps) -> bool:
    """The J.2 trade-off per cell: (kappa(T_r), tau(T_r)) over retained ranks r."""
    plt = pyplot()

    families = sorted({r.family for r in rows})
    fig, ax = plt.subplots(figsize=(6, 4.5))
    drew = False
    for k, fam in enumerate(families):
        first = True
        for r in rows:
            if r.family != fam:
                continue
            pts = [(_num(_col(r, f"svd_r{q}_kappa")), _num(_col(r, f"svd_r{q}_tau"))) for q in SVD_RANKS]
            pts = [(a, b) for a, b in pts if math.isfinite(a) and math.isfinite(b) and a > 0]
            if len(pts) < 2:
                continue
            drew = True
            xs, ys = zip(*pts)
            ax.plot(xs, ys, "-o", color=f"C{k % 10}", alpha=0.4, markersize=3, label=fam if first else None)
            first = False
    if drew:
        if math.isfinite(eps):
            ax.axhline(eps, color="k", linestyle=":", linewidth=1, label=f"eps = {eps:g}")
        log_x(ax)
        ax.set_xlabel("kappa(T_r) (upper), r = " + ", ".join(str(q) for q in SVD_RANKS))
        ax.set_ylabel("tau(T_r) = 2 tanh(q(C - T_r)/4)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        _png(fig, path)
    plt.close(fig)
    return drew

def _family_table(sel, eps) -> list:
    """Medians and Spearman correlations of U with the descriptors, per family."""
    lines = []
    families = sorted({r.family for r in sel})
    lines += [
        "| family | cells | median kappa lower | median kappa upper | median tau0 | "
        "Spearman(U, kappa) | Spearman(U, tau0) | Spearman(U, profile) | Spearman(U, Gamma) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for fam in families:
        fr = [r for r in sel if r.family == fam]
        med = lambda c: float(np.nanmedian([_num(_col(r, c)) for r in fr])) if fr else math.nan
        U = [_col(r, "U") for r in fr]
        lines.append(
            f"| {fam} | {len(fr)} | {_fmt(med('kappa_lower'))} | {_fmt(med('kappa_upper'))} | "
            f"{_fmt(med('tau0'))} | {_fmt(spearman(U, [_col(r, 'kappa_upper') for r in fr]), 2)} | "
            f"{_fmt(spearman(U, [_col(r, 'tau0') for r in fr]), 2)} | "
            f"{_fmt(spearman(U, [intrinsic_profile_score(r.descriptors, eps) for r in fr]), 2)} | "
            f"{_fmt(spearman(U, [_col(r, 'gamma_native') for r in fr]), 2)} |"
        )
    lines += [
        "",
        "The profile score is the best prefactor-free J.2 shape score "
        "`min_r (r/2) log(1 + kappa(T_r)) - r log(eps - tau(T_r))` over the family "
        "(C_r set to one: a shape diagnostic, never a certificate).",
        "",
    ]
    return lines


def _gauge_audit(have) -> list:
    """Appendix L.7: diagonal Q/K gauges move the native features, never the intrinsic ones."""
    lines = []
    ratios = sorted(
        {k.split("_g")[-1] for r in have for k in r.descriptors if k.startswith("gamma_native_move_g")},
        key=lambda s: _num(s),
    )
    if ratios:
        lines += [
            "Gauge audit (Appendix L.7): diagonal Q/K gauges leave the logits unchanged "
            "(max logit change below), so no intrinsic descriptor may move; the native features do.",
            "",
            "| gauge ratio | max logit change | max intrinsic move | median |log Gamma move| | "
            "median SVD-dim move | median gap move |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for g in ratios:
            col = lambda c: [_num(_col(r, f"{c}_g{g}")) for r in have]
            lines.append(
                f"| {g} | {_fmt(np.nanmax(col('logit_change')))} | {_fmt(np.nanmax(col('intrinsic_move')))} | "
                f"{_fmt(np.nanmedian(col('gamma_native_move')))} | "
                f"{_fmt(np.nanmedian(col('svd_interaction_dim_move')))} | "
                f"{_fmt(np.nanmedian(col('width_spectrum_gap_move')))} |"
            )
        lines.append("")
    return lines


def _cert_summary(have) -> list:
    """How far the rigorous descriptor bounds lie from the float ones."""
    lines = []
    cert = [r for r in have if math.isfinite(_num(_col(r, "kappa_upper_cert")))]
    if cert:
        worst = max(_num(_col(r, "kappa_upper_cert")) / _num(_col(r, "kappa_upper")) - 1
                    for r in cert if _num(_col(r, "kappa_upper")) > 0)
        lines += [
            f"Recorded rigorous versions: the records of {len(cert)} of {len(have)} cells carry exact/arb "
            "`*_cert` bounds (computed by the panel and read from its records, not re-checked by this report); "
            f"the largest relative excess of the recorded `kappa_upper_cert` over `kappa_upper` is {_fmt(worst)}.",
            "",
        ]
    return lines


def geometry_section(rows: list[PanelRow], outdir, figures: str = "") -> str:
    """Markdown for the interaction-geometry section; PNGs written to ``outdir/figures`` (``outdir`` itself
    when ``figures`` is empty), linked relative to ``outdir`` (where the report lies)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    figdir = make_dirs(outdir / figures, root=outdir) if figures else outdir
    link = (lambda name: f"{figures}/{name}") if figures else (lambda name: name)
    lines = ["## Interaction geometry", ""]
    have = [r for r in rows if math.isfinite(_num(_col(r, "kappa_upper")))]
    if not have:
        lines.append("No cell carries geometry columns (kappa_upper missing); nothing to plot.")
        return "\n".join(lines) + "\n"
    eps = _pick_eps(have)
    sel = [r for r in have if eps is None or abs(_num(_col(r, "eps")) - eps) < EPS_MATCH]
    eps = eps if eps is not None else math.nan
    lines += [
        f"Brackets [L, U] at eps = {eps:g} (the exact pass's, see the first lines) against the intrinsic "
        "profile of each cell "
        "(MATH.md section 3): size kappa(C) (gauge-optimised MEB radius product; the "
        "double-difference lower bound is in the table) and residual tau(0). The descriptors are the "
        "panel's records, not re-checked by this report (each bound's `*_cert` column included); they "
        "are descriptive and never a certificate (C_r unknown).",
        "",
    ]
    if _scatter(figdir / "geometry_intrinsic.png", sel, _INTRINSIC, eps):
        lines += [f"![U and L against intrinsic size and residual]({link('geometry_intrinsic.png')})", ""]
    if _family_curves(figdir / "geometry_family.png", sel, eps):
        lines += [
            "Logit-SVD family (J.2): size and residual of the same retained T_r, one curve per "
            "cell. Theorem 1 needs tau(T_r) < eps; setting C_r = 1 would not be a certificate.",
            "",
            f"![J.2 family: kappa(T_r) against tau(T_r)]({link('geometry_family.png')})",
            "",
        ]
    if any(math.isfinite(_num(_col(r, "gamma_native"))) for r in sel):
        if _scatter(figdir / "geometry_native.png", sel, _NATIVE, eps):
            lines += [f"![U and L against native features]({link('geometry_native.png')})", ""]

    lines += _family_table(sel, eps) + _gauge_audit(have) + _cert_summary(have)
    return "\n".join(lines) + "\n"

"""The report's figures (paper section 6): one PNG per function, from checked rows.

Every row given here carries the ranks of the exact re-verification
(``numeric.panel.audit``); ``plot_all`` writes the four figures and returns
their paths by name.
"""
from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

from matplotlib.ticker import LogFormatter, LogLocator

from numeric.panel.schema import PanelRow
from numeric.runtime import pyplot
from fileio.safeio import make_dirs, write_bytes

__all__ = ["plot_all", "CAPTIONS", "FIGURES", "log_x"]

#: The report's figures, all of them (the geometry section's included), lie in this folder of the run directory.
FIGURES = "figures"
#: Minor ticks of a log axis: the other integers times a power of ten. Their labels come on a short range
#: (under two decades, every one under half a decade; LogFormatter's thresholds), where the powers of ten
#: alone would leave one labelled tick.
LOG_MINOR_SUBS = (2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
LOG_MINOR_THRESHOLDS = (2, 0.5)

CAPTIONS = {"brackets": "Bracket intervals per head", "ratio": "U/L distribution",
            "resolved": "Resolved fraction per layer", "u_over_n": "U/n per family"}
DPI = 110
#: The bracket plot's y axis is linear up to this rank, logarithmic above.
SYMLOG_LINTHRESH = 4
RATIO_BINS = 20
#: Figure width: a minimum, and inches per head / per (layer, eps) / per (family, eps).
MIN_WIDTH, WIDTH_PER_HEAD, WIDTH_PER_BAR, WIDTH_PER_BOX = 6, 0.9, 0.6, 1.5
HEIGHT = 4
#: Colour-map range: both ends of viridis are hard to see on white.
CMAP_LOW, CMAP_SPAN = 0.1, 0.8
#: The bars of one x position (one per eps) share this much of the unit spacing.
GROUP_WIDTH = 0.8


def log_x(ax) -> None:
    """Put the x axis of ``ax`` on a base-10 log scale with labelled major and minor ticks."""
    ax.set_xscale("log")
    axis = ax.xaxis
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(LogFormatter(base=10, labelOnlyBase=False))
    axis.set_minor_locator(LogLocator(base=10, subs=LOG_MINOR_SUBS))
    axis.set_minor_formatter(LogFormatter(base=10, labelOnlyBase=False, minor_thresholds=LOG_MINOR_THRESHOLDS))


def _eps_label(e) -> str:
    return str(Fraction(e))


def _save(fig, path: Path, root) -> Path:
    """The figure as PNG at ``path``, written through ``fileio.safeio`` (no link followed below ``root``)."""
    plt = pyplot()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return write_bytes(path, buf.getvalue(), root=root)


def _brackets(plt, rows, eps_values, colours, path, root):
    heads = sorted({(r.family, r.layer, r.head) for r in rows})
    fig, ax = plt.subplots(figsize=(max(MIN_WIDTH, WIDTH_PER_HEAD * len(heads) + 2), HEIGHT))
    width = GROUP_WIDTH / max(1, len(eps_values))
    for k, e in enumerate(eps_values):
        for i, h in enumerate(heads):
            rs = [r for r in rows if (r.family, r.layer, r.head) == h and Fraction(r.eps) == e]
            for j, r in enumerate(rs):
                x = i - GROUP_WIDTH / 2 + width * (k + 0.5) + (j - (len(rs) - 1) / 2) * width / (len(rs) + 1)
                ax.vlines(x, r.L, r.U, color=colours[e], lw=2.5,
                          label=f"eps = {_eps_label(e)}" if (i == 0 and j == 0) else None)
                ax.plot([x, x], [r.L, r.U], "_", color=colours[e], ms=6)
    ax.set_xticks(range(len(heads)))
    ax.set_xticklabels([f"{f[:3]} {l}.{h}" for f, l, h in heads], rotation=45, ha="right")
    ax.set_ylabel("bracket [L, U] (exact pass)")
    ax.set_yscale("symlog", linthresh=SYMLOG_LINTHRESH)
    ax.set_ylim(bottom=0)
    ax.set_title("Certified brackets per head (one bar per source)")
    ax.legend(fontsize=8)
    return _save(fig, path, root)


def _ratio(plt, rows, eps_values, colours, path, root):
    fig, ax = plt.subplots(figsize=(MIN_WIDTH, HEIGHT))
    for e in eps_values:
        ratios = [r.U / r.L for r in rows if Fraction(r.eps) == e and r.L > 0]
        if ratios:
            ax.hist(ratios, bins=RATIO_BINS, alpha=0.6, color=colours[e], label=f"eps = {_eps_label(e)}")
    ax.set_xlabel("U / L")
    ax.set_ylabel("brackets")
    ax.set_title("Bracket width U / L (1 = closed)")
    ax.legend(fontsize=8)
    return _save(fig, path, root)


def _resolved(plt, rows, eps_values, colours, path, root):
    layers = sorted({(r.family, r.layer) for r in rows})
    width = GROUP_WIDTH / max(1, len(eps_values))
    fig, ax = plt.subplots(figsize=(max(MIN_WIDTH, WIDTH_PER_BAR * len(layers) * len(eps_values)), HEIGHT))
    for k, e in enumerate(eps_values):
        fr = []
        for fl in layers:
            rs = [r for r in rows if (r.family, r.layer) == fl and Fraction(r.eps) == e]
            fr.append(sum(r.L == r.U for r in rs) / len(rs) if rs else 0.0)
        ax.bar([i + (k - (len(eps_values) - 1) / 2) * width for i in range(len(layers))], fr, width=width,
               color=colours[e], label=f"eps = {_eps_label(e)}")
    ax.set_xticks(range(len(layers)))
    ax.set_xticklabels([f"{f[:3]} L{l}" for f, l in layers])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("fraction closed (L = U)")
    ax.set_title("Resolved fraction per layer")
    ax.legend(fontsize=8)
    return _save(fig, path, root)


def _u_over_n(plt, rows, eps_values, colours, path, root):
    """U / min(m, n) per family, each family at its own common shape."""
    fams = sorted({(r.family, r.n_rows, r.n_cols) for r in rows})
    width = GROUP_WIDTH / max(1, len(eps_values))
    fig, ax = plt.subplots(figsize=(max(MIN_WIDTH - 1, WIDTH_PER_BOX * len(fams) * len(eps_values)), HEIGHT))
    for k, e in enumerate(eps_values):
        data = [[r.U / min(r.n_rows, r.n_cols) for r in rows
                 if (r.family, r.n_rows, r.n_cols) == f and Fraction(r.eps) == e] for f in fams]
        pos = [i + (k - (len(eps_values) - 1) / 2) * width for i in range(len(fams))]
        bp = ax.boxplot([d or [float("nan")] for d in data], positions=pos, widths=width * 0.9,
                        patch_artist=True, manage_ticks=False)
        for patch in bp["boxes"]:
            patch.set_facecolor(colours[e])
        ax.plot([], [], "s", color=colours[e], label=f"eps = {_eps_label(e)}")
    ax.set_xticks(range(len(fams)))
    ax.set_xticklabels([f"{f} {m}x{n}" for f, m, n in fams])
    ax.set_ylabel("U / min(m, n)")
    ax.set_title("Upper budget relative to the matrix size")
    ax.legend(fontsize=8)
    return _save(fig, path, root)


def plot_all(rows: list[PanelRow], figdir: Path, root=None) -> dict:
    """Write the four figures of ``rows`` into ``figdir``; ``{name: path}``. ``root``: no symbolic link is
    followed between it (default ``figdir``'s parent) and a figure (``fileio.safeio``)."""
    plt = pyplot()
    root = figdir.parent if root is None else root
    make_dirs(figdir, root=root)
    eps_values = sorted({Fraction(r.eps) for r in rows})
    shades = [CMAP_LOW + CMAP_SPAN * i / max(1, len(eps_values) - 1) for i in range(len(eps_values))]
    colours = dict(zip(eps_values, plt.cm.viridis(shades)))
    args = (plt, rows, eps_values, colours)
    return {"brackets": _brackets(*args, figdir / "brackets_per_head.png", root),
            "ratio": _ratio(*args, figdir / "u_over_l.png", root),
            "resolved": _resolved(*args, figdir / "resolved_per_layer.png", root),
            "u_over_n": _u_over_n(*args, figdir / "u_over_n.png", root)}

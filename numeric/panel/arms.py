"""The ViT two-arm qualification (paper Appendix L.3).

  python -m numeric.panel.arms --out runs/arms                  # the preset (presets.VIT_ARMS)
  python -m numeric.panel.arms --out DIR --heads 0.0,2.3 --sources 2 --eps 1/4

The paper's two ViT checkpoints "share images, roster, operator shape, and
code"; it reports the paired Spearman of their upper endpoints over the same
cells and the fraction of cells where one arm's upper endpoint exceeds the
other's, and keeps the arms separate throughout (L.3). Here the arms are
``digitvit`` and its fine-tune on rotated digits ``digitvit-rot90``
(``numeric.heads.zoo.vit_shift``), read on the same held-out digits.

Each arm is a panel of its own, run by the panel's own code path
(``python -m numeric panel``: extract, search at the given effort, export,
verify with the exact tier) into ``DIR/<arm>/`` with the same roster,
sources, tolerances and effort. The two directories are never merged: a
report or study reads one arm at a time, and only paired comparisons cross
the arms. Before any work both arms must be ViTs of one operator shape
(layers, heads, image and patch size) whose sources are the same images.

Per tolerance, over the cells (layer, head, source) that both arms verified
exactly (a cell missing or unverified in either arm is counted and left out,
never imputed):

- the paired Spearman of U across the arms (and of L);
- the fractions of cells where U of arm B exceeds U of arm A, the reverse, and ties;
- the certified fractions: L_B > U_A (arm B provably needs more rank than arm A
  on that cell) and L_A > U_B;
- per layer, the fraction where U_B > U_A (the paper finds the excess mostly in later layers).

Writes ``DIR/arms.json`` and ``DIR/arms.md`` and prints the Markdown. Exit 0;
1 when a requested bracket was not verified in either arm; 2 on bad input (one line).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from pathlib import Path

from exact.errors import ExitCode, OneLineParser
from numeric.heads.extract import source_for, parse_heads, ExtractionError
from numeric.heads.models import load_model, PRESETS, preset_path, weights_sha256, ModelInputError
from numeric.heads.sources import MAX_SOURCES, SourceError
from numeric.panel import cli
from numeric.panel.report_geometry import spearman
from numeric.panel.schema import PanelRow
from numeric.panel.table import read_rows, atomic_write
from numeric.runtime import pinned_threads
from fileio.safeio import escape
from numeric.panel.presets import ARMS_EFFORT, ARMS_EPS, ARMS_SOURCES, VIT_ARMS, model_shape
from numeric.panel.provenance import PanelError

__all__ = ["ArmComparison", "ArmsResults", "compare_arms", "arm_dir", "run_arms", "write_arms", "main"]

PROG = "python -m numeric.panel.arms"
JSON_NAME = "arms.json"
MD_NAME = "arms.md"


@dataclass(frozen=True)
class LayerShare:
    """One layer's paired cells and the fractions where one arm's U exceeds the other's."""

    layer: int
    cells: int
    b_above: float
    a_above: float


@dataclass(frozen=True)
class ArmComparison:
    """The paired comparison of two arms at one tolerance (L.3). Fractions are of ``cells``."""

    eps: str
    cells: int                  # cells verified exactly in both arms
    excluded: int               # requested cells missing or unverified in either arm
    spearman_U: float           # nan with fewer than 3 cells or a constant arm
    spearman_L: float
    b_above: float              # U_B > U_A
    a_above: float              # U_A > U_B
    equal: float                # U_A == U_B
    b_certified_above: float    # L_B > U_A: arm B needs more rank, proven
    a_certified_above: float    # L_A > U_B
    median_U_a: float
    median_U_b: float
    by_layer: tuple             # LayerShare per layer


def _eps_key(e) -> str:
    return str(Fraction(e))


def _verified(r: PanelRow) -> bool:
    return r.status == "ok" and bool(r.verified)


def _frac(n: int, d: int) -> float:
    return n / d if d else math.nan


def _median(v: list) -> float:
    if not v:
        return math.nan
    s = sorted(v)
    m = len(s) // 2
    return float(s[m]) if len(s) % 2 else (s[m - 1] + s[m]) / 2


def compare_arms(rows_a: list[PanelRow], rows_b: list[PanelRow], cells: list[tuple[int, int, str]],
                 eps: Sequence[object]) -> list[ArmComparison]:
    """The paired comparison per tolerance over the requested ``cells`` ((layer, head, source id) triples).

    ``rows_a``/``rows_b``: the panel rows of the two arms (``numeric.panel.table.read_rows``).
    A cell enters only where both arms have a verified row for it; the arms' values are
    paired cell by cell, never pooled.
    """
    def index(rows):
        return {(int(r.layer), int(r.head), str(r.source), _eps_key(r.eps)): r for r in rows}

    ia, ib = index(rows_a), index(rows_b)
    out = []
    for e in (_eps_key(x) for x in eps):
        pairs, excluded = [], 0
        for (layer, head, src) in cells:
            ra, rb = ia.get((layer, head, src, e)), ib.get((layer, head, src, e))
            if ra is None or rb is None or not (_verified(ra) and _verified(rb)):
                excluded += 1
                continue
            pairs.append((layer, int(ra.L), int(ra.U), int(rb.L), int(rb.U)))
        n = len(pairs)
        layers = sorted({p[0] for p in pairs})
        by_layer = tuple(LayerShare(l, sum(p[0] == l for p in pairs),
                                    _frac(sum(p[0] == l and p[4] > p[2] for p in pairs), sum(p[0] == l for p in pairs)),
                                    _frac(sum(p[0] == l and p[2] > p[4] for p in pairs), sum(p[0] == l for p in pairs)))
                         for l in layers)
        out.append(ArmComparison(
            eps=e, cells=n, excluded=excluded,
            spearman_U=spearman([p[2] for p in pairs], [p[4] for p in pairs]),
            spearman_L=spearman([p[1] for p in pairs], [p[3] for p in pairs]),
            b_above=_frac(sum(p[4] > p[2] for p in pairs), n), a_above=_frac(sum(p[2] > p[4] for p in pairs), n),
            equal=_frac(sum(p[2] == p[4] for p in pairs), n),
            b_certified_above=_frac(sum(p[3] > p[2] for p in pairs), n),
            a_certified_above=_frac(sum(p[1] > p[4] for p in pairs), n),
            median_U_a=_median([p[2] for p in pairs]), median_U_b=_median([p[4] for p in pairs]),
            by_layer=by_layer))
    return out


def arm_dir(out: Path, arm: str) -> Path:
    """The arm's own panel directory under ``out`` (its name, file-safe)."""
    name = Path(arm).name or arm
    return Path(out) / "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in name)


def _check_arms(arms: list) -> None:
    """Two distinct ViTs of one operator shape (PanelError, one line)."""
    if len(arms) != 2 or arms[0] == arms[1]:
        raise PanelError(f"--arms takes two different models, got {','.join(arms)}")
    if arm_dir(Path("."), arms[0]) == arm_dir(Path("."), arms[1]):
        raise PanelError(f"the arms {arms[0]} and {arms[1]} have the same directory name")
    shapes = [model_shape(a) for a in arms]
    for a, s in zip(arms, shapes):
        if s.family != "vit":
            raise PanelError(f"model {a} is a {s.family}, not a ViT: the two-arm qualification is for ViT arms")
    a, b = ((s.layers, s.heads, s.image_size, s.patch_size) for s in shapes)
    if a != b:
        raise PanelError(f"the arms differ in shape: {arms[0]} has {a[0]} layers x {a[1]} heads on {a[2]} px "
                         f"images (patch {a[3]}), {arms[1]} {b[0]} x {b[1]} on {b[2]} px (patch {b[3]})")


def _source_ids(arm: str, n: int) -> list:
    """The ids of the arm's first ``n`` panel sources (as ``numeric panel`` builds them)."""
    lm = load_model(arm)
    return [source_for(lm, k).source_id for k in range(n)]


def run_arms(out: Path, arms: list, heads: list, n_sources: int, eps_text: str, effort: str, *,
             workers: int = 1, quiet: bool = True) -> tuple[int, ArmsResults | None]:
    """Run both arms' panels (resumable) and compare them; (exit status, the comparison, None when an arm's
    panel failed)."""
    if not 1 <= n_sources <= MAX_SOURCES:
        raise PanelError(f"--sources must be in 1..{MAX_SOURCES}")
    _check_arms(arms)
    ids = [_source_ids(a, n_sources) for a in arms]
    if ids[0] != ids[1]:
        raise PanelError(f"the arms do not share images: {arms[0]} reads {ids[0][0]}..., {arms[1]} {ids[1][0]}...")
    eps = cli.parse_eps(eps_text)
    status: int = ExitCode.OK
    for arm in arms:
        argv = ["--model", arm, "--heads", ",".join(f"{l}.{h}" for l, h in heads), "--sources", str(n_sources),
                "--eps", ",".join(eps), "--effort", effort, "--workers", str(workers), "--no-report",
                "--out", str(arm_dir(out, arm))] + (["--quiet"] if quiet else [])
        with contextlib.redirect_stdout(sys.stderr):   # stdout carries the comparison only
            rc = cli.main(argv)
        if rc not in (ExitCode.OK, ExitCode.REFUTED):
            return rc, None
        status = max(status, rc)
    cells = [(l, h, s) for l, h in heads for s in ids[0]]
    comps = compare_arms(read_rows(arm_dir(out, arms[0])), read_rows(arm_dir(out, arms[1])), cells, eps)
    if any(c.excluded for c in comps):
        status = ExitCode.REFUTED
    return status, ArmsResults(tuple(arms), tuple(str(arm_dir(out, a)) for a in arms),
                               {a: _weights(a) for a in arms}, tuple(f"{l}.{h}" for l, h in heads), tuple(ids[0]),
                               tuple(eps), effort, tuple(comps))


def _weights(arm: str) -> str:
    return weights_sha256(preset_path(arm) if arm in PRESETS else Path(arm))


def _jsonable(x):
    """NaN as null (strict JSON)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def _f(x, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:.1f} %" if pct else f"{x:.3f}"


@dataclass(frozen=True)
class ArmsResults:
    """The two-arm qualification: the arms (A, B), their panel directories, their weight hashes, the heads,
    the shared sources, the tolerances, the effort and the comparison per tolerance; ``to_json`` and
    ``to_markdown`` render ``arms.json`` and ``arms.md``; ``command``: the command line, once known."""

    arms: tuple[str, ...]
    dirs: tuple[str, ...]
    weights_sha256: dict[str, str]
    heads: tuple[str, ...]
    sources: tuple[str, ...]
    eps: tuple[str, ...]
    effort: str
    comparisons: tuple[ArmComparison, ...]
    command: str | None = None

    def to_dict(self) -> dict:
        """``arms.json``'s document (NaN as null; ``command`` only when set)."""
        doc = {"arms": list(self.arms), "dirs": list(self.dirs), "weights_sha256": dict(self.weights_sha256),
               "heads": list(self.heads), "sources": list(self.sources), "eps": list(self.eps),
               "effort": self.effort, "comparisons": [_jsonable(asdict(c)) for c in self.comparisons]}
        return doc if self.command is None else dict(doc, command=self.command)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True, allow_nan=False) + "\n"

    def to_markdown(self) -> str:
        """The comparison as Markdown: one row per tolerance, then the per-layer shares."""
        a, b = self.arms
        lines = [f"# ViT two-arm qualification (L.3): A = {a}, B = {b}", "",
                 f"Arms run separately, never pooled: {', '.join(self.dirs)}. Heads {', '.join(self.heads)}; "
                 f"the same sources for both arms ({len(self.sources)}: {', '.join(self.sources)}); "
                 f"effort {self.effort}; a cell counts only where both arms' brackets were verified by the exact "
                 "tier. Weight hashes (as in the cells' provenance): "
                 + ", ".join(f"{k} {v[:16]}..." for k, v in self.weights_sha256.items()) + ".", "",
                 "| eps | paired cells | excluded | Spearman U | Spearman L | U_B > U_A | U_A > U_B | U_A = U_B | "
                 "L_B > U_A (proven) | L_A > U_B (proven) | median U_A | median U_B |",
                 "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for c in self.comparisons:
            lines.append(f"| {c.eps} | {c.cells} | {c.excluded} | {_f(c.spearman_U)} | "
                         f"{_f(c.spearman_L)} | {_f(c.b_above, True)} | {_f(c.a_above, True)} | "
                         f"{_f(c.equal, True)} | {_f(c.b_certified_above, True)} | "
                         f"{_f(c.a_certified_above, True)} | {_f(c.median_U_a)} | {_f(c.median_U_b)} |")
        if self.comparisons:
            first = self.comparisons[0].by_layer
            lines += ["", "Per layer (cells; U_B > U_A; U_A > U_B):", "",
                      "| eps | " + " | ".join(f"layer {s.layer}" for s in first) + " |",
                      "| --- |" + " --- |" * len(first)]
        for c in self.comparisons:
            lines.append(f"| {c.eps} | " + " | ".join(
                f"{s.cells}; {_f(s.b_above, True)}; {_f(s.a_above, True)}" for s in c.by_layer) + " |")
        return "\n".join(lines) + "\n"


def write_arms(out: Path, results: ArmsResults) -> str:
    """Write ``arms.json`` and ``arms.md``; the Markdown."""
    atomic_write(Path(out) / JSON_NAME, results.to_json())
    md = results.to_markdown()
    atomic_write(Path(out) / MD_NAME, md)
    return md


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (one panel directory per arm inside)")
    p.add_argument("--arms", default=",".join(VIT_ARMS), help=f"two ViT models A,B (default {','.join(VIT_ARMS)})")
    p.add_argument("--heads", help="LAYER.HEAD list (default: every head)")
    p.add_argument("--sources", type=int, default=ARMS_SOURCES, help=f"shared sources (default {ARMS_SOURCES})")
    p.add_argument("--eps", default=ARMS_EPS, help=f"tolerances (default {ARMS_EPS})")
    p.add_argument("--effort", default=ARMS_EFFORT, help=f"search effort (default {ARMS_EFFORT})")
    p.add_argument("--workers", type=int, default=1, help="local worker processes per arm (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def _heads(text: str | None, arm: str) -> list:
    if text:
        try:
            return list(dict.fromkeys(parse_heads(text)))
        except ValueError as e:
            raise PanelError(str(e)) from None
    s = model_shape(arm)
    return [(l, h) for l in range(s.layers) for h in range(s.heads)]


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        arms = [a.strip() for a in args.arms.split(",") if a.strip()]
        if not arms:
            raise PanelError("--arms names no model")
        with pinned_threads():
            status, results = run_arms(Path(args.out), arms, _heads(args.heads, arms[0]), args.sources, args.eps,
                                   args.effort, workers=args.workers, quiet=args.quiet)
    except (PanelError, ModelInputError, ExtractionError, SourceError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return ExitCode.MALFORMED
    except OSError as e:         # an --out that cannot be created (under a file, no permission)
        print(f"{PROG}: error: {escape(args.out)}: {e.strerror or e}", file=sys.stderr)
        return ExitCode.MALFORMED
    if results is None:
        return status
    results = replace(results, command=" ".join([PROG] + list(sys.argv[1:] if argv is None else argv)))
    print(write_arms(Path(args.out), results), end="")
    return status


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

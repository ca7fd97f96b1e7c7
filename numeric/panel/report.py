"""Re-verify a panel directory and write its Markdown report (paper section 6, Appendix L).

  python -m numeric report DIR [--trust-records] [--no-independent] [--check-heads]

A panel directory is untrusted input (the trust model of ``docs/panel.md``). Every
bracket file under ``DIR/brackets`` is re-verified by the exact tier
(``exact.verify``, one process per core) and every row bound to its head
(``numeric.panel.audit``): counts, ranks, shapes, witness kinds and slack
come from that pass, not from the records the panel wrote; the records of an
earlier exact pass (``DIR/verified``) are used only with ``--trust-records``,
and then the report's first lines say so. A record or file that is missing,
unreadable, malformed or disagrees with the exact pass or with its head is
listed under "Errors", and the command exits 1 (so does any unverified
bracket, a successful rank-(L-1) attack and an upper factorisation that
failed its direct check). The report states the effort preset, package
versions and code that produced the run (``DIR/panel.json``, checked against
every bracket file's provenance). It writes ``DIR/report.md`` with PNG plots
under ``DIR/figures``: bracket intervals per head, the U/L distribution, the
resolved (L = U) fraction per layer, U/n per family, and the integrity
figures; and, per family, the head screen, the common-shape audit and the
identification gate (``numeric.panel.report_families``, ``--gate``).
Exit 2 when DIR is not a panel directory, holds no cells, or an output
(``report.md``, ``figures/``) is not a regular file or directory of DIR
(``fileio.safeio``). Strings from the directory are printed escaped and cut
(``fileio.safeio.escape``). By default every bracket is also re-derived by
the second checker (``crosscheck``, which shares no code with ``exact/``);
the report states how many brackets each checker verified, and a
disagreement is an error (exit 1); ``--no-independent`` skips it. The brackets
are about the head files in ``DIR/heads``; ``--check-heads`` extracts every head
again from its model on this machine (``numeric.panel.binding``): identical
bytes bind it, a head that moved within ``--head-tolerance`` gets its brackets
transferred (the row-l1 triangle inequality, printed with its delta), and a head
not re-extracted or beyond the tolerance is an error; without it the report's
first lines say the heads were not re-extracted.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from exact.errors import ExitCode, OneLineParser, UserInputError
import crosscheck
from numeric.panel.audit import audit
from numeric.panel.binding import HEAD_TOLERANCE
from numeric.panel.figures import CAPTIONS, FIGURES, plot_all
from numeric.panel.report_families import GATE, families_section
from numeric.panel.report_geometry import geometry_section
from numeric.panel.report_cap import cap_section
from numeric.panel.report_heads import DIGEST_CHARS, ERROR_LINE, check_panel_heads, head_files, heads_line, md, rebound
from numeric.panel.report_summary import MASS_DIGITS, REFERENCE_EPS, Summary, fmt, summarise
from numeric.panel.provenance import PanelRun
from numeric.panel.schema import PanelRow
from numeric.panel.table import CELLS_DIR
from fileio.safeio import SafeIOError, check_output_dir, check_target, escape, list_dir, write_text

__all__ = ["ReportError", "Report", "summarise", "write_report", "main"]

PROG = "python -m numeric report"
#: Characters of the geometry section's failure message kept in the report.
ERROR_CHARS = 200

#: The string columns of a row, escaped for Markdown before the report shows them.
LABELS = ("family", "model", "source", "cell_kind", "cell_id", "file", "status", "lower_witness", "upper_witness")


class ReportError(UserInputError):
    """Nothing to report on (exit 2)."""


@dataclass(frozen=True)
class Report:
    """The report written: its path, the errors it lists (integrity failures included), and the verified count."""

    path: Path
    errors: list
    brackets: int
    verified: int

    @property
    def ok(self) -> bool:
        return not self.errors and self.verified == self.brackets


def _shown(r: PanelRow) -> PanelRow:
    shown: dict[str, Any] = {k: md(r.column(k)) for k in LABELS if isinstance(r.column(k), str)}
    return replace(r, **shown)


def _trust_line(checked, trusted: bool) -> str:
    if trusted and checked.from_records:
        return (f"**Trusted records:** the exact pass of {checked.from_records} of {checked.files} bracket files was "
                "read from the records in `verified/` (`--trust-records`), not re-run: anyone who can write this "
                "directory can forge those. Without the flag every file is re-verified.\n")
    return (f"Every bracket file ({checked.files}) was re-verified by the exact tier for this report; no record of "
            "an earlier pass was used.\n")


def _identity(value: str, field: str, checked) -> str:
    """An identity field of panel.json as printed: only when the bracket files' provenance confirms it."""
    if field in checked.refused:
        return f"REFUSED (panel.json says {value}; a bracket file's provenance says otherwise, see Errors)"
    if not checked.confirmed:
        return f"{value} (unconfirmed: no bracket file's provenance to check panel.json against)"
    return value


def _header(rows, s: Summary, run, checked=None) -> list:
    models = sorted({(r.family, r.model) for r in rows})
    shape = []
    for f, m in models:
        rs = [r for r in rows if (r.family, r.model) == (f, m)]
        kinds = sorted({r.cell_kind or "" for r in rs} - {""})
        heads = len({(r.layer, r.head) for r in rs})
        shape.append(f"{m} ({f}{'; ' + ', '.join(kinds) if kinds else ''}): {heads} heads x "
                     f"{len({r.source for r in rs})} sources")
    L = ["# Learned-head panel report\n",
         f"Models: {'; '.join(shape)}. {s.brackets} brackets, {len(s.dropped)} rows dropped by the mass "
         "or locality screen.\n"]
    info = run if run is not None else PanelRun({})
    code = info.run_code
    checked = checked if checked is not None else SimpleNamespace(refused=frozenset(), confirmed=1)
    effort = _identity(f"`{md(info.effort or 'unknown')}`", "effort", checked)
    version = _identity(md(code.version or "?"), "project version", checked)
    packages = _identity(", ".join(f"{md(k)} {md(v)}" for k, v in sorted(info.versions.items()) if v)
                         or "unknown", "package versions", checked)
    L.append(f"Produced with effort preset {effort}, code {version} (the last run's commit "
             f"{md(code.commit or 'unknown')}{', uncommitted changes' if code.dirty else ''}; "
             f"sources sha256 {md((code.source_sha256 or 'unknown')[:DIGEST_CHARS])}), packages "
             f"{packages} (effort, code version and packages checked against the provenance of "
             f"{checked.confirmed} bracket cells).\n")
    last = info.last_run
    if last is not None:
        L.append(f"Last panel run: {last.run} cells computed, {last.skipped} resumed, {last.seconds:.0f} s wall.\n")
    L.append("Every rank, shape, witness kind and slack below comes from the exact tier's pass on the bracket "
             "files (`exact.verify`, the checker behind `python -m exact verify`; run for this report unless the "
             "first line says records were trusted), not from the panel's records, and every row is bound to its "
             "head file (`heads/<key>.safetensors`: the hashes of its logits and matrix are those the exact pass "
             "saw; listed at the end). U is a checked constructive budget, not a minimum; where L < U the eps-rank "
             "is only known to lie in the interval.\n")
    return L


def _figures_and_drops(s: Summary, out: Path) -> list:
    L = []
    figs = plot_all(list(s.verified_rows), out / FIGURES, root=out) if s.verified_rows else {}
    if figs:
        L.append("## Figures\n")
        L.extend(f"![{CAPTIONS[k]}]({p.relative_to(out).as_posix()})\n" for k, p in figs.items())
    if s.dropped:
        L.append("## Dropped cells\n")
        seen = sorted({(r.model, r.layer, r.head, r.source, r.status,
                        round(r.mass or 0, MASS_DIGITS), fmt(r.local_mass, MASS_DIGITS))
                       for r in s.dropped})
        L.extend(f"- {model} {layer}.{head} on {src}: {status} (retained mass {mass}, local mass {local})"
                 for model, layer, head, src, status, mass, local in seen)
        L.append("")
    return L


def _geometry_section(rows, out: Path) -> str:
    """The geometry section (``numeric.panel.report_geometry``) on the verified rows."""

    # the section writes its PNGs under figures/, with the other figures
    try:
        return geometry_section(rows, out, FIGURES)
    except SafeIOError:
        raise
    except Exception as e:  # a plotting failure is reported, the brackets stay
        return f"## Geometry\n\nThe geometry section failed: {type(e).__name__}: {str(e)[:ERROR_CHARS]}\n"


def _families(out: Path, checked, s: Summary, gate: float, errors: list) -> list:
    """The family comparison (``numeric.panel.report_families``); a failure is listed as an error."""
    try:
        section = families_section(out, [_shown(r) for r in checked.rows], list(s.verified_rows), REFERENCE_EPS, gate)
    except SafeIOError:
        raise
    except Exception as e:  # the brackets stay; the failure is an error of the report
        errors.append(f"the family section failed: {type(e).__name__}: {str(e)[:ERROR_CHARS]}")
        return []
    return [section] if section else []


def _check_outputs(out: Path) -> None:
    """Refuse (``SafeIOError``, exit 2) what the writes would refuse, before any work: ``report.md``, the
    ``figures`` directory, and every PNG already in DIR or DIR/figures, when one is not a regular file."""
    check_target(out / "report.md", root=out)
    check_output_dir(out / FIGURES)
    for folder in (out, out / FIGURES):
        for name in list_dir(folder, root=out, suffix=".png"):
            check_target(folder / name, root=out)


def write_report(out, *, workers: int | None = None, gate: float = GATE, trust_records: bool = False,
                 independent: bool = True, check: bool = False,
                 tolerance: Fraction = HEAD_TOLERANCE) -> Report:
    """Re-verify ``out`` and write ``out/report.md`` and its figures; ``gate``: the identification gate's
    threshold (``numeric.panel.report_families``); ``trust_records``: read the exact pass of a file from its
    record in ``verified/`` where one matches (the report says so in its first lines); ``independent``:
    re-derive every bracket with the second checker too (``crosscheck``), state both counts, and list any
    disagreement as an error; ``check``: re-extract every head from its model on this machine and bind it or
    transfer its brackets (``numeric.panel.binding``; a head not re-extracted, or beyond ``tolerance``, is an
    error)."""
    out = Path(out)
    if not out.is_dir():
        raise ReportError(f"{escape(out)} is not a panel directory (not a directory)")
    try:
        cells = list_dir(out / CELLS_DIR, root=out, suffix=".json")
        files = list_dir(out / "brackets", root=out, suffix=".safetensors")
    except SafeIOError as e:
        raise ReportError(f"{escape(out)} is not a panel directory ({e})") from None
    if not (out / CELLS_DIR).is_dir():
        raise ReportError(f"{escape(out)} is not a panel directory (no {CELLS_DIR}/ in it)")
    if not cells and not files:
        raise ReportError(f"{escape(out)} has no finished cells")
    _check_outputs(out)         # a link, FIFO, device or directory where an output goes: refused before any work
    checked = audit(out, workers, reverify=not trust_records, independent=independent)
    s = summarise(checked.rows)
    errors = list(checked.errors) + s.integrity_errors()
    checks = check_panel_heads(out, checked, tolerance) if check else None
    errors += [err for c in checks or [] if (err := c.error()) is not None]
    shown = s.shown(_shown)
    families = _families(out, checked, shown, gate, errors)
    L = _header([_shown(r) for r in checked.rows], shown, checked.run, checked)
    L[1:1] = [_trust_line(checked, trust_records), heads_line(checks)]
    L += shown.integrity_markdown([md(e, ERROR_LINE) for e in errors], checked.from_records if trust_records else 0)
    L += rebound(checks, checked.run, tolerance) + shown.tables_markdown()
    L += cap_section(list(shown.verified_rows), checked.caps) + families
    L += _figures_and_drops(shown, out)
    section = _geometry_section(list(shown.verified_rows), out)
    if section:
        L.append(section.rstrip() + "\n")
    L += head_files(checked)
    if checked.independent is not None:
        L += [md(line, ERROR_LINE) if line.startswith("- DISAGREEMENT") else line
              for line in crosscheck.markdown(checked.independent)] + [""]
    path = write_text(out / "report.md", "\n".join(L), root=out)
    return Report(path, errors, s.brackets, s.verified)


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (also rendered into the CLI reference of the docs)."""
    p = OneLineParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="panel output directory")
    p.add_argument("--workers", type=int, default=None, help="verification processes (default: one per core)")
    p.add_argument("--gate", type=float, default=GATE,
                   help=f"identification gate: the resolved fraction and ordering coverage each family needs "
                        f"(default {GATE}, the paper's 50 %%)")
    p.add_argument("--trust-records", action="store_true",
                   help="read the exact pass of a bracket file from its record in DIR/verified where one matches "
                        "(faster; anyone who can write DIR can forge a record; the report's first lines say so)")
    p.add_argument("--check-heads", action="store_true",
                   help="re-extract every head from its model on this machine: identical bytes bind it, a head "
                        "within --head-tolerance gets its brackets transferred (printed with delta); a head not "
                        "re-extracted or beyond the tolerance exits 1")
    p.add_argument("--head-tolerance", default=str(HEAD_TOLERANCE),
                   help=f"--check-heads: the largest delta (row-l1 distance of the attention matrices, an exact "
                        f"upper bound) accepted (default {HEAD_TOLERANCE})")
    p.add_argument("--no-independent", dest="independent", action="store_false",
                   help="skip the second, independent checker (crosscheck: no code shared with exact/); by "
                        "default it re-derives every bracket and a disagreement with the exact tier exits 1")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.workers is not None and args.workers < 1:
        print(f"{PROG}: error: --workers must be >= 1", file=sys.stderr)
        return ExitCode.MALFORMED
    if not 0 <= args.gate <= 1:
        print(f"{PROG}: error: --gate must be in [0, 1]", file=sys.stderr)
        return ExitCode.MALFORMED
    try:
        tolerance = Fraction(args.head_tolerance)
    except (ValueError, ZeroDivisionError):
        tolerance = Fraction(-1)
    if tolerance < 0:
        print(f"{PROG}: error: --head-tolerance must be a number >= 0", file=sys.stderr)
        return ExitCode.MALFORMED
    if args.trust_records:
        print(f"{PROG}: --trust-records: the exact pass of a bracket file is read from its record in DIR/verified "
              "where one matches, not re-run (anyone who can write DIR can forge one); the report's first lines "
              "say how many", file=sys.stderr)
    try:
        rep = write_report(args.dir, workers=args.workers, gate=args.gate, trust_records=args.trust_records,
                           independent=args.independent, check=args.check_heads, tolerance=tolerance)
    except (ReportError, SafeIOError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return ExitCode.MALFORMED
    except RecursionError:
        print(f"{PROG}: error: {escape(args.dir)}: a document nests too deep to read", file=sys.stderr)
        return ExitCode.REFUTED
    except MemoryError:
        print(f"{PROG}: error: {escape(args.dir)}: out of memory reading the panel directory", file=sys.stderr)
        return ExitCode.REFUTED
    print(escape(rep.path, 4096))
    for err in rep.errors:
        print(f"{PROG}: error: {escape(err, ERROR_LINE)}", file=sys.stderr)
    if rep.verified < rep.brackets:
        print(f"{PROG}: {rep.brackets - rep.verified} of {rep.brackets} brackets not verified", file=sys.stderr)
    return ExitCode.OK if rep.ok else ExitCode.REFUTED


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

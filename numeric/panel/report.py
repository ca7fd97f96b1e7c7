"""Re-verify a panel directory and write its Markdown report (paper section 6, Appendix L).

  python -m numeric report DIR

Every bracket file under ``DIR/brackets`` is re-verified by the exact tier
(``exact.verify``, one process per core); counts and ranks come from that
pass, not from the records the panel wrote. A record or file that is
missing, unreadable or disagrees with the exact pass is listed under
"Errors", and the command exits 1 (so does any unverified bracket). The
report states the effort preset, package versions and code that produced
the run (``DIR/panel.json``). It writes ``DIR/report.md`` with PNG plots
under ``DIR/figures``: bracket intervals per head, the U/L distribution, the
resolved (L = U) fraction per layer, U/n per family, and the integrity
figures; and, per family, the head screen, the common-shape audit and the
identification gate (``numeric.panel.report_families``, ``--gate``).
Exit 2 when DIR is not a panel directory or holds no cells.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from numeric.panel.audit import audit, run_summary
from numeric.panel.figures import CAPTIONS, plot_all
from numeric.panel.report_families import GATE
from numeric.panel.table import CELLS_DIR

__all__ = ["ReportError", "Report", "summarise", "write_report", "main"]

PROG = "python -m numeric report"
REFERENCE_EPS = Fraction(1, 4)  # the paper's table tolerance (section 6, Table 1)
#: Exit statuses: 1 when an error or an unverified bracket is listed, 2 on bad input.
EXIT_FAILED, EXIT_BAD_INPUT = 1, 2
#: Characters of the geometry section's failure message kept in the report.
ERROR_CHARS = 200
#: Hex digits of the sources digest shown in the header (the full one is in panel.json).
DIGEST_CHARS = 16
#: Digits of the prefix mass in the tables (a fraction in [0, 1]).
MASS_DIGITS = 3


class ReportError(ValueError):
    """Nothing to report on (exit 2)."""


@dataclass(frozen=True)
class Report:
    """The report written: its path, the errors it lists, and the verified count."""

    path: Path
    errors: list
    brackets: int
    verified: int

    @property
    def ok(self) -> bool:
        return not self.errors and self.verified == self.brackets


def _fmt(x, digits=2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _slack(x) -> str:
    return f"{x:.2g}" if isinstance(x, float) else _fmt(x)


def _per_eps(verified: list) -> dict:
    by_eps = defaultdict(list)
    for r in verified:
        by_eps[Fraction(r["eps"])].append(r)
    per_eps = {}
    for e in sorted(by_eps):
        rs = by_eps[e]
        ratios = [r["U"] / r["L"] for r in rs if r["L"] > 0]
        per_eps[e] = {
            "brackets": len(rs), "closed": sum(r["L"] == r["U"] for r in rs),
            "median_L": statistics.median(r["L"] for r in rs), "median_U": statistics.median(r["U"] for r in rs),
            "median_U_over_L": statistics.median(ratios) if ratios else None,
            "median_seconds": statistics.median(float(r["seconds"]) for r in rs),
        }
    return per_eps


def summarise(rows: list[dict]) -> dict:
    """Per-eps figures over verified brackets, and the integrity counts.

    ``rows`` are checked rows (``numeric.panel.audit``): their ranks and
    verdicts are those of the exact pass.
    """
    ok = [r for r in rows if r.get("status") == "ok"]
    verified = [r for r in ok if r.get("verified")]
    return {
        "rows": len(rows), "brackets": len(ok), "verified": len(verified),
        "unverified": [r for r in ok if not r.get("verified")],
        "dropped": [r for r in rows if r.get("status") != "ok"],
        "capped": [r for r in ok if r.get("capped")],
        "attacks_run": sum(bool(r.get("attack_run")) for r in ok),
        "attack_successes": sum(bool(r.get("attack_success")) for r in ok),
        "direct_checked": sum(bool(r.get("direct_checked")) for r in ok),
        "direct_passed": sum(bool(r.get("direct_checked")) and bool(r.get("direct_passed")) for r in ok),
        "per_eps": _per_eps(verified),
        "verified_rows": verified,
    }


def _header(rows, s, run) -> list:
    models = sorted({(r["family"], r["model"]) for r in rows})
    shape = []
    for f, m in models:
        rs = [r for r in rows if (r["family"], r["model"]) == (f, m)]
        kinds = sorted({str(r.get("cell_kind") or "") for r in rs} - {""})
        heads = len({(r["layer"], r["head"]) for r in rs})
        shape.append(f"{m} ({f}{'; ' + ', '.join(kinds) if kinds else ''}): {heads} heads x "
                     f"{len({r['source'] for r in rs})} sources")
    L = ["# Learned-head panel report\n",
         f"Models: {'; '.join(shape)}. {s['brackets']} brackets, {len(s['dropped'])} rows dropped by the mass "
         "or locality screen.\n"]
    info = run_summary(run)
    code = info["code"]
    L.append(f"Produced with effort preset `{info['effort'] or 'unknown'}`, code "
             f"{code.get('version') or '?'} (commit {code.get('commit') or 'unknown'}"
             f"{', uncommitted changes' if code.get('dirty') else ''}; sources sha256 "
             f"{(code.get('source_sha256') or 'unknown')[:DIGEST_CHARS]}), packages "
             + (", ".join(f"{k} {v}" for k, v in sorted(info["versions"].items()) if v) or "unknown") + ".\n")
    summary = info["summary"]
    if isinstance(summary, dict) and "run" in summary:
        L.append(f"Last panel run: {summary['run']} cells computed, {summary['skipped']} resumed, "
                 f"{summary['seconds']:.0f} s wall.\n")
    L.append("Every rank below comes from re-verifying the bracket files with the exact tier when this report "
             "was written (`exact.verify`, the checker behind `python -m exact verify`), not from the panel's "
             "records. U is a checked constructive budget, not a minimum; where L < U the eps-rank is only "
             "known to lie in the interval.\n")
    return L


def _integrity(s, errors) -> list:
    L = []
    if errors:
        L.append(f"## Errors ({len(errors)})\n")
        L.append("Records or files that are missing, unreadable or disagree with the exact pass:\n")
        L.extend(f"- {e}" for e in errors)
        L.append("")
    L += ["## Integrity\n", "| check | passed | of |\n|---|---:|---:|",
          f"| brackets re-verified exactly (both sides) | {s['verified']} | {s['brackets']} |",
          f"| targeted rank-(L-1) attacks without success | {s['attacks_run'] - s['attack_successes']} "
          f"| {s['attacks_run']} |",
          f"| upper factorisations checked directly (exact max row-l1 of A - P Q^T) | "
          f"{s['direct_passed']} | {s['direct_checked']} |",
          f"| searches within their work budgets (not ended by a stop request) | "
          f"{s['brackets'] - len(s['capped'])} | {s['brackets']} |\n"]
    for title, rows in (("Unverified brackets (not used below)", s["unverified"]),
                        ("Capped searches (a stop request ended them; brackets still verified "
                         "but not reproducible)", s["capped"])):
        if rows:
            L.append(f"{title}:\n")
            L.extend(f"- {r['cell_id']} ({r['file']}): lower verified {r['lower_verified']}, "
                     f"upper verified {r['upper_verified']}" for r in rows)
            L.append("")
    return L


def _tables(s) -> list:
    L = ["## Summary per tolerance (verified brackets)\n",
         "| eps | brackets | closed (L = U) | median L | median U | median U/L | median s/bracket |",
         "|---|---:|---:|---:|---:|---:|---:|"]
    for e, d in s["per_eps"].items():
        L.append(f"| {e} | {d['brackets']} | {d['closed']} | {_fmt(d['median_L'], 1)} | "
                 f"{_fmt(d['median_U'], 1)} | {_fmt(d['median_U_over_L'])} | {_fmt(d['median_seconds'])} |")
    L.append("")
    ref = [r for r in s["verified_rows"] if Fraction(r["eps"]) == REFERENCE_EPS]
    if ref:
        L += [f"## Brackets at eps = {REFERENCE_EPS} (the paper's table tolerance)\n",
              "| family | head | source | n | L | U | lower witness | upper witness | slack | mass |",
              "|---|---|---|---:|---:|---:|---|---|---:|---:|"]
        L.extend(f"| {r['family']} | {r['layer']}.{r['head']} | {r['source']} | {r['n_rows']}x{r['n_cols']} | "
                 f"{r['L']} | {r['U']} | {r['lower_witness']} | {r['upper_witness']} | {_slack(r.get('slack'))} | "
                 f"{_fmt(r.get('mass'), MASS_DIGITS)} |" for r in ref)
        L.append("")
    return L


def _figures_and_drops(s, out: Path) -> list:
    L = []
    figs = plot_all(s["verified_rows"], out / "figures") if s["verified_rows"] else {}
    if figs:
        L.append("## Figures\n")
        L.extend(f"![{CAPTIONS[k]}]({p.relative_to(out).as_posix()})\n" for k, p in figs.items())
    if s["dropped"]:
        L.append("## Dropped cells\n")
        seen = sorted({(str(r.get("model", "")), r["layer"], r["head"], r["source"], r["status"],
                        round(r.get("mass") or 0, MASS_DIGITS), _fmt(r.get("local_mass"), MASS_DIGITS))
                       for r in s["dropped"]})
        L.extend(f"- {model} {layer}.{head} on {src}: {status} (retained mass {mass}, local mass {local})"
                 for model, layer, head, src, status, mass, local in seen)
        L.append("")
    return L


def _geometry_section(rows, out: Path) -> str:
    """The geometry section (``numeric.panel.report_geometry``) on the verified rows."""
    from numeric.panel.report_geometry import geometry_section

    # the section takes eps as a number and writes its PNGs next to report.md
    geo_rows = [dict(r, eps=float(Fraction(r["eps"])), eps_exact=r["eps"]) for r in rows]
    try:
        return geometry_section(geo_rows, out)
    except Exception as e:  # noqa: BLE001 - a plotting failure is reported, the brackets stay
        return f"## Geometry\n\nThe geometry section failed: {type(e).__name__}: {str(e)[:ERROR_CHARS]}\n"


def _families(out: Path, checked, s, gate: float, errors: list) -> list:
    """The family comparison (``numeric.panel.report_families``); a failure is listed as an error."""
    from numeric.panel.report_families import families_section

    try:
        section = families_section(out, checked.rows, s["verified_rows"], REFERENCE_EPS, gate)
    except Exception as e:  # noqa: BLE001 - the brackets stay; the failure is an error of the report
        errors.append(f"the family section failed: {type(e).__name__}: {str(e)[:ERROR_CHARS]}")
        return []
    return [section] if section else []


def write_report(out, workers: int | None = None, gate: float = GATE) -> Report:
    """Re-verify ``out`` and write ``out/report.md`` and its figures; ``gate``: the
    identification gate's threshold (``numeric.panel.report_families``)."""
    out = Path(out)
    if not (out / CELLS_DIR).is_dir():
        raise ReportError(f"{out} is not a panel directory (no {CELLS_DIR}/ in it)")
    if not any((out / CELLS_DIR).glob("*.json")) and not any((out / "brackets").glob("*.safetensors")):
        raise ReportError(f"{out} has no finished cells")
    checked = audit(out, workers)
    s = summarise(checked.rows)
    errors = list(checked.errors)
    families = _families(out, checked, s, gate, errors)
    L = _header(checked.rows, s, checked.run) + _integrity(s, errors) + _tables(s) + families
    L += _figures_and_drops(s, out)
    section = _geometry_section(s["verified_rows"], out)
    if section:
        L.append(section.rstrip() + "\n")
    path = out / "report.md"
    path.write_text("\n".join(L))
    return Report(path, errors, s["brackets"], s["verified"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="panel output directory")
    p.add_argument("--workers", type=int, default=None, help="verification processes (default: one per core)")
    p.add_argument("--gate", type=float, default=GATE,
                   help=f"identification gate: the resolved fraction and ordering coverage each family needs "
                        f"(default {GATE}, the paper's 50 %%)")
    args = p.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        print(f"{PROG}: error: --workers must be >= 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not 0 <= args.gate <= 1:
        print(f"{PROG}: error: --gate must be in [0, 1]", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        rep = write_report(args.dir, args.workers, args.gate)
    except ReportError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(rep.path)
    for e in rep.errors:
        print(f"{PROG}: error: {e}", file=sys.stderr)
    if rep.verified < rep.brackets:
        print(f"{PROG}: {rep.brackets - rep.verified} of {rep.brackets} brackets not verified", file=sys.stderr)
    return 0 if rep.ok else EXIT_FAILED


if __name__ == "__main__":
    raise SystemExit(main())

"""The report's section on open brackets: the convex cap beside L and U (``docs/explanation/convex-cap.md``).

For every verified open bracket (L < U) the exact pass judged the cell's
convex cap r0, when the search found one: no convex certificate can prove
``r_eps > r0``. The section counts, per tolerance, the open brackets, those
with a verified cap, and how L stands to it (above: the lower families pass
every convex relaxation there; equal; below it and the cap below U: room that
a convex certificate might still take; a cap at or above U rules out nothing
below U), with the median gaps ``L - r0`` and ``U - r0``. A cap
that is not verified is counted as such, never used.
"""
from __future__ import annotations

from fractions import Fraction
from statistics import median

__all__ = ["cap_section"]


def cap_section(rows, caps: dict) -> list[str]:
    """Markdown lines on the convex caps of the verified open brackets among ``rows`` (empty when none);
    ``caps``: per (file, cell id), the ``convex_cap*`` keys of the cell's exact report."""
    per: dict[str, list] = {}
    for r in rows:
        if r.verified and r.L < r.U:
            per.setdefault(r.eps, []).append((r, caps.get((r.file, r.cell_id), {})))
    if not per:
        return []
    lines = ["## Why brackets stay open: the convex cap", "",
             "A verified cap r0 means that no convex certificate (nuclear-norm or trace duality, gamma_2, LP or "
             "SDP relaxations) can prove r_eps > r0; L > r0 means the lower families pass that cap, and a cap "
             "r0 >= U rules out nothing below U.", "",
             "| eps | open | cap verified | cap not verified | no cap found | L > cap | L = cap | L < cap < U "
             "| cap >= U | median L - cap | median U - cap |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for eps in sorted(per, key=lambda e: -Fraction(e)):
        group = per[eps]
        ok = [(r, c["convex_cap"]) for r, c in group if c.get("convex_cap_verified")]
        failed = sum(1 for _, c in group if c.get("convex_cap") is not None and not c.get("convex_cap_verified"))
        none = sum(1 for _, c in group if c.get("convex_cap") is None)
        above = sum(r.L > r0 for r, r0 in ok)
        equal = sum(r.L == r0 for r, r0 in ok)
        high = sum(r0 >= r.U for r, r0 in ok)
        gaps = (f"{median(r.L - r0 for r, r0 in ok):g} | {median(r.U - r0 for r, r0 in ok):g}" if ok else "- | -")
        lines.append(f"| {eps} | {len(group)} | {len(ok)} | {failed} | {none} | {above} | {equal} | "
                     f"{len(ok) - above - equal - high} | {high} | {gaps} |")
    return lines + [""]

"""Read a panel directory into the study's table.

The rows come from ``numeric.panel.audit.audit``: every bracket file is
re-verified with the exact tier and every record checked against that pass,
so L and U are the exact pass's. Any error of that audit, an unverified cell
at the study's tolerance, a tolerance the panel did not run or a missing
column is a ``StudyError``: unverified cells are never targets. A panel too
small for an analysis (``numeric.study.compare.MIN_SOURCES`` sources,
``MIN_HEADS`` heads) is not an error here: that comparison's row carries a
one-line reason. Cells the panel dropped (decoder mass or
locality screen) have no bracket and are not study rows.
"""
from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np

from numeric.geometry import AUDIT_RATIOS, intrinsic_profile_score
from numeric.heads.domains import row_domain
from fileio.safeio import SafeIOError, escape, file_kind, missing_reason, read_json
from numeric.panel.schema import COLUMNS, PanelRow, SchemaError, check_run
from numeric.panel.audit import audit
from numeric.panel.provenance import RUN_BYTES
from numeric.panel.table import RUN_NAME
from numeric.study.blocks import BLOCKS, CATEGORICAL, gauged_column
from numeric.study.data import PanelDisagreement, StudyData, StudyError

__all__ = ["TARGETS", "load_study", "study_rows", "target_values"]

#: Targets: the normalised certified upper budget (primary), L/n, log bracket midpoint.
TARGETS = ("u_over_n", "l_over_n", "log_mid")


def _eps(text) -> Fraction:
    try:
        return Fraction(str(text))
    except (ValueError, ZeroDivisionError):
        raise StudyError(f"bad tolerance {text!r}") from None


def study_rows(out, eps, workers: int | None = None, reverify: bool = True) -> list[PanelRow]:
    """The audited rows of a panel directory at tolerance ``eps`` (all verified; ``reverify``: every
    file through the exact tier now, not from the records of its pass)."""
    out = Path(out)
    if not out.exists():
        raise StudyError(f"panel directory {escape(out)} {missing_reason(out)}")
    if not out.is_dir():
        raise StudyError(f"{escape(out)} is not a panel directory ({file_kind(out.stat().st_mode)}, not a directory)")
    if not (out / "panel.json").is_file():
        raise StudyError(f"{escape(out)} is not a panel directory (no panel.json)")
    try:        # an unreadable run record: not a panel directory (exit 2), not a panel that fails its audit
        check_run(read_json(out / RUN_NAME, limit=RUN_BYTES, root=out))
    except (SafeIOError, SchemaError) as e:
        raise StudyError(f"{escape(out)} is not a panel directory ({RUN_NAME}: {e})") from None
    a = audit(out, workers, reverify)
    if a.errors:
        raise PanelDisagreement(f"the panel's audit failed ({len(a.errors)} errors), first: {a.errors[0]}")
    want = _eps(eps)
    run_eps = sorted({Fraction(r.eps) for r in a.rows})
    rows = [r for r in a.rows if Fraction(r.eps) == want and r.ok]
    if not rows:
        raise StudyError(f"the panel did not run eps {want} (it ran {', '.join(map(str, run_eps)) or 'nothing'})")
    bad = [r.cell_id for r in rows if not r.verified]
    if bad:
        raise PanelDisagreement(f"{len(bad)} cells at eps {want} are not verified by the exact pass, first: {bad[0]}")
    return rows


def _count(v: int | None) -> float:
    """A count of a verified row (set on every one) as a float."""
    assert v is not None
    return float(v)


def target_values(rows: list[PanelRow], target: str) -> np.ndarray:
    """U/n, L/n or log((L + U) / 2) per row (n = the number of keys)."""
    L = np.array([_count(r.L) for r in rows])
    U = np.array([_count(r.U) for r in rows])
    n = np.array([_count(r.n_cols) for r in rows])
    if target == "u_over_n":
        return U / n
    if target == "l_over_n":
        return L / n
    if target == "log_mid":
        return np.log((L + U) / 2)
    raise StudyError(f"unknown target {target!r} (choose from {', '.join(TARGETS)})")


def _number(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _profile(row, eps: float) -> tuple[float, float]:
    """(finiteness flag, finite value or 0) of the profile score of a descriptor row."""
    s = intrinsic_profile_score(row, eps)
    return float(math.isfinite(s)), s if math.isfinite(s) else 0.0


def _gauged_profile(row: PanelRow, ratio: int) -> dict:
    """The intrinsic columns recomputed under the audit gauge of ``ratio``, unprefixed."""
    pre, suf = "iaudit_", f"_g{ratio}"
    return {k[len(pre):-len(suf)]: v for k, v in row.descriptors.items() if k.startswith(pre) and k.endswith(suf)}


def _with_profile(rows: list[PanelRow], eps: Fraction) -> list[dict]:
    """Per row, its descriptor columns with the I block's profile score at eps: its finite value (0 when
    infinite) and a finiteness flag; the same from each audit gauge's recomputed profile
    (``iaudit_*_g{ratio}``, numeric.panel.features) where the row has one."""
    out = []
    for r in rows:
        cols = dict(r.descriptors)
        cols["profile_finite"], cols["profile_score"] = _profile(r.descriptors, float(eps))
        for g in AUDIT_RATIOS:
            view = _gauged_profile(r, g)
            if view:
                cols[f"iaudit_profile_finite_g{g}"], cols[f"iaudit_profile_score_g{g}"] = _profile(view, float(eps))
        out.append(cols)
    return out


def _needed() -> list:
    cols = [c for b in BLOCKS.values() for c in b]
    gauged = [gauged_column(c, g) for c in cols for g in AUDIT_RATIOS]
    return list(dict.fromkeys(cols + [g for g in gauged if g]))


def _one_model_per_family(rows) -> None:
    """Two models in one family (the two ViT arms, ``python -m numeric.panel.arms``) are never pooled: their
    heads would share the family's head ids and fits (paper L.3: the arms are compared, not pooled).

    >>> vit = lambda model: PanelRow("vit", model, 0, 0, "image:0", "1/4", "ok")
    >>> _one_model_per_family([vit("digitvit"), vit("digitvit")])
    >>> _one_model_per_family([vit("digitvit"), vit("digitvit-rot90")])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    numeric.study.data.StudyError: family vit holds 2 models (digitvit, digitvit-rot90): the study never pools...
    """
    models: dict = {}
    for r in rows:
        models.setdefault(r.family, set()).add(r.model)
    for fam, names in sorted(models.items()):
        if len(names) > 1:
            raise StudyError(f"family {fam} holds {len(names)} models ({', '.join(sorted(names))}): the study never "
                             "pools two models in one family (two ViT arms are compared with python -m "
                             "numeric.panel.arms); run the study on one of them")


def load_study(out, *, eps="1/4", target: str = "u_over_n", workers: int | None = None,
               reverify: bool = True, audited: list | None = None) -> StudyData:
    """The study's table of a panel directory, or of several (a list: their rows together; a
    cell id in two of them is an error), see the module docstring. Native-causal cells are not rows
    of the table (paper L.1: not in the geometry panel; ``numeric.study.native_target``).
    ``audited``: a list that receives ``(panel dir, row)`` for every audited row at ``eps``, native
    cells included (the other targets, ``numeric.study.targets``)."""
    if target not in TARGETS:
        raise StudyError(f"unknown target {target!r} (choose from {', '.join(TARGETS)})")
    dirs = [out] if isinstance(out, (str, Path)) else out
    pairs = [(d, r) for d in dirs for r in study_rows(d, eps, workers, reverify)]
    rows = [r for _, r in pairs]
    seen: set = set()
    for r in rows:
        if r.cell_id in seen:
            raise StudyError(f"cell {r.cell_id} is in two of the panel directories")
        seen.add(r.cell_id)
    _one_model_per_family(rows)
    if audited is not None:
        audited.extend(pairs)
    rows = [r for r in rows if not r.native]
    if not rows:
        raise StudyError("the panel holds only native-causal cells at this tolerance (the study needs "
                         "their common-prefix cells)")
    table = _with_profile(rows, _eps(eps))
    cols = _needed()
    missing = [c for c in cols if c not in CATEGORICAL and c not in COLUMNS and any(c not in t for t in table)]
    if missing:
        i = next(i for i, t in enumerate(table) if missing[0] not in t)
        why = next((table[i][k] for k in ("study_error", "native_error", "geometry_error") if table[i].get(k)),
                   "rerun the panel with this version and --geometry")
        raise StudyError(f"the panel table lacks {len(missing)} study columns, first: {missing[0]} "
                         f"(cell {rows[i].cell_id}: {why})")
    sources = [r.source for r in rows]
    heads = [f"{r.family}:{r.layer}.{r.head}" for r in rows]
    families = [r.family for r in rows]
    numeric = {c: [_number(_value(r, t, c)) for r, t in zip(rows, table)] for c in cols if c not in CATEGORICAL}
    categorical = {c: [str(_value(r, t, c)) for r, t in zip(rows, table)] for c in CATEGORICAL}
    return StudyData.build(numeric, categorical, target_values(rows, target), sources, heads, families,
                           cell_ids=[r.cell_id or "" for r in rows],
                           domains=[row_domain(r.domain, r.source) for r in rows])


def _value(r: PanelRow, cols: dict, name: str):
    """A column of a row: a descriptor or profile column (``cols``, ``""`` when absent) or a typed column
    (``mass``, ``family``; ``""`` when None); ``StudyError`` for a name that is neither (``PanelRow.column``)."""
    if name in cols:
        return cols[name]
    try:
        value = r.column(name)
    except SchemaError as e:
        raise StudyError(str(e)) from None
    return "" if value is None else value

"""Heads bound to their model and records counted only with their evidence (numeric.panel.binding,
numeric.panel.audit; the trust model of docs/panel.md).

Tiny synthetic panels (``tests/report_panel.build_panel``: 8 x 8 heads, real bracket files) damaged the way
someone who can write the directory would: a head filed twice one ulp apart, a dropped record with no head
file, a relabelled effort, records trusted with ``--trust-records``. The transfer lemma is checked on a
perturbed head against brackets the exact tier verifies on it. The re-extraction itself (a model on this
machine) is ``tests/test_panel_heads.py``.
"""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from exact.matrix import ExactMatrix
from exact.norms import row_l1_norm
from exact.slack import softmax_slack_bound
from exact.verify import verify_file
from numeric.heads.extract import softmax_rows
from numeric.panel.binding import (DUPLICATE_ROW_L1, HeadCheck, head_delta, near_duplicates,
                                   fingerprint, transfer)
from numeric.panel.report import main
from numeric.panel.report_geometry import _cert_summary
from numeric.panel.schema import PanelRow
from numeric.panel.table import write_record
from numeric.search import search_brackets
from numeric.search.export import write_bracket_file
from tests.report_panel import EPS, IDENTITY, row

PROG = "python -m numeric report:"


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    """No figures: they take most of a report's time and none of these cases is about them."""
    monkeypatch.setattr("numeric.panel.report.plot_all", lambda rows, figdir, root=None: {})


def report(out, capsys, *extra) -> tuple[int, str, str]:
    rc = main([str(out), "--workers", "1", "--no-independent", *extra])
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(line.startswith(PROG) for line in err.strip().splitlines()), err
    return rc, err, (out / "report.md").read_text()


def add_head(out: Path, head: int, logits: np.ndarray) -> None:
    """One more head of the synthetic panel (as ``build_panel`` writes them): bracket file, head file, record."""
    from safetensors.numpy import save_file

    key = f"L0H{head}_s00"
    A = softmax_rows(logits)
    prov = {"model": "m", "family": "encoder", "cell_kind": "full", "layer": 0, "head": head, "source": "text:0"}
    res = search_brackets(A, list(EPS), logits=logits, id_prefix=key, attack=False, effort="quick", provenance=prov)
    write_bracket_file(out / "brackets" / f"{key}.safetensors", res.cells, res.tensors)
    save_file({"logits": logits, "matrix": A, "Q": logits[:, :2].copy(), "K": logits[:, 2:4].copy()},
              str(out / "heads" / f"{key}.safetensors"))
    rows = [row(0, head, 0, c.eps, c.lower.rank, c.upper.rank, n=8, cell_id=c.id, file=f"brackets/{key}.safetensors",
                cell_kind="full", lower_witness=c.lower.kind, upper_witness=c.upper.kind,
                slack=float(Fraction(c.target.slack))) for c in res.cells]
    write_record(out, key, {"signature": {"identity": IDENTITY}, "rows": rows})


# ---------------------------------------------------------------- the transfer lemma on a perturbed head


def test_transfer_lemma_on_a_perturbed_head(tmp_path):
    """A certified [L, U] of A moves to A' within delta: the upper witness of A is within eps + delta of A'
    (exact residual plus the proved slack), and the brackets the exact tier verifies on A' itself at
    eps -/+ delta agree with the transferred ones (U' >= L at eps - delta, L' <= U at eps + delta)."""
    eps = Fraction(1, 4)
    H = 3.0 * np.random.default_rng(7).standard_normal((8, 8))
    A = softmax_rows(H)
    res = search_brackets(A, [eps], logits=H, id_prefix="a", attack=False, effort="quick")
    cell = res.cells[0]
    H2 = H + 1e-3 * np.random.default_rng(8).standard_normal(H.shape)       # the model's head elsewhere
    A2 = softmax_rows(H2)
    delta = head_delta(A, H2, A2)
    assert delta is not None
    assert float(delta) >= float(np.max(np.abs(A - A2).sum(axis=1)))     # an upper bound on the distance
    assert delta < Fraction(1, 100)
    t = transfer(cell.lower.rank, cell.upper.rank, eps, delta)
    assert t.upper_eps == eps + delta and t.lower_eps == eps - delta
    # upper half, on the witness itself: ||softmax(H2) - P Q^T|| <= ||A2 - P Q^T|| + alpha2 <= eps + delta
    P = ExactMatrix.from_float64(res.tensors[cell.upper.fields["P"]])
    Q = ExactMatrix.from_float64(res.tensors[cell.upper.fields["Q"]])
    residual = row_l1_norm(ExactMatrix.from_float64(A2) - P @ Q.T) + softmax_slack_bound(H2, A2)
    assert Fraction(int(residual.p), int(residual.q)) <= t.upper_eps
    # both halves against brackets verified on the perturbed head at the transferred tolerances
    other = search_brackets(A2, [t.lower_eps, t.upper_eps], logits=H2, id_prefix="b", attack=False, effort="quick")
    write_bracket_file(tmp_path / "b.safetensors", other.cells, other.tensors)
    assert all(rep.verified for rep in verify_file(tmp_path / "b.safetensors"))
    by_eps = {Fraction(c.eps): c for c in other.cells}
    assert by_eps[t.lower_eps].upper.rank >= t.L
    assert by_eps[t.upper_eps].lower.rank <= t.U


def test_transfer_needs_eps_above_delta():
    t = transfer(2, 3, "1/10", Fraction(1, 10))
    assert t.lower_eps is None and "no lower bound" in t.text()
    with pytest.raises(ValueError):
        transfer(2, 3, "1/10", Fraction(-1, 10))


def test_head_delta_of_identical_heads_is_the_slack_only():
    H = np.random.default_rng(3).standard_normal((6, 6))
    A = softmax_rows(H)
    delta = head_delta(A, H, A)
    assert delta is not None and 0 <= delta < Fraction(1, 10**12)
    assert head_delta(A, H[:5], A[:5]) is None          # another shape: no delta


def test_a_head_that_is_not_bound_is_an_error_line():
    c = HeadCheck("L0H0_s00", "differs", model="m", delta=Fraction(1, 2))
    assert not c.ok and "differs by delta = 0.5 > 1/1000" in c.error()
    assert HeadCheck("k", "bound", delta=Fraction(0)).error() is None


# ---------------------------------------------------------------- near-duplicate heads


def test_fingerprint_bounds_the_distance():
    rng = np.random.default_rng(1)
    a, b = softmax_rows(rng.standard_normal((9, 9))), softmax_rows(rng.standard_normal((9, 9)))
    assert np.max(np.abs(fingerprint(a) - fingerprint(b))) <= np.max(np.abs(a - b).sum(axis=1)) + 1e-12
    m = {"a": a, "b": b}
    assert near_duplicates({k: fingerprint(v) for k, v in m.items()}, m.get) == []


def test_head_filed_twice_one_ulp_apart(panel, capsys):
    """L0H2 is L0H0's head with one logit one ulp higher: its own bracket file and record, other hashes; it is
    one head filed twice: one error line, exit 1."""
    from safetensors.numpy import load_file

    logits = load_file(str(panel / "heads" / "L0H0_s00.safetensors"))["logits"].copy()
    logits[3, 4] = np.nextafter(logits[3, 4], np.inf)
    add_head(panel, 2, logits)
    rc, err, text = report(panel, capsys)
    assert rc == 1
    dup = [line for line in err.splitlines() if "hold the same head" in line]
    assert len(dup) == 1 and "heads/L0H2_s00.safetensors and heads/L0H0_s00.safetensors" in dup[0], err
    assert f"at most {DUPLICATE_ROW_L1:g}" in dup[0]


def test_distinct_heads_are_not_duplicates(panel, capsys):
    """The negative control: a third honest head (other logits) passes."""
    add_head(panel, 2, 3.0 * np.random.default_rng(42).standard_normal((8, 8)))
    rc, err, _ = report(panel, capsys)
    assert rc == 0, err


# ---------------------------------------------------------------- nothing counted without its evidence


def dropped_row(**kw) -> dict:
    r = row(1, 5, 0, "1/4", None, None, status="dropped_mass", mass=0.01, min_mass=0.01, local_mass=0.2,
            cell_kind="full")
    for k in ("cell_id", "file", "L", "U", "n_rows", "n_cols", "lower_witness", "upper_witness", "verified",
              "lower_verified", "upper_verified", "attack_run", "attack_success", "direct_checked", "direct_passed",
              "hf_max_abs_diff", "seconds", "slack"):
        r.pop(k)
    r.update(kw)
    return r


def test_dropped_record_without_its_head_file_is_not_counted(panel, capsys):
    write_record(panel, "L1H5_s00", {"signature": {"identity": IDENTITY}, "rows": [dropped_row()]})
    rc, err, text = report(panel, capsys)
    assert rc == 1 and "cells/L1H5_s00.json: a dropped_mass row not counted: no evidence" in err, err
    assert "0 rows dropped by the mass or locality screen" in text


def test_dropped_record_with_its_head_file_is_counted(panel, capsys):
    """The positive control, and a head file whose provenance says another mass."""
    from safetensors.numpy import save_file

    write_record(panel, "L1H5_s00", {"signature": {"identity": IDENTITY}, "rows": [dropped_row()]})
    H = np.random.default_rng(5).standard_normal((4, 4))
    prov = {"model": "m", "family": "encoder", "cell_kind": "full", "layer": 1, "head": 5, "source": "text:0",
            "mass": 0.01, "min_mass": 0.01, "local_mass": 0.2}
    path = panel / "heads" / "L1H5_s00.safetensors"
    save_file({"logits": H, "matrix": softmax_rows(H)}, str(path), metadata={"provenance": json.dumps(prov)})
    rc, err, text = report(panel, capsys)
    assert rc == 0, err
    assert "1 rows dropped by the mass or locality screen" in text
    save_file({"logits": H, "matrix": softmax_rows(H)}, str(path),
              metadata={"provenance": json.dumps(dict(prov, mass=0.5))})
    rc, err, _ = report(panel, capsys)
    assert rc == 1 and "the row says mass = 0.01, its head file's provenance 0.5" in err, err


def test_relabelled_effort_is_refused_not_printed(panel, capsys):
    """panel.json and every record say effort "thorough", the bracket files "quick": the header does not print
    the forged effort as the run's."""
    ident = dict(IDENTITY, effort="thorough")
    run_doc = json.loads((panel / "panel.json").read_text())
    (panel / "panel.json").write_text(json.dumps(dict(run_doc, identity=ident)))
    for p in (panel / "cells").glob("*.json"):
        doc = json.loads(p.read_text())
        doc["signature"]["identity"] = ident
        for r in doc["rows"]:
            r["effort"] = "thorough"
        p.write_text(json.dumps(doc))
    rc, err, text = report(panel, capsys)
    assert rc == 1
    header = next(line for line in text.splitlines() if line.startswith("Produced with"))
    assert "effort preset `thorough`" not in header and "effort preset REFUSED (panel.json says `thorough`" in header


def test_relabelled_effort_of_a_row_is_an_error(panel, capsys):
    p = panel / "cells" / "L0H1_s00.json"
    doc = json.loads(p.read_text())
    doc["rows"][0]["effort"] = "thorough"
    p.write_text(json.dumps(doc))
    rc, err, _ = report(panel, capsys)
    assert rc == 1 and "the row says effort = 'thorough', the file's provenance 'quick'" in err, err


# ---------------------------------------------------------------- what the first lines say


def test_first_lines_say_the_heads_were_not_re_extracted(panel, capsys):
    rc, err, text = report(panel, capsys)
    assert rc == 0, err
    first = "\n".join(text.splitlines()[:6])
    assert "**Heads not re-extracted:**" in first and "about the head files in `heads/`" in first


def test_check_heads_without_the_model_exits_1(panel, capsys):
    """panel.json names no model here (the synthetic panel's identity has none): every head is listed as not
    re-extracted, and the command exits 1; then a model path that is not on this machine."""
    rc, err, text = report(panel, capsys, "--check-heads")
    assert rc == 1 and err.count("was not re-extracted: panel.json names no model") == 2, err
    assert "0 byte-identical (bound to the model)" in text and "2 not re-extracted" in text
    ident = dict(IDENTITY, model=str(panel / "no-such-model"))
    run_doc = json.loads((panel / "panel.json").read_text())
    (panel / "panel.json").write_text(json.dumps(dict(run_doc, identity=ident)))
    for p in (panel / "cells").glob("*.json"):
        doc = json.loads(p.read_text())
        doc["signature"]["identity"] = ident
        p.write_text(json.dumps(doc))
    rc, err, _ = report(panel, capsys, "--check-heads")
    assert rc == 1 and "model m is not here" in err, err


def test_bad_head_tolerance_is_bad_input(panel, capsys):
    assert main([str(panel), "--check-heads", "--head-tolerance", "x"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_trust_records_announced_and_never_called_re_verified(panel, capsys):
    """The first run leaves records of its exact pass; the second reads them: stderr and the first lines say
    so, and the integrity table does not call those brackets re-verified."""
    assert report(panel, capsys)[0] == 0
    rc, err, text = report(panel, capsys, "--trust-records")
    assert rc == 0 and err.startswith(f"{PROG} --trust-records:"), err
    assert "**Trusted records:**" in "\n".join(text.splitlines()[:4])
    assert "re-verified exactly" not in text
    assert "the pass of 2 bracket files read from records in `verified/`, not run for this report" in text


def test_recorded_descriptor_bounds_are_not_called_certified():
    """The ``*_cert`` descriptor columns are the records' (forgeable): the geometry section names them so."""
    rows = [PanelRow("encoder", "m", 0, h, "text:0", "1/4", "ok", L=2, U=3,
                     descriptors={"kappa_upper": 2.0, "kappa_upper_cert": 99.0}) for h in range(2)]
    text = "\n".join(_cert_summary(rows))
    assert "certified" not in text and "read from its records, not re-checked" in text


def test_study_announces_trust_records(tmp_path, capsys):
    """The study says on stderr, before any work, that records are trusted (here the directory is no panel,
    so it then stops with exit 2)."""
    from numeric.study.cli import main as study_main

    (tmp_path / "p").mkdir()
    assert study_main([str(tmp_path / "p"), "--trust-records", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "--trust-records:" in err.splitlines()[0] and "no second checker" in err


def test_study_md_first_lines_say_records_were_trusted():
    from numeric.study.results import StudyResults

    setup = {"panel": "p", "target": "u_over_n", "eps": "1/4", "cells": 3, "sources": 1, "heads": 3,
             "families": ["encoder"], "folds": 2, "replicates": 0, "permutations": 1, "seed": 0, "seconds": 1.0,
             "caution": [], "gbm_replicates": 0}
    trusted = StudyResults("c", dict(setup, trusted_records=True), {}, [], []).to_markdown()
    plain = StudyResults("c", setup, {}, [], []).to_markdown()
    assert "**Trusted records**" in "\n".join(trusted.splitlines()[:6]) and "verified cells" not in trusted
    assert "Trusted records" not in plain and "3 verified cells" in plain

"""The typed contracts between the stages: the bracket cell (``exact.cellspec.CellSpec``), the search's
``BracketResult``, the panel row (``numeric.panel.schema.PanelRow``) and the provenance records
(``numeric.panel.provenance``). Each check has its negative control."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from exact.bracketfile import read_bracket_file
from exact.cellspec import LOWER_KINDS, UPPER_KINDS, CellSpec, Claim, TargetSpec
from exact.errors import MalformedInput
from fileio.bracketwriter import write_bracket_file
from numeric.panel.provenance import CellProvenance, PanelRun
from numeric.panel.schema import ROW_SCHEMA, PanelRow, SchemaError, check_record

ROOT = Path(__file__).resolve().parents[1]

#: One valid claim of every witness kind, on a 2 x 2 target ``A`` (names of tensors in ``TENSORS``).
CLAIMS = {
    ("lower", "trivial"): Claim.of(1, "trivial"),
    ("lower", "reconstruction"): Claim.of(2, "reconstruction", R="I", X="I", L="I"),
    ("lower", "row_reconstruction"): Claim.of(2, "row_reconstruction", G="I", Z="I", M="I"),
    ("lower", "frobenius"): Claim.of(2, "frobenius", k=1),
    ("upper", "trivial"): Claim.of(2, "trivial"),
    ("upper", "factors"): Claim.of(2, "factors", P="I", Q="I"),
}
TENSORS = {"A": np.eye(2), "H": np.zeros((2, 2)) + np.eye(2), "I": np.eye(2)}


def test_every_kind_has_a_claim_here():
    assert {k for s, k in CLAIMS if s == "lower"} | {"odd_map"} == set(LOWER_KINDS)
    assert {k for s, k in CLAIMS if s == "upper"} == set(UPPER_KINDS)


def test_writer_and_reader_share_the_cell(tmp_path):
    """What a producer builds is what the reader gives back, field for field (the odd map has its own file)."""
    lowers = [c for (side, _), c in CLAIMS.items() if side == "lower"]
    uppers = [c for (side, _), c in CLAIMS.items() if side == "upper"]
    cells = [CellSpec(f"c{i}", "1/4", TargetSpec("A") if i % 2 else TargetSpec("A", "H", "1/1024"), low, up,
                      {"producer": "test", "i": i} if i else None)
             for i, (low, up) in enumerate((lo, up) for lo in lowers for up in uppers)]
    path = write_bracket_file(tmp_path / "all.safetensors", cells, TENSORS)
    read = read_bracket_file(path)
    assert [c.spec for c in read.cells] == cells
    assert read.cells[0].provenance == {} and read.cells[1].provenance == {"producer": "test", "i": 1}
    assert str(read.cells[0].target.slack) == "1/1024" and read.cells[1].target.slack is None
    oddmap = read_bracket_file(ROOT / "tests" / "data" / "oddmap.safetensors")
    assert {c.spec.lower.kind for c in oddmap.cells} == {"odd_map"}
    assert all(CellSpec(**vars(c.spec)) == c.spec for c in oddmap.cells)


@pytest.mark.parametrize("build, needle", [
    (lambda: CellSpec("c", "1/4", TargetSpec("A"), Claim.of(2, "factors", P="I", Q="I"), Claim.of(2, "trivial")),
     "lower: unknown witness kind 'factors'"),
    (lambda: CellSpec("c", "1/4", TargetSpec("A"), Claim.of(1, "trivial"), Claim.of(2, "frobenius", k=1)),
     "upper: unknown witness kind 'frobenius'"),
    (lambda: CellSpec("c", "1/4", TargetSpec("A"), Claim.of(2, "reconstruction", R="I", X="I"), Claim.of(2, "trivial")),
     "has fields ['R', 'X'], needs ['L', 'R', 'X']"),
    (lambda: CellSpec("c", "1/4", TargetSpec("A"), Claim.of(2, "frobenius", k=-1), Claim.of(2, "trivial")),
     "witness k must be a int >= 0"),
    (lambda: CellSpec("c", "1/4", TargetSpec("A"), Claim.of(2, "frobenius", k="1"), Claim.of(2, "trivial")),
     "witness k must be a int >= 0"),
    (lambda: CellSpec("c", "1/4", TargetSpec("A"), Claim.of(1, "trivial"), Claim.of(2, "factors", P="I", Q=3)),
     "witness Q must be a tensor name"),
    (lambda: CellSpec("c", "1/4", TargetSpec("A"), Claim.of(True, "trivial"), Claim.of(2, "trivial")),
     "rank must be a non-negative int"),
    (lambda: CellSpec("c", "1/4", TargetSpec("A"), Claim.of(-1, "trivial"), Claim.of(2, "trivial")),
     "rank must be a non-negative int"),
    (lambda: TargetSpec("A", "H"), "needs both logits and slack"),
    (lambda: CellSpec("c", 0.25, TargetSpec("A"), Claim.of(1, "trivial"), Claim.of(2, "trivial")),
     "id and eps must be strings"),
])
def test_a_producer_cannot_build_a_malformed_cell(build, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        build()


def test_the_reader_validates_before_it_builds_the_spec(tmp_path):
    """A hostile file's malformed cell is the reader's one-line MalformedInput, never CellSpec's ValueError."""
    raw = {"id": "c", "eps": "1/4", "target": {"matrix": "A"}, "upper": {"rank": 2, "witness": {"kind": "trivial"}},
           "lower": {"rank": 2, "witness": {"kind": "factors", "P": "I", "Q": "I"}}}
    path = write_bracket_file(tmp_path / "bad.safetensors", [raw], TENSORS)
    with pytest.raises(MalformedInput, match="unknown witness kind 'factors'"):
        read_bracket_file(path)
    raw["lower"] = {"rank": 1, "witness": {"kind": "trivial"}}       # the control: the same file, valid
    assert read_bracket_file(write_bracket_file(tmp_path / "ok.safetensors", [raw], TENSORS)).cells[0].lower.rank == 1


def test_no_producer_writes_a_cell_by_hand():
    """The producers build ``CellSpec``: no witness JSON literal in the packages that write bracket files."""
    hits = []
    for pkg in ("fileio", "numeric", "oracles", "proofs_checks", "softrank"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            for n, line in enumerate(p.read_text().splitlines(), 1):
                if re.search(r'["\']witness["\']\s*:', line):
                    hits.append(f"{p.relative_to(ROOT)}:{n}")
    assert hits == []
    assert re.search(r'["\']witness["\']\s*:', '{"witness": {"kind": "trivial"}}')     # the pattern can fire


def test_bracket_result_takes_keywords_only():
    from numeric.search.driver import BracketResult

    r = BracketResult(eps="1/4", lower=1, upper=2, lower_witness="trivial", upper_witness="trivial", seconds=0.0,
                      slack=None, attack_success=None)
    assert (r.lower, r.upper, r.capped) == (1, 2, False)
    with pytest.raises(TypeError):
        BracketResult("1/4", 1, 2, "trivial", "trivial", 0.0, None, None)


#: A row as the panel of commit 8cb9f0b writes it (/work/runs/study16): typed columns and descriptors.
OLD_ROW = {"L": 10, "U": 21, "attack_run": True, "attack_success": False, "b0_domain": "text", "b1_logit_rank": 21,
           "capped": False, "cell_id": "L0H0_s00/eps=1/4", "cell_kind": "full", "direct_checked": True,
           "direct_passed": True, "effort": "quick", "eps": "1/4", "family": "encoder",
           "file": "brackets/L0H0_s00.safetensors", "gamma_native_g4": 17.9, "geometry_seconds": 1.1, "head": 0,
           "hf_max_abs_diff": 7.8e-08, "iaudit_tau0_g4": 1.77, "kappa_upper": 4.9, "layer": 0, "local_mass": None,
           "lower_verified": True, "lower_witness": "row_reconstruction/far-rows-lp", "mass": 1.0, "min_mass": 1.0,
           "model": "all-MiniLM-L6-v2", "n_cols": 256, "n_rows": 256, "q_residual": 5.67, "seconds": 3.915,
           "seed": 8488295891416455233, "slack": 7.1e-14, "source": "text:0", "status": "ok", "svd_rank": 47,
           "svd_r1_kappa": 1.87, "tau0": 1.77, "upper_verified": True, "upper_witness": "factors/refined",
           "verified": True, "width_spectrum_gap": 2.36, "study_error": None}


def test_rows_of_the_current_layout_are_read_and_written_back():
    r = PanelRow.from_json(OLD_ROW)
    assert (r.L, r.U, r.verified, r.model, r.local_mass) == (10, 21, True, "all-MiniLM-L6-v2", None)
    assert r.descriptors["kappa_upper"] == 4.9 and r.column("kappa_upper") == 4.9 and r.column("c_rank") is None
    assert r.to_json() == {k: v for k, v in OLD_ROW.items() if v is not None or k == "study_error"}
    doc = {"signature": {}, "rows": [OLD_ROW]}                       # no "schema" key: version 1
    assert check_record(doc) == [r] == check_record(dict(doc, schema=ROW_SCHEMA))


@pytest.mark.parametrize("change, needle", [
    ({"lowr_witness": "x"}, "unknown key 'lowr_witness'"),
    ({"Kappa_upper": 1.0}, "unknown key 'Kappa_upper'"),
    ({"kappa_upper": [1.0]}, "kappa_upper is not a number, a short string"),
    ({"L": None}, "L is not an integer"),
    ({"L": "3"}, "L is not an integer"),
])
def test_a_row_key_that_does_not_fit_is_named(change, needle):
    with pytest.raises(SchemaError, match=re.escape(needle)):
        PanelRow.from_json(dict(OLD_ROW, **change))


@pytest.mark.parametrize("key", ["L", "status", "cell_id", "verified", "eps"])
def test_a_missing_row_key_is_named(key):
    row = {k: v for k, v in OLD_ROW.items() if k != key}
    with pytest.raises(SchemaError, match=re.escape(f"missing key {key!r}")):
        PanelRow.from_json(row)
    dropped = {k: OLD_ROW[k] for k in ("family", "model", "layer", "head", "source", "eps")}
    assert PanelRow.from_json(dict(dropped, status="dropped_mass")).L is None     # a dropped row has no bracket


def test_records_of_another_schema_are_refused():
    for schema in (2, "1", 1.0, True):
        with pytest.raises(SchemaError, match="not a row schema this reader knows"):
            check_record({"signature": {}, "rows": [OLD_ROW], "schema": schema})


def test_a_misspelt_column_is_an_error_not_none():
    r = PanelRow.from_json(OLD_ROW)
    for name in ("kapa_upper", "Verified", "l"):
        with pytest.raises(SchemaError, match=f"unknown column {name!r}"):
            r.column(name)
    assert r.column("verified") is True and r.column("svd_r8_kappa") is None


def test_typed_provenance_reads_what_the_report_checks():
    prov = {"model": "m", "family": "decoder", "model_type": "gpt2", "layer": 1, "head": 2, "source": "text:0",
            "cell_kind": "prefix-block", "odd": [1], "search": {"effort": "quick", "lower_family": "decoded",
                                                                "versions": {"numpy": "2.0"},
                                                                "code": {"version": "0.1.0", "commit": "abc",
                                                                         "dirty": False, "x": 1}, "seconds": 3.0}}
    p = CellProvenance.from_json(prov)
    assert p.label("layer") == 1 and p.label("odd") is None and p.search.effort == "quick"
    assert p.to_json() == {"model": "m", "family": "decoder", "model_type": "gpt2", "layer": 1, "head": 2,
                           "source": "text:0", "cell_kind": "prefix-block",
                           "search": {"effort": "quick", "lower_family": "decoded", "versions": {"numpy": "2.0"},
                                      "code": {"version": "0.1.0", "commit": "abc", "dirty": False}}}
    bad = CellProvenance.from_json({"search": {"versions": {"numpy": [2]}, "code": "x", "effort": {"a": 1}}})
    assert bad.search.versions is None and bad.search.code is None and bad.search.effort is None
    assert CellProvenance.from_json("not an object").to_json() == {"search": {}}
    run = PanelRun.from_json({"identity": {"effort": "quick", "eps": ["1/4"], "code": {"version": "0.1.0"},
                                           "versions": {"numpy": "2.0"}}, "summary": None})
    assert (run.effort, run.eps, run.project_version, dict(run.versions)) == ("quick", ["1/4"], "0.1.0",
                                                                              {"numpy": "2.0"})
    assert PanelRun.from_json({}).eps is None and PanelRun.from_json({}).project_version is None

"""The study end to end on a tiny BERT (panel with the study columns, then study),
its bad input (one-line errors, exit 2) and the study preset's roster."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.panel_helpers import cli, one_line_error, save_tiny

HEADS, SOURCES = ("0.1", "1.2"), 4   # 4 sources: the fewest the source cross-fitting runs on
PANEL = ["--heads", ",".join(HEADS), "--sources", str(SOURCES), "--length", "12", "--eps", "1/4,1/2",
         "--effort", "quick", "--workers", "1", "--quiet", "--no-attack"]


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    from numeric.panel.cli import main

    model = save_tiny(tmp_path_factory.mktemp("bert"), "bert")
    out = tmp_path_factory.mktemp("panel")
    assert main(["--model", str(model), "--out", str(out), *PANEL]) == 0
    return model, out


@pytest.fixture(scope="module")
def study(panel, tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    proc = cli("study", panel[1], "--out", out, "--replicates", "4", "--workers", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "caution: family" in proc.stderr          # 4 sources: below the calibrated shape
    return out, json.loads(proc.stdout)


def test_panel_rows_carry_the_study_columns(panel):
    rows = list(csv.DictReader(open(panel[1] / "cells.csv")))
    assert len(rows) == len(HEADS) * SOURCES * 2
    for r in rows:
        assert "study_error" not in r or not r["study_error"]
        assert 0 <= int(r["b1_logit_rank"]) <= 8          # head_dim of the tiny BERT is 32 / 4
        assert 0 <= float(r["b0_depth"]) <= 1 and r["b0_domain"] == "text"
        assert float(r["b1_entropy_min"]) <= float(r["b1_entropy_q50"])
        for g in (4, 16):   # the whole intrinsic profile, recomputed under a non-dyadic gauge, agrees
            for col in ("q_residual", "tau0", "kappa_lower", "kappa_upper", "svd_r1_kappa", "svd_r1_tau"):
                assert float(r[f"iaudit_{col}_g{g}"]) == pytest.approx(float(r[col]), rel=1e-6, abs=1e-9), col


def test_study_end_to_end(panel, study):
    out, summary = study
    doc = json.loads((out / "study.json").read_text())
    assert summary["setup"]["cells"] == len(HEADS) * SOURCES and doc["setup"]["sources"] == SOURCES
    assert {c["name"] for c in doc["comparisons"]} >= {"B1 vs B1+G", "B1 vs B1+I", "B1+G vs B1+G+I"}
    assert (out / "study.md").read_text().count("| B1 vs B1+G |") >= 1 and (out / "figures" / "gains.png").is_file()
    assert (out / "figures" / "heldout.png").is_file()
    # the targets are U/n of the table's rows at eps 1/4, read here independently of the study
    table = {r["cell_id"]: r for r in csv.DictReader(open(panel[1] / "cells.csv")) if r["eps"] == "1/4"}
    preds = list(csv.DictReader(open(out / "predictions.csv")))
    assert {p["cell_id"] for p in preds} == set(table)
    for p in preds:
        assert float(p["target"]) == float(table[p["cell_id"]]["U"]) / float(table[p["cell_id"]]["n_cols"])
        assert np.isfinite(float(p["pred_B1+G+I"]))
    assert {g["ratio"] for g in doc["gauge"]} == {4, 16}
    # I is recomputed under the gauges and moves only by solver tolerance; every I column is audited
    for g in doc["gauge"]:
        if g["model"] in ("B0+I", "B1+I"):
            assert g["max_feature_move"] < 1e-6


@pytest.mark.parametrize("target", ["l_over_n", "log_mid"])
def test_secondary_targets(panel, tmp_path, capsys, target):
    """``--target l_over_n`` and ``--target log_mid``: L/n and log((L + U) / 2) of the table's rows."""
    rc, err = study_main(capsys, panel[1], "--out", tmp_path, "--target", target, "--replicates", "2",
                         "--workers", "1", *(["--gbm", "1"] if target == "log_mid" else []))
    assert rc == 0, err
    doc = json.loads((tmp_path / "study.json").read_text())
    from numeric.study.protocol import comparisons

    assert doc["setup"]["target"] == target and len(doc["comparisons"]) == len(comparisons())
    table = {r["cell_id"]: r for r in csv.DictReader(open(panel[1] / "cells.csv")) if r["eps"] == "1/4"}
    for p in csv.DictReader(open(tmp_path / "predictions.csv")):
        L, U, n = (float(table[p["cell_id"]][k]) for k in ("L", "U", "n_cols"))
        assert float(p["target"]) == pytest.approx(L / n if target == "l_over_n" else np.log((L + U) / 2), rel=1e-12)
    for c in doc["comparisons"]:
        e = c["estimates"]["aggregate"]
        assert c["reason"] is None and np.isfinite(e["delta"])
        if c["note"]:   # leave one head out with 2 heads: descriptive, no interval
            assert "descriptive" in c["note"] and e["equivalence"] == "not shown (descriptive)"
            continue
        assert e["delta_ci"][0] <= e["delta"] <= e["delta_ci"][1]
        assert e["equivalence"] in ("not shown (small panel)", "not shown", "different")   # 4 sources: caution
    assert target in (tmp_path / "study.md").read_text()
    if target == "log_mid":   # the boosted robustness check's plumbing
        assert [c["name"] for c in doc["gbm"]] == ["B1 vs B1+G", "B1 vs B1+I"]
        assert "gradient-boosted" in (tmp_path / "study.md").read_text()


def study_main(capsys, *args):
    """``python -m numeric study ARGS`` in this process: (exit status, stderr)."""
    from numeric.study.cli import main

    capsys.readouterr()
    rc = main([str(a) for a in args])
    return rc, capsys.readouterr().err


def bad(capsys, needle, *args, code=2):
    rc, err = study_main(capsys, *args, "--workers", "1")
    lines = err.strip().splitlines()
    assert rc == code and len(lines) == 1 and needle in lines[0], err


def test_study_is_reproducible(panel, study, tmp_path, capsys):
    assert study_main(capsys, panel[1], "--out", tmp_path, "--replicates", "4", "--workers", "1")[0] == 0
    a = json.loads((study[0] / "study.json").read_text())["comparisons"]
    assert json.loads((tmp_path / "study.json").read_text())["comparisons"] == a


def test_the_figure_draws_an_interval_that_misses_its_point(tmp_path):
    """A percentile interval need not contain its point estimate (few draws, a skewed gain):
    the figure draws it all the same (it once raised on a negative error bar)."""
    from numeric.study.write import _figure

    doc = {"comparisons": [{"name": "B1 vs B1+G", "estimates": {"aggregate": {"rho": 0.1, "rho_ci": [0.2, 0.3]}}},
                           {"name": "B1 vs B1+I", "estimates": {"aggregate": {"rho": 0.0, "rho_ci": [-0.1, 0.1]}}}]}
    _figure(doc, tmp_path / "gains.png", tmp_path)
    assert (tmp_path / "gains.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _without(src: Path, dst: Path, drop) -> Path:
    """A copy of a panel directory without the cells whose key satisfies ``drop``."""
    shutil.copytree(src, dst)
    for sub in ("cells", "brackets", "heads"):
        for p in (dst / sub).iterdir():
            if drop(p.stem):
                p.unlink()
    return dst


def test_bad_input(panel, tmp_path, capsys):
    out = panel[1]
    one_line_error(cli("study", tmp_path / "none"), "does not exist")
    bad(capsys, "did not run eps 1/8", out, "--eps", "1/8")
    bad(capsys, "--replicates", out, "--replicates", "-1")
    bad(capsys, "--permutations", out, "--permutations", "0")
    bad(capsys, "does not exist", "--calibrate", tmp_path / "none")
    bad(capsys, "not a panel directory", "--calibrate", tmp_path)
    bad(capsys, "--shape", "--calibrate", "--shape", "enc=8")
    bad(capsys, "give a panel directory")
    missing = shutil.copytree(out, tmp_path / "m")
    for p in (missing / "cells").glob("*.json"):
        doc = json.loads(p.read_text())
        for r in doc["rows"]:
            r.pop("b1_logit_rank", None)
        p.write_text(json.dumps(doc))
    bad(capsys, "b1_logit_rank", missing)
    for name, change in (("misspelt", lambda r: r.update(lowr_witness=r["lower_witness"])),
                         ("dropped", lambda r: r.pop("U"))):      # an unknown key, a missing key: named
        damaged = shutil.copytree(out, tmp_path / name)
        rec = sorted((damaged / "cells").glob("*.json"))[0]
        doc = json.loads(rec.read_text())
        change(doc["rows"][0])
        rec.write_text(json.dumps(doc))
        # a record the audit cannot read fails the audit: exit 1, as numeric report exits
        bad(capsys, "unknown key 'lowr_witness'" if name == "misspelt" else "missing key 'U'", damaged, code=1)
    forged = shutil.copytree(out, tmp_path / "f")
    rec = sorted((forged / "cells").glob("*.json"))[0]
    doc = json.loads(rec.read_text())
    doc["rows"][0]["U"] = int(doc["rows"][0]["U"]) + 1   # a record the exact pass does not back
    rec.write_text(json.dumps(doc))
    bad(capsys, "audit failed", forged, code=1)      # the exact pass contradicts a record: exit 1


def test_too_small_panels_get_a_reason_in_the_row(panel, tmp_path, capsys):
    """Small panels: 3 sources skip the source-fold rows, 1 head skips the head analyses, each with a
    one-line reason in its row; the study itself runs (exit 0) and says so."""
    out = panel[1]
    for name, drop, needle, kind in (("s", lambda k: k.endswith("_s03"), "3 sources", "source"),
                                     ("h", lambda k: k.startswith("L1H2"), "1 head", "head")):
        small = _without(out, tmp_path / name, drop)
        rc, err = study_main(capsys, small, "--out", tmp_path / f"{name}-study", "--replicates", "2", "--workers", "1")
        assert rc == 0, err
        doc = json.loads((tmp_path / f"{name}-study" / "study.json").read_text())
        skipped = [c for c in doc["comparisons"] if c["reason"]]
        assert skipped and all(needle in c["reason"] and "\n" not in c["reason"] and not c["estimates"] for c in skipped)
        if kind == "head":
            assert {c["name"] for c in skipped} >= {"B1 vs B1+G, leave one head out", "B1 vs B1+G, within-head demeaned"}
            assert not any(c["reason"] for c in doc["comparisons"] if c["name"] == "B1 vs B1+G")
        assert "skipped:" in (tmp_path / f"{name}-study" / "study.md").read_text()


def test_study_roster_rule(tmp_path):
    from numeric.panel.cli import study_roster

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "num_hidden_layers": 2,
                                                       "num_attention_heads": 8}))
    assert study_roster(str(tmp_path)) == [(l, h) for l in range(2) for h in (0, 2, 4, 6)]
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "num_hidden_layers": 6,
                                                       "num_attention_heads": 12}))
    assert study_roster(str(tmp_path))[:4] == [(0, 0), (0, 3), (0, 6), (0, 9)] and len(study_roster(str(tmp_path))) == 24


def test_several_panel_directories_are_one_study(panel, study, tmp_path, capsys):
    """Cells split over two directories give the study of the one directory; a cell in both is refused."""
    out = panel[1]
    first = _without(out, tmp_path / "a", lambda k: k.endswith("_s02"))
    second = _without(out, tmp_path / "b", lambda k: not k.endswith("_s02"))
    rc, err = study_main(capsys, first, second, "--out", tmp_path / "s", "--replicates", "4", "--workers", "1")
    assert rc == 0, err
    got = json.loads((tmp_path / "s" / "study.json").read_text())
    want = json.loads((study[0] / "study.json").read_text())
    assert got["setup"]["cells"] == want["setup"]["cells"]
    for g, w in zip(got["comparisons"], want["comparisons"]):
        assert g["name"] == w["name"]
        assert g["estimates"]["aggregate"]["delta"] == pytest.approx(w["estimates"]["aggregate"]["delta"], abs=1e-9)
    bad(capsys, "in two of the panel directories", first, out)


def test_records_of_the_exact_pass_are_bound_to_file_and_checker(panel, tmp_path, monkeypatch):
    """The panel records its exact pass of every bracket file (``DIR/verified``); the audit reads a
    record only for the same file bytes and the same checker code, re-verifies anything else (and
    rewrites the record), and ``reverify`` ignores every record."""
    from numeric.heads.zoo.common import file_sha256
    from numeric.panel import audit as audit_mod
    from numeric.panel import vcache

    out = shutil.copytree(panel[1], tmp_path / "p")
    files = sorted((out / "brackets").glob("*.safetensors"))
    records = sorted((out / vcache.VERIFIED_DIR).glob("*.json"))
    assert {p.stem for p in records} == {file_sha256(f) for f in files}   # written by the panel

    verified = []
    real = audit_mod.verify_files
    monkeypatch.setattr(audit_mod, "verify_files", lambda paths, workers=None: verified.extend(paths) or real(paths, 1))
    first = audit_mod.audit(out, 1, reverify=False)
    assert not first.errors and not verified                  # every file from its record

    rec = out / vcache.VERIFIED_DIR / f"{file_sha256(files[0])}.json"
    doc = json.loads(rec.read_text())
    doc["checker_sha256"] = "0" * 64                          # another checker's pass
    rec.write_text(json.dumps(doc))
    forged = out / vcache.VERIFIED_DIR / f"{file_sha256(files[1])}.json"
    doc = json.loads(forged.read_text())
    doc["file_sha256"] = "f" * 64                             # a record of other bytes under this name
    forged.write_text(json.dumps(doc))
    changed = files[2]
    data = bytearray(changed.read_bytes())
    data[-1] ^= 1                                             # a file whose bytes no longer match
    changed.write_bytes(bytes(data))
    audit_mod.audit(out, 1, reverify=False)
    by_digest = {file_sha256(f): str(f) for f in files}
    assert sorted(verified) == sorted([by_digest[rec.stem], str(files[1]), str(changed)])
    assert vcache.lookup(out, rec.stem) is not None           # rewritten by this checker
    assert vcache.lookup(out, file_sha256(changed)) is not None   # the changed bytes' own record

    verified.clear()
    audit_mod.audit(out, 1, reverify=True)
    assert sorted(verified) == sorted(map(str, files))


def test_calibrate_reads_the_panels_shape(panel, capsys):
    """``--calibrate DIR``: the self-check at the panel's shape (its family, heads, sources and
    head-constant columns: the weight spectra are constant within a head); 2 replications keep
    it to seconds, so only the plumbing and the report's lines are checked here."""
    from numeric.study.cli import main

    capsys.readouterr()
    rc = main(["--calibrate", str(panel[1]), "--calibrations", "2", "--workers", "1", "--scan", "2"])
    out = capsys.readouterr().out
    assert rc in (0, 1), out
    assert f"{len(HEADS)} heads x {SOURCES} sources" in out
    n_const = int(out.split("; ")[1].split(" head-constant")[0])
    assert n_const >= 15                                   # the 15 weight-spectrum columns at least
    for needle in ("false-positive rate", "power at planted rho", "leave one head out", "caution threshold"):
        assert needle in out


def test_one_domain_panel_skips_the_transfer_rows(study):
    """The domain-transfer rows (numeric.study.transfer) on a panel of one domain: each skipped with a
    one-line reason in study.json and study.md; the study itself ran (exit 0)."""
    out, _ = study
    rows = json.loads((out / "study.json").read_text())["transfer"]
    assert len(rows) == 4 and all(r["reason"].startswith("skipped: no family has two domains")
                                  and "one domain (docs)" in r["reason"] and not r["estimates"] for r in rows)
    md = (out / "study.md").read_text()
    assert "## Domain transfer" in md and md.count("skipped: no family has two domains") == 4

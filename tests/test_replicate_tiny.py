"""``python -m numeric replicate`` end to end on a tiny BERT: run, resume, record, check (the three outcomes and
their exit codes), a tampered rebuild and a failing command.

A registry of its own (``--registry``) names one panel (2 heads x 4 sources, eps 1/4) and the study read from it.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from numeric.replicate.cli import main
from tests.panel_helpers import save_tiny

PANEL = ["--heads", "0.1,1.2", "--sources", "4", "--length", "12", "--eps", "1/4", "--effort", "quick",
         "--no-attack"]


def registry(path: Path, model: Path, study: bool = True) -> Path:
    steps = [{"kind": "panel", "out": "tiny", "args": ["--model", str(model), *PANEL]}]
    if study:
        steps.append({"kind": "study", "out": "tiny-study", "panels": ["tiny"],
                      "args": ["--replicates", "4", "--jobs", "1"]})
    doc = {"format": 1, "runs": {"tiny": {"about": "a tiny BERT panel", "cited": [], "steps": steps,
                                           "slice": ["L0H1_s00", "L1H2_s01"]}}}
    path.write_text(json.dumps(doc))
    return path


def rep(reg: Path, *args) -> int:
    return main(["--registry", str(reg), *map(str, args)])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    base = tmp_path_factory.mktemp("replicate")
    model = save_tiny(base / "bert", "bert")
    reg = registry(base / "registry.json", model)
    out, manifest = base / "run", base / "tiny.json"
    assert rep(reg, "tiny", "--out", out, "--workers", "1") == 0
    assert rep(reg, "tiny", "--record", out, "--manifest", manifest, "--workers", "1") == 0
    return reg, out, manifest, model


def test_record_reads_the_exact_pass(recorded):
    _, out, manifest, _ = recorded
    doc = json.loads(manifest.read_text())
    assert doc["status"] == "recorded" and doc["machine"]["cores"] >= 1
    (panel,) = doc["panels"]
    assert panel["cells"] == 8 and len(panel["rows"]) == 8 and panel["dropped"] == []
    key = panel["rows"][0][0]
    assert (out / "tiny" / "brackets" / f"{key}.safetensors").is_file()
    assert panel["run"]["code"]["source_sha256"] and panel["measured"]["from"] == "replicate"
    (study,) = doc["studies"]
    assert study["headline"]["setup"]["cells"] == 8 and "B1 vs B1+G" in study["headline"]["comparisons"]


def test_a_second_call_resumes(recorded, capsys):
    reg, out, _, _ = recorded
    assert rep(reg, "tiny", "--out", out, "--workers", "1") == 0
    text = capsys.readouterr().out
    assert "done before on the same panel tables, skipped" in text
    stamp = json.loads((out / "replicate.json").read_text())
    assert len(stamp["steps"]["tiny"]["calls"]) == 2 and len(stamp["steps"]["tiny-study"]["calls"]) == 1


def test_check_identical(recorded, capsys):
    reg, out, manifest, _ = recorded
    assert rep(reg, "tiny", "--check", out, "--manifest", manifest, "--workers", "1") == 0
    text = capsys.readouterr().out
    assert "9 identical, 0 same brackets, 0 different" in text and "nothing differs" in text


def test_check_same_brackets_other_bytes(recorded, tmp_path, capsys):
    """Other bytes (another CPU), the same verified L and U: exit 0, said as such."""
    reg, out, manifest, _ = recorded
    doc = json.loads(manifest.read_text())
    row = doc["panels"][0]["rows"][0]
    for r in doc["panels"][0]["rows"]:
        if r[0] == row[0]:
            r[9] = "0" * 64
            r[6] = "1" * 64
    study = doc["studies"][0]
    study["study_canonical_sha256"] = "0" * 64
    name = next(iter(study["headline"]["comparisons"]))
    est = study["headline"]["comparisons"][name]["aggregate"]
    est["delta"] += 1e-9
    other = tmp_path / "m.json"
    other.write_text(json.dumps(doc))
    assert rep(reg, "tiny", "--check", out, "--manifest", other, "--workers", "1") == 0
    text = capsys.readouterr().out
    assert (f"same brackets: tiny/{row[0]}: 1 bracket(s) with the same verified L and U, other bytes "
            "(head logits differ)") in text
    assert "same brackets: tiny-study/study.json: the same reading" in text


def test_check_different_bracket_and_reading(recorded, tmp_path, capsys):
    reg, out, manifest, _ = recorded
    doc = json.loads(manifest.read_text())
    row = doc["panels"][0]["rows"][1]
    row[9] = "0" * 64
    row[3] += 1
    study = doc["studies"][0]
    study["study_canonical_sha256"] = "0" * 64
    study["headline"]["reading"] = {"G": "a planted verdict"}
    other = tmp_path / "m.json"
    other.write_text(json.dumps(doc))
    assert rep(reg, "tiny", "--check", out, "--manifest", other, "--workers", "1") == 1
    text = capsys.readouterr().out
    assert f"different: tiny/{row[0]}: eps 1/4: L {row[2]}, U {row[3]} -> {row[3] - 1} (-1)" in text
    assert "different: tiny-study/study.json: reading.G: a planted verdict -> " in text


def test_check_tampered_or_incomplete_rebuild(recorded, tmp_path, capsys):
    reg, out, manifest, _ = recorded
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    key = json.loads(manifest.read_text())["panels"][0]["rows"][2][0]
    (copy / "tiny" / "heads" / f"{key}.safetensors").unlink()         # the row is no longer bound to its head
    (copy / "tiny-study" / "study.json").unlink()
    assert rep(reg, "tiny", "--check", copy, "--manifest", manifest, "--workers", "1") == 1
    text = capsys.readouterr().out
    assert f"different: tiny/{key}: missing from the rebuilt run" in text
    assert "different: tiny: integrity:" in text and "tiny-study/study.json: missing" in text
    assert rep(reg, "tiny", "--record", copy, "--manifest", tmp_path / "x.json", "--workers", "1") == 1
    assert not (tmp_path / "x.json").exists()


def test_slice_rebuild_checked(recorded, tmp_path, capsys):
    reg, _, manifest, _ = recorded
    out = tmp_path / "slice"
    assert rep(reg, "tiny", "--out", out, "--slice", "2", "--workers", "1") == 0
    assert sorted(p.name for p in (out / "tiny" / "brackets").iterdir()) == ["L0H1_s00.safetensors",
                                                                            "L1H2_s01.safetensors"]
    assert rep(reg, "tiny", "--check", out, "--slice", "2", "--manifest", manifest, "--workers", "1") == 0
    text = capsys.readouterr().out
    assert "2 identical, 0 same brackets, 0 different (a slice: studies not rebuilt)" in text
    assert rep(reg, "tiny", "--check", out, "--manifest", manifest, "--workers", "1") == 1   # not the whole run


def test_a_failing_command_stops_the_run(recorded, tmp_path, capsys):
    _, _, _, model = recorded
    reg = tmp_path / "r.json"
    doc = {"format": 1, "runs": {"bad": {"about": "x", "steps": [
        {"kind": "panel", "out": "p", "args": ["--model", str(model), "--heads", "9.9", "--sources", "1"]}]}}}
    reg.write_text(json.dumps(doc))
    assert rep(reg, "bad", "--out", tmp_path / "o") == 2
    assert "exited 2; rerun the same command to resume" in capsys.readouterr().out

"""``python -m numeric replicate`` without a model: the registry, the list, the comparison's three outcomes,
the canonical digests, and hostile manifests and run directories (one line, exit 2)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from numeric.replicate import cli
from numeric.replicate.check import DIFFERENT, IDENTICAL, SAME, Outcome, compare_cells, compare_study
from numeric.replicate.manifest import (COLUMNS, CellEntry, ManifestError, bracket_canonical_sha256, headline,
                                        manifest_path, read_manifest, study_canonical_sha256)
from numeric.replicate.registry import RegistryError, load_registry

ROOT = Path(__file__).resolve().parents[1]
H = "a" * 64


def run(capsys, *args) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return int(rc), out.out, out.err


def one_line(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m numeric replicate: error: "), err
    assert "Traceback" not in err


# --- the registry ---------------------------------------------------------------------------------------------

def test_every_run_the_docs_cite_is_registered():
    reg = load_registry()
    assert {"demo", "demo-full", "families", "minilm-study", "four-family", "every-row", "domain-docgpt2",
            "domain-digitvit"} <= set(reg)
    for name, rep in reg.items():
        for doc in rep.cited:
            assert (ROOT / doc.split(" section")[0]).is_file(), (name, doc)
        assert manifest_path(name).is_file(), f"{name}: no shipped manifest (recorded or 'not recorded')"
        read_manifest(manifest_path(name), name)


def test_slice_cells_are_in_the_roster():
    from numeric.replicate.manifest import expected_keys

    for name, rep in load_registry().items():
        if rep.slice:
            keys = expected_keys(rep.panel_steps[0].args, Path("x"))
            assert set(rep.slice) <= set(keys), name


def test_list_names_every_run(capsys):
    rc, out, _ = run(capsys, "--list")
    assert rc == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert names == list(load_registry())
    assert all("measured here" in line for line in out.splitlines())
    assert re.search(r"^demo\s+8 cells", out, re.M) and re.search(r"^demo-full\s+16 cells", out, re.M)
    assert re.search(r"^minilm-study\s+384 cells, 4 studies", out, re.M)


def test_show_prints_the_commands(capsys):
    rc, out, _ = run(capsys, "four-family", "--show")
    assert rc == 0
    assert "python -m numeric panel --model docgpt2,docqwen2,digitvit --preset study --effort quick --no-report " \
           "--native --out OUT/zoo16" in out
    assert "python -m numeric study OUT/study16 OUT/zoo16 --out OUT/study-all" in out


@pytest.mark.parametrize("doc, msg", [
    ({"format": 2, "runs": {}}, "not a replicate registry"),
    ({"format": 1, "runs": {"../x": {"about": "a", "steps": [{"kind": "panel", "out": "p", "args": []}]}}},
     "not a run name"),
    ({"format": 1, "runs": {"x": {"about": "a", "steps": [{"kind": "panel", "out": "../p", "args": []}]}}},
     "not a folder name"),
    ({"format": 1, "runs": {"x": {"about": "a", "steps": [{"kind": "shell", "out": "p", "args": []}]}}},
     "not an object of kind"),
    ({"format": 1, "runs": {"x": {"about": "a", "steps": [{"kind": "panel", "out": "p", "args": ["--out", "/"]}]}}},
     "the replicate command sets them"),
    ({"format": 1, "runs": {"x": {"about": "a", "steps": [{"kind": "study", "out": "s", "panels": ["p"]}]}}},
     "reads panels of earlier steps only"),
])
def test_malformed_registry(tmp_path, capsys, doc, msg):
    reg = tmp_path / "r.json"
    reg.write_text(json.dumps(doc))
    with pytest.raises(RegistryError, match=re.escape(msg)):
        load_registry(reg)
    rc, _, err = run(capsys, "--registry", reg, "--list")
    assert rc == 2 and msg in err
    one_line(err)


# --- bad arguments and hostile input -----------------------------------------------------------------------------

def manifest(rows=None, studies=None, **extra) -> dict:
    rows = rows if rows is not None else [["L0H1_s00", "1/4", 3, 5, "bernstein", "lowrank", H, H, H, H]]
    doc = {"format": 1, "name": "demo", "status": "recorded", "machine": {},
           "panels": [{"dir": "demo", "columns": list(COLUMNS), "rows": rows, "dropped": []}],
           "studies": studies or []}
    doc.update(extra)
    return doc


def hostile_manifests(tmp_path: Path):
    good = manifest()
    yield "not JSON", b"{", "not JSON"
    yield "wrong format", json.dumps(dict(good, format=7)).encode(), "not a manifest of format 1"
    yield "another run", json.dumps(dict(good, name="families")).encode(), "the manifest of another run"
    yield "bad status", json.dumps(dict(good, status="trusted")).encode(), "status is"
    for i, bad in enumerate([["L0H1_s00", "1/4", 5, 3, "b", "l", H, H, H, H],          # L > U
                             ["L0H1_s00", "1/4", -1, 3, "b", "l", H, H, H, H],         # negative
                             ["L0H1_s00", "1/4", True, 3, "b", "l", H, H, H, H],       # a bool is no count
                             ["../../etc", "1/4", 1, 3, "b", "l", H, H, H, H],         # a path as key
                             ["L0H1_s00", "0", 1, 3, "b", "l", H, H, H, H],            # eps 0
                             ["L0H1_s00", "1/4", 1, 3, "b\x1b[2J", "l", H, H, H, H],   # a terminal escape
                             ["L0H1_s00", "1/4", 1, 3, "b", "l", "xyz", H, H, H],      # not a digest
                             ["L0H1_s00", "1/4", 1, 3, "b", "l", H, H, H],             # a column short
                             "L0H1_s00"]):
        yield f"row {i}", json.dumps(manifest(rows=[bad])).encode(), "panel demo"
    twice = [["L0H1_s00", "1/4", 1, 3, "b", "l", H, H, H, H], ["L0H1_s00", "2/8", 1, 3, "b", "l", H, H, H, H]]
    yield "a row twice", json.dumps(manifest(rows=twice)).encode(), "twice"
    yield "deep", b"[" * 100000 + b"]" * 100000, "manifest"
    yield "a study without digest", json.dumps(manifest(studies=[{"out": "s", "headline": {}}])).encode(), "study s"
    yield "not recorded", json.dumps({"format": 1, "name": "demo", "status": "not recorded"}).encode(), \
        "no recorded manifest yet"


@pytest.mark.parametrize("case", range(17))
def test_hostile_manifest_is_one_line_exit_2(tmp_path, capsys, case):
    label, data, msg = list(hostile_manifests(tmp_path))[case]
    path = tmp_path / "m.json"
    path.write_bytes(data)
    rundir = tmp_path / "run"
    rundir.mkdir()
    rc, out, err = run(capsys, "demo", "--check", rundir, "--manifest", path)
    assert rc == 2, label
    one_line(err)
    assert msg in err or (label == "deep" and ("deep" in err or "JSON" in err)), (label, err)
    assert "\x1b" not in err


def test_hostile_manifest_files(tmp_path, capsys):
    rundir = tmp_path / "run"
    rundir.mkdir()
    target = tmp_path / "real.json"
    target.write_text(json.dumps(manifest()))
    link = tmp_path / "link.json"
    link.symlink_to(target)
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "dir.json").mkdir()
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (5 << 20))
    for path in (link, tmp_path / "fifo.json", tmp_path / "dir.json", big, tmp_path / "absent.json"):
        rc, _, err = run(capsys, "demo", "--check", rundir, "--manifest", path)
        assert rc == 2, path.name
        one_line(err)


def test_bad_run_directories_and_arguments(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "file").write_text("x")
    for args in (["demo", "--check", tmp_path / "absent"], ["demo", "--check", tmp_path / "link"],
                 ["demo", "--check", tmp_path / "file"], ["demo", "--record", tmp_path / "absent"],
                 ["nosuchrun", "--out", tmp_path / "o"], ["demo"], [],
                 ["demo", "--out", tmp_path / "o", "--slice", "9"], ["demo", "--out", tmp_path / "o", "--workers", "0"],
                 ["vit-arms", "--out", tmp_path / "o", "--slice", "1"],
                 ["demo", "--record", real, "--slice", "1"]):
        rc, _, err = run(capsys, *args)
        assert rc == 2, args
        one_line(err)
    with pytest.raises(SystemExit) as exc:
        cli.main(["demo", "--out", str(tmp_path / "o"), "--check", str(tmp_path)])
    assert exc.value.code == 2
    one_line(capsys.readouterr().err)
    assert not (tmp_path / "o").exists()


def test_a_hostile_stamp_is_refused(tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    (out / "replicate.json").write_text("[1, 2]")
    rc, _, err = run(capsys, "demo", "--out", out)
    assert rc == 2 and "not a replicate record" in err
    one_line(err)


def test_a_malformed_study_json_in_a_run_is_one_line(tmp_path, capsys, monkeypatch):
    """A study.json that is a link out of the run: refused (exit 2), never followed."""
    from numeric.replicate import check

    rundir = tmp_path / "run"
    (rundir / "s").mkdir(parents=True)
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    (rundir / "s" / "study.json").symlink_to(secret)
    (rundir / "demo").mkdir()
    monkeypatch.setattr(check, "panel_cells", lambda d, w: ({}, [], [], {}))
    doc = manifest(rows=[], studies=[{"out": "s", "study_sha256": H, "study_canonical_sha256": H, "headline": {}}])
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    rc, _, err = run(capsys, "demo", "--check", rundir, "--manifest", path)
    assert rc == 2 and "link" in err
    one_line(err)


# --- the comparison's outcomes ----------------------------------------------------------------------------------

def cell(key="L0H1_s00", lu=((3, 5),), canon=H, head=H) -> CellEntry:
    eps = ("1/10", "1/4", "1/2")
    return CellEntry(key, head, H, "b" * 64, canon, tuple((eps[i], lo, up, "bernstein", "lowrank")
                                                         for i, (lo, up) in enumerate(lu)))


def test_compare_cells_three_outcomes():
    ref = cell(lu=((3, 5), (2, 3))).rows()
    out = Outcome()
    compare_cells("demo", ref, {"L0H1_s00": cell(lu=((3, 5), (2, 3)))}, None, out)
    assert out.counts[IDENTICAL] == 1 and not out.failed
    out = Outcome()
    compare_cells("demo", ref, {"L0H1_s00": cell(lu=((3, 5), (2, 3)), canon="c" * 64, head="d" * 64)}, None, out)
    assert out.counts[SAME] == 1 and not out.failed and "head logits differ" in out.lines[0]
    out = Outcome()
    compare_cells("demo", ref, {"L0H1_s00": cell(lu=((3, 6), (1, 3)), canon="c" * 64)}, None, out)
    assert out.failed and out.lines == ["different: demo/L0H1_s00: eps 1/10: L 3, U 5 -> 6 (+1); "
                                        "eps 1/4: L 2 -> 1 (-1), U 3"]
    out = Outcome()
    compare_cells("demo", ref, {"L0H2_s00": cell("L0H2_s00")}, None, out)
    assert out.failed and out.lines == ["different: demo/L0H1_s00: missing from the rebuilt run",
                                        "different: demo/L0H2_s00: not in the manifest"]
    out = Outcome()      # a slice: only its cells must be there
    compare_cells("demo", ref + cell("L0H2_s00").rows(), {"L0H1_s00": cell(lu=((3, 5), (2, 3)))}, {"L0H1_s00"}, out)
    assert not out.failed and out.counts[IDENTICAL] == 1


def study_doc(delta=0.01, verdict="no gain") -> dict:
    est = {"delta": delta, "delta_ci": [-0.1, 0.1], "rho": 0.02, "rho_ci": [-0.2, 0.2], "equivalence": "yes",
           "mae_base": 0.5, "mae_aug": 0.49}
    return {"command": "python -m numeric study /somewhere", "setup": {"panel": "/somewhere", "cells": 8,
            "seconds": 3.2, "code_version": {"commit": "abc"}}, "reading": {"G": verdict},
            "comparisons": [{"name": "B1 vs B1+G", "estimates": {"aggregate": est}, "reason": None}]}


def test_compare_study_three_outcomes():
    ref = {"out": "s", "study_canonical_sha256": study_canonical_sha256(study_doc()), "headline": headline(study_doc())}
    moved = dict(study_doc(), command="python -m numeric study /elsewhere")
    moved["setup"] = dict(moved["setup"], panel="/elsewhere", seconds=99.0, code_version={"commit": "def"})
    got = {"study_canonical_sha256": study_canonical_sha256(moved), "headline": headline(moved)}
    out = Outcome()
    compare_study(ref, got, out)
    assert out.counts[IDENTICAL] == 1 and not out.failed        # paths, wall time and checkout masked
    near = study_doc(delta=0.01 + 1e-12)
    out = Outcome()
    compare_study(ref, {"study_canonical_sha256": study_canonical_sha256(near), "headline": headline(near)}, out)
    assert out.counts[SAME] == 1 and not out.failed
    for bad in (study_doc(delta=0.02), study_doc(verdict="gain")):
        out = Outcome()
        compare_study(ref, {"study_canonical_sha256": study_canonical_sha256(bad), "headline": headline(bad)}, out)
        assert out.failed and out.counts[DIFFERENT] == 1


def safetensors_bytes(seconds: float, commit: str, data: bytes = b"\x00" * 8) -> bytes:
    doc = {"cells": [{"id": "c", "provenance": {"search": {"seconds": seconds, "code": {"commit": commit,
                                                                                          "dirty": False}}}}]}
    header = {"__metadata__": {"softrank": json.dumps(doc)},
              "x": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data


def test_bracket_canonical_digest_masks_time_and_checkout_only():
    a = bracket_canonical_sha256(safetensors_bytes(1.0, "abc"))
    assert a == bracket_canonical_sha256(safetensors_bytes(7.5, "def"))
    assert a != bracket_canonical_sha256(safetensors_bytes(1.0, "abc", b"\x01" + b"\x00" * 7))
    for bad in (b"", b"\xff" * 8, (4).to_bytes(8, "little") + b"[1]!"):
        with pytest.raises(ValueError):
            bracket_canonical_sha256(bad)


def test_manifest_error_is_raised_not_crashed(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest(rows=[["L0H1_s00", "1/4", 1, 3, "b", "l", H, H, H, H]])))
    assert read_manifest(path, "demo")["panels"][0]["rows"][0][2] == 1
    with pytest.raises(ManifestError):
        read_manifest(path, "families")


def test_panel_cells_names_cells_of_the_roster(tmp_path, capsys):
    """``python -m numeric panel --cells``: a key outside the roster is one line, exit 2, before any work."""
    from numeric.panel.cli import main as panel_main

    for cells in ("L9H9_s00", ",", "L0H1_s00,L0H1_s05"):
        assert panel_main(["--model", "minilm", "--demo", "--cells", cells, "--out", str(tmp_path / "p")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--cells names no cell of the roster" in err
    assert not (tmp_path / "p").exists()

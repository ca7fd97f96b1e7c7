"""Several families in one panel: the family comparison of the report (ordering
coverage, bootstrap, gate), the decoded-inverse ablation from exactly verified certificates,
the common-shape roster, native-causal decoder cells, and the bad input of these options."""
from __future__ import annotations

import csv
import json
from fractions import Fraction

import numpy as np
import pytest

from numeric.panel.report_families import bootstrap_median, gate_table, ordering
from numeric.panel.schema import PanelRow

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.panel_helpers import SMALL, cli, in_process, one_line_error, save_tiny


def test_ordering_counts_disjoint_pairs_and_ties():
    # (1,2)-(3,4) disjoint; (3,4) against both (2,2) disjoint; (2,2)-(2,2) a tie; (1,2)-(2,2) overlap
    assert ordering([(1, 2), (3, 4), (2, 2), (2, 2)]) == (6, 3, 1)
    assert ordering([(1, 1)]) == (0, 0, 0)


def test_bootstrap_interval_over_sources():
    rng = np.random.default_rng(0)
    med, lo, hi = bootstrap_median({"a": [0.1, 0.2], "b": [0.3], "c": [0.4, 0.5]}, rng, draws=200)
    assert med == 0.3 and lo <= med <= hi and 0.1 <= lo and hi <= 0.5
    assert bootstrap_median({"a": [0.1, 0.3]}, rng)[1:] == (None, None)   # one source: no interval


def row(L, U, cid, family="decoder-gpt2"):
    return PanelRow(family=family, model="m", layer=0, head=0, source="s", eps="1/4", status="ok", L=L, U=U,
                    cell_id=cid)


def test_gate_table_thresholds():
    fams = {"good": [row(1, 1, "a"), row(3, 3, "b"), row(5, 5, "c")],
            "wide": [row(1, 4, "d"), row(2, 5, "e"), row(2, 2, "f")]}
    t = {x.family: x for x in gate_table(fams, 0.5)}
    assert t["good"].resolved == 3 and t["good"].coverage == 1.0 and t["good"].gate
    assert t["wide"].resolved == 1 and t["wide"].coverage == 0.0 and not t["wide"].gate
    assert t["good"].median_U_over_L == 1.0 and t["wide"].median_U_over_L == 2.5
    assert not gate_table({"good": fams["good"]}, 1.01)[0].gate


def test_ablation_replaces_decoded_certificates_by_verified_ones(tmp_path):
    """A cell whose lower certificate is the decoded inverse takes the best certificate of
    another family, verified exactly from a file of its own."""
    from fileio.bracketwriter import write_bracket_file
    from numeric.heads.extract import softmax_rows
    from numeric.panel.ablation import ABLATION_DIR, DECODED, ablated_lowers
    from numeric.search.inverse import decoded

    rng = np.random.default_rng(3)
    A = softmax_rows(rng.normal(size=(10, 10)) + 6 * np.eye(10))
    c = decoded(A, 0.25)
    assert c is not None and c.rank >= 2
    names = {k: f"c/{k}" for k in c.tensors}
    cells = [{"id": "c/eps=1/4", "eps": "1/4", "target": {"matrix": "A"},
              "lower": {"rank": c.rank, "witness": {"kind": "reconstruction", **names}},
              "upper": {"rank": 10, "witness": {"kind": "trivial"}},
              "provenance": {"search": {"lower_family": DECODED}}}]
    (tmp_path / "brackets").mkdir()
    write_bracket_file(tmp_path / "brackets" / "f.safetensors", cells,
                       {"A": A, **{names[k]: v for k, v in c.tensors.items()}})
    rows = [PanelRow(family="f", model="m", layer=0, head=0, source="s", status="ok", verified=True, eps="1/4",
                     file="brackets/f.safetensors", cell_id="c/eps=1/4", L=c.rank, U=10)]
    got = ablated_lowers(tmp_path, rows, Fraction(1, 4))["c/eps=1/4"]
    assert 1 <= got.L <= 10 and got.source in ("trivial", "frobenius", "reconstruction/pinv")
    assert list((tmp_path / ABLATION_DIR).glob("*.safetensors"))
    kept = ablated_lowers(tmp_path, rows, Fraction(1, 4), family="reconstruction/pinv")["c/eps=1/4"]
    assert kept.L == c.rank and kept.source == "kept"


def test_spread_roster(tmp_path):
    from numeric.panel.presets import spread_roster

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 4, "n_head": 4}))
    assert spread_roster(str(tmp_path), 4) == [(0, 2), (1, 2), (2, 2), (3, 2)]
    assert spread_roster(str(tmp_path), 2) == [(1, 0), (3, 0)]
    assert spread_roster("minilm", 4) == [(0, 9), (2, 3), (3, 9), (5, 3)]


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    base = tmp_path_factory.mktemp("fam")
    return {k: save_tiny(base / k, k) for k in ("gpt2", "bert", "vit")}


def test_bad_input_of_the_family_options(tmp_path, tiny_models):
    o = tmp_path / "o"
    one_line_error(cli("panel", "--model", tiny_models["vit"], "--heads", "0.0", "--image-size", "64",
                       "--out", o), "image size 64", "takes only 32 x 32", "4 x 4 patches of 8 px")
    one_line_error(cli("panel", "--model", tiny_models["bert"], "--heads", "0.0", "--native", "--length", "16",
                       "--out", o),
                   "--native is for decoders")
    one_line_error(cli("panel", "--model", f"{tiny_models['bert']},{tiny_models['gpt2']}", "--heads", "0.0",
                       "--length", "16", "--prefix", "40", "--block", "40", "--out", o),
                   "80 tokens exceeds", "64 positions")
    one_line_error(cli("panel", "--model", f"{tiny_models['bert']},{tiny_models['gpt2']}", "--heads", "2.0",
                       "--length", "16", "--out", o, *SMALL), "outside model", "layers 0..1")
    one_line_error(cli("panel", "--preset", "common-shape", "--model", "docgpt2", "--per-family", "17",
                       "--out", o), "16 heads")
    one_line_error(cli("report", tmp_path, "--gate", "2"), "--gate")


def test_damaged_zoo_copy_refused_before_any_work(tmp_path):
    import shutil

    from numeric.heads.zoo.train import WEIGHTS_DIR

    path = tmp_path / "docgpt2"
    shutil.copytree(WEIGHTS_DIR / "docgpt2", path)
    w = path / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[100] ^= 1
    w.write_bytes(bytes(data))
    one_line_error(cli("panel", "--model", f"minilm,{path}", "--heads", "0.0", "--out", tmp_path / "o"),
                   "stale or damaged")
    assert not (tmp_path / "o").exists()


def test_two_families_and_native_cells_in_one_run(tmp_path, tiny_models, capsys):
    """A tiny decoder and encoder in one directory, with native-causal cells; the report's family section."""
    out = tmp_path / "run"
    rc, cap = in_process(capsys, "--model", f"{tiny_models['gpt2']},{tiny_models['bert']}", "--heads", "0.1",
                         "--native", "--length", "16", "--prefix", "8", "--block", "8", "--eps", "1/4",
                         "--effort", "quick", "--no-screen", "--min-mass", "0", "--no-geometry", "--quiet",
                         "--workers", "1", "--sources", "1", "--report", "--out", out)
    assert rc == 0, cap.err
    rows = list(csv.DictReader(open(out / "cells.csv")))
    kinds = sorted((r["family"], r["cell_kind"], r["n_rows"]) for r in rows)
    assert kinds == [("decoder-gpt2", "native-causal", "16"), ("decoder-gpt2", "prefix-block", "8"),
                     ("encoder", "full", "16")]
    assert all(r["verified"] == "True" for r in rows)
    assert sorted(p.name for p in (out / "brackets").iterdir()) == ["bert_L0H1_s00.safetensors",
                                                                    "gpt2_L0H1_s00.safetensors",
                                                                    "gpt2_L0H1_s00_nc.safetensors"]
    from exact.bracketfile import read_bracket_file

    bf = read_bracket_file(out / "brackets" / "gpt2_L0H1_s00_nc.safetensors")
    A = bf.tensors[bf.cells[0].target.matrix]
    assert np.all(np.triu(A, 1) == 0) and np.allclose(A.sum(axis=1), 1)   # exactly lower triangular
    text = (out / "report.md").read_text()
    for needle in ("## Families", "Head screen", "Architecture audit", "Table 1", "without the decoded-inverse",
                   "Native-causal cells", "encoder (bert)", "decoder-gpt2 (gpt2)"):
        assert needle in text, needle
    ident = json.loads((out / "panel.json").read_text())["identity"]
    assert ident["native"] is True and isinstance(ident["model"], list) and len(ident["model"]) == 2

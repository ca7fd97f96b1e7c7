"""The second domain of every family and the study's domain-transfer rows (paper L.6).

- the second domain is deterministic: the code corpus rebuilds to the same bytes (and to the
  shipped file on the Python it was built with), code windows and rotated digits are the same
  twice, and they differ from the primary domain's;
- the panel keeps a primary-domain cell's key and signature and gives a second-domain cell its own;
- the transfer split never tests on a fitting source: the test cells' predictions do not depend on
  the test cells' targets (a split that leaks one test source fails the same check);
- a one-domain table skips every transfer row with a one-line reason;
- a planted domain effect (the test domain's targets moved by a constant) leaves every estimate
  unchanged and shows in the reported level; a planted gain of G transfers.
"""
from __future__ import annotations

import platform
import sys
from dataclasses import replace

import numpy as np
import pytest

from numeric.heads.domains import DOMAINS, domains_of, resolve_domains, row_domain, source_domain
from numeric.study.calibrate import FOUR_FAMILY, Shape, synthetic
from numeric.study.compare import AGGREGATE
from numeric.study.transfer import (MIN_DOMAIN_SOURCES, TransferSplit, split_predictions, synthetic_domains,
                                    transfer_markdown, transfer_rows, transfer_section, transfer_splits)

SHAPE = Shape((("fam0", 4, 12, "text"), ("fam1", 3, 12, "image")), FOUR_FAMILY.head_constant)


def _table(scenario="null", seed=1, offset=0.0, first=6, rho=0.3):
    d = synthetic(SHAPE, scenario, np.random.default_rng(7), np.random.default_rng(seed), rho=rho,
                  rng_extra=np.random.default_rng(seed + 100))
    return synthetic_domains(d, first, offset)


# ---- the second domain --------------------------------------------------------------------------

def test_code_corpus_is_deterministic_and_shipped():
    from numeric.heads.corpus.build_corpus import code_units
    from numeric.heads.sources import CODE_CORPUS_PATH, corpus_text

    one, two = "\n\n".join(code_units()) + "\n", "\n\n".join(code_units()) + "\n"
    assert one == two
    shipped = CODE_CORPUS_PATH.read_bytes()
    assert corpus_text("code").encode() == shipped and corpus_text("docs") != corpus_text("code")
    assert '"""' not in shipped.decode()[:2000] and "def " in shipped.decode()   # code, docstrings removed
    if platform.python_implementation() == "CPython" and sys.version_info[:3] == (3, 11, 7):
        assert one.encode() == shipped          # the Python it was built with gives the shipped bytes


def test_code_windows_are_deterministic_and_their_own():
    pytest.importorskip("transformers")
    from transformers import PreTrainedTokenizerFast

    from numeric.heads.models import preset_path
    from numeric.heads.sources import corpus_sha256, text_source

    tok = PreTrainedTokenizerFast(tokenizer_file=str(preset_path("docgpt2") / "tokenizer.json"))
    a, b = text_source(tok, 5, 256, special_tokens=False, domain="code"), \
        text_source(tok, 5, 256, special_tokens=False, domain="code")
    docs = text_source(tok, 5, 256, special_tokens=False)
    assert a == b and a.source_id == "code:5" and docs.source_id == "text:5" and len(a.input_ids) == 256
    assert a.input_ids != docs.input_ids and a.corpus_sha256 == corpus_sha256("code") != docs.corpus_sha256
    assert source_domain(a.source_id) == "code" and source_domain(docs.source_id) == "docs"


def test_rotated_digits_are_deterministic_and_rotated():
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    from numeric.heads.sources import SourceError, digit_source
    from numeric.heads.zoo.digits import digits, pixels, split

    a, b = digit_source(3, 44, "digits-rot90"), digit_source(3, 44, "digits-rot90")
    up = digit_source(3, 44)
    assert a.source_id == "digits-rot90:3" and up.source_id == "digits:3"
    assert a.pixel_values.tobytes() == b.pixel_values.tobytes()
    assert a.pixel_values.tobytes() != up.pixel_values.tobytes()
    k = int(split()[1][3])
    want = pixels(np.rot90(digits()[0][k:k + 1], 1, axes=(1, 2)).copy(), 44)[0]
    assert np.array_equal(a.pixel_values, want)
    with pytest.raises(SourceError):
        digit_source(3, 44, "code")


def test_domain_registry_and_row_accessor():
    assert [d.name for d in domains_of("digits")] == ["digits", "digits-rot90"]
    assert resolve_domains(["all"], "text") == ["docs", "code"] and resolve_domains(["code"], "digits") == []
    with pytest.raises(ValueError, match="unknown domain"):
        resolve_domains(["prose"], "text")
    # rows of panels written before the column existed get their domain from the source id
    assert row_domain(None, "digits:4") == "digits" and row_domain(None, "x:1") == ""
    assert row_domain("code", "code:0") == "code"
    assert len({d.prefix for d in DOMAINS.values()}) == len(DOMAINS)


def test_cell_keys_and_signatures():
    from numeric.panel.cell import CellTask

    base = dict(model="docgpt2", layer=1, head=2, source=3, eps=("1/4",), out="/x", prefix=128, block=128,
                length=256, min_mass=0.1, screen=True, attack=True, geometry=True, device=None, image_dir=None)
    docs, code = CellTask(**base), CellTask(**base, domain="code")
    assert docs.key == "L1H2_s03" and "domain" not in docs.signature()    # a primary cell as before
    assert code.key == "L1H2_s03_code" and code.signature()["domain"] == "code"


def test_panel_domains_bad_input(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.panel_helpers import cli_in_process, one_line_error

    cli = lambda *args: cli_in_process(capsys, *args)
    one_line_error(cli("panel", "--model", "docgpt2", "--heads", "0.0", "--domains", "prose", "--out", tmp_path / "a"),
                   "unknown domain")
    one_line_error(cli("panel", "--model", "docgpt2", "--heads", "0.0", "--domains", "digits-rot90",
                       "--out", tmp_path / "b"), "reads none of the domains")


# ---- the transfer rows --------------------------------------------------------------------------

def _test_predictions(data, split):
    return split_predictions(data, split, ("b0_depth", "mass", "b1_logit_rank", "b1_dc_sv1", "svd_interaction_dim"))[0]


def test_the_split_never_tests_on_a_fitting_source():
    data = _table()
    for direction in ("forward", "backward"):
        splits, skipped = transfer_splits(data, direction)
        assert len(splits) == 2 and not skipped
        for s in splits:
            assert not set(data.sources[s.train]) & set(data.sources[s.test])
            assert set(data.domains[s.train]) == {s.fit_domain} and set(data.domains[s.test]) == {s.test_domain}
            assert {s.fit_domain, s.test_domain} == {"docs", "code"}
            assert set(s.train) | set(s.test) == set(np.flatnonzero(data.families == s.family))
            # the test cells' targets do not reach the fit: scrambling them moves no test prediction
            scrambled = data.y.copy()
            scrambled[s.test] = np.random.default_rng(3).normal(50.0, 10.0, s.test.size)
            assert np.array_equal(_test_predictions(data, s), _test_predictions(replace(data, y=scrambled), s))


def test_the_leak_check_can_fail():
    """Negative control: a split that fits on one test source's cells fails the same check."""
    data = _table()
    s = transfer_splits(data, "forward")[0][0]
    leaked_src = data.sources[s.test][0]
    leak = TransferSplit(s.family, s.fit_domain, s.test_domain,
                         np.concatenate([s.train, s.test[data.sources[s.test] == leaked_src]]), s.test)
    scrambled = data.y.copy()
    scrambled[s.test] = np.random.default_rng(3).normal(50.0, 10.0, s.test.size)
    assert not np.array_equal(_test_predictions(data, leak), _test_predictions(replace(data, y=scrambled), leak))


def test_one_domain_table_skips_every_row_with_a_reason():
    data = replace(_table(), domains=np.full(len(_table()), "docs"))
    rows = transfer_rows(data)
    assert len(rows) == 4 and all(r.reason and r.reason.startswith("skipped:") and "\n" not in r.reason
                                  and "one domain (docs)" in r.reason and not r.estimates for r in rows)
    md = "\n".join(transfer_markdown(transfer_section(rows)))
    assert md.count("skipped: no family has two domains") == 4
    # too few sources in a domain: the family is left out, with its reason
    few = synthetic_domains(synthetic(SHAPE, "null", np.random.default_rng(7), np.random.default_rng(1),
                                      rng_extra=np.random.default_rng(2)), MIN_DOMAIN_SOURCES - 1)
    rows = transfer_rows(few)
    assert all(r.reason and f"{MIN_DOMAIN_SOURCES - 1} sources in domain docs" in r.reason for r in rows)


def test_a_family_with_one_domain_is_left_out_of_the_row():
    data = _table()
    doms = np.where(data.families == "fam1", "digits", data.domains)
    rows = transfer_rows(replace(data, domains=doms))
    for r in rows:
        assert r.reason is None and set(r.estimates) == {"fam0", AGGREGATE}
        assert "one domain (digits)" in r.skipped["fam1"]
        assert r.estimates[AGGREGATE].rho == pytest.approx(r.estimates["fam0"].rho)


def test_a_planted_domain_effect_is_absorbed_and_reported():
    """The test domain's targets moved by a constant: every estimate and interval is unchanged
    (each model's level is re-estimated on the other test sources), the reported level moves by
    the constant, the raw MAE grows."""
    plain, shifted = transfer_rows(_table()), transfer_rows(_table(offset=5.0))
    for a, b in zip(plain, shifted):
        sign = 1.0 if a.direction == "forward" else -1.0    # forward tests on code, the moved domain
        for f in a.estimates:
            ea, eb = a.estimates[f], b.estimates[f]
            assert eb.delta == pytest.approx(ea.delta, abs=1e-9) and eb.rho == pytest.approx(ea.rho, abs=1e-9)
            assert eb.delta_ci == pytest.approx(ea.delta_ci, abs=1e-9)
        for f in a.level:
            assert b.level[f] - a.level[f] == pytest.approx(sign * 5.0, rel=1e-6)
            assert b.raw[f] > a.raw[f] + 3.0
            assert b.within[f] == pytest.approx(a.within[f], abs=1e-9)


def test_a_planted_gain_transfers():
    """G carries a cell-level signal in both domains (planted rho 0.7; the interval is conservative):
    the transfer rows find it in both directions; the same table with G as noise does not."""
    gain = transfer_rows(_table("gain", rho=0.7))
    null = transfer_rows(_table("null"))
    for r in gain:
        if r.block == "G":
            assert r.estimates[AGGREGATE].delta_ci[0] > 0, r.name
    for r in null:
        if r.block == "G":
            assert r.estimates[AGGREGATE].delta_ci[0] <= 0, r.name


# ---- end to end: a two-domain panel of a tiny BERT, then the study -----------------------------

def test_two_domain_panel_and_its_transfer_rows(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import csv
    import json

    from numeric.panel.cli import main as panel_main
    from numeric.study.cli import main as study_main
    from tests.panel_helpers import save_tiny

    model = save_tiny(tmp_path / "bert", "bert")
    out = tmp_path / "panel"
    assert panel_main(["--model", str(model), "--out", str(out), "--heads", "0.1,1.2", "--sources", "3",
                       "--domains", "all", "--length", "12", "--eps", "1/4", "--effort", "quick", "--workers", "1",
                       "--quiet", "--no-attack"]) == 0
    rows = list(csv.DictReader(open(out / "cells.csv")))
    assert len(rows) == 12 and {r["domain"] for r in rows} == {"docs", "code"}
    for r in rows:
        code = r["domain"] == "code"
        assert r["source"].startswith("code:" if code else "text:") and r["cell_id"].endswith(
            ("_code" if code else "") + "/eps=1/4") and r["b0_domain"] == ("code" if code else "text")
    assert study_main([str(out), "--out", str(tmp_path / "study"), "--workers", "1", "--jobs", "1"]) == 0
    doc = json.loads((tmp_path / "study" / "study.json").read_text())
    assert [r["direction"] for r in doc["transfer"]] == ["forward"] * 2 + ["backward"] * 2
    for r in doc["transfer"]:
        assert r["reason"] is None and set(r["estimates"]) == {"encoder", "aggregate"}
        assert r["cells"]["encoder"] == [6, 6] and np.isfinite(r["estimates"]["encoder"]["delta"])
        assert r["domains"]["encoder"] == (["docs", "code"] if r["direction"] == "forward" else ["code", "docs"])
    assert "(fit code, test docs)" in (tmp_path / "study" / "study.md").read_text()

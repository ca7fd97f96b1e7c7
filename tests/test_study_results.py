"""The study's results object: ``study.json`` and ``study.md`` come from one ``StudyResults``, and ``study.md``
is a function of ``study.json`` alone (parse the written JSON, render it, get the written Markdown)."""
from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest

from numeric.study.compare import compare
from numeric.study.data import StudyError
from numeric.study.protocol import comparisons, readings
from numeric.study.results import StudyResults, comparison_records
from numeric.study.transfer import transfer_rows, transfer_section
from numeric.study.write import write_outputs


def _data():
    from numeric.study.calibrate import Shape, synthetic

    shape = Shape((("fa", 4, 8, "text"), ("fb", 4, 8, "image")), ("b0_depth",))
    rng = np.random.default_rng(5)
    return synthetic(shape, "gain", rng, rng, rho=0.3, rng_extra=np.random.default_rng(6))


@pytest.fixture(scope="module")
def record():
    data = _data()
    res = compare(data, comparisons()[:5], seed=1, permutations=1)
    setup = {"panel": "synthetic", "target": "u_over_n", "eps": "1/4", "cells": len(data), "sources": 8,
             "heads": 8, "families": ["fa", "fb"], "folds": 4, "replicates": 0, "permutations": 1, "seed": 1,
             "seconds": 0.0, "caution": [], "gbm_replicates": 0}
    transfer = transfer_section(transfer_rows(data, folds=4))
    return data, StudyResults("python -m numeric study synthetic", setup, readings(res), comparison_records(res),
                              [], gbm=comparison_records(res[:2]), transfer=transfer)


def test_markdown_is_a_function_of_the_json(record):
    _, r = record
    back = StudyResults.from_json(r.to_json())
    assert back.to_markdown() == r.to_markdown()
    assert json.loads(back.to_json()) == json.loads(r.to_json())
    md = r.to_markdown()
    assert "## Domain transfer" in md and "gradient-boosted model" in md and "## Readings" in md


def test_write_outputs_writes_both_files_from_the_record(record, tmp_path):
    data, r = record
    assert write_outputs(tmp_path / "s", data, r) is r
    assert (tmp_path / "s" / "study.md").read_text() == r.to_markdown()
    written = StudyResults.from_json((tmp_path / "s" / "study.json").read_text())
    assert written.to_markdown() == (tmp_path / "s" / "study.md").read_text()


def test_a_changed_number_in_the_json_changes_the_markdown(record):
    """Negative control: the Markdown is rendered from the record, not cached beside it."""
    _, r = record
    doc = json.loads(r.to_json())
    doc["comparisons"][0]["estimates"]["aggregate"]["rho"] = 0.123456
    assert "+0.1235" in StudyResults.from_dict(doc).to_markdown()
    assert "+0.1235" not in r.to_markdown()


@pytest.mark.parametrize("text, what", [
    ("[", "not JSON"), ("[]", "not an object"), ('{"command": "c"}', "'setup'"),
    ('{"command": "c", "setup": {}, "comparisons": [], "gauge": []}', "setup lacks"),
])
def test_a_malformed_study_json_is_refused_in_one_line(text, what):
    with pytest.raises(StudyError) as e:
        StudyResults.from_json(text)
    assert what in str(e.value) and "\n" not in str(e.value)


def test_a_comparison_that_does_not_render_is_refused(record):
    _, r = record
    doc = json.loads(r.to_json())
    del doc["comparisons"][0]["estimates"]
    with pytest.raises(StudyError, match="malformed"):
        StudyResults.from_dict(doc)
    doc = json.loads(r.to_json())
    doc["gbm"] = {"not": "a list"}
    with pytest.raises(StudyError, match="'gbm' is not a list"):
        StudyResults.from_dict(doc)


def test_the_record_is_frozen(record):
    _, r = record
    with pytest.raises(AttributeError):
        r.command = "x"          # type: ignore[misc]
    assert asdict(r)["command"] == r.command

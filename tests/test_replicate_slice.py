"""The shipped manifests of the README's two runs, checked against a test-sized rebuild from this checkout.

``python -m numeric replicate NAME --out DIR --slice 1`` rebuilds the first cell of the run's test slice
(every tolerance of that cell, with the whole run's identity and seed) and ``--check DIR --slice 1`` compares
it with the shipped manifest: exit 0 means the bracket is the one recorded (identical, or the same verified
L and U with other bytes). A change of the search that moves these brackets fails here: record the run again
(``replicate NAME --out DIR`` then ``replicate NAME --record DIR``) and ship the new manifest.
"""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from numeric.replicate.cli import main
from numeric.replicate.manifest import manifest_path
from numeric.replicate.registry import load_registry


@pytest.mark.parametrize("name", ["demo", "families"])
def test_slice_rebuilt_and_checked_against_the_shipped_manifest(name, tmp_path, capsys):
    doc = json.loads(manifest_path(name).read_text())
    assert doc["status"] == "recorded", f"{name}: the shipped manifest is not recorded"
    key = load_registry()[name].slice[0]
    assert key in {row[0] for p in doc["panels"] for row in p["rows"]}
    out = tmp_path / "run"
    assert main([name, "--out", str(out), "--slice", "1", "--workers", "1"]) == 0
    rc = main([name, "--check", str(out), "--slice", "1", "--workers", "1"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "0 different" in text and f"/{key}: " in text

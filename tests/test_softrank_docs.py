"""The examples of the Python front door run: ``docs/api.md`` as a doctest and the quickstart notebook.

An example that rots fails here. Both use the shipped MiniLM at effort quick on short sentences.
"""
from __future__ import annotations

import doctest
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]


def test_api_md_examples_run():
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 30 and result.failed == 0, result


def test_a_rotten_example_fails(tmp_path):
    """Negative control: the doctest runner does compare outputs."""
    doc = tmp_path / "rot.md"
    doc.write_text("```python\n>>> 1 + 1\n3\n\n```\n")
    result = doctest.testfile(str(doc), module_relative=False, report=False)
    assert result.failed == 1


def test_quickstart_notebook_runs(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(ROOT / "docs" / "examples" / "quickstart.ipynb", as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code")   # stored without outputs
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs if o.output_type == "execute_result")
    assert "verified by the exact tier" in html and html.count("<tr>") == 1 + 3 * 3
    assert any("image/png" in o.get("data", {}) for o in outputs if o.output_type == "display_data")
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.name == "stdout")
    assert "9/9 cells verified on both sides" in text

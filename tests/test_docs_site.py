"""The documentation site builds in strict mode, with the quickstart notebook executed.

``mkdocs build --strict`` (``mkdocs.yml``) turns every warning into a failure: a broken link or
anchor between pages, a page missing from the nav, a docstring that does not render, a CLI whose
parser does not build (``docs/_hooks/cli_reference.py``), a notebook cell that raises
(``allow_errors: false``). The build is the one place the quickstart notebook runs; what the
notebook must show is checked here on the page it became.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")
pytest.importorskip("mkdocs_jupyter")
pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
#: the commands of docs/_hooks/cli_reference.py, each must appear as its own usage line
USAGES = ["python -m exact verify", "python -m crosscheck", "python -m numeric bracket", "python -m numeric panel",
          "python -m numeric report", "python -m numeric study", "python -m oracles.twobit",
          "python -m proofs_checks", "python -m numeric.heads.zoo", "python -m numeric.panel.arms"]


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               NO_MKDOCS_2_WARNING="1", COLUMNS="100")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, env=env, capture_output=True, text=True,
                          timeout=1800)


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", "", html, flags=re.S)))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = build(ROOT / "mkdocs.yml", out)
    assert result.returncode == 0, result.stderr[-4000:]
    return out


def test_the_site_builds_strict_with_every_section(site):
    for page in ["index.html", "tutorials/first-bracket.html", "how-to/read-a-report.html",
                 "explanation/trust-model.html", "reference/exit-codes.html", "bracket-format.html"]:
        assert (site / page).is_file(), page


def test_the_quickstart_notebook_ran_in_the_build(site):
    """What tests/test_softrank_docs.py checked of the executed notebook, read from its page."""
    html = (site / "examples" / "quickstart.html").read_text()
    assert "verified by the exact tier" in html                      # the Brackets table rendered
    table = html[html.index("verified by the exact tier"):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 3 * 3                          # header + 3 heads x 3 tolerances
    assert "data:image/png;base64," in html                          # the plot of L and U
    assert "9/9 cells verified on both sides" in html                # the saved file re-verified
    assert "jp-OutputArea-executeResult" in html and "Traceback" not in html   # ran, and raised nothing


def test_the_cli_reference_is_generated_from_the_parsers(site):
    text = text_of((site / "reference" / "cli.html").read_text())
    for command in USAGES:
        assert f"usage: {command}" in text, command
    assert "--max-tensor-bytes BYTES" in text and "--scheduler ADDRESS" in text


def test_the_api_reference_is_generated_from_docstrings(site):
    text = text_of((site / "reference" / "python-api.html").read_text())
    for name in ["softrank.bracket", "softrank.Brackets", "exact.verify.verify_file", "exact.errors.ExitCode",
                 "crosscheck.verify_file", "crosscheck.Agreement"]:
        assert name in text, name
    assert "[0, 1, 2, 130]" in text                                  # a doctest example rendered as code


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    """Negative control: the project's strictness settings, on a page with a dead link and a dead
    anchor, fail the build and name both."""
    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config = {k: ours[k] for k in ("strict", "validation", "markdown_extensions", "use_directory_urls")}
    config.update(site_name="control", docs_dir="docs")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Control\n\n[gone](missing.md) and [here](#no-such-heading)\n")
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "missing.md" in result.stderr and "no-such-heading" in result.stderr

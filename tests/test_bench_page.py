"""``docs/benchmarks.md`` is generated: rendering the template with the shipped results gives it byte for byte.
Also the layout rules of ``bench/``: nothing in the product imports it, and no script in it edits ``sys.path``."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from bench.render import PAGE, TEMPLATE, render, render_page
from bench.runner import RESULTS, load, suite_names
from tests.helpers import PACKAGES as PRODUCT
from tests.helpers import imports_of as _imports

ROOT = Path(__file__).resolve().parents[1]


def test_the_page_is_what_the_shipped_results_render():
    assert render_page() == PAGE.read_text(), "docs/benchmarks.md is stale or hand-edited: run python -m bench render"


def test_a_changed_result_changes_the_page(tmp_path):
    """Negative control: the comparison above can fail."""
    shutil.copytree(RESULTS, tmp_path / "results")
    path = next(iter(sorted((tmp_path / "results").rglob("*.json"))))
    doc = json.loads(path.read_text())
    doc["machine"]["cpu_model"] = "A different CPU"
    path.write_text(json.dumps(doc))
    assert render_page(tmp_path / "results") != PAGE.read_text()


def test_every_placeholder_names_a_suite_and_every_suite_is_on_the_page():
    names = re.findall(r"^@@([a-z0-9_]+)\.([a-z0-9_]+)@@$", TEMPLATE.read_text(), flags=re.M)
    assert names
    assert {n for n, _ in names} - {"all"} == set(suite_names())
    assert not re.search(r"^@@.*@@$", PAGE.read_text(), flags=re.M)


def test_a_suite_without_results_says_how_to_make_them(tmp_path):
    page = render("@@exact_speed.ratio@@\n", tmp_path)
    assert page == f"*No results yet: `{load('exact_speed').command}`.*\n"


def test_the_page_is_short_and_names_no_machine_path_date_or_commit():
    text = PAGE.read_text()
    assert len(text.splitlines()) <= 400
    assert not re.search(r"/(work|tmp|home|root)/", text)
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not re.search(r"\b[0-9a-f]{7,40}\b", text)
    assert not re.search(r"(?i)\bissue\s+\d+", text)


def test_nothing_in_the_product_imports_bench_or_research():
    bad = [f"{p.relative_to(ROOT)} imports {name}" for pkg in PRODUCT for p in sorted((ROOT / pkg).rglob("*.py"))
           for name in _imports(p) if name.split(".")[0] in ("bench", "research")]
    assert not bad, "\n".join(bad)


def test_bench_edits_no_sys_path_and_research_imports_no_suite():
    edits = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "bench").rglob("*.py")) if "sys.path" in p.read_text()]
    assert not edits, edits
    suites = [f"{p.relative_to(ROOT)} imports {name}" for p in sorted((ROOT / "research").glob("*.py"))
              for name in _imports(p) if name.startswith("bench.") and name != "bench.common"]
    assert not suites, "\n".join(suites)

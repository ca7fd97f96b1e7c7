"""Test markers, assigned centrally by file (no per-test decorators to keep in step).

- ``exact``: the trusted tier and the independent second checker (no torch, no model).
- ``model``: loads a model or torch (the float tier's heads, the zoo, panels).
- ``slow``: whole pipelines (training, panels, the docs site with its notebook, every appendix check,
  mutation runs).

``python -m pytest -m "not slow"`` is the quick loop; plain ``python -m pytest`` (the README's and
CI's command) still runs everything. The file lists are checked against the tree by
``tests/test_markers.py``, which also finds every test file (or single test) that imports torch or
transformers, or skips without them, and requires its ``model`` marker.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MARKERS = {
    "slow": "whole pipelines (training, panels, the notebook, all appendix checks); deselect with -m 'not slow'",
    "model": "loads a model or torch",
    "exact": "the exact tier or the independent second checker only",
}

#: Test files of each marker (names under tests/). Doctests of exact/ and crosscheck/ are ``exact``.
SLOW = frozenset({
    "test_train.py", "test_vit_arms.py", "test_families.py", "test_panel.py", "test_panel_resume.py",
    "test_softrank_docs.py", "test_proofs_checks.py", "test_exact_mutation.py", "test_oddmap_real.py",
    "test_determinism.py", "test_docs_site.py", "test_proofs_mutation.py", "test_replicate_tiny.py",
    "test_replicate_slice.py",
})
MODEL = frozenset({
    "test_extract.py", "test_models_zoo.py", "test_train.py", "test_vit_arms.py", "test_families.py",
    "test_panel.py", "test_panel_resume.py", "test_softrank_docs.py", "test_study_features.py",
    "test_determinism.py", "test_runtime.py", "test_docs_site.py", "test_panel_heads.py",
    "test_bench_smoke_model.py", "test_replicate_tiny.py", "test_replicate_slice.py", "test_domains.py",
    "test_softrank.py", "test_study_cli.py", "test_study_targets.py", "test_written_gradients.py",
})
#: Single tests of otherwise torch-free files that import torch: ``FILE::TEST``, as ``SLOW_TESTS``.
MODEL_TESTS = frozenset({
    "test_cli_errors.py::test_float_tier_bad_input",
    "test_upper_anneal.py::test_same_seed_same_brackets_with_one_or_two_threads",
})
#: Single tests of otherwise quick files that run a whole pipeline (a panel, a study, a training run):
#: ``FILE::TEST`` (the function's name, every parametrisation). ``tests/test_markers.py`` checks that each exists.
SLOW_TESTS = frozenset({
    "test_domains.py::test_two_domain_panel_and_its_transfer_rows",
    "test_lower.py::test_search_keeps_the_callers_order_and_lower_ranks_fall_with_eps",
    "test_models_zoo.py::test_decoder_metrics",
})
EXACT_PREFIXES = ("test_exact_", "test_crosscheck_")
EXACT_PACKAGES = ("exact", "crosscheck")


def markers_of(path: Path) -> set[str]:
    """The markers of every test collected from ``path``."""
    try:
        rel = path.resolve().relative_to(ROOT)
    except ValueError:
        return set()
    out = set()
    if rel.parts[0] == "tests":
        if rel.name in SLOW:
            out.add("slow")
        if rel.name in MODEL:
            out.add("model")
        if rel.name.startswith(EXACT_PREFIXES):
            out.add("exact")
    elif rel.parts[0] in EXACT_PACKAGES:
        out.add("exact")
    return out


def pytest_configure(config):
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.path))
        names = markers_of(path)
        test = f"{path.name}::{getattr(item, 'originalname', item.name)}"
        if test in SLOW_TESTS:
            names.add("slow")
        if test in MODEL_TESTS:
            names.add("model")
        for name in sorted(names):
            item.add_marker(getattr(pytest.mark, name))


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A small real panel (``tests/report_panel.build_panel``: two heads, real bracket and head files), built
    once per test module that asks for it; ``panel`` is a fresh copy of it per test, to damage."""
    from tests.report_panel import build_panel

    return build_panel(tmp_path_factory.mktemp("clean"), heads=2)


@pytest.fixture
def panel(clean, tmp_path):
    """A copy of ``clean`` (links copied as links) that a test may change."""
    out = tmp_path / "run"
    shutil.copytree(clean, out, symlinks=True)
    return out

"""The central marker lists of tests/conftest.py name files that exist, and the markers land."""
from __future__ import annotations

from tests.conftest import EXACT_PREFIXES, MODEL, ROOT, SLOW, markers_of


def test_marker_lists_name_existing_test_files():
    missing = sorted(n for n in SLOW | MODEL if not (ROOT / "tests" / n).is_file())
    assert not missing, f"tests/conftest.py names files that are gone: {missing}"
    assert any((ROOT / "tests").glob(f"{EXACT_PREFIXES[0]}*.py"))


def test_markers_are_assigned_by_file():
    assert markers_of(ROOT / "tests" / "test_train.py") == {"slow", "model"}
    assert markers_of(ROOT / "tests" / "test_exact_known.py") == {"exact"}
    assert markers_of(ROOT / "exact" / "rational.py") == {"exact"}
    assert markers_of(ROOT / "tests" / "test_architecture.py") == set()     # negative control


def test_markers_reach_the_items(request):
    """This file has no marker; a marked neighbour's items carry theirs (checked through the hook)."""
    assert not {m.name for m in request.node.iter_markers()} & {"slow", "model", "exact"}

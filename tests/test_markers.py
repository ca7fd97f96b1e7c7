"""The central marker lists of tests/conftest.py name files that exist, and the markers land."""
from __future__ import annotations

import re

from tests.conftest import EXACT_PREFIXES, MODEL, ROOT, SLOW, SLOW_TESTS, markers_of


def test_marker_lists_name_existing_test_files():
    missing = sorted(n for n in SLOW | MODEL if not (ROOT / "tests" / n).is_file())
    assert not missing, f"tests/conftest.py names files that are gone: {missing}"
    assert any((ROOT / "tests").glob(f"{EXACT_PREFIXES[0]}*.py"))


def test_slow_tests_name_existing_tests():
    """Every ``FILE::TEST`` of SLOW_TESTS is a test function defined in that file."""
    for entry in sorted(SLOW_TESTS):
        name, test = entry.split("::")
        path = ROOT / "tests" / name
        assert path.is_file(), f"tests/conftest.py SLOW_TESTS names a file that is gone: {entry}"
        assert re.search(rf"^def {re.escape(test)}\(", path.read_text(), re.M), f"no such test: {entry}"


def test_markers_are_assigned_by_file():
    assert markers_of(ROOT / "tests" / "test_train.py") == {"slow", "model"}
    assert markers_of(ROOT / "tests" / "test_exact_known.py") == {"exact"}
    assert markers_of(ROOT / "exact" / "rational.py") == {"exact"}
    assert markers_of(ROOT / "tests" / "test_architecture.py") == set()     # negative control


def test_markers_reach_the_items(request):
    """This file has no marker; a marked neighbour's items carry theirs (checked through the hook)."""
    assert not {m.name for m in request.node.iter_markers()} & {"slow", "model", "exact"}


def test_a_listed_test_is_slow_and_its_neighbours_are_not(pytestconfig):
    """SLOW_TESTS marks the test it names and no other test of its file (through the hook)."""
    from tests.conftest import pytest_collection_modifyitems

    class Item:
        def __init__(self, path, name):
            self.path, self.name, self.originalname, self.marks = path, name, name, []

        def add_marker(self, mark):
            self.marks.append(mark.name)

    name, test = sorted(SLOW_TESTS)[0].split("::")
    listed, other = Item(ROOT / "tests" / name, test), Item(ROOT / "tests" / name, "test_not_listed")
    pytest_collection_modifyitems(pytestconfig, [listed, other])
    assert "slow" in listed.marks and "slow" not in other.marks

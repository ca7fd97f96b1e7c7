"""The central marker lists of tests/conftest.py name files that exist, and the markers land."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import EXACT_PREFIXES, MODEL, MODEL_TESTS, ROOT, SLOW, SLOW_TESTS, markers_of
from tests.helpers import imports_of

#: The packages whose use makes a test a ``model`` test.
TORCH = ("torch", "transformers")


def test_marker_lists_name_existing_test_files():
    missing = sorted(n for n in SLOW | MODEL if not (ROOT / "tests" / n).is_file())
    assert not missing, f"tests/conftest.py names files that are gone: {missing}"
    assert any((ROOT / "tests").glob(f"{EXACT_PREFIXES[0]}*.py"))


def test_slow_tests_name_existing_tests():
    """Every ``FILE::TEST`` of SLOW_TESTS and MODEL_TESTS is a test function defined in that file."""
    for entry in sorted(SLOW_TESTS | MODEL_TESTS):
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


def _torch_use(path: Path) -> tuple[bool, set[str]]:
    """Whether ``path`` imports torch or transformers (or skips without them) at module level, and the
    test functions that do so in their body."""
    def uses(nodes) -> bool:
        for node in nodes:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import) and any(a.name.split(".")[0] in TORCH for a in sub.names):
                    return True
                if isinstance(sub, ast.ImportFrom) and (sub.module or "").split(".")[0] in TORCH:
                    return True
                if isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") == "importorskip" and sub.args \
                        and isinstance(sub.args[0], ast.Constant) and sub.args[0].value in TORCH:
                    return True
        return False

    body = ast.parse(path.read_text()).body
    functions = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return uses([n for n in body if n not in functions]), {f.name for f in functions if uses(f.body)}


def _unmarked(paths) -> list[str]:
    out = []
    for path in paths:
        module_level, tests = _torch_use(path)
        if path.name in MODEL:
            continue
        if module_level:
            out.append(path.name)
        out += [f"{path.name}::{t}" for t in sorted(tests) if t.startswith("test_")
                and f"{path.name}::{t}" not in MODEL_TESTS]
    return out


def test_every_test_that_needs_torch_is_a_model_test(tmp_path):
    """A file that imports torch or transformers (or skips without them) at module level is in MODEL; a test
    function that does so in its body is in MODEL (its file) or MODEL_TESTS. Helpers are not tests: a
    fixture or helper that imports torch marks nothing (its tests' files are listed by hand). Negative
    control: a planted file of each kind is seen."""
    assert _unmarked(sorted((ROOT / "tests").glob("test_*.py"))) == []
    (tmp_path / "test_planted.py").write_text('import pytest\n\ntorch = pytest.importorskip("torch")\n')
    (tmp_path / "test_planted_one.py").write_text("def test_one():\n    from transformers import AutoModel\n")
    assert _unmarked(sorted(tmp_path.glob("test_*.py"))) == ["test_planted.py", "test_planted_one.py::test_one"]


def _test_imports(paths) -> list[str]:
    return [f"{p.name} imports {n}" for p in paths for n in imports_of(p)
            if n.startswith("tests.test_") or n.split(".")[0].startswith("test_")]


def test_no_test_file_imports_another(tmp_path):
    """Shared helpers live in conftest.py fixtures or helper modules, never in a ``test_*.py`` that another
    test file imports; negative control: both spellings of such an import are seen."""
    assert _test_imports(sorted((ROOT / "tests").rglob("*.py"))) == []
    (tmp_path / "test_x.py").write_text("from tests.test_panel import cli\n\n\ndef f():\n    import test_report\n")
    assert _test_imports([tmp_path / "test_x.py"]) == ["test_x.py imports tests.test_panel",
                                                       "test_x.py imports test_report"]


def test_no_sys_path_edits():
    """The tests, the benchmarks and the tests' data scripts import the tree as installed (or from the
    repository root), never by editing ``sys.path``."""
    edit = re.compile(r"sys\.path\.(insert|append|extend)\(|sys\.path\s*\+?=")
    edits = [str(p.relative_to(ROOT)) for folder in ("tests", "bench") for p in sorted((ROOT / folder).rglob("*.py"))
             if p.name != "test_markers.py" and edit.search(p.read_text())]
    assert edits == []
    assert edit.search("sys.path.insert(0, ROOT)") and not edit.search("if str(ROOT) in sys.path:")

"""A newcomer's first hour: a light front door, a progress bar that does not warn, a demo report that reads right."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: what only some calls need: none of it may load with ``import softrank`` or ``softrank --help``
HEAVY = ("sklearn", "torch", "transformers", "scipy", "matplotlib")


def _loaded_after(program: str) -> dict:
    """Run ``program`` in a fresh interpreter; return the heavy packages it left in ``sys.modules`` and its stdout."""
    probe = (f"{program}\nimport json, sys\n"
             f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    return {"rc": done.returncode, "stdout": done.stdout, "heavy": json.loads(done.stderr.strip().splitlines()[-1])}


def test_import_softrank_loads_no_heavy_package():
    got = _loaded_after("import softrank")
    assert got["rc"] == 0 and got["heavy"] == []


def test_softrank_help_loads_no_heavy_package():
    got = _loaded_after("import sys\nfrom softrank.cli import main\nrc = main(['--help'])\nassert rc == 0, rc")
    assert got["rc"] == 0 and got["heavy"] == []
    assert got["stdout"].startswith("The ``softrank`` console script")


def test_the_lazy_names_are_the_modules_names():
    """Every public name resolves, to the object its module defines (and ``dir`` lists it)."""
    import softrank
    from softrank import api, records
    for name in softrank.__all__:
        assert getattr(softrank, name) is not None, name
    assert softrank.bracket is api.bracket and softrank.Brackets is records.Brackets
    assert set(softrank.__all__) <= set(dir(softrank))
    assert softrank.inputs.as_matrices is not None        # a submodule, reachable as an attribute
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        softrank.no_such_name

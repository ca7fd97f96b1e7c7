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


#: a Jupyter kernel as tqdm.autonotebook recognises one (ipykernel's shell loaded, IPython's shell a ZMQ one),
#: with ``ipywidgets`` missing; then ``softrank.bracket`` with its progress bar on a 4 x 4 matrix
NOTEBOOK_WITHOUT_WIDGETS = """
import sys, types, warnings
class ZMQInteractiveShell: pass
ipython = types.ModuleType("IPython"); ipython.get_ipython = ZMQInteractiveShell
sys.modules["IPython"] = ipython
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
sys.modules["ipywidgets"] = None                 # import ipywidgets: ImportError, installed or not
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import numpy as np
    import softrank
    b = softrank.bracket(np.full((4, 4), 0.25), eps=0.5, effort="quick", progress=True)
print(repr([f"{w.category.__name__}: {w.message}" for w in caught]))
"""


def test_progress_in_a_notebook_without_ipywidgets_does_not_warn():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", NOTEBOOK_WITHOUT_WIDGETS], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "softrank.bracket" in done.stderr         # the bar was drawn (tqdm's text bar, on stderr)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_notebook_extra_brings_the_widget():
    import tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("ipywidgets") for req in extras["notebook"])

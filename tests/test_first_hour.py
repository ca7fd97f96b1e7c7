"""A newcomer's first hour: a light front door, a progress bar that does not warn, a demo report that reads right."""
from __future__ import annotations

import importlib
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
    # the function, not the submodule of the same name that ``softrank.api`` imported first
    assert softrank.attention is importlib.import_module("softrank.attention").attention
    assert set(softrank.__all__) <= set(dir(softrank))
    assert softrank.inputs.as_matrices is not None        # a submodule, reachable as an attribute
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        softrank.no_such_name


#: a Jupyter kernel as tqdm.autonotebook recognises one (ipykernel's shell loaded, IPython's shell a ZMQ one),
#: with ``ipywidgets`` missing; then the front door's import and the progress bar ``softrank.bracket`` draws
#: (its class, ``softrank.api._progress_class``; a whole bracket would load torch)
NOTEBOOK_WITHOUT_WIDGETS = """
import sys, types, warnings
class ZMQInteractiveShell: pass
ipython = types.ModuleType("IPython"); ipython.get_ipython = ZMQInteractiveShell
sys.modules["IPython"] = ipython
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
sys.modules["ipywidgets"] = None                 # import ipywidgets: ImportError, installed or not
warnings.simplefilter("always")
shown = lambda caught: print(repr([f"{w.category.__name__}: {w.message}" for w in caught]), flush=True)
with warnings.catch_warnings(record=True) as caught:
    import softrank.api
shown(caught)
with warnings.catch_warnings(record=True) as caught:
    bar = softrank.api._progress_class()(total=2, desc="softrank.bracket", unit="side", leave=False)
    bar.update(2)
    bar.close()
shown(caught)
"""


def test_progress_in_a_notebook_without_ipywidgets_does_not_warn():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", NOTEBOOK_WITHOUT_WIDGETS], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.stdout.splitlines()[:1] == ["[]"], done.stdout     # importing the front door's functions
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["[]", "[]"], done.stdout   # drawing the bar
    assert "softrank.bracket" in done.stderr         # the bar was drawn (tqdm's text bar, on stderr)


def test_the_notebook_extra_brings_the_widget():
    import tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("ipywidgets") for req in extras["notebook"])


# ---------------------------------------------------------------- the demo report reads right

def _cells(family: str, n: int, brackets) -> list:
    """Verified rows of one family at n x n, one per (L, U) in ``brackets`` (layer i, head 0, two sources)."""
    from numeric.panel.schema import PanelRow
    return [PanelRow(family=family, model="m", layer=i, head=0, source=f"text:{i % 2}", eps="1/4", status="ok",
                     n_rows=n, n_cols=n, L=L, U=U, verified=True, cell_id=f"{family}-L{i}")
            for i, (L, U) in enumerate(brackets)]


#: overlapping, unresolved brackets: a family below the gate on both counts
BELOW = [(3, 9), (4, 9), (5, 9), (3, 8)]
ABOVE = [(2, 2), (5, 5), (9, 9), (14, 14)]


def _table1(rows) -> str:
    from fractions import Fraction

    from numeric.panel.report_families import GATE, _by_family, _table1, gate_table
    return "\n".join(_table1(gate_table(_by_family(rows), GATE), GATE, Fraction(1, 4)))


def test_one_family_is_not_failed_by_the_identification_gate():
    text = _table1(_cells("encoder", 256, BELOW))
    assert "FAIL" not in text and "**" not in text
    assert "Overall gate: not assessed" in text and "compares families" in text
    # negative control: with two families, a family below the gate fails the run, in bold
    assert "Overall gate (every family passes): **FAIL**" in _table1(_cells("encoder", 256, BELOW)
                                                                     + _cells("decoder-gpt2", 256, ABOVE))
    assert "**pass**" in _table1(_cells("encoder", 128, ABOVE) + _cells("vit", 128, ABOVE))


def _audit(rows) -> str:
    import numpy as np

    from numeric.panel.report_families import _audit, _by_family
    return "\n".join(_audit(_by_family(rows), np.random.default_rng(0)))


def test_the_paper_column_only_at_the_papers_shape():
    at_256 = _audit(_cells("encoder", 256, ABOVE))
    assert "paper U/128" not in at_256 and "| encoder (m) | 256 x 256 |" in at_256
    assert "this run's shape (256 x 256) is another" in at_256
    at_128 = _audit(_cells("encoder", 128, ABOVE))
    assert "paper U/128" in at_128 and "| 0.14-0.17 |" in at_128
    mixed = _audit(_cells("encoder", 128, ABOVE) + _cells("vit", 122, ABOVE))
    assert "| - (not at n = 128) |" in mixed


def test_the_screen_heading_names_decoders_only_when_there_are_some():
    from numeric.panel.report_families import _screens
    encoders = "\n".join(_screens(_cells("encoder", 128, ABOVE)))
    assert "(decoders;" not in encoders and "### Cells per family" in encoders and "this run has none" in encoders
    both = "\n".join(_screens(_cells("encoder", 128, ABOVE) + _cells("decoder-gpt2", 128, ABOVE)))
    assert "### Head screen (decoders" in both and "dropped: retained mass" in both


def test_geometry_figures_lie_under_figures(tmp_path, monkeypatch):
    """The report's geometry PNGs go to DIR/figures (links relative to report.md), none at the top of DIR;
    their log x axes are drawn by ``log_x``."""
    from numeric.panel import report, report_geometry
    from tests.report_panel import geometry_rows as _rows
    calls = []
    real = report_geometry.log_x
    monkeypatch.setattr(report_geometry, "log_x", lambda ax: (calls.append(ax), real(ax)))
    md = report._geometry_section(_rows(), tmp_path)
    names = ("geometry_intrinsic.png", "geometry_family.png", "geometry_native.png")
    assert all((tmp_path / "figures" / n).stat().st_size > 1000 for n in names)
    assert not list(tmp_path.glob("*.png"))
    assert all(f"(figures/{n})" in md for n in names)
    assert len(calls) >= 3


def test_a_short_log_axis_has_labelled_major_and_minor_ticks():
    """x from 2.5 to 20 (the demo's geometry range): more than the one labelled tick "10"."""
    from numeric.panel.figures import log_x
    from numeric.runtime import pyplot
    plt = pyplot()
    fig, ax = plt.subplots()
    try:
        ax.plot([2.5, 20], [0, 1])
        log_x(ax)
        fig.canvas.draw()
        lo, hi = ax.get_xlim()
        shown = lambda ticks: [t.get_text() for t in ticks if t.get_text() and lo <= t.get_position()[0] <= hi]
        assert shown(ax.xaxis.get_majorticklabels()) == ["10"]
        minor = shown(ax.xaxis.get_minorticklabels())
        assert len(minor) >= 3 and {"3", "20"} <= set(minor), minor
    finally:
        plt.close(fig)

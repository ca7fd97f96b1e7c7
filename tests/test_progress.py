"""Progress inside a long cell: the bracket command's status line names the side it is on and the work its
budgets have spent, on a terminal only; it is a display, and a bracket is the same with or without it."""
from __future__ import annotations

import io

import numpy as np

from numeric.runtime import note_work, work_observer
from numeric.search import search_brackets
from numeric.search.budget import Budget
from numeric.search.cli import main as bracket_main
from numeric.search.progress import SearchProgress, search_progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _head(n: int = 12) -> np.ndarray:
    rng = np.random.default_rng(1)
    E = np.exp(2.0 * rng.normal(size=(n, n)))
    return E / E.sum(axis=1, keepdims=True)


def test_every_budget_tells_the_observer_and_nothing_outside_one():
    seen: list[int] = []
    b = Budget(10)
    with work_observer(seen.append):
        b.spend(3)
        b.take(2)
    b.spend(1)
    note_work(5)
    assert seen == [3, 2] and b.used == 6


def test_the_status_line_names_the_side_and_the_units(monkeypatch):
    monkeypatch.setattr("numeric.search.progress.REFRESH_S", 0.0)
    term = _Terminal()
    with search_progress("bracket", 2, show=True, stream=term) as bar:
        assert isinstance(bar, SearchProgress)
        note_work(1500)
        bar.step(0, "eps=1/2 lower")
        note_work(500)
    text = term.getvalue()
    assert "side 1 of 4, 1,500 work units" in text
    assert "side 2 of 4 (finished: eps=1/2 lower), 2,000 work units" in text and text.endswith("\n")


def test_no_line_without_a_terminal_or_under_json(tmp_path, monkeypatch, capsys):
    """Negative control of the display: piped stderr and --json print no status line."""
    with search_progress("bracket", 1, show=False) as bar:
        assert bar is None
    np.save(tmp_path / "A.npy", _head())
    monkeypatch.setattr("sys.stderr", _Terminal())
    assert bracket_main(["--matrix", str(tmp_path / "A.npy"), "--eps", "1/2", "--out", str(tmp_path / "o.safetensors"),
                         "--effort", "quick", "--json"]) == 0
    import sys
    assert "work units" not in sys.stderr.getvalue()


def test_the_bracket_command_shows_progress_on_a_terminal(tmp_path, monkeypatch):
    np.save(tmp_path / "A.npy", _head())
    monkeypatch.setattr("numeric.search.progress.REFRESH_S", 0.0)
    term = _Terminal()
    monkeypatch.setattr("sys.stderr", term)
    assert bracket_main(["--matrix", str(tmp_path / "A.npy"), "--eps", "1/2", "--out", str(tmp_path / "o.safetensors"),
                         "--effort", "quick"]) == 0
    assert "side 2 of 2 (finished: " in term.getvalue() and "work units" in term.getvalue()


def test_a_bracket_is_the_same_with_and_without_the_display():
    A = _head()
    plain = search_brackets(A, ["1/2"], effort="quick", attack=False)
    with search_progress("bracket", 1, show=True, stream=_Terminal()):
        shown = search_brackets(A, ["1/2"], effort="quick", attack=False)
    assert [(r.lower, r.upper, r.lower_witness, r.upper_witness) for r in plain.results] == \
           [(r.lower, r.upper, r.lower_witness, r.upper_witness) for r in shown.results]

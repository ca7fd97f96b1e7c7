"""``exact.bracketfile.show``: values from a file, shown whole up to the limit, marked when cut (issue 14, item 6)."""
from __future__ import annotations

from exact.bracketfile import show


def test_show_marks_a_cut_and_only_a_cut():
    assert show("a" * 40, 40) == ascii("a" * 40) and show("a" * 41, 40) == ascii("a" * 40) + "..."
    assert show("ab", 40) == "'ab'" and show("", 40) == "''"
    assert show([1] * 3, 9) == "[1, 1, 1]" and show([1] * 4, 9) == "[1, 1, 1,..."
    assert show(7, 9) == "7"

"""``bench/effort_compare.py``'s flags: a thorough U above default's, a thorough L below default's and an
after bracket wider than before on either side are flagged; equal or tighter brackets are not (each case is
the other's control)."""
from __future__ import annotations

from bench.effort_compare import compare


def _sides(bd, bt, ad, at):
    return {"before-default": {("h_a", "1/2"): bd}, "before-thorough": {("h_a", "1/2"): bt},
            "after-default": {("h_a", "1/2"): ad}, "after-thorough": {("h_a", "1/2"): at}}


def test_clean_cells_are_not_flagged():
    rows, med = compare(_sides((3, 9), (3, 8), (3, 8), (4, 7)), ["h_a"])
    assert rows[0]["flags"] == []
    assert med["after-thorough"]["h 1/2"] == 7 / 4 and med["before-default"]["h 1/2"] == 3


def test_thorough_above_default_is_flagged():
    rows, _ = compare(_sides((3, 9), (3, 9), (3, 8), (3, 9)), ["h_a"])
    assert rows[0]["flags"] == ["T>D after"]


def test_a_wider_after_bracket_is_flagged_on_either_side():
    assert compare(_sides((3, 9), (3, 9), (2, 9), (3, 9)), ["h_a"])[0][0]["flags"] == ["wider default (L lost)"]
    assert compare(_sides((3, 9), (3, 8), (3, 9), (3, 9)), ["h_a"])[0][0]["flags"] == ["wider thorough (U lost)"]


def test_thorough_below_default_on_the_lower_side_is_flagged():
    rows, _ = compare(_sides((3, 9), (3, 9), (4, 9), (3, 9)), ["h_a"])
    assert rows[0]["flags"] == ["T<D L after"]

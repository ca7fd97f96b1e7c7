"""The typed bracket cell's own checks (``exact/cellspec.py``), tested directly.

``exact.bracketfile`` validates a file's fields before it builds a ``CellSpec``, so a file
cannot reach these checks with a wrong witness; the producers (the float tier, the oracles,
the proof checks) can, and these tests pin what each check refuses, and its message. They
kill the mutants of ``cellspec.py`` that the reader's tests cannot reach
(``python bench/mutation.py --only cellspec.py``). Only ``exact`` is imported.
"""
from __future__ import annotations

import pytest

from exact.cellspec import LOWER_KINDS, UPPER_KINDS, Claim, TargetSpec


def test_a_witness_with_an_extra_field_is_refused():
    with pytest.raises(ValueError, match=r"has fields \['P', 'Q', 'R'\], needs \['P', 'Q'\]"):
        Claim.of(2, "factors", P="c/P", Q="c/Q", R="c/R").check(UPPER_KINDS, "upper")


def test_a_witness_with_a_missing_field_is_refused():
    with pytest.raises(ValueError, match=r"has fields \['P'\], needs \['P', 'Q'\]"):
        Claim.of(2, "factors", P="c/P").check(UPPER_KINDS, "upper")


def test_the_exact_field_set_is_accepted():
    Claim.of(2, "factors", P="c/P", Q="c/Q").check(UPPER_KINDS, "upper")
    Claim.of(3, "frobenius", k=3).check(LOWER_KINDS, "lower")


@pytest.mark.parametrize("value", [3, None, 1.5])
def test_a_tensor_field_that_is_not_a_name_says_tensor_name(value):
    with pytest.raises(ValueError, match=r"upper witness P must be a tensor name$"):
        Claim.of(2, "factors", P=value, Q="c/Q").check(UPPER_KINDS, "upper")


@pytest.mark.parametrize("value", ["3", -1, True, 2.0])
def test_an_int_field_that_is_not_a_count_says_int(value):
    with pytest.raises(ValueError, match=r"lower witness k must be a int >= 0$"):
        Claim.of(3, "frobenius", k=value).check(LOWER_KINDS, "lower")


def test_a_logit_target_needs_both_logits_and_slack():
    assert TargetSpec("c/A").to_json() == {"matrix": "c/A"}
    assert TargetSpec("c/A", "c/H", "1/8").to_json() == {"matrix": "c/A", "logits": "c/H", "slack": "1/8"}
    with pytest.raises(ValueError, match="needs both logits and slack"):
        TargetSpec("c/A", logits="c/H")            # logits without a slack
    with pytest.raises(ValueError, match="needs both logits and slack"):
        TargetSpec("c/A", slack="1/8")             # a slack without logits

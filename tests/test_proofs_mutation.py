"""The mutation run over proofs_checks' deciding lines (tests/proofs_mutation.py): its
enumeration, its mutants, and one real mutant killed by the control that targets it."""
from __future__ import annotations

import ast
from pathlib import Path

from tests import proofs_mutation as pm

ROOT = Path(__file__).resolve().parents[1]


def test_deciding_lines_include_the_laws_and_the_controls_targets():
    ms = pm.mutants(kind="true")
    texts = {(m.file, m.func) for m in ms}
    for where in [("hardcore.py", "law_bracket"), ("hardcore.py", "certify"), ("hardcore.py", "visible_key_gap"),
                  ("growth.py", "prove_law"), ("identities.py", "check_a3"), ("soundness.py", "check_i1")]:
        assert where in texts, where
    assert len(ms) > 150


def test_every_mutant_applies_and_changes_the_source():
    src = (ROOT / "proofs_checks" / "growth.py").read_text()
    for m in pm.mutants(only="growth.py"):
        out = pm.apply(m, src)
        ast.parse(out)
        assert out != ast.unparse(ast.parse(src)), m.describe()


def test_every_check_is_reached_and_has_controls():
    _, checks = pm.call_graph()
    assert set(checks.values()) == set(pm.CONTROL_PREFIX)
    assert pm.labels_reaching("law_bracket") == ["G.3", "I.4"]


def test_a_dropped_fact_is_killed_by_its_control():
    # A.3's "minimal dimension = rank C" replaced by True: A.3 still passes, so only the
    # control that perturbs C can kill it, and does
    [m] = [m for m in pm.mutants(only="identities.py", kind="true", match="check_a3") if "upper == rc" in m.text]
    verdict, why = pm.run_mutant(m, timeout=300)
    assert verdict == "killed" and "test_a3_fails_for_a_non_row_column_term" in why, why

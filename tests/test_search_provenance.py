"""The search provenance of a bracket cell: written by typed records, read back by the same contract
(``numeric.search.provenance``)."""
from __future__ import annotations

import json
from dataclasses import dataclass, fields

import numpy as np
import pytest

from numeric.search.driver import search_brackets
from numeric.search.provenance import (SEARCH, CellProvenance, CellSearch, CodeVersion, RunOutcome, RunProvenance,
                                       SearchProvenance, SearchTolerances, cell_provenance)

RUN = RunProvenance(effort="quick", base_effort=None, budgets={"upper_work": 7, "descent_steps": 3}, seed=11,
                    tolerances=SearchTolerances(lower_safety=1e-9, upper_safety=1e-6, attack_fraction=0.999,
                                                stochastic_tol=1e-12),
                    threads=1, versions={"numpy": "2.0.0", "torch": None},
                    code=CodeVersion(version="0.1", commit="abc", dirty=False))
CELL = CellSearch(lower_family="frobenius", upper_family="factors/svd", svd_rank=3, lower_from_eps=None,
                  upper_from_eps="1/4", seconds=0.5, device="cpu", lower_margin="1/7", upper_margin=None,
                  attack_rank=None, attack_eps=None, attack_error=None, attack_success=None, cell_seed=5,
                  capped=False)
LABELS = {"model": "m", "layer": 2, "head": 1, "source": "s0", "kv_head": 1}

#: The key order the driver has always written (part of a bracket file's bytes).
WRITTEN_ORDER = ["lower_family", "upper_family", "svd_rank", "lower_from_eps", "upper_from_eps", "seconds", "device",
                 "lower_margin", "upper_margin", "attack_rank", "attack_eps", "attack_error", "attack_success",
                 "cell_seed", "capped", "effort", "base_effort", "budgets", "seed", "tolerances", "threads",
                 "versions", "code"]


def _unwritten(read_record: type, written: dict) -> list[str]:
    """The fields of a read-side record that the writer does not write."""
    return [f.name for f in fields(read_record) if f.name not in written]


def test_cell_provenance_writes_search_then_labels_in_the_recorded_order():
    prov = cell_provenance(CELL, RUN, LABELS)
    assert list(prov) == [SEARCH, *LABELS]
    assert list(prov[SEARCH]) == WRITTEN_ORDER
    assert list(prov[SEARCH]["tolerances"]) == ["lower_safety", "upper_safety", "attack_fraction", "stochastic_tol"]
    assert prov[SEARCH]["code"] == {"version": "0.1", "commit": "abc", "dirty": False}
    assert prov[SEARCH]["budgets"] == {"upper_work": 7, "descent_steps": 3}
    assert cell_provenance(CELL, RUN)[SEARCH]["upper_from_eps"] == "1/4"
    # the caller's labels win on a clash, as they did when the driver built the dict by hand
    assert cell_provenance(CELL, RUN, {SEARCH: "mine"}) == {SEARCH: "mine"}
    outcome = RunOutcome(run=RUN, stopped=True, capped=("c/eps=1/4",)).to_json()
    assert list(outcome)[-2:] == ["stopped", "capped"] and outcome["capped"] == ["c/eps=1/4"]
    assert {k: v for k, v in outcome.items() if k not in ("stopped", "capped")} == RUN.to_json()


def test_what_is_written_reads_back():
    prov = json.loads(json.dumps(cell_provenance(CELL, RUN, {**LABELS, "layer": [2]})))
    read = CellProvenance.from_json(prov)
    assert read.search == SearchProvenance(effort="quick", lower_family="frobenius",
                                           versions={"numpy": "2.0.0", "torch": None}, code=RUN.code)
    assert read.labels == {"model": "m", "head": 1, "source": "s0"}      # scalars of CELL_LABELS only
    assert CellProvenance.from_json({SEARCH: {"effort": "x"}}).search.lower_family is None


def test_the_read_side_names_only_written_fields():
    written = cell_provenance(CELL, RUN)[SEARCH]
    assert _unwritten(SearchProvenance, written) == []
    assert _unwritten(CodeVersion, written["code"]) == []

    @dataclass(frozen=True)
    class Misspelt:                       # negative control: a reader of a field nobody writes
        effrot: str | None = None
        lower_family: str | None = None

    assert _unwritten(Misspelt, written) == ["effrot"]


def test_a_search_writes_the_records_it_returns():
    A = np.full((6, 6), 1 / 6)
    out = search_brackets(A, ["1/2"], effort="quick", attack=False, provenance={"model": "uniform"})
    (cell,) = out.cells
    assert list(cell.provenance) == [SEARCH, "model"]
    assert list(cell.provenance[SEARCH]) == WRITTEN_ORDER
    assert {k: cell.provenance[SEARCH][k] for k in out.provenance.run.to_json()} == out.provenance.run.to_json()
    read = CellProvenance.from_json(cell.provenance)
    assert read.search.effort == "quick" and read.search.code == out.provenance.run.code
    assert read.search.lower_family == out.results[0].lower_witness and read.label("model") == "uniform"
    assert out.provenance.stopped is False and out.provenance.capped == ()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

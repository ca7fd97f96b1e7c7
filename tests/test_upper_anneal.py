"""Upper trials are complete annealed runs, restarts below the best rank are run and
counted, the mechanics are deterministic across thread counts, and bad input is refused early."""
from __future__ import annotations

import numpy as np
import pytest

from numeric.runtime import trial_trace
from numeric.search import refine as rf
from numeric.search import upper as up
from numeric.search.budget import Budget


def _softmax(h):
    z = np.exp(h - h.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def head():
    rng = np.random.default_rng(7)
    q, k = rng.normal(size=(48, 8)), rng.normal(size=(48, 8))
    return _softmax(q @ k.T / 2.0)


@pytest.fixture
def trials():
    """The ``TrialLog`` of every refine call and the record of every search trial (``numeric.runtime.trial_trace``)."""
    with trial_trace() as trace:
        yield trace.refines, trace.trials


def _missing_trials(head, iters):
    svd, _ = up.svd_baseline(head)
    out = []
    for k, eps in ((11, 0.25), (4, 0.5), (2, 0.5)):          # ranks that miss by 35 % to 75 %
        b = Budget(10**9)
        _, _, err = rf.refine(head, *up.svd_factors(*svd, k), eps, iters=iters, budget=b)
        assert err > eps
        out.append((err, b.used, rf.step_work(*head.shape, k)))
    return out


def test_a_trial_is_not_ended_while_its_temperature_is_above_the_floor(head, trials):
    """A trial that misses runs its whole schedule, or ends in its last quarter (the surrogate's
    hopeless rule); its budget is the steps it ran. Negative control: the same rule judged from
    the first step ends these trials while the temperature is still high."""
    logs, _ = trials
    iters = 600
    spent = _missing_trials(head, iters)
    assert len(logs) == 3
    for log, (err, used, unit) in zip(logs, spent):
        assert log.reason in ("length", "hopeless") and log.feasible_at is None
        assert log.steps == iters or (log.reason == "hopeless" and log.steps >= rf.LATE_FRACTION * iters)
        assert used == log.steps * unit and log.error == err
        t0 = rf.schedule(0.25, *head.shape)[0]
        assert log.last_T <= log.floor_T * (t0 / log.floor_T) ** (1 - rf.LATE_FRACTION) * 1.0001   # near the floor
    logs.clear()
    rf_late = rf.LATE_FRACTION
    try:
        rf.LATE_FRACTION = 0.0
        _missing_trials(head, iters)
    finally:
        rf.LATE_FRACTION = rf_late
    assert any(log.reason == "hopeless" and log.steps < rf.LATE_FRACTION * iters for log in logs)


def test_a_feasible_trial_runs_past_feasibility_at_the_floor(head, trials):
    """Feasible at some step, the trial runs ``margin`` more steps at the floor, and the factors it
    returns are at least as far below eps as at the first feasible step."""
    logs, _ = trials
    svd, errs = up.svd_baseline(head)
    k, eps = 17, 0.25
    b = Budget(10**9)
    P, Q, err = rf.refine(head, *up.svd_factors(*svd, k), eps, iters=400, budget=b, margin=60)
    (log,) = logs
    assert log.reason == "feasible" and err <= eps
    assert log.steps == min(400, log.feasible_at + 60) > log.feasible_at
    assert b.used == log.steps * rf.step_work(48, 48, k) and log.last_T == log.floor_T
    logs.clear()
    P0, Q0, err0 = rf.refine(head, *up.svd_factors(*svd, k), eps, iters=400, budget=Budget(10**9), margin=0)
    assert logs[0].steps == logs[0].feasible_at and err <= err0      # margin: no worse than stopping at once


def test_restarts_below_the_best_rank_run_and_are_counted(head, trials, monkeypatch):
    """With restarts (thorough's ``hybrid``), full-length trials run at the first failing rank from
    structurally different starts, every step of them is spent from the budget (exactly: no refit
    here), and the budget is never overrun; a budget that affords only the narrowing runs none."""
    logs, trace = trials
    monkeypatch.setattr(up, "REFIT_WINDOW", 0.0)           # no refit: the budget is the trials' steps
    svd = up.svd_baseline(head)
    b = Budget(200_000)
    found = up.search_upper(head, 0.25, b, svd=svd, hybrid=True, iters=100, full_iters=200)
    restarts = [t for t in trace if t[0] == "restart"]
    assert restarts and all(t[3] == 200 or t[3] >= up.MIN_TRIAL_FRACTION * 200 for t in restarts)
    assert any(t[2] == found[0].rank - 1 for t in restarts)                 # below the best rank
    assert len({t[1] for t in restarts}) >= 2 and "perturbed" in {t[1] for t in restarts}
    assert len(logs) == len(trace) and all(log.iters == t[3] for log, t in zip(logs, trace))
    assert b.used == sum(log.steps * rf.step_work(48, 48, t[2]) for log, t in zip(logs, trace)) <= b.units
    narrow = sum(log.steps * rf.step_work(48, 48, t[2]) for log, t in zip(logs, trace) if t[0] == "narrow")
    trace.clear()
    b2 = Budget(narrow)
    up.search_upper(head, 0.25, b2, svd=svd, hybrid=True, iters=100, full_iters=200)
    assert trace and not [t for t in trace if t[0] != "narrow"] and b2.used <= b2.units


def test_default_descends_and_stops_at_the_first_clear_miss(head, trials):
    """Without restarts the boundary phase runs full trials one rank at a time below the best and
    stops at the first clear miss: no restart phase, no rank tried twice from the same start."""
    _, trace = trials
    found = up.search_upper(head, 0.25, Budget(10**8), svd=up.svd_baseline(head), iters=100, full_iters=200)
    boundary = [t for t in trace if t[0] == "boundary"]
    assert boundary and not [t for t in trace if t[0] == "restart"]
    assert boundary[-1][2] == found[0].rank - 1 and boundary[-1][4] > 0.25 * (1 + rf.NEAR_FRACTION)


def _stand_in(monkeypatch, result, objectives=None):
    """``_trial`` replaced by a stand-in returning its start with the error ``result(phase, kind, k, eps)``
    and spending the budget of the steps it affords (as ``_trial`` does); returns the list of
    ``(phase, kind, rank)`` of the trials run (and appends ``(objective, steps)`` to ``objectives``)."""
    runs = []

    def fake(A, e, start, *, iters, budget, device, phase, kind, lr_scale=1.0, objective=up.SMOOTHED):
        k = start[1].shape[1]
        steps = up.affordable_steps(budget, A.shape, k, iters)
        if not steps:
            return None
        budget.spend(steps * rf.step_work(*A.shape, k))
        runs.append((phase, kind, k))
        if objectives is not None:
            objectives.append((objective, steps))
        return start[0], start[1], result(phase, kind, k, e)

    monkeypatch.setattr(up, "_trial", fake)
    monkeypatch.setattr(up, "_rescue", lambda A, e, P, Q, err, budget: (P, Q, err))
    return runs


@pytest.mark.parametrize("miss, retried", [(1 + 0.4 * up.RESTART_WINDOW, True), (1 + 2 * up.RESTART_WINDOW, False)])
def test_a_boundary_rank_is_retried_only_after_a_close_miss(head, monkeypatch, miss, retried):
    """A full boundary trial that misses within ``RESTART_WINDOW`` is run again from the other start;
    one that misses by more is not (default's cost: no retries after a 1 % miss). The trials are
    stand-ins that miss by ``miss``; the control is the other case of the pair."""
    eps = 0.25
    runs = _stand_in(monkeypatch, lambda phase, kind, k, e: e * miss)
    svd, _ = up.svd_baseline(head)
    up._boundary_rank(head, eps, 5, up.svd_factors(*svd, 8), svd, budget=Budget(10**6), iters=100, device=None,
                      warm=None, fresh=True, tried=set())
    assert [kind for _, kind, _ in runs] == (["svd", "compressed"] if retried else ["svd"])


@pytest.mark.parametrize("hybrid", [False, True])
def test_default_narrowing_runs_one_start_per_rank(head, monkeypatch, hybrid):
    """Narrowing trials reach eps at the upper half of the ranks and miss by 0.2 % below: default
    runs each rank from one start (the boundary phase retries close misses); thorough (``hybrid``,
    the control) runs a miss again from the other start, compressed best or truncated SVD."""
    svd = up.svd_baseline(head)
    half = (up.first_within(svd[1], 0.25) + 1) // 2
    runs = _stand_in(monkeypatch, lambda phase, kind, k, e: e * (0.9 if k >= half else 1.002))
    up.search_upper(head, 0.25, Budget(10**6), svd=svd, hybrid=hybrid, iters=100, full_iters=200)
    starts = [(k, kind) for phase, kind, k in runs if phase == "narrow" and kind != "hybrid"]
    missed = {k for k, _ in starts if k < half}
    assert missed and len(starts) == len({k for k, _ in starts}) + (len(missed) if hybrid else 0)
    if hybrid:
        assert all({kind for r, kind in starts if r == k} == {"compressed", "svd"} for k in missed)


@pytest.mark.parametrize("drop", [up.FAR_DROP - 1, up.FAR_DROP])
def test_a_far_narrowing_trial_starts_from_the_svd(head, monkeypatch, drop):
    """The narrowing's first trial below a feasible best at rank 12 is at rank 12 - ``drop`` (the
    bisection's lower end chosen so): ``FAR_DROP`` ranks below it starts from the truncated SVD, one
    rank nearer (the control) from the compressed best."""
    svd, _ = up.svd_baseline(head)
    runs = _stand_in(monkeypatch, lambda phase, kind, k, e: e * 1.5)
    best = up.UpperResult(12, *up.compress(*up.svd_factors(*svd, 14), 12), 0.2, "factors/refined")
    up._bisect(head, 0.25, 12 - 2 * drop, [best], svd, budget=Budget(10**6), iters=100, device=None)
    assert runs[0] == ("narrow", "svd" if drop >= up.FAR_DROP else "compressed", 12 - drop)


@pytest.mark.parametrize("spare, below", [(0.5, False), (1.0, True)])
def test_default_descends_below_the_first_boundary_rank_only_with_full_trials(head, monkeypatch, spare, below):
    """Narrowing trials miss, full trials reach eps. Default's first boundary rank (the SVD rank minus
    one) runs whatever the budget affords; the rank below it only a full-length trial: with
    ``spare`` = half a trial left it stops, with a whole one (the control) it goes on down."""
    svd = up.svd_baseline(head)
    k_svd = up.first_within(svd[1], 0.25)
    runs = _stand_in(monkeypatch, lambda phase, kind, k, e: e * (1.1 if phase == "narrow" else 0.9))
    probe = Budget(10**9)
    up._bisect(head, 0.25, 1, [up.UpperResult(k_svd, *up.svd_factors(*svd[0], k_svd), 0.2, "svd")], svd[0],
               budget=probe, iters=100, device=None)
    narrowing = probe.used
    first = 200 * rf.step_work(*head.shape, k_svd - 1)
    second = 200 * rf.step_work(*head.shape, k_svd - 2)
    runs.clear()
    found = up.search_upper(head, 0.25, Budget(narrowing + first + int(spare * second)), svd=svd,
                            iters=100, full_iters=200)
    ranks = [k for phase, _, k in runs if phase == "boundary"]
    assert ranks[0] == k_svd - 1 and (k_svd - 2 in ranks) == below
    assert found[0].rank == (k_svd - 2 if below else k_svd - 1)


@pytest.mark.parametrize("eps, sharp_trials, granted", [(0.1, 2, True), (0.1, 0, False), (0.25, 2, False)])
def test_a_sharp_boundary_is_granted_full_hot_trials(head, monkeypatch, eps, sharp_trials, granted):
    """Narrowing trials miss, boundary trials reach eps, and the budget is spent when the narrowing
    ends. At eps 1/10 the first boundary rank, 29 of 48, is sharp (``SHARP_FRACTION``): with
    ``sharp_trials`` = 2 the budget is topped up to two full trials at that rank: rank 29, which
    the narrowing missed, from the truncated SVD under the hot plain objective, and rank 28, which
    it did not try, from the compressed best under the usual one. Controls: no grant with
    ``sharp_trials`` = 0, nor at eps 1/4, whose first boundary rank (21) is not sharp; then no
    boundary trial runs at all."""
    svd = up.svd_baseline(head)
    k_svd = up.first_within(svd[1], eps)
    assert (k_svd - 1 >= up.SHARP_FRACTION * head.shape[1]) == (eps == 0.1)
    objectives: list = []
    runs = _stand_in(monkeypatch, lambda phase, kind, k, e: e * (1.1 if phase == "narrow" else 0.9), objectives)
    probe = Budget(10**9)
    up._bisect(head, eps, 1, [up.UpperResult(k_svd, *up.svd_factors(*svd[0], k_svd), 0.2, "svd")], svd[0],
               budget=probe, iters=100, device=None)
    runs.clear(), objectives.clear()
    b = Budget(probe.used)
    found = up.search_upper(head, eps, b, svd=svd, iters=100, full_iters=200, sharp_trials=sharp_trials)
    boundary = [(kind, k, o) for (phase, kind, k), o in zip(runs, objectives) if phase == "boundary"]
    if not granted:
        assert boundary == [] and b.used == b.units == probe.used and found[0].rank == k_svd
        return
    assert boundary == [("svd-hot", k_svd - 1, (up.HOT, 200)), ("compressed", k_svd - 2, (up.SMOOTHED, 200))]
    work = [rf.step_work(*head.shape, k) for k in (k_svd - 1, k_svd - 2)]
    assert b.units == probe.used + 2 * 200 * work[0] and b.used == probe.used + 200 * sum(work)
    assert found[0].rank == k_svd - 2


def test_the_sharp_grant_is_a_count_that_may_be_zero():
    """``upper_sharp_trials`` may be overridden to 0 (no grant, quick's value); it is still refused
    negative or boolean, and a work budget is still refused at 0 (the control)."""
    from numeric.search.effort import PRESETS

    assert PRESETS["default"].replace(upper_sharp_trials=0).upper_sharp_trials == 0
    assert PRESETS["quick"].upper_sharp_trials == 0 < PRESETS["default"].upper_sharp_trials
    for bad, word in (({"upper_sharp_trials": -1}, "non-negative"), ({"upper_sharp_trials": True}, "non-negative"),
                      ({"upper_work": 0}, "positive")):
        with pytest.raises(ValueError, match=f"must be a {word} integer"):
            PRESETS["default"].replace(**bad)


def test_perturbed_starts_are_deterministic():
    P, Q = np.ones((5, 2)), np.ones((6, 2))
    a, b, c = up.perturbed(P, Q, 2, 1), up.perturbed(P, Q, 2, 1), up.perturbed(P, Q, 2, 2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and not np.array_equal(a[0], c[0])
    assert not np.array_equal(a[0], up.perturbed(P, Q, 2, 1, tag=1)[0])


@pytest.mark.parametrize("objective", [up.SMOOTHED, up.PLAIN, up.HOT])
def test_later_restart_rounds_start_from_perturbed_misses(head, objective):
    """A round after the first: perturbed starts of the closest miss, under the objective that
    reached it (with or without the Huber smoothing, hot or not), and of the compressed best (smoothed)."""
    svd, _ = up.svd_baseline(head)
    best = up.svd_factors(*svd, 12)
    near = (*up.svd_factors(*svd, 10), 0.3, objective)
    starts = up._restart_starts(head, 0.25, 10, best, svd, None, round_=3, near=near, tried=set())
    assert [(k, o) for _, k, _, o in starts] == [("perturbed-miss", objective), ("perturbed", up.SMOOTHED)]
    assert all(s[0][1].shape == (48, 10) for s in starts)


@pytest.mark.parametrize("polish", [True, False])
def test_a_round_starts_by_polishing_the_closest_miss(head, polish):
    """With ``polish`` a round's first start is the closest miss itself, at ``FINE_LR`` times the
    step without the smoothing (``miss-fine``); without it (the control) no start is."""
    svd, _ = up.svd_baseline(head)
    near = (*up.svd_factors(*svd, 10), 0.3, up.SMOOTHED)
    for round_ in (0, 2):
        starts = up._restart_starts(head, 0.25, 10, up.svd_factors(*svd, 12), svd, None, round_=round_, near=near,
                                    tried=set(), polish=polish)
        fine = [(s[0], lr, o) for s, k, lr, o in starts if k == "miss-fine"]
        assert fine == ([(near[0], up.FINE_LR, up.PLAIN)] if polish else [])
        assert (starts[0][1] == "miss-fine") == polish


@pytest.mark.parametrize("earlier", [True, False])
def test_restarts_polish_the_earlier_phases_miss(head, monkeypatch, earlier):
    """The restarts at the first failing rank begin with the narrowing's closest miss there, polished
    (counted in the budget, as every trial); with no earlier miss at that rank (the control) they
    begin with the truncated SVD. Every trial misses clearly, so one round runs."""
    svd, _ = up.svd_baseline(head)
    runs = _stand_in(monkeypatch, lambda phase, kind, k, e: e * 1.5)
    best = up.UpperResult(12, *up.svd_factors(*svd, 12), 0.2, "factors/refined")
    missed = {11: (*up.svd_factors(*svd, 11), 0.26)} if earlier else {}
    budget = Budget(10**7)
    up._restarts(head, 0.25, 11, 1, [best], svd, budget=budget, iters=200, device=None, warm=None, tried=set(),
                 missed=missed)
    assert runs[0] == ("restart", "miss-fine" if earlier else "svd", 11)
    assert budget.used == len(runs) * 200 * rf.step_work(*head.shape, 11)


def test_the_first_restart_round_runs_trials_without_the_huber_smoothing(head, monkeypatch):
    """Round 0 ends with the truncated SVD under the plain objective (``up.PLAIN``) and under the
    plain one from the hot temperature (``up.HOT``), starts the other kinds do not repeat; ``refine``
    then runs its surrogate without the smoothing, and from ``LSE_HOT_EPS`` eps."""
    svd, _ = up.svd_baseline(head)
    starts = up._restart_starts(head, 0.25, 10, up.svd_factors(*svd, 12), svd, None, round_=0, near=None, tried=set())
    assert [(k, o) for _, k, _, o in starts if o != up.SMOOTHED] == [("svd-plain", up.PLAIN), ("svd-hot", up.HOT)]
    assert [k for _, k, _, o in starts if o == up.SMOOTHED][0] == "svd"
    start = up.svd_factors(*svd, 6)
    runs = [rf.refine(head, *start, 0.25, iters=60, objective=o)[2]
            for o in (up.SMOOTHED, up.SMOOTHED, up.PLAIN, up.HOT)]
    # the control: the same objective, the same trial
    assert runs[0] == runs[1] and len({runs[0], runs[2], runs[3]}) == 3


def _cells(out):
    cells = []
    for spec in out.cells:
        c = spec.to_json()
        c = {**c, "provenance": {**c["provenance"], "search": dict(c["provenance"]["search"])}}
        c["provenance"]["search"].pop("seconds")
        cells.append(c)
    return cells


def test_same_seed_same_brackets_with_one_or_two_threads(trials):
    """The thorough mechanics (restarts, perturbed starts) under 1 and 2 caller BLAS/torch threads:
    the same cells and the same tensors, bit for bit; the budget reaches the restarts' first round
    (the polish, the perturbed, plain and hot starts)."""
    import torch
    from threadpoolctl import threadpool_limits

    from numeric.search import search_brackets
    from numeric.search.effort import effort_budgets

    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(32, 6)), rng.normal(size=(32, 6))
    A = _softmax(1.5 * q @ k.T / np.sqrt(6))
    import dataclasses

    # thorough's upper mechanics (upper_hybrid = 1) with small budgets and no base run
    effort = dataclasses.replace(effort_budgets("thorough").replace(
        upper_work=1_000_000, far_lp_work=300, descent_steps=100, greedy_steps=100, greedy_rows=2, swap_work=200,
        lp_append_work=200, lp_svd_solves=5), name="thorough-small")
    runs, traces = [], []
    _, trace = trials
    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            trace.clear()
            torch.set_num_threads(n)
            with threadpool_limits(limits=n):
                runs.append(search_brackets(A, ["1/4"], effort=effort, seed=9, attack=False))
            traces.append(list(trace))
    finally:
        torch.set_num_threads(before)
    a, b = runs
    assert _cells(a) == _cells(b)
    assert a.tensors.keys() == b.tensors.keys()
    assert all(np.array_equal(a.tensors[t], b.tensors[t]) for t in a.tensors)
    assert a.results[0].upper < 32
    assert a.provenance.run.budgets["upper_hybrid"] == 1
    assert traces[0] == traces[1] and traces[0]          # the same trials, errors bit for bit
    assert {"miss-fine", "perturbed", "svd-plain", "svd-hot"} <= {t[1] for t in traces[0] if t[0] == "restart"}


def test_budget_refuses_negative_units():
    assert Budget(0).exhausted
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="non-negative integer"):
            Budget(bad)
    with pytest.raises(ValueError):
        Budget(5).spend(-1)


def test_a_target_too_large_for_memory_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    """The shape is read from the file's header, the estimate compared with the memory at hand:
    one line naming both, exit 2, and no search started. Negative control: with room, no error."""
    from numeric.search import cli, front
    from numeric.search import effort as ef

    A = _softmax(np.random.default_rng(1).normal(size=(64, 64)))
    path = tmp_path / "a.npy"
    np.save(path, A)
    monkeypatch.setattr(cli, "available_bytes", lambda: ef.expected_bytes(64, 64) - 1)
    monkeypatch.setattr(front, "search_targets", lambda *a, **k: pytest.fail("the search started"))
    rc = cli.main(["--matrix", str(path), "--eps", "0.5", "--out", str(tmp_path / "o.safetensors")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "64 x 64" in err and "GiB" in err and "available" in err
    monkeypatch.setattr(cli, "available_bytes", lambda: ef.expected_bytes(64, 64))
    cli._check_memory(cli._stored_shape(str(path), None))                 # room enough: no error
    with pytest.raises(cli.InputError):
        monkeypatch.setattr(cli, "available_bytes", lambda: 1)
        cli._check_memory(cli._stored_shape(str(path), None))


def test_the_shape_of_a_safetensors_input_is_read_without_loading(tmp_path):
    from safetensors.numpy import save_file

    from numeric.search import cli

    save_file({"x": np.zeros((3, 5)), "y": np.zeros((2, 2))}, str(tmp_path / "t.safetensors"))
    assert cli._stored_shape(str(tmp_path / "t.safetensors"), "x") == (3, 5)
    assert cli._stored_shape(str(tmp_path / "t.safetensors"), None) is None        # two tensors: _load says so
    assert cli._stored_shape(str(tmp_path / "missing.npy"), None) is None

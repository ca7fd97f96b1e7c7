"""Bracket search: the float tier's public entry point.

``search_brackets(matrix, eps_list, ...)`` finds, for each tolerance, the
tightest bracket ``L <= r_eps(A) <= U`` whose witnesses the exact tier
accepts, and returns bracket-file cells (format v1) with their tensors.

Pipeline (MATH.md section 2). Lower sides run largest tolerance first, upper
sides smallest first, because r_eps(A) is non-increasing in eps: a lower
witness at one tolerance is valid at every smaller one, an upper witness at
every larger one (output keeps the caller's order):

1. slack (K.5): for logit targets, ``alpha`` proved by ``exact.slack``; the
   lower side is searched at ``eps + alpha``, the upper side at ``eps - alpha``;
2. lower, tolerances largest first: every family of ``numeric.search.lower``
   (trivial, Frobenius K.2, truncated pseudo-inverse and decoded inverse K.3,
   row-side reconstruction on far rows with a Voronoi, LP-optimal or descent
   map, grown by the screened greedy and the LP swap search), strongest
   first, each re-checked with ``exact.certificates.check_lower``; the first
   one the exact tier verifies wins, so a witness that float rounding spoiled
   is replaced by the next-best. The strongest row set of a tolerance is
   offered at the next smaller one and the row-set searches grow it;
3. upper, tolerances smallest first: ``numeric.search.upper.search_upper``
   (K.1: SVD baseline, refined factors, rank bisection with warm starts down
   to L), each re-checked with ``check_upper``; trivial upper (B = A) when
   nothing verifies. The lowest-rank factors verified at a smaller tolerance
   are its warm start (``search_upper(warm=...)``: its first best when below
   the SVD rank, else the compressed start of each trial's second try);
4. across tolerances (``numeric.search.across``): a tolerance whose L is below
   a larger tolerance's, or whose U is above a smaller tolerance's, takes that
   witness, re-checked by the exact tier at its own tolerance (provenance
   ``lower_from_eps`` / ``upper_from_eps``), so L and U are non-increasing in
   eps in the output;
5. attack (item 3): rank ``L - 1`` at ``(eps + alpha)(1 - 1e-3)``; an exactly
   verified success is recorded in ``attack_success`` and warned about
   loudly (callers stop with an error).

A preset with a base (``effort.BASE``: thorough runs default first) runs the
base's budgets and then its own at each tolerance, each with its own chain of
row sets and of upper warm starts (the last run is warm-started from the best
of all runs), and keeps the larger verified L and the smaller verified U (the
base's on ties) before step 4: never a wider bracket than the base's.

Same input, code, seed and effort give the same cells apart from timing
fields (counted budgets, determinism): every search spends counted budgets (``effort.Effort``),
the random choices of a tolerance come from ``cell_seed(seed, eps)``, and
the search runs with pinned threads (``numeric.runtime.pinned_threads``). No clock
is read: only a stop request (Ctrl-C: the stop token of ``numeric.runtime.stop_scope``) ends a search
early, and a cell it ended records ``"capped": true``. After a stop request no
further tolerance's lower side starts; the tolerances whose lower side ran
get their upper sides with every budget spent (the SVD baseline or trivial).

Nothing unverified is ever exported: every claim in ``cells`` was verified by
the exact API before it was written.
"""
from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
from flint import fmpq

from exact.cellspec import CellSpec, Claim, TargetSpec
from exact.certificates import TrivialLower, TrivialUpper, check_lower, check_upper
from exact.matrix import ExactMatrix
from exact.rational import format_rational, to_fmpq, to_fraction
from exact.verdict import Verdict
from numeric.search.across import (LowerPick, UpperPick, carry_lower, carry_upper, exact_lower_witness,
                                   exact_upper_witness)
from numeric.search.attack import ATTACK_FRACTION, attack_rank
from numeric.search.budget import Budget, SafetyCap, stop_requested
from numeric.search.cap import open_cell_caps
from numeric.search.candidate import LowerCandidate, strongest_rows
from numeric.search.effort import (BASE, DEFAULT_EFFORT, Effort, cell_seed, code_version, effort_budgets,
                                   package_versions)
from numeric.search.export import rational_string
from numeric.search.inputs import STOCHASTIC_TOL, parse_eps, validate_matrix
from numeric.search.hints import hints_for
from numeric.search.lower import lower_candidates
from numeric.search.provenance import (CellSearch, CodeVersion, RunOutcome, RunProvenance, SearchTolerances,
                                       cell_provenance)
from numeric.runtime import SEARCH_THREADS, pinned_threads
from numeric.search.device import pick_device
from numeric.search.slack import target_slack
from numeric.search.starts import Svd, svd_factors
from numeric.search.upper import UpperResult, first_within, search_upper, svd_baseline

__all__ = ["search_brackets", "svd_budget", "SearchOutput", "BracketResult", "validate_matrix", "parse_eps",
           "STOCHASTIC_TOL", "UPPER_SAFETY"]

#: The upper search aims at ``(eps - slack)(1 - UPPER_SAFETY)`` so that float
#: rounding of ``A - P Q^T`` (about k n 2^-53) never spoils the exact check.
UPPER_SAFETY = 1e-6
#: The lower search works at ``(eps + slack)(1 + LOWER_SAFETY)`` for the same reason.
LOWER_SAFETY = 1e-9


@dataclass(frozen=True, kw_only=True)
class BracketResult:
    """One tolerance's outcome: a bracket both of whose sides the exact tier verified (keyword fields)."""

    eps: object                    # the tolerance as given
    lower: int
    upper: int
    lower_witness: str             # winning family, e.g. "row_reconstruction/far-rows"
    upper_witness: str             # "factors/refined", "factors/svd", "trivial", ... (of a carried witness too)
    seconds: float
    slack: float | None
    attack_success: bool | None    # None: not run (L < 2 or attack=False)
    svd_rank: int | None = None    # the truncated-SVD baseline rank (None: no truncation reaches eps)
    attack_error: float | None = None
    lower_margin: str | None = None
    upper_margin: str | None = None
    capped: bool = False           # a stop request (Ctrl-C) ended a search of this cell


@dataclass(frozen=True)
class SearchOutput:
    """Cells (``exact.cellspec.CellSpec``), their tensors, and one ``BracketResult`` per tolerance."""

    cells: list[CellSpec]
    tensors: dict[str, np.ndarray]
    results: list[BracketResult]
    #: the run's provenance (effort preset and budgets, seed, package versions, code version), whether a
    #: stop request ended it early, and the cells it capped (``numeric.search.provenance``)
    provenance: RunOutcome


@dataclass(frozen=True)
class _Target:
    """What every tolerance of one matrix shares: the matrix, its exact copy, slack and SVD."""

    A: np.ndarray
    A_exact: ExactMatrix
    slack_q: fmpq | None           # None: matrix target
    slack_f: float
    svd: Svd
    svd_errs: np.ndarray
    device: str
    hints: tuple[LowerCandidate, ...] = ()   # lower witnesses of an earlier file (``hints``), checked first


def lower_claim(c: LowerCandidate, names: dict[str, str]) -> Claim:
    """The lower side of a cell from a float-checked candidate; ``names``: its tensors' names in the file."""
    if c.kind == "trivial":
        return Claim.of(int(c.rank), "trivial")
    if c.kind == "frobenius":
        assert c.k is not None        # a Frobenius candidate has its tail index
        return Claim.of(int(c.rank), "frobenius", k=int(c.k))
    return Claim(int(c.rank), c.kind, dict(names))


@dataclass(frozen=True)
class _Tol:
    """One tolerance: its identity, seed, safety cap and the exact and float targets of both sides."""

    idx: int
    item: object
    text: str                      # the tolerance as a rational string
    cid: str
    seed: int
    cap: SafetyCap
    lo_exact: fmpq                 # eps + slack
    up_exact: fmpq                 # eps - slack
    eps_lo: float
    eps_up: float


def _tol(t: _Target, idx: int, item: object, eq: Fraction, id_prefix: str, seed: int) -> _Tol:
    e = to_fmpq(eq)
    s = t.slack_q if t.slack_q is not None else e * 0
    text = rational_string(eq)
    return _Tol(idx, item, text, f"{id_prefix}/eps={item}", cell_seed(seed, text), SafetyCap(), e + s, e - s,
                float(eq) + t.slack_f, float(eq) - t.slack_f)


def _lower_side(t: _Target, tol: _Tol, row_start: LowerCandidate | None,
                effort: Effort) -> tuple[LowerCandidate, Verdict, LowerCandidate | None]:
    """(winning candidate, its exact verdict, strongest row witness) at ``eps + slack``."""
    candidates = lower_candidates(t.A, tol.eps_lo * (1 + LOWER_SAFETY), t.svd, effort, start=row_start,
                                  seed=tol.seed, cap=tol.cap)
    # hints join by rank (stable: the search's own candidate wins a tie); only the exact verdict counts
    for c in sorted(candidates + list(t.hints), key=lambda c: -c.rank):
        if c.rank == 0:
            continue
        v = check_lower(t.A_exact, exact_lower_witness(c), tol.lo_exact, c.rank)
        if v.verified:
            return c, v, strongest_rows(candidates)
    c = LowerCandidate(0, "trivial", "trivial")
    return c, check_lower(t.A_exact, TrivialLower(), tol.lo_exact, 0), strongest_rows(candidates)


def _svd_rank(t: _Target, tol: _Tol) -> int | None:
    """The truncated-SVD baseline rank at the upper side's float tolerance ``(eps - slack)(1 - UPPER_SAFETY)``
    (None: no truncation reaches it, or ``eps <= slack``)."""
    return first_within(t.svd_errs, tol.eps_up * (1 - UPPER_SAFETY)) if tol.up_exact > 0 else None


def _first_verified(t: _Target, tol: _Tol, candidates: list[UpperResult],
                    warm: UpperPick | None) -> UpperPick | None:
    """The first of the float upper witnesses ``candidates`` (``upper.UpperResult``) that the exact tier
    verifies at ``eps - slack`` below the trivial rank, as an ``UpperPick``; None when none is."""
    p = min(t.A.shape)
    for u in candidates:
        v = check_upper(t.A_exact, exact_upper_witness(u.P, u.Q), tol.up_exact, u.rank)
        if v.verified and u.rank < p:
            fam = f"factors/{u.family.split('/')[-1]}"
            if fam == "factors/warm":
                assert warm is not None       # a warm candidate comes from a warm pick
                return replace(warm, verdict=v)
            return UpperPick(u.rank, fam, v, u)
    return None


def _trivial_upper(t: _Target, tol: _Tol) -> UpperPick:
    """The trivial upper side ``B = A`` at rank ``min(m, n)``, checked by the exact tier (K.1)."""
    p = min(t.A.shape)
    v = check_upper(t.A_exact, TrivialUpper(), tol.up_exact if tol.up_exact >= 0 else tol.up_exact * 0, p)
    if not v.verified:
        raise RuntimeError(f"{tol.cid}: the trivial upper witness was refused: {v.reason}")
    return UpperPick(p, "trivial", v, None)


def _upper_side(t: _Target, tol: _Tol, L: int, effort: Effort,
                warm: UpperPick | None) -> tuple[UpperPick, int | None]:
    """(the verified upper side, truncated-SVD rank) at ``eps - slack``; ``warm``: the ``UpperPick``
    of a smaller tolerance (``from_eps`` set) or None (``upper.search_upper(warm=...)``)."""
    svd_rank = _svd_rank(t, tol)
    if tol.up_exact > 0:
        units = effort.upper_units(t.A.shape[0], t.A.shape[1], svd_rank if svd_rank is not None else min(t.A.shape))
        found = search_upper(t.A, tol.eps_up * (1 - UPPER_SAFETY), Budget(units, tol.cap), lower=L,
                             svd=(t.svd, t.svd_errs), device=t.device, hybrid=bool(effort.upper_hybrid),
                             sharp_trials=effort.upper_sharp_trials,
                             warm=(warm.result.P, warm.result.Q) if warm is not None and warm.result is not None
                             else None)
        pick = _first_verified(t, tol, found, warm)
        if pick is not None:
            return pick, svd_rank
    return _trivial_upper(t, tol), svd_rank


def svd_budget(matrix: object, eps: object, *, logits: object = None, row_tol: float = STOCHASTIC_TOL) -> int:
    """The attention-SVD constructive budget of a target at tolerance ``eps`` (paper L.6): the smallest
    rank ``k`` whose truncated SVD of A meets ``eps`` in row-l1 (K.1), found the way a bracket's upper side
    finds its SVD baseline and trivial upper, with no search: the first ``k`` whose float truncation error is
    within ``(eps - slack)(1 - UPPER_SAFETY)`` (``_svd_rank``; the K.5 slack of ``logits``), its balanced
    factors re-checked by the exact tier at ``eps - slack``; when no truncation reaches eps or the exact tier
    refuses it, the trivial upper ``min(m, n)`` (exactly checked too). Non-increasing in eps.

    >>> svd_budget(np.eye(2) / 2 + 0.25, "1/4"), svd_budget(np.eye(2) / 2 + 0.25, "3/4"), svd_budget(np.eye(3), "1/2")
    (2, 1, 3)
    """
    A = validate_matrix(matrix, row_tol=row_tol)
    with pinned_threads():
        t, _, _ = _target(A, logits, "cpu", "svd")
        tol = _tol(t, 0, eps, parse_eps(eps), "svd", 0)
        k = _svd_rank(t, tol)
        candidates = [] if k is None else [UpperResult(k, *svd_factors(*t.svd, k), float(t.svd_errs[k]), "svd")]
        pick = _first_verified(t, tol, candidates, None) or _trivial_upper(t, tol)
    return int(pick.rank)


def _attack(t: _Target, L: int, tol: _Tol, upper: UpperResult | None, lower_family: str) -> tuple[bool, float]:
    """(success, float error) of the rank-(L - 1) attack; a verified success warns (soundness bug)."""
    eps_att = tol.eps_lo * ATTACK_FRACTION
    warm = (upper.P, upper.Q) if upper is not None else None
    ar = attack_rank(t.A, L - 1, eps_att, t.svd, device=t.device, warm=warm)
    if not ar.success:
        return False, ar.error
    assert ar.P is not None and ar.Q is not None      # a successful attack (rank L - 1 >= 1) has factors
    va = check_upper(t.A_exact, exact_upper_witness(ar.P, ar.Q), tol.lo_exact, L - 1)
    if va.verified:
        warnings.warn(f"SOUNDNESS BUG: rank-{L - 1} attack succeeded on {tol.cid} (error {ar.error!r} "
                      f"<= {eps_att!r}) where L = {L} was certified by {lower_family}",
                      RuntimeWarning, stacklevel=3)
    return bool(va.verified), ar.error


def _runs(effort: Effort) -> list[Effort]:
    """The presets a search runs at each tolerance: the base preset first (``effort.BASE``), then its own."""
    return ([effort_budgets(BASE[effort.name])] if effort.name in BASE else []) + [effort]


def _lower_phase(t: _Target, tols: list[_Tol], effort: Effort, clock: dict[int, float],
                 on_step: Callable[[str], object] | None = None) -> dict[int, list[LowerPick]]:
    """Lower sides, largest tolerance first: {idx: [(LowerPick, ...) per run]}; stops after a stop request.

    Each run keeps its own chain of row sets across tolerances (a base run's witnesses are those a
    base search finds); the strongest row witness of a tolerance seeds the next smaller one."""
    out: dict[int, list[LowerPick]] = {}
    row_start: dict[str, LowerCandidate | None] = {}
    for tol in tols:
        t0 = time.perf_counter()
        out[tol.idx] = []
        for e in _runs(effort):
            c, v, top = _lower_side(t, tol, row_start.get(e.name), e)
            out[tol.idx].append(LowerPick(c, v))
            row_start[e.name] = top if top is not None else row_start.get(e.name)
        clock[tol.idx] = time.perf_counter() - t0
        if on_step is not None:
            on_step(f"lower eps={tol.text}")
        if stop_requested():
            break   # a clean stop: the tolerances done so far, the current one with what it had
    return out


def _upper_phase(t: _Target, tols: list[_Tol], lowers: dict[int, list[LowerPick]], effort: Effort,
                 clock: dict[int, float], on_step: Callable[[str], object] | None = None
                 ) -> dict[int, tuple[list[UpperPick], int | None]]:
    """Upper sides, smallest tolerance first: {idx: (UpperPick per run, svd rank)}.

    Run i is warm-started (``search_upper(warm=...)``) with the lowest-rank factors that runs
    0..i verified at smaller tolerances, so a base run sees only its own (its witnesses are a
    base search's) and the last run the best of all."""
    out: dict[int, tuple[list[UpperPick], int | None]] = {}
    chain: list[UpperPick | None] = [None] * len(_runs(effort))
    for tol in reversed(tols):
        t0 = time.perf_counter()
        picks = []
        for i, e in enumerate(_runs(effort)):
            pick, svd_rank = _upper_side(t, tol, lowers[tol.idx][i].cand.rank, e, chain[i])
            picks.append(pick)
        for i in range(len(chain)):
            for pick in picks[:i + 1]:
                held = chain[i]
                if pick.result is not None and (held is None or pick.rank < held.rank):
                    chain[i] = replace(pick, from_eps=pick.from_eps or tol.text)
        out[tol.idx] = (picks, svd_rank)
        clock[tol.idx] += time.perf_counter() - t0
        if on_step is not None:
            on_step(f"upper eps={tol.text}")
    return out


def _target(A: np.ndarray, logits: object, device: Any,
            id_prefix: str) -> tuple[_Target, dict[str, np.ndarray], TargetSpec]:
    """(shared _Target, tensors, ``TargetSpec``) of a matrix or logit target (K.5 slack for logits)."""
    tensors = {f"{id_prefix}/matrix": A}
    target = TargetSpec(f"{id_prefix}/matrix")
    slack_q: fmpq | None = None
    slack_f = 0.0
    if logits is not None:
        H = validate_matrix(logits, "logits", stochastic=False)
        if H.shape != A.shape:
            raise ValueError(f"logits {H.shape} and matrix {A.shape} differ in shape")
        slack_q, slack_f = target_slack(H, A)
        tensors[f"{id_prefix}/logits"] = H
        target = TargetSpec(target.matrix, f"{id_prefix}/logits", format_rational(slack_q))
    svd, svd_errs = svd_baseline(A)
    t = _Target(A, ExactMatrix.from_float64(A), slack_q, slack_f, svd, svd_errs, str(pick_device(device)))
    return t, tensors, target


def _run_provenance(effort: Effort, seed: int, row_tol: float = STOCHASTIC_TOL) -> RunProvenance:
    """What produced a run: effort preset and budgets, seed, search tolerances, threads, versions."""
    return RunProvenance(effort=effort.name, base_effort=BASE.get(effort.name), budgets=effort.budgets(), seed=seed,
                         tolerances=SearchTolerances(lower_safety=LOWER_SAFETY, upper_safety=UPPER_SAFETY,
                                                     attack_fraction=ATTACK_FRACTION, stochastic_tol=row_tol),
                         threads=SEARCH_THREADS, versions=package_versions(), code=CodeVersion(**code_version()))


def _cell(t: _Target, tol: _Tol, low: LowerPick, up: UpperPick, *, svd_rank: int | None, attack: bool,
          seconds: float) -> tuple[tuple[Claim, Claim], CellSearch, BracketResult, dict[str, np.ndarray]]:
    """((lower, upper) claims, search provenance, BracketResult, tensors) of one tolerance's chosen sides;
    runs the attack."""
    t0 = time.perf_counter()
    L, U, cid = low.cand.rank, up.rank, tol.cid
    if L > U:
        raise RuntimeError(f"{cid}: verified lower {L} above verified upper {U}: the exact tier is unsound")
    attack_success: bool | None = None
    attack_error: float | None = None
    if attack and L >= 2:
        attack_success, attack_error = _attack(t, L, tol, up.result, low.cand.family)
    tensors = {f"{cid}/{k}": arr for k, arr in low.cand.tensors.items()}
    names = {k: f"{cid}/{k}" for k in low.cand.tensors}
    upper = Claim.of(int(U), "trivial")
    if up.result is not None:
        upper = Claim.of(int(U), "factors", P=f"{cid}/P", Q=f"{cid}/Q")
        tensors[f"{cid}/P"], tensors[f"{cid}/Q"] = up.result.P, up.result.Q
    margins = [format_rational(v.margin) if v.margin is not None else None for v in (low.verdict, up.verdict)]
    search = CellSearch(lower_family=low.cand.family, upper_family=up.family, svd_rank=svd_rank,
                        lower_from_eps=low.from_eps, upper_from_eps=up.from_eps,
                        seconds=round(seconds + time.perf_counter() - t0, 3), device=t.device,
                        lower_margin=margins[0], upper_margin=margins[1],
                        attack_rank=L - 1 if attack_success is not None else None,
                        attack_eps=repr(tol.eps_lo * ATTACK_FRACTION) if attack_success is not None else None,
                        attack_error=attack_error, attack_success=attack_success,
                        cell_seed=tol.seed, capped=tol.cap.fired)
    lower = lower_claim(low.cand, names)
    result = BracketResult(eps=tol.item, lower=int(L), upper=int(U), lower_witness=low.cand.family,
                           upper_witness=up.family, seconds=search.seconds,
                           slack=float(to_fraction(t.slack_q)) if t.slack_q is not None else None,
                           attack_success=attack_success, svd_rank=svd_rank, attack_error=attack_error,
                           lower_margin=margins[0], upper_margin=margins[1], capped=tol.cap.fired)
    return (lower, upper), search, result, tensors


def _chosen(t: _Target, tols: list[_Tol], lowers: dict[int, list[LowerPick]],
            uppers: dict[int, tuple[list[UpperPick], int | None]],
            clock: dict[int, float]) -> list[tuple[LowerPick, UpperPick]]:
    """Per tolerance (largest first), the larger verified L of its runs (first on ties) and the
    smaller verified U, then both carried across tolerances (``across``): [(LowerPick, UpperPick)]."""
    t0 = time.perf_counter()
    low = [max(lowers[s.idx], key=lambda p: p.cand.rank) for s in tols]
    up = [min(uppers[s.idx][0], key=lambda p: p.rank) for s in reversed(tols)]
    low = carry_lower(t.A_exact, low, [s.lo_exact for s in tols], [s.text for s in tols])
    up = carry_upper(t.A_exact, up, [s.up_exact for s in reversed(tols)], [s.text for s in reversed(tols)])
    if tols:
        clock[tols[-1].idx] += time.perf_counter() - t0
    return list(zip(low, reversed(up)))


def search_brackets(matrix: object, eps_list: Iterable[object], *, logits: object = None, id_prefix: str = "cell",
                    device: Any = None, attack: bool = True, provenance: dict[str, Any] | None = None,
                    effort: str | Effort = DEFAULT_EFFORT, seed: int = 0, row_tol: float = STOCHASTIC_TOL,
                    on_step: Callable[[str], object] | None = None,
                    hints: Sequence[LowerCandidate] = ()) -> SearchOutput:
    """Search, exactly re-check and package brackets for ``matrix`` at each tolerance.

    ``matrix``: m x n row-stochastic float64; ``logits``: optional float64 with
    ``matrix`` its float64 row softmax (the claim is then about the exact
    softmax, with slack, K.5). ``eps_list``: tolerances in (0, 1] (float,
    Fraction, str). ``effort``: a preset name of ``numeric.search.effort`` or
    an ``Effort``; ``seed``: the cell's seed (``effort.cell_seed`` of its
    identity), from which each tolerance draws ``cell_seed(seed, eps)``.
    ``row_tol``: the row-sum tolerance of ``validate_matrix`` (wider only for
    half-precision inputs); ``on_step``: called with a short label after each
    tolerance's lower side and each upper side (progress bars; it never
    changes the search). ``hints``: lower witnesses of an earlier file (``numeric.search.hints``), each
    re-checked exactly on this matrix beside the search's own candidates (those that do not fit its shape
    are dropped). Raises ValueError on bad input.
    """
    budgets = effort_budgets(effort)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    A = validate_matrix(matrix, row_tol=row_tol)
    eps_items = list(eps_list)
    eps_q = [parse_eps(e) for e in eps_items]
    run_prov = _run_provenance(budgets, seed, row_tol)
    with pinned_threads():
        t, tensors, target = _target(A, logits, device, id_prefix)
        t = replace(t, hints=hints_for(hints, A.shape))
        # lower sides largest tolerance first, upper sides smallest first, then both carried across
        tols = [_tol(t, i, eps_items[i], eps_q[i], id_prefix, seed)
                for i in sorted(range(len(eps_q)), key=lambda i: -eps_q[i])]
        clock: dict[int, float] = {}
        lowers = _lower_phase(t, tols, budgets, clock, on_step)
        tols = [s for s in tols if s.idx in lowers]
        uppers = _upper_phase(t, tols, lowers, budgets, clock, on_step)
        cells: dict[int, CellSpec] = {}
        results: dict[int, BracketResult] = {}
        chosen = list(zip(tols, _chosen(t, tols, lowers, uppers, clock)))
        caps = open_cell_caps(t.A, [(s.text, s.cid, low.cand.rank, up.rank) for s, (low, up) in chosen], t.slack_q)
        for (s, (low, up)), (cap, cap_tensors) in zip(chosen, caps):
            (lower, upper), search, results[s.idx], cell_tensors = _cell(t, s, low, up, svd_rank=uppers[s.idx][1],
                                                                         attack=attack, seconds=clock[s.idx])
            tensors.update(cell_tensors)
            tensors.update(cap_tensors)
            cells[s.idx] = CellSpec(s.cid, s.text, target, lower, upper, cell_provenance(search, run_prov, provenance),
                                    cap)
    order = [i for i in range(len(eps_q)) if i in cells]
    outcome = RunOutcome(run=run_prov, stopped=len(order) < len(eps_q) or stop_requested(),
                         capped=tuple(cells[i].id for i in order if results[i].capped))
    return SearchOutput([cells[i] for i in order], tensors, [results[i] for i in order], outcome)

"""Upper witnesses (K.1): factors P, Q with ``||A - P Q^T||_row1 <= eps``.

The truncated SVD is the baseline: it minimises the Frobenius error, not the
max row-l1 error. ``search_upper`` runs in two phases, each trial one complete
annealed continuation run of ``refine.refine``:

1. **narrowing**: a rank bisection between a lower bound and the SVD rank with
   short trials (``refine.DEFAULT_ITERS`` steps), warm-started from the best
   feasible factors (compressed to the trial rank by an SVD of ``P Q^T``) near
   them and from the truncated SVD ``FAR_DROP`` ranks or more below; one start
   per rank at default, a second start after a close miss and the hybrid start at
   thorough;
2. **boundary**: full trials (``refine.FULL_ITERS`` steps) below the best rank.
   Without restarts (default) they descend one rank at a time from the compressed
   best, a close miss retried from the truncated SVD and from the warm factors, and
   stop at the first clear miss (below the first boundary rank, also where the budget
   no longer affords a full-length trial). A sharp boundary (a rank of at least
   ``SHARP_FRACTION`` min(m, n)) is granted ``sharp_trials`` full trials beyond the
   budget, and its SVD start descends the plain objective from the hot temperature.
   With restarts (thorough, ``hybrid``) they gallop down (1, 2, 4, ... ranks below
   the best) and bisect back to the first failing rank, where the rest of the budget
   goes to full-length restarts from structurally different starts (``_restarts``:
   the closest miss so far polished with a small step, the fresh truncated SVD, the
   compressed best, the hybrid coordinate + SVD start with a larger step, a
   perturbed start, the truncated SVD under the plain objective and from the hot
   temperature), until every start misses clearly or the budget is spent.

Near misses are refitted row by row (``l1fit.refit_rows``) and, on boundary
cells, rounded to dyadic factors (``refine.snap_dyadic``). Every trial is sized
to what the ``Budget`` of Adam work units affords before it starts (its schedules
then fit the steps it runs): the reach of the search is counted work, not seconds,
and the perturbed starts draw from a generator seeded by the rank and the round,
so the result is deterministic.

Warm starts across tolerances: ``search_upper(warm=(P, Q))`` takes
the factors verified at a smaller tolerance. They are feasible here too (a
rank-r witness at eps' is one at every eps >= eps'), so when their rank is
below the SVD rank they are the bisection's first best (family
``factors/warm``) and its trials start from their compressions; otherwise
their compression is the second try of each trial that misses before the
first success, and a start of each boundary rank that misses closely.

Everything here is float: the exact tier re-checks the chosen factors.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import numpy as np

from numeric.runtime import record_trial
from numeric.search.budget import Budget
from numeric.search.l1fit import refit_rows
from numeric.search.norms import row_l1_error, row_l1_norm
from numeric.search.refine import DEFAULT_ITERS, FULL_ITERS, NEAR_FRACTION, Objective, refine, snap_dyadic, step_work
from numeric.search.starts import Factors, Miss, Svd, Tried, Trial, compress, hybrid_factors, perturbed, svd_factors

__all__ = ["UpperResult", "svd_baseline", "first_within", "search_upper", "affordable_steps"]

#: A boundary trial that misses eps by at most this relative amount is repeated from the
#: truncated SVD of A (the two-bit cell A(3/4, 3/4) at eps = 3/4: the warm start stalls
#: at 0.7508 at rank 1, the SVD start reaches 0.75000002 and snaps to 7/64 J, error 3/4; MiniLM
#: l0h0 at eps 1/4, rank 21: 1.0003 eps from the truncated SVD). Not 1 %: on MiniLM
#: l4h2 at eps 1/4 the full trials of rank 6 missed by 1.00 %, 0.98 % and 0.99 % from the three
#: starts, and those two retries (280,000 units) made default 1.18 times its former CPU time there.
RESTART_WINDOW = 5e-3
#: With ``hybrid`` (thorough), a narrowing trial that misses eps by at most this relative amount is
#: tried from a second start (a farther miss is not: on MiniLM l0h0 at eps 1/4 the two starts of
#: rank 19 missed by 7.8 % and 7.7 %, and the work of the second was what the boundary phase then
#: lacked). Default's narrowing runs one start per rank: on seven quality heads and two demo heads
#: at three tolerances none of its 24 second starts reached eps, and on demo1 l1h3 they were 249,000
#: of default's 1.76 million upper units (docs/explanation/search-lessons.md); the close misses they were for
#: are retried by the boundary phase's full trials (``_boundary_rank``).
SECOND_WINDOW = 5e-2
#: A narrowing trial this many ranks or more below the best factors starts from the truncated SVD,
#: a nearer one from the compressed best (``_narrow_starts``). Compressing drops the directions the
#: l1 descent spread its error into: demo1 l3h8 at eps 1/10, rank 148 from the best at 154 missed
#: by 15 % compressed and reached 0.9954 eps from the SVD (rank 149 from 155: 1.024 and 0.999 eps).
#: One or two ranks below, the compressed start reached eps where the SVD missed (demo1 l1h3 at
#: eps 1/4, rank 41 from 43: 0.9999 and 1.0066 eps) and a feasible compressed trial stops sooner.
FAR_DROP = 3
#: A restart that misses eps by more than this relative amount is a clear miss: a round of
#: restarts whose starts all miss clearly ends the search.
CLEAR_MISS = 2e-2
#: The hybrid restart's Adam step, as a multiple of the usual one.
HYBRID_LR = 3.0
#: A closest miss continued without the Huber smoothing, at this multiple of the usual Adam step
#: (``miss-fine``): demo1 l3h8 at eps 1/10, the narrowing's miss of rank 147 (1.0106 eps) ends at
#: 1.0106 continued at the usual step, at 0.999 at 0.3 times it and at 0.9695 at 0.1 times it,
#: plain; the truncated SVD at 0.1 times the step ends at 1.055 (too slow from a far start).
FINE_LR = 0.1
#: The trials' objectives (``refine.Objective``): the Huber-smoothed one of every phase, the plain
#: one (``svd-plain``, ``miss-fine``) and the plain one from the hot temperature (``svd-hot``).
SMOOTHED, PLAIN, HOT = Objective(), Objective(huber=False), Objective(huber=False, hot=True)
#: A boundary rank of at least this fraction of min(m, n) is sharp. Default's descent (with
#: ``sharp_trials``) starts a sharp rank's SVD trial under the plain objective from the hot
#: temperature (``svd-hot``), and a boundary that begins at a sharp rank is granted that many full
#: trials beyond the budget. In docs/explanation/search-lessons.md the hot-plain trial from the truncated SVD
#: ended lowest at 6 of the 8 ranks above 125 of 256 (MiniLM l2h0, demo0 l3h8 and demo1 l3h8 at eps
#: 1/10) and at none of the 16 ranks from 41 to 90; a full trial at rank 129 of 256 costs 386,000
#: units, more than default's narrowing leaves there (7.12), and 7.14 measures the grant's CPU.
SHARP_FRACTION = 0.5
#: A trial starts only when the budget affords this fraction of its length (it then runs
#: its whole schedule in the steps afforded).
MIN_TRIAL_FRACTION = 0.5
#: A boundary trial that misses eps by at most this relative amount is rounded to dyadic
#: factors (``snap_dyadic``) and offered too: the caller's target is eps (1 - 1e-6), so a
#: candidate in this window may still meet the exact eps; the exact tier decides.
SNAP_WINDOW = 2e-6
#: A trial that misses eps by at most this relative amount has its rows over eps refitted
#: exactly on span(Q) (``l1fit.refit_rows``: each row's l1 optimum, the descent's rows are
#: not); MiniLM heads: a refit lowers an over-eps row by 0.1 to 1 % (docs/explanation/search-lessons.md).
REFIT_WINDOW = 2e-2
#: ... when at most this many rows are over eps (more: the descent is far from feasible).
REFIT_ROWS = 32


@dataclass(frozen=True)
class UpperResult:
    """A float-feasible upper witness: rank, factors, float error and family name."""

    rank: int
    P: np.ndarray
    Q: np.ndarray
    error: float
    family: str


def svd_baseline(A: np.ndarray) -> tuple[Svd, np.ndarray]:
    """The SVD of A and the max row-l1 error of every truncation (index k = rank k).

    >>> _, errs = svd_baseline(np.eye(2) / 2 + 0.25); errs.round(12).tolist()
    [1.0, 0.5, 0.0]
    """
    U, S, Vt = np.linalg.svd(A, full_matrices=False)
    R = A.copy()
    errs = [row_l1_norm(R)]
    for k in range(S.size):
        R -= S[k] * np.outer(U[:, k], Vt[k])
        errs.append(row_l1_norm(R))
    return (U, S, Vt), np.array(errs)


def first_within(errs: np.ndarray, eps: float) -> int | None:
    """The smallest rank k whose truncation error ``errs[k]`` (``svd_baseline``) is at most eps, or None.

    >>> first_within(np.array([1.0, 0.5, 0.0]), 0.5), first_within(np.array([1.0, 0.5]), 0.25)
    (1, None)
    """
    ok = np.nonzero(errs <= eps)[0]
    return int(ok[0]) if ok.size else None


def _rescue(A: np.ndarray, eps: float, P: np.ndarray, Q: np.ndarray, err: float, budget: Budget) -> Trial:
    """A near miss (within ``REFIT_WINDOW``) with its rows over eps refitted exactly; else as given."""
    if eps < err <= eps * (1 + REFIT_WINDOW):
        P2, err2 = refit_rows(A, P, Q, eps, budget, REFIT_ROWS)
        if err2 < err:
            return P2, Q, err2
    return P, Q, err


def affordable_steps(budget: Budget, shape: tuple[int, ...], k: int, iters: int) -> int:
    """Steps of a rank-``k`` trial of nominal length ``iters``: all of them, or as many as the budget
    affords when that is at least ``MIN_TRIAL_FRACTION`` of them; 0 (no trial) otherwise.

    >>> [affordable_steps(Budget(80 * units), (256, 256), 16, 600) for units in (1000, 500)]
    [600, 500]
    >>> affordable_steps(Budget(80 * 200), (256, 256), 16, 600)
    0
    """
    if budget.exhausted:
        return 0
    steps = min(int(iters), (budget.units - budget.used) // step_work(shape[0], shape[1], max(k, 1)))
    return steps if steps >= MIN_TRIAL_FRACTION * iters and steps > 0 else 0


def _trial(A: np.ndarray, eps: float, start: Factors, *, iters: int, budget: Budget, device: Any, phase: str,
           kind: str, lr_scale: float = 1.0, objective: Objective = SMOOTHED) -> Trial | None:
    """One trial from ``start`` sized to the budget (``affordable_steps``): (P, Q, err), or None."""
    k = start[1].shape[1]
    steps = affordable_steps(budget, A.shape, k, iters)
    if not steps:
        return None
    P, Q, err = refine(A, *start, eps, iters=steps, device=device, budget=budget, lr_scale=lr_scale,
                       objective=objective)
    record_trial((phase, kind, k, steps, err))         # into numeric.runtime.trial_trace, when one is open
    return P, Q, err


_T = TypeVar("_T", Trial, Miss)


@overload
def _better(a: _T | None, b: _T) -> _T: ...
@overload
def _better(a: _T, b: _T | None) -> _T: ...
def _better(a: _T | None, b: _T | None) -> _T | None:
    """The trial result of lower error (``a`` on ties; None stands for no trial)."""
    if a is None:
        return b
    return b if b is not None and b[2] < a[2] else a


def _narrow_starts(svd: Svd, best: Factors, mid: int, best_is_svd: bool,
                   warm: Factors | None) -> tuple[tuple[Factors, str], tuple[Factors | None, str | None]]:
    """The two starts of a narrowing trial at rank ``mid`` below the best factors ``best``, each as
    ``(factors, kind)``; the second is ``(None, None)`` when it would repeat the first.

    The first is the compressed best when ``mid`` is fewer than ``FAR_DROP`` ranks below it, else
    the truncated SVD; the second is the other of the two. While the best is the truncated SVD the
    two are the same product, and the second is the compressed ``warm`` factors of a smaller
    tolerance when they have more than ``mid`` columns.
    """
    near = best[1].shape[1] - mid < FAR_DROP
    compressed = (compress(*best, mid), "compressed")
    if best_is_svd:
        other: tuple[Factors | None, str | None] = \
            (compress(*warm, mid), "warm") if warm is not None and warm[1].shape[1] > mid else (None, None)
        return compressed, other
    fresh = (svd_factors(*svd, mid), "svd")
    return (compressed, fresh) if near else (fresh, compressed)


def _bisect(A: np.ndarray, eps: float, lo: int, found: list[UpperResult], svd: Svd, *, budget: Budget, iters: int,
            device: Any, hybrid: bool = False, warm: Factors | None = None) -> dict[int, Trial]:
    """Rank bisection in ``[lo, found[0].rank)`` with short trials; feasible ranks go to the front of ``found``.

    Each trial starts from the compressed best factors, or from the truncated SVD when it drops
    ``FAR_DROP`` ranks or more (``_narrow_starts``); with ``hybrid`` (thorough), a miss by at most
    ``SECOND_WINDOW`` is tried again from the other of the two (or ``warm``), and a miss from
    ``hybrid_factors``. Returns ``{rank: (P, Q, err)}``: each rank missed, with its closest miss.
    """
    hi = found[0].rank
    best = (found[0].P, found[0].Q)
    best_is_svd = found[0].family == "svd"
    missed: dict[int, Trial] = {}
    narrow = functools.partial(_trial, A, eps, iters=iters, budget=budget, device=device, phase="narrow")
    while lo < hi:
        mid = (lo + hi) // 2
        (first, kind), (second, kind2) = _narrow_starts(svd, best, mid, best_is_svd, warm)
        res = narrow(first, kind=kind)
        if res is None:
            break
        if hybrid and eps < res[2] <= eps * (1 + SECOND_WINDOW) and second is not None and kind2 is not None:
            res = _better(res, narrow(second, kind=kind2))
        start = hybrid_factors(A, eps, mid) if hybrid and res[2] > eps else None
        if start is not None:
            res = _better(res, narrow(start, kind="hybrid"))
        P1, Q1, err = _rescue(A, eps, *res, budget)
        if err <= eps:
            hi = mid
            best, best_is_svd = (P1, Q1), False
            found.insert(0, UpperResult(mid, P1, Q1, err, "factors/refined"))
        else:
            missed[mid] = (P1, Q1, err)
            lo = mid + 1
    return missed


def _boundary_rank(A: np.ndarray, eps: float, r: int, cur: Factors, svd: Svd, *, budget: Budget, iters: int,
                   device: Any, warm: Factors | None, fresh: bool, tried: set[Tried],
                   hot: bool = False) -> Trial | None:
    """The best full trial at rank ``r`` (or None: the budget affords none): from the truncated SVD
    when ``fresh`` (a rank the narrowing missed from every start), else from the compressed
    ``cur``; with ``hot``, the SVD start descends the plain objective from the hot temperature
    (``svd-hot``, ``SHARP_FRACTION``). A close miss (``RESTART_WINDOW``) is retried from the other
    of the two (MiniLM l0h0 at eps 1/4, rank 21: 1.0003 eps from the SVD), and a rank still missed
    closely from the compressed ``warm`` factors of a smaller tolerance (a far miss is not: on
    MiniLM layer-1 head 3 at eps 1/2 that try doubled the default upper work and won nothing).
    Near misses are refitted."""
    starts = ((("svd-hot", HOT) if hot else ("svd", SMOOTHED)) + (svd_factors(*svd, r),),
              ("compressed", SMOOTHED, compress(*cur, r)))
    first, other = starts[::1 if fresh else -1]
    res = _trial(A, eps, first[2], iters=iters, budget=budget, device=device, phase="boundary", kind=first[0],
                 objective=first[1])
    if res is None:
        return None
    key: Callable[[str], Tried] = lambda kind: (r, kind, cur[1].shape[1] if kind == "compressed" else None)
    tried.add(key(first[0]))
    close: Callable[[Trial], bool] = lambda x: eps < x[2] <= eps * (1 + RESTART_WINDOW)
    if close(res):
        res = _better(res, _trial(A, eps, other[2], iters=iters, budget=budget, device=device, phase="boundary",
                                  kind=other[0], objective=other[1]))
        tried.add(key(other[0]))
    if close(res) and warm is not None and warm[1].shape[1] > r:
        res = _better(res, _trial(A, eps, compress(*warm, r), iters=iters, budget=budget, device=device,
                                  phase="boundary", kind="warm"))
        tried.add((r, "warm", None))
    return _rescue(A, eps, *res, budget)


def _offer_snapped(A: np.ndarray, eps: float, r: int, P: np.ndarray, Q: np.ndarray, found: list[UpperResult]) -> None:
    """A miss within ``NEAR_FRACTION`` rounded to dyadic factors, offered when within ``SNAP_WINDOW``."""
    Ps, Qs = snap_dyadic(A, P, Q)
    if row_l1_error(A, Ps, Qs) <= eps * (1 + SNAP_WINDOW):
        found.insert(0, UpperResult(r, Ps, Qs, row_l1_error(A, Ps, Qs), "factors/snapped"))


def _descend(A: np.ndarray, eps: float, lower: int, found: list[UpperResult], missed: dict[int, Trial], svd: Svd,
             *, budget: Budget, iters: int, device: Any, warm: Factors | None, tried: set[Tried],
             sharp_trials: int = 0) -> None:
    """Default's boundary phase: full trials one rank below the best at a time (``_boundary_rank``),
    until the first clear miss; a miss within ``NEAR_FRACTION`` is snapped and the next rank tried.
    With ``sharp_trials``, a sharp rank (``SHARP_FRACTION``) starts hot from the SVD, and a first
    boundary rank that is sharp tops the budget up to ``sharp_trials`` full trials there.

    Below the first boundary rank a trial runs only at its full length: in the traces of
    docs/explanation/search-lessons.md the trials the budget cut short there found no rank (MiniLM
    l3h7 at eps 1/4, rank 15: 1,900 of 2,000 steps, 3.4 % over eps; demo1 l1h3 at 1/2, rank 16:
    1,367 steps, 2.6 % over), and on demo1 l1h3 that trial was what made default cost 1.15 times
    its former CPU time. The first boundary rank keeps a cut trial (MiniLM l2h0 at eps 1/4 found
    rank 94 with 946 of 1,085 steps)."""
    k, cur = found[0].rank, (found[0].P, found[0].Q)
    first = k - 1
    sharp: Callable[[int], bool] = lambda r: sharp_trials > 0 and r >= SHARP_FRACTION * min(A.shape)
    if first >= lower and sharp(first):
        budget.top_up(sharp_trials * iters * step_work(A.shape[0], A.shape[1], first))
    while k - 1 >= lower:
        if k - 1 < first and affordable_steps(budget, A.shape, k - 1, iters) < iters:
            return
        res = _boundary_rank(A, eps, k - 1, cur, svd, budget=budget, iters=iters, device=device, warm=warm,
                             fresh=k - 1 in missed, tried=tried, hot=sharp(k - 1))
        if res is None:
            return
        k, cur = k - 1, res[:2]
        if res[2] <= eps:
            found.insert(0, UpperResult(k, *res, "factors/refined"))
            continue
        if res[2] > eps * (1 + NEAR_FRACTION):
            return
        _offer_snapped(A, eps, k, *res[:2], found)


def _gallop(A: np.ndarray, eps: float, lower: int, found: list[UpperResult], missed: dict[int, Trial], svd: Svd,
            *, budget: Budget, iters: int, device: Any, warm: Factors | None, tried: set[Tried]) -> int | None:
    """Thorough's boundary phase: full trials 1, 2, 4, ... ranks below the best, then a bisection
    back between the lowest success and the first miss. Returns the first failing rank (the
    best rank minus one; None when the best is at ``lower`` or the budget ran out)."""
    def reaches(r: int) -> bool | None:      # one full trial at rank r from the best factors; a success joins ``found``
        res = _boundary_rank(A, eps, r, (found[0].P, found[0].Q), svd, budget=budget, iters=iters, device=device,
                             warm=warm, fresh=r in missed, tried=tried)
        if res is not None and res[2] <= eps:
            found.insert(0, UpperResult(r, *res, "factors/refined"))
        elif res is not None:
            missed[r] = _better(missed.get(r), res)
        return None if res is None else res[2] <= eps     # None: the budget ran out

    step, miss = 1, None
    while found[0].rank > lower:
        r = max(lower, found[0].rank - step)
        ok = reaches(r)
        if ok is None:
            return None
        if not ok:
            miss = r
            break
        step *= 2
    if miss is None:
        return None
    lo = miss + 1
    while lo < found[0].rank:
        r = (lo + found[0].rank) // 2
        ok = reaches(r)
        if ok is None:
            return None
        if not ok:
            lo = r + 1
    return found[0].rank - 1 if found[0].rank - 1 >= lower else None


def _restart_starts(A: np.ndarray, eps: float, r: int, best: Factors, svd: Svd, warm: Factors | None, *, round_: int,
                    near: Miss | None, tried: set[Tried],
                    polish: bool = False) -> list[tuple[Factors, str, float, Objective]]:
    """``[(start, kind, lr_scale, objective)]`` of one round of restarts at rank ``r`` below the best
    factors ``best``. Round 0: the fresh truncated SVD, the compressed best, the compressed warm
    factors, the hybrid start with a larger step, a perturbed compressed best (starts already run at
    this rank from the same factors are skipped), and the truncated SVD again without the Huber
    smoothing (``svd-plain``: a different objective, not only a different start; on demo0 l3h8 at
    eps 1/10 the smoothed trials from every other start missed rank 129 by 4 to 6 %, the plain one
    by 1.9 %, and a perturbation of that miss reached eps: thorough went from 130 to 127,
    docs/explanation/search-lessons.md), and once more from the hot temperature (``svd-hot``: on MiniLM
    l2h0 at eps 1/10 every other start missed rank 128 by 4 to 16 %, ``svd-hot`` reached it). Later
    rounds: perturbed starts of the closest miss ``near = (P, Q, err, objective)``, under the
    objective that reached it, and of the compressed best. With ``polish``, every round starts
    with ``near`` continued at ``FINE_LR`` times the step, plain (``miss-fine``)."""
    cb = compress(*best, r)
    out: list[tuple[Factors, str, float, Objective]] = \
        [((near[0], near[1]), "miss-fine", FINE_LR, PLAIN)] if polish and near is not None else []
    if round_ > 0:
        assert near is not None       # a later round follows a round with a close miss
        P, Q, _, objective = near
        return out + [(perturbed(P, Q, r, round_), "perturbed-miss", 1.0, objective),
                      (perturbed(*cb, r, round_, 1), "perturbed", 1.0, SMOOTHED)]
    if (r, "svd", None) not in tried:
        out.append((svd_factors(*svd, r), "svd", 1.0, SMOOTHED))
    if (r, "compressed", best[1].shape[1]) not in tried:
        out.append((cb, "compressed", 1.0, SMOOTHED))
    if warm is not None and warm[1].shape[1] > r and (r, "warm", None) not in tried:
        out.append((compress(*warm, r), "warm", 1.0, SMOOTHED))
    hyb = hybrid_factors(A, eps, r)
    if hyb is not None:
        out.append((hyb, "hybrid", HYBRID_LR, SMOOTHED))
    out.append((perturbed(*cb, r, 0), "perturbed", 1.0, SMOOTHED))
    out.append((svd_factors(*svd, r), "svd-plain", 1.0, PLAIN))
    out.append((svd_factors(*svd, r), "svd-hot", 1.0, HOT))
    return out


def _smoothed(miss: Trial | None) -> Miss | None:
    """A miss (P, Q, err) of the Huber-smoothed trials as the restarts' (P, Q, err, objective)."""
    return None if miss is None else (*miss, SMOOTHED)


def _restarts(A: np.ndarray, eps: float, r: int, lower: int, found: list[UpperResult], svd: Svd, *, budget: Budget,
              iters: int, device: Any, warm: Factors | None, tried: set[Tried], missed: dict[int, Trial]) -> None:
    """Full-length restarts at the first failing rank ``r`` (and below, after each success), from
    structurally different starts (``_restart_starts``), round after round while some start of
    the round misses by at most ``CLEAR_MISS`` and the budget affords a trial. ``missed``: the
    closest miss (P, Q, err) of the earlier phases at each rank they missed; the closest miss is
    polished (``miss-fine``) in the round after it is found."""
    round_, near = 0, _smoothed(missed.get(r))
    polish = near is not None
    while r >= lower:
        best = (found[0].P, found[0].Q)
        res: Miss | None = None
        close = False
        for start, kind, lr, objective in _restart_starts(A, eps, r, best, svd, warm, round_=round_, near=near,
                                                          tried=tried, polish=polish):
            trial = _trial(A, eps, start, iters=iters, budget=budget, device=device, phase="restart", kind=kind,
                           lr_scale=lr, objective=objective)
            if trial is None:
                return
            out: Miss = (*_rescue(A, eps, *trial, budget), objective)
            close |= out[2] <= eps * (1 + CLEAR_MISS)
            res = _better(res, out)
            if res[2] <= eps:
                break
        if res is None:
            return
        if res[2] <= eps:
            found.insert(0, UpperResult(r, *res[:3], "factors/refined"))
        elif res[2] <= eps * (1 + NEAR_FRACTION):
            _offer_snapped(A, eps, r, *res[:2], found)
        if found[0].rank == r:
            r, round_, near = r - 1, 0, _smoothed(missed.get(r - 1))
            polish = near is not None
            continue
        if not close:
            return
        polish = near is None or res[2] < near[2]
        near = _better(near, res)
        round_ += 1


def search_upper(A: np.ndarray, eps: float, budget: Budget, *, lower: int = 0,
                 svd: tuple[Svd, np.ndarray] | None = None, device: Any = None,
                 iters: int = DEFAULT_ITERS, hybrid: bool = False, warm: Factors | None = None,
                 full_iters: int = FULL_ITERS, sharp_trials: int = 0) -> list[UpperResult]:
    """Float-feasible upper witnesses at tolerance ``eps``, best (lowest rank) first.

    The list always ends with the SVD baseline rank (or is empty when no
    truncation reaches eps: the caller falls back to the trivial upper).
    Narrowing bisection over ranks in ``[max(lower, 1), k_svd - 1]`` with short trials
    of ``iters`` steps, then the boundary phase with full trials of ``full_iters`` steps
    (module docstring); every trial is sized to what ``budget`` (Adam work units,
    ``refine.step_work``) affords. ``hybrid`` (thorough): bisection trials that miss
    from both usual starts also start from ``hybrid_factors``, and the boundary phase
    gallops down and spends the rest of the budget on restarts below the best rank.
    ``warm``: factors (P, Q) found at a smaller tolerance (module docstring); offered as
    ``factors/warm`` when within eps in float and below the SVD rank. ``sharp_trials``
    (without ``hybrid``): full trials granted beyond ``budget`` to a boundary that starts
    at a sharp rank (``SHARP_FRACTION``), whose SVD starts run hot.
    Rank 0 is returned directly (B = 0) when no singular direction is needed.
    """
    usv, errs = svd_baseline(A) if svd is None else svd
    k_svd = first_within(errs, eps)
    if k_svd is None:
        return []
    if k_svd == 0:
        return [UpperResult(0, np.zeros((A.shape[0], 0)), np.zeros((A.shape[1], 0)), errs[0], "zero")]
    P, Q = svd_factors(*usv, k_svd)
    found = [UpperResult(k_svd, P, Q, row_l1_error(A, P, Q), "svd")]
    if warm is not None and 0 < warm[1].shape[1] < k_svd and row_l1_error(A, *warm) <= eps:
        found.insert(0, UpperResult(warm[1].shape[1], *warm, row_l1_error(A, *warm), "factors/warm"))
    lo = max(int(lower), 1)
    missed = _bisect(A, eps, lo, found, usv, budget=budget, iters=iters, device=device, hybrid=hybrid, warm=warm)
    tried: set[Tried] = set()
    if not hybrid:
        _descend(A, eps, lo, found, missed, usv, budget=budget, iters=full_iters, device=device, warm=warm,
                 tried=tried, sharp_trials=sharp_trials)
        return found
    r = _gallop(A, eps, lo, found, missed, usv, budget=budget, iters=full_iters, device=device, warm=warm, tried=tried)
    if r is not None:
        _restarts(A, eps, r, lo, found, usv, budget=budget, iters=full_iters, device=device, warm=warm, tried=tried,
                  missed=missed)
    return found

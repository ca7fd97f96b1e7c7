"""Bracket search: the float tier's public entry point (issue 4).

``search_brackets(matrix, eps_list, ...)`` finds, for each tolerance, the
tightest bracket ``L <= r_eps(A) <= U`` whose witnesses the exact tier
accepts, and returns bracket-file cells (format v1) with their tensors.

Pipeline per tolerance (MATH.md section 2), tolerances largest first (the
row set certified at one tolerance is valid at every smaller one and seeds
its search; output keeps the caller's order):

1. slack (K.5): for logit targets, ``alpha`` proved by ``exact.slack``; the
   lower side is searched at ``eps + alpha``, the upper side at ``eps - alpha``;
2. lower: every family of ``numeric.search.lower`` (trivial, Frobenius K.2,
   truncated pseudo-inverse and decoded inverse K.3, row-side reconstruction
   on far rows with a Voronoi, LP-optimal or descent map, grown by the
   screened greedy and the LP swap search), strongest first,
   each re-checked with ``exact.certificates.check_lower``; the first one the
   exact tier verifies wins, so a witness that float rounding spoiled is
   replaced by the next-best;
3. upper: ``numeric.upper.search_upper`` (K.1: SVD baseline, refined factors,
   rank bisection with warm starts down to L), each re-checked with
   ``check_upper``; trivial upper (B = A) when nothing verifies;
4. attack (item 3): rank ``L - 1`` at ``(eps + alpha)(1 - 1e-3)``; an exactly
   verified success is recorded in ``attack_success`` and warned about
   loudly (callers stop with an error).

Nothing unverified is ever exported: every claim in ``cells`` was verified by
the exact API before it was written.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from numeric.search.attack import ATTACK_FRACTION, attack_rank
from numeric.search.effort import DEFAULT_EFFORT, code_version, package_versions, parse_effort
from numeric.search.export import rational_string
from numeric.search.lower import LowerCandidate, lower_candidates, strongest_rows
from numeric.search.upper import pick_device, search_upper, svd_baseline

__all__ = ["search_brackets", "SearchOutput", "BracketResult", "validate_matrix", "parse_eps",
           "STOCHASTIC_TOL", "UPPER_SAFETY"]

#: Row sums of a row-stochastic float64 matrix are 1 within n ulps; we accept
#: 1e-6 (a float32 softmax cast to float64 passes, a wrong normalisation does not).
STOCHASTIC_TOL = 1e-6
#: The upper search aims at ``(eps - slack)(1 - UPPER_SAFETY)`` so that float
#: rounding of ``A - P Q^T`` (about k n 2^-53) never spoils the exact check.
UPPER_SAFETY = 1e-6
#: Seconds of rank bisection per tolerance (a minute per 256 x 256 head for
#: three tolerances, issue 4 item 6, leaves about 10 s per upper search).
UPPER_BUDGET_S = 10.0
#: The lower search works at ``(eps + slack)(1 + LOWER_SAFETY)`` for the same reason.
LOWER_SAFETY = 1e-9


@dataclass(frozen=True)
class BracketResult:
    """One tolerance's outcome: a bracket both of whose sides the exact tier verified."""

    eps: object                    # the tolerance as given
    lower: int
    upper: int
    lower_witness: str             # winning family, e.g. "row_reconstruction/far-rows"
    upper_witness: str             # "factors/refined", "factors/svd", "trivial"
    seconds: float
    slack: float | None
    attack_success: bool | None    # None: not run (L < 2 or attack=False)
    svd_rank: int | None = None    # the truncated-SVD baseline rank (None: no truncation reaches eps)
    attack_error: float | None = None
    lower_margin: str | None = None
    upper_margin: str | None = None


@dataclass(frozen=True)
class SearchOutput:
    """Cells (format v1), their tensors, and one ``BracketResult`` per tolerance."""

    cells: list
    tensors: dict
    results: list
    #: run-level provenance: effort preset, seed, package versions, code version
    provenance: dict = field(default_factory=dict)


def parse_eps(e) -> Fraction:
    """A tolerance as an exact Fraction: floats by their shortest decimal (0.1 -> 1/10).

    >>> parse_eps(0.1), parse_eps("1/4"), parse_eps(Fraction(1, 2))
    (Fraction(1, 10), Fraction(1, 4), Fraction(1, 2))
    """
    if isinstance(e, bool):
        raise ValueError(f"eps {e!r} is not a number")
    if isinstance(e, float):
        if not np.isfinite(e):
            raise ValueError(f"eps {e!r} is not finite")
        q = Fraction(repr(e))
    elif hasattr(e, "p") and hasattr(e, "q"):          # flint.fmpq
        q = Fraction(int(e.p), int(e.q))
    else:
        try:
            q = Fraction(str(e).strip())
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"eps {e!r} is not a rational number") from None
    if not (0 < q <= 1):
        raise ValueError(f"eps {e} is outside (0, 1]")
    return q


def validate_matrix(matrix, what: str = "matrix", stochastic: bool = True) -> np.ndarray:
    """Check a 2-D finite float64 array (row-stochastic unless told otherwise); ValueError otherwise."""
    a = np.asarray(matrix)
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D, got shape {a.shape}")
    if a.dtype != np.float64:
        raise ValueError(f"{what} must be float64, got {a.dtype}")
    if a.size == 0:
        raise ValueError(f"{what} is empty")
    if not np.isfinite(a).all():
        raise ValueError(f"{what} has NaN or Inf entries")
    if stochastic:
        if (a < 0).any():
            raise ValueError(f"{what} has negative entries: not row-stochastic")
        dev = np.abs(a.sum(axis=1) - 1.0)
        if dev.max() > STOCHASTIC_TOL:
            raise ValueError(f"{what} is not row-stochastic: row {int(dev.argmax())} sums to "
                             f"{a.sum(axis=1)[dev.argmax()]!r}")
    return np.ascontiguousarray(a)


def _exact_lower_witness(c: LowerCandidate):
    from exact.certificates import FrobeniusTail, ReconstructionWitness, RowReconstructionWitness, TrivialLower
    from exact.matrix import ExactMatrix

    t = {k: ExactMatrix.from_float64(v) for k, v in c.tensors.items()}
    if c.kind == "trivial":
        return TrivialLower()
    if c.kind == "frobenius":
        return FrobeniusTail(c.k)
    if c.kind == "reconstruction":
        return ReconstructionWitness(t["R"], t["X"], t["L"])
    return RowReconstructionWitness(t["G"], t["Z"], t["M"])


def _lower_json(c: LowerCandidate, names: dict) -> dict:
    if c.kind == "trivial":
        return {"kind": "trivial"}
    if c.kind == "frobenius":
        return {"kind": "frobenius", "k": int(c.k)}
    return {"kind": c.kind, **names}


def search_brackets(matrix, eps_list, *, logits=None, id_prefix: str = "cell", device=None,
                    attack: bool = True, provenance: dict | None = None, effort: str = DEFAULT_EFFORT,
                    seed: int = 0) -> SearchOutput:
    """Search, exactly re-check and package brackets for ``matrix`` at each tolerance.

    ``matrix``: m x n row-stochastic float64; ``logits``: optional float64 with
    ``matrix`` its float64 row softmax (the claim is then about the exact
    softmax, with slack, K.5). ``eps_list``: tolerances in (0, 1] (float,
    Fraction, str). ``effort``: a preset of ``numeric.search.effort``;
    ``seed``: the cell's seed (``effort.cell_seed`` of its identity). Raises
    ValueError on bad input.
    """
    from exact.certificates import TrivialLower, TrivialUpper, UpperFactors, check_lower, check_upper
    from exact.matrix import ExactMatrix
    from exact.rational import format_rational, to_fmpq, to_fraction

    effort = parse_effort(effort)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    run_prov = {"effort": effort, "seed": seed, "versions": package_versions(), "code": code_version()}
    A = validate_matrix(matrix)
    eps_items = list(eps_list)
    eps_q = [parse_eps(e) for e in eps_items]
    m, n = A.shape
    p = min(m, n)
    dev = str(pick_device(device))
    A_exact = ExactMatrix.from_float64(A)
    tensors = {f"{id_prefix}/matrix": A}
    target = {"matrix": f"{id_prefix}/matrix"}
    slack_q = None
    slack_f = 0.0
    if logits is not None:
        H = validate_matrix(logits, "logits", stochastic=False)
        if H.shape != A.shape:
            raise ValueError(f"logits {H.shape} and matrix {A.shape} differ in shape")
        from numeric.search.slack import target_slack

        slack_q, slack_f = target_slack(H, A)
        tensors[f"{id_prefix}/logits"] = H
        target = {"matrix": f"{id_prefix}/matrix", "logits": f"{id_prefix}/logits",
                  "slack": format_rational(slack_q)}
    t_svd = time.perf_counter()
    svd, svd_errs = svd_baseline(A)
    t_svd = time.perf_counter() - t_svd

    cells, results = [], []
    # largest tolerance first: a row-side lower witness found there stays valid at every
    # smaller tolerance, and the row-set searches grow it (``lower_candidates(start=...)``)
    row_start = None
    order = sorted(range(len(eps_q)), key=lambda i: -eps_q[i])
    for idx in order:
        item, eq = eps_items[idx], eps_q[idx]
        t0 = time.perf_counter()
        cid = f"{id_prefix}/eps={item}"
        e_exact = to_fmpq(eq)
        lo_exact = e_exact + slack_q if slack_q is not None else e_exact
        up_exact = e_exact - slack_q if slack_q is not None else e_exact
        eps_lo = float(eq) + slack_f
        eps_up = float(eq) - slack_f

        # lower side ------------------------------------------------------------
        lower_c, lower_v = None, None
        candidates = lower_candidates(A, eps_lo * (1 + LOWER_SAFETY), svd, start=row_start)
        top_rows = strongest_rows(candidates)
        if top_rows is not None:
            row_start = top_rows
        for c in candidates:
            if c.rank == 0:
                continue
            v = check_lower(A_exact, _exact_lower_witness(c), lo_exact, c.rank)
            if v.verified:
                lower_c, lower_v = c, v
                break
        if lower_c is None:
            lower_c = LowerCandidate(0, "trivial", "trivial")
            lower_v = check_lower(A_exact, TrivialLower(), lo_exact, 0)
        L = lower_c.rank

        # upper side ------------------------------------------------------------
        upper = None
        svd_rank = None
        if up_exact > 0:
            ok = np.nonzero(svd_errs <= eps_up * (1 - UPPER_SAFETY))[0]
            svd_rank = int(ok[0]) if ok.size else None
            for u in search_upper(A, eps_up * (1 - UPPER_SAFETY), lower=L, svd=(svd, svd_errs), device=dev,
                                  budget_s=UPPER_BUDGET_S):
                v = check_upper(A_exact, UpperFactors(ExactMatrix.from_float64(u.P), ExactMatrix.from_float64(u.Q)),
                                up_exact, u.rank)
                if v.verified and u.rank < p:
                    upper = (u, v)
                    break
        if upper is None:
            v = check_upper(A_exact, TrivialUpper(), up_exact if up_exact >= 0 else e_exact * 0, p)
            if not v.verified:
                raise RuntimeError(f"{cid}: the trivial upper witness was refused: {v.reason}")
            U_rank, U_fam, U_json, U_margin, uP = p, "trivial", {"kind": "trivial"}, v.margin, None
        else:
            u, v = upper
            U_rank, U_fam, U_margin, uP = u.rank, f"factors/{u.family.split('/')[-1]}", v.margin, u
            U_json = {"kind": "factors", "P": f"{cid}/P", "Q": f"{cid}/Q"}
            tensors[f"{cid}/P"] = u.P
            tensors[f"{cid}/Q"] = u.Q
        if L > U_rank:
            raise RuntimeError(f"{cid}: verified lower {L} above verified upper {U_rank}: the exact tier is unsound")

        # attack ----------------------------------------------------------------
        attack_success, attack_error = None, None
        if attack and L >= 2:
            eps_att = eps_lo * ATTACK_FRACTION
            warm = (uP.P, uP.Q) if uP is not None else None
            ar = attack_rank(A, L - 1, eps_att, svd, device=dev, warm=warm)
            attack_error = ar.error
            attack_success = False
            if ar.success:
                va = check_upper(A_exact, UpperFactors(ExactMatrix.from_float64(ar.P), ExactMatrix.from_float64(ar.Q)),
                                 lo_exact, L - 1)
                attack_success = bool(va.verified)
                if attack_success:
                    warnings.warn(f"SOUNDNESS BUG: rank-{L - 1} attack succeeded on {cid} (error {ar.error!r} "
                                  f"<= {eps_att!r}) where L = {L} was certified by {lower_c.family}",
                                  RuntimeWarning, stacklevel=2)

        # export ----------------------------------------------------------------
        names = {}
        for k, arr in lower_c.tensors.items():
            names[k] = f"{cid}/{k}"
            tensors[names[k]] = arr
        seconds = time.perf_counter() - t0 + (t_svd if not results else 0.0)
        prov = {"search": {"lower_family": lower_c.family, "upper_family": U_fam, "svd_rank": svd_rank,
                           "seconds": round(seconds, 3), "device": dev,
                           "lower_margin": format_rational(lower_v.margin) if lower_v.margin is not None else None,
                           "upper_margin": format_rational(U_margin) if U_margin is not None else None,
                           "attack_rank": L - 1 if attack_success is not None else None,
                           "attack_eps": repr(eps_lo * ATTACK_FRACTION) if attack_success is not None else None,
                           "attack_error": attack_error, "attack_success": attack_success,
                           "effort": effort, "seed": seed}}
        prov.update(provenance or {})
        cells.append({"id": cid, "eps": rational_string(eq), "target": dict(target),
                      "lower": {"rank": int(L), "witness": _lower_json(lower_c, names)},
                      "upper": {"rank": int(U_rank), "witness": U_json},
                      "provenance": prov})
        results.append(BracketResult(item, int(L), int(U_rank), lower_c.family, U_fam, seconds,
                                     float(to_fraction(slack_q)) if slack_q is not None else None, attack_success,
                                     svd_rank, attack_error,
                                     prov["search"]["lower_margin"], prov["search"]["upper_margin"]))
    # cells and results in the caller's order of tolerances
    perm = sorted(range(len(order)), key=lambda k: order[k])
    return SearchOutput([cells[i] for i in perm], tensors, [results[i] for i in perm], run_prov)

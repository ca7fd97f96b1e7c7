"""The study's self-check: its intervals and reading rule on synthetic tables with a known truth
(docs/study.md, "The self-check"; ``python -m numeric study --calibrate [DIR]``).

``Shape`` is a panel's layout: per family its heads and sources, the source
pool it draws from (text families share their windows), and which B1 columns
are constant within a head (the weight spectra and the depth). ``synthetic``
builds a table of that shape with the study's column names, whose target is

    y = head effect + B1's cell-level signal + source shift + gamma u + noise,

where B1's head-constant columns see only part of the head effect (a 3-factor
head structure; the rest, ``e_h``, is head identity that B1 cannot tell), and
``u`` is a cell-level signal carried by the G block only in the ``gain``
scenario, with gamma set so that the oracle's relative gain is ``rho``
(Gaussian errors: MAE proportional to sd). The scenarios:

- ``null``: G is cell-level noise independent of y;
- ``gain``: G carries ``u`` (planted rho, default 0.08);
- ``head-identity``: G is random head-level constants plus within-head noise,
  independent of y; it can learn ``e_h`` (a spurious gain after B1);
- ``head-constant``: G is random head-level constants exactly (the demeaned
  row must drop them: Delta exactly 0);
- ``loho-null``: as ``null``, heads redrawn every replication, for the
  leave-one-head-out row's coverage over heads;
- ``loho-head``: the head-structured no-signal block of ``head-identity``
  (random head constants plus within-head noise, independent of y), heads
  redrawn every replication: the leave-one-head-out row's coverage where a
  block's values cluster by head, as the real G and I do;
- ``within-head``: a head-structured block with a genuine within-head gain:
  G's first column carries ``u`` (planted rho), its other columns are head
  constants; the reading rule must count it wherever the demeaned row finds it.

``source_scan`` runs the ``gain`` scenario's primary row at the shape with
its sources per family set to each of a grid, and ``caution_threshold``
reads off the smallest number of sources per family at which the
interval's coverage reaches 0.94 and its se/sd 0.9
(``numeric.study.caution`` tabulates it at the recorded shapes).

Per scenario it runs the primary row, the head-level placebo, the demeaned row
(and leave-one-head-out for ``loho-null``) with the study's own ``compare``,
and reports the rate of "lower limit > 0" (the power with its exact one-sided
lower bound, ``lower_bound``; a false-positive rate within simulation error
of 5 % by a one-sided exact binomial test, ``max_count``), the coverage of the simulation's
mean estimate (the estimand of a cross-fitted comparison: the mean over
replications), and the reading rule's verdicts. Heads are drawn once per
scenario (the source-clustered intervals are conditional on the heads) except
in ``loho-null``. Seeds: replication ``i`` of scenario ``k`` uses
``SeedSequence(seed, spawn_key=(k, i))``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from numeric.study.blocks import B0, B1_EXTRA, B2_EXTRA, CATEGORICAL, G, I, WEIGHT, block_columns
from numeric.study.compare import AGGREGATE, compare, source_pools
from numeric.study.data import StudyData, StudyError
from numeric.study.demean import head_means
from numeric.study.fit import negligible
from numeric.study.caution import threshold
from numeric.study.intervals import MARGIN
from numeric.study.loho import MIN_LOHO_HEADS
from numeric.study.protocol import COUNTED, demeaned_name, placebo_name, reading, _c

__all__ = ["Shape", "FOUR_FAMILY", "RECORDED_FOUR_FAMILY", "SCENARIOS", "synthetic", "panel_shape", "parse_shape",
           "RECORDED_FOUR_FAMILY_SPEC", "calibrate", "CalibrationResult", "report_lines", "binomial_tail",
           "lower_bound",
           "max_count", "within_rate", "ScanPoint", "source_scan", "caution_threshold", "with_sources", "REDRAWN"]

#: The synthetic scenarios (module docstring).
SCENARIOS = ("null", "gain", "head-identity", "head-constant", "loho-null", "loho-head", "within-head")
#: Scenarios whose heads are redrawn every replication (leave one head out speaks about unseen heads).
REDRAWN = ("loho-null", "loho-head")
#: Scenarios that plant the gain ``u``.
PLANTED = ("gain", "within-head")
#: Standard deviations of the synthetic target's parts: cell noise, source shift, the head effect
#: B1 sees, the head effect it cannot tell (head identity).
NOISE, SOURCE_SD, HEAD_SEEN, HEAD_UNSEEN = 0.5, 0.3, 1.0, 0.4
#: The self-check's tolerances: the nominal rate of a false positive, the power asked for at the
#: planted gain, and the level of the exact binomial tests that say "within simulation error".
NOMINAL_FPR, TARGET_POWER, ALPHA = 0.05, 0.80, 0.05
#: Within-head noise of the head-identity block; G's measurement noise in the gain scenario.
IDENTITY_NOISE, G_NOISE = 0.3, 0.5


@dataclass(frozen=True)
class Shape:
    """``families``: ``(name, heads, sources, pool)`` per family; ``head_constant``: B0/B1 columns
    constant within a head."""

    families: tuple
    head_constant: tuple

    def describe(self) -> str:
        return ", ".join(f"{n} {h} heads x {s} sources ({p})" for n, h, s, p in self.families) + \
            f"; {len(self.head_constant)} head-constant B1 columns"


#: The built-in shape: 4 families x 8 heads x 16 sources (3 text families on one pool, one image family).
FOUR_FAMILY = Shape((("fam0", 8, 16, "text"), ("fam1", 8, 16, "text"), ("fam2", 8, 16, "text"),
                     ("fam3", 8, 16, "image")), ("b0_depth",) + WEIGHT)


#: The recorded four-family panel's shape (docs/study.md, "Results: the four families at the study preset":
#: MiniLM 24 heads, GPT-2 and Qwen2 16 each on the same 16 text windows, the digit ViT 12 heads on 16 images;
#: 1,088 cells; docqwen2's 4 dropped cells are not modelled), as ``--shape`` spells it.
RECORDED_FOUR_FAMILY_SPEC = "encoder=24x16@text,docgpt2=16x16@text,docqwen2=16x16@text,digitvit=12x16@image"


def parse_shape(spec: str) -> Shape:
    """``"name=HxS@pool,..."`` (e.g. ``encoder=24x16@text``), head-constant columns as the panel's."""
    fams = []
    for part in spec.split(","):
        try:
            name, rest = part.split("=")
            hs, pool = rest.split("@") if "@" in rest else (rest, "text")
            h, s = (int(x) for x in hs.lower().split("x"))
        except ValueError:
            raise StudyError(f"bad --shape entry {part!r} (want NAME=HEADSxSOURCES@POOL)") from None
        if h < 1 or s < 1:
            raise StudyError(f"bad --shape entry {part!r}: heads and sources must be >= 1")
        fams.append((name, h, s, pool))
    return Shape(tuple(fams), FOUR_FAMILY.head_constant)


RECORDED_FOUR_FAMILY = parse_shape(RECORDED_FOUR_FAMILY_SPEC)


def panel_shape(data: StudyData) -> Shape:
    """The shape of a loaded panel: families, heads, sources, pools, and the B0/B1 columns whose
    within-head spread is rounding residue against their spread (``fit.negligible``)."""
    pools = source_pools(data)
    fams = []
    for f in np.unique(data.families):
        m = data.families == f
        srcs = set(data.sources[m])
        pool = next(i for i, p in enumerate(pools) if srcs & set(p))
        fams.append((str(f), int(np.unique(data.heads[m]).size), len(srcs), f"pool{pool}"))
    const = []

    for c in B0 + B1_EXTRA:
        if c not in data.numeric:
            continue
        v = data.numeric[c]
        with np.errstate(invalid="ignore"):
            within = np.sqrt(np.nanmean((v - head_means(v, data.heads, np.ones(v.size, dtype=bool))) ** 2))
        if negligible(np.nan_to_num(within), np.nan_to_num(np.nanstd(v))):
            const.append(c)
    return Shape(tuple(fams), tuple(const))


def _gamma(rho: float, carriers: int = len(G)) -> float:
    """The coefficient of ``u`` whose oracle relative gain is ``rho``: the residual after B1 has
    variance R; G's ``carriers`` columns that carry ``u`` explain the share q of it; MAE is
    proportional to sd (Gaussian)."""
    R = NOISE**2 + SOURCE_SD**2 + HEAD_UNSEEN**2
    q = 1.0 / (1.0 + G_NOISE**2 / carriers)        # R^2 of u on the mean of the carrying columns
    a = (1.0 - rho) ** 2
    return float(np.sqrt(R * (1.0 - a) / (a - 1.0 + q))) if rho > 0 else 0.0


def synthetic(shape: Shape, scenario: str, rng_heads: np.random.Generator, rng: np.random.Generator,
              rho: float = 0.08, rng_extra: np.random.Generator | None = None) -> StudyData:
    """A table of ``shape`` under ``scenario`` (head-level draws from ``rng_heads``, the rest from ``rng``);
    ``rng_extra``: also the B2 and I columns, as cell-level noise drawn from it (so that every
    comparison of the protocol runs, e.g. to time the study; the other columns are unchanged)."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}")
    b1 = [c for c in block_columns("B1") if c not in CATEGORICAL]
    hc = [c for c in b1 if c in shape.head_constant]
    cell = [c for c in b1 if c not in shape.head_constant]
    gamma = _gamma(rho) if scenario == "gain" else _gamma(rho, 1) if scenario == "within-head" else 0.0
    shift = {}
    cols: dict[str, list[np.ndarray]] = {c: [] for c in b1 + list(G)}
    y, src, heads, fams, dom = [], [], [], [], []
    for name, n_h, n_s, pool in shape.families:
        F = rng_heads.standard_normal((n_h, 3))
        L = rng_heads.standard_normal((3, len(hc)))
        seen = F @ np.array([1.0, 0.6, 0.4]) / np.sqrt(1.52) * HEAD_SEEN
        unseen = HEAD_UNSEEN * rng_heads.standard_normal(n_h)
        Xh = F @ L                                          # B1's head-constant columns: rank 3
        Gh = rng_heads.standard_normal((n_h, len(G)))       # head-level constants of the identity blocks
        for s in range(n_s):
            key = f"{pool}:s{s}"
            if key not in shift:
                shift[key] = SOURCE_SD * rng.standard_normal()
        n = n_h * n_s
        h_idx = np.repeat(np.arange(n_h), n_s)
        s_idx = np.tile(np.arange(n_s), n_h)
        Xc = rng.standard_normal((n, len(cell)))
        beta = np.zeros(len(cell))
        beta[:4] = (1.0, 0.7, 0.5, 0.3)[:min(4, len(cell))]
        u = rng.standard_normal(n)
        eta = rng.standard_normal((n, len(G)))
        if scenario == "gain":
            Gx = u[:, None] + G_NOISE * eta
        elif scenario in ("head-identity", "loho-head"):
            Gx = Gh[h_idx] + IDENTITY_NOISE * eta
        elif scenario == "within-head":
            Gx = Gh[h_idx].copy()
            Gx[:, 0] = u + G_NOISE * eta[:, 0]
        elif scenario == "head-constant":
            Gx = Gh[h_idx]
        else:
            Gx = eta
        yf = (seen[h_idx] + unseen[h_idx] + Xc @ beta + np.array([shift[f"{pool}:s{s}"] for s in s_idx])
              + gamma * u + NOISE * rng.standard_normal(n))
        for j, c in enumerate(hc):
            cols[c].append(Xh[h_idx, j])
        for j, c in enumerate(cell):
            cols[c].append(Xc[:, j])
        for j, c in enumerate(G):
            cols[c].append(Gx[:, j])
        y.append(yf)
        src += [f"{pool}:s{s}" for s in s_idx]
        heads += [f"{name}:h{h}" for h in h_idx]
        fams += [name] * n
        dom += [pool] * n
    numeric = {c: np.concatenate(v) for c, v in cols.items()}
    if rng_extra is not None:
        n = len(fams)
        numeric.update({c: rng_extra.standard_normal(n) for c in B2_EXTRA + I})
    return StudyData.build(numeric, {"family": fams, "b0_domain": dom}, np.concatenate(y), src, heads, fams)


def _rows(scenario: str) -> list:
    if scenario in REDRAWN:
        return [_c("B1", "G", "B1 vs B1+G, leave one head out", clusters="head")]
    return [_c("B1", "G"), _c("B1", "G", placebo_name("G"), placebo="heads"),
            _c("B1", "G", demeaned_name("G"), demean=True)]


@dataclass(frozen=True)
class CalibrationResult:
    """Per scenario and row: the estimates (aggregate) of every replication, the verdicts, and the rows the
    shape is too small for (``compare.shape_reason``: fewer than 4 sources, fewer than 2 heads per family)."""

    shape: Shape
    scenario: str
    replications: int
    rho: float
    estimates: dict      # row name -> list of aggregate Estimates
    verdicts: list       # reading rule verdict on G per replication
    skipped: dict = field(default_factory=dict)   # row name -> one-line reason (the shape is too small for it)

    def rate(self, row: str, pred) -> float:
        return float(np.mean([pred(e) for e in self.estimates[row]]))

    def coverage(self, row: str, what: str = "rho") -> float:
        ests = self.estimates[row]
        truth = np.mean([getattr(e, what) for e in ests])
        return float(np.mean([getattr(e, f"{what}_ci")[0] <= truth <= getattr(e, f"{what}_ci")[1] for e in ests]))


def calibrate(shape: Shape, scenario: str, replications: int, seed: int, *, rho: float = 0.08,
              permutations: int = 5, rows=None) -> CalibrationResult:
    """Run ``scenario`` ``replications`` times (see the module docstring); ``rows``: other comparisons than
    the scenario's own (the source scan runs the primary row alone)."""
    k = SCENARIOS.index(scenario)
    rows = _rows(scenario) if rows is None else rows
    ests: dict = {c.name: [] for c in rows}
    verdicts: list = []
    skipped: dict = {}
    heads_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k, 2**31)))
    head_state = heads_rng.bit_generator.state
    for i in range(replications):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k, i)))
        if scenario in REDRAWN:
            hr = rng                                       # heads redrawn every replication
        else:
            hr = np.random.default_rng()
            hr.bit_generator.state = head_state            # the scenario's heads, every replication
        data = synthetic(shape, scenario, hr, rng, rho)
        res = compare(data, rows, seed=seed + i, permutations=permutations)
        for r in res:
            if r.reason:
                skipped[r.comparison.name] = r.reason     # the shape is fixed: the same in every replication
            else:
                ests[r.comparison.name].append(r.estimates[AGGREGATE])
        verdicts.append(reading(res, "G"))
    return CalibrationResult(shape, scenario, replications, rho, ests, verdicts, skipped)


def _se(p: float, n: int) -> float:
    return float(np.sqrt(p * (1 - p) / n))


def binomial_tail(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``, summed exactly term by term (log-gamma weights).

    >>> round(binomial_tail(20, 20, 0.8), 6), binomial_tail(0, 5, 0.3)
    (0.011529, 1.0)
    """
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0.0 or p >= 1.0:
        return float(p >= 1.0)
    lg = math.lgamma
    return float(min(1.0, sum(math.exp(lg(n + 1) - lg(j + 1) - lg(n - j + 1) + j * math.log(p)
                                       + (n - j) * math.log1p(-p)) for j in range(k, n + 1))))


def lower_bound(k: int, n: int, alpha: float = 0.05) -> float:
    """The exact (Clopper-Pearson) one-sided ``1 - alpha`` lower confidence bound of a rate seen ``k`` times in
    ``n``: the ``p`` at which ``P(X >= k) = alpha`` (bisection; 0 when ``k = 0``). ``lower_bound(k, n) >= q``
    exactly when a one-sided exact binomial test rejects "rate <= q" at level ``alpha``.

    >>> round(lower_bound(20, 20), 4), round(lower_bound(58, 60), 3), lower_bound(0, 10)
    (0.8609, 0.899, 0.0)
    """
    if k <= 0:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if binomial_tail(k, n, mid) < alpha else (lo, mid)
    return lo


def max_count(n: int, p: float, alpha: float = ALPHA) -> int:
    """The most hits in ``n`` replications that a one-sided exact binomial test at level ``alpha`` does not
    find above the rate ``p`` (the tolerance of a false-positive check at ``n`` replications).

    >>> max_count(200, 0.05), max_count(60, 0.05), max_count(20, 0.05)
    (15, 6, 3)
    """
    return next(k - 1 for k in range(n + 2) if binomial_tail(k, n, p) <= alpha)


def within_rate(rate: float, n: int, p: float, alpha: float = ALPHA) -> bool:
    """Whether ``rate`` (of ``n`` replications) is within simulation error of at most ``p`` (``max_count``)."""
    return int(round(rate * n)) <= max_count(n, p, alpha)


def _cover_tol(n: int) -> float:
    """The tolerance of a coverage of ``n`` replications around 0.95: two standard errors plus 0.01."""
    return 2 * _se(0.95, n) + 0.01


def _coverage_check(cov: float, n: int, what: str = "") -> tuple[bool, str]:
    """``(passed, text)`` of a two-sided coverage check: ``cov`` (of ``n`` replications) within
    ``_cover_tol(n)`` of 0.95; ``what`` follows the rate in the text."""
    return abs(cov - 0.95) <= _cover_tol(n), f"{cov:.3f}{what} (target 0.95 +- {_cover_tol(n):.3f})"


def _coverage_floor(cov: float, n: int, what: str, why: str) -> tuple[bool, str]:
    """``(passed, text)`` of a one-sided coverage check: ``cov`` at least ``0.95 - _cover_tol(n)`` (a row that
    may be conservative, ``why``)."""
    return cov >= 0.95 - _cover_tol(n), f"{cov:.3f}{what} (target >= 0.95 - {_cover_tol(n):.3f}: {why})"


def _descriptive(r: CalibrationResult, row: str) -> bool:
    """Whether ``row``'s intervals are descriptive only at this shape (NaN: ``numeric.study.loho``)."""
    return bool(r.estimates[row]) and all(not np.isfinite(e.rho_se) for e in r.estimates[row])


def report_lines(results: dict) -> tuple:
    """``(lines, failed checks)`` for ``{scenario: CalibrationResult}``; a row the shape is too small for is a
    ``[skipped]`` line with its one-line reason, and the checks that need it do not run. Every rate is on the
    study's one aggregate, rho (a lower limit of rho's 95 % interval above 0)."""
    lines, failed = [], []
    gain_row, pl, dm, loho = "B1 vs B1+G", placebo_name("G"), demeaned_name("G"), "B1 vs B1+G, leave one head out"

    def check(name, ok, text):
        lines.append(f"  [{'ok' if ok else 'FAIL'}] {name}: {text}")
        if not ok:
            failed.append(name)

    lower = lambda e: e.rho_ci[0] > 0
    equivalent = lambda e: e.equivalence == "equivalent"
    for sc, r in results.items():
        n = r.replications
        ran = lambda *rows: not any(x in r.skipped for x in rows)
        counted = float(np.mean([v == COUNTED for v in r.verdicts]))
        lines.append(f"{sc} ({n} replications):")
        lines += [f"  [skipped] {row}: {why.removeprefix('skipped: ')}" for row, why in r.skipped.items()]
        if sc not in REDRAWN and ran(gain_row, dm):
            # one aggregate: the rule's verdict is the printed aggregate rho intervals', replication by replication
            bad = sum((v == COUNTED) != lower(d) or (v == "no gain") != (not lower(p) and not lower(d))
                      for v, p, d in zip(r.verdicts, r.estimates[gain_row], r.estimates[dm]))
            check(f"single aggregate ({sc})", bad == 0,
                  f"{bad} of {n} replications where the reading rule's verdict and the printed aggregate rho "
                  f"intervals (demeaned and primary rows) disagree (target 0)")
        if sc == "null" and ran(gain_row):
            fpr = r.rate(gain_row, lower)
            check("null false-positive rate", within_rate(fpr, n, NOMINAL_FPR),
                  f"{fpr:.3f} of primary rho intervals exclude 0 from below (target: not above {NOMINAL_FPR} by a "
                  f"one-sided exact binomial test at level {ALPHA}, i.e. at most {max_count(n, NOMINAL_FPR)} of "
                  f"{n}; one-sided nominal 0.025)")
            check(f"coverage ({gain_row})", *_coverage_check(r.coverage(gain_row), n,
                                                          " of rho intervals cover the simulation mean"))
            lines.append(f"  se/sd of rho {_se_sd(r, gain_row):.2f}; equivalence (|rho| < {MARGIN}) declared in "
                         f"{r.rate(gain_row, equivalent):.3f}")
            if ran(dm):
                # the demeaned row only confirms a gain in the reading rule: too narrow would count noise as
                # geometry (a failure); too wide costs it power, which the gain scenario measures directly
                check(f"coverage ({dm})", *_coverage_floor(
                    r.coverage(dm), n, " of rho intervals cover the simulation mean",
                    "this confirming row may be conservative; its power is the gain scenario's 'demeaned row "
                    "finds it'"))
            check("null: reading rule's false-positive rate", within_rate(counted, n, NOMINAL_FPR),
                  f"the rule counts the noise block as geometry in {counted:.3f} (target: not above {NOMINAL_FPR}, "
                  f"at most {max_count(n, NOMINAL_FPR)} of {n})")
        elif sc == "gain" and ran(gain_row):
            power = r.rate(gain_row, lower)
            k = int(round(power * n))
            bound = lower_bound(k, n, ALPHA)
            mean_rho = np.mean([e.rho for e in r.estimates[gain_row]])
            tag = "shown" if bound >= TARGET_POWER else "ok" if power >= TARGET_POWER else "LOW"
            lines.append(f"  [{tag}] power at planted rho {r.rho}: {power:.3f} ({k} of {n}; exact one-sided "
                         f"{1 - ALPHA:.0%} lower bound {bound:.3f}; mean estimated rho {mean_rho:+.3f}; se/sd "
                         f"{_se_sd(r, gain_row):.2f}; target >= "
                         f"{TARGET_POWER}, 'shown' when the lower bound reaches it; low power is a property of the "
                         f"shape, not a failed check)")
            check(f"coverage ({gain_row}, gain)", *_coverage_check(r.coverage(gain_row), n))
            eq = r.rate(gain_row, equivalent)
            check(f"equivalence size (rho {r.rho})", within_rate(eq, n, NOMINAL_FPR),
                  f"equivalence (|rho| < {MARGIN}) declared under the planted gain in {eq:.3f} (target: not above "
                  f"{NOMINAL_FPR}, at most {max_count(n, NOMINAL_FPR)} of {n})")
            if ran(pl, dm):
                lines.append(f"  demeaned row finds it {r.rate(dm, lower):.3f} (coverage {r.coverage(dm):.3f}); "
                             f"head-level placebo flags {r.rate(pl, lower):.3f}; reading rule counts it as geometry "
                             f"{counted:.3f}")
        elif sc == "within-head" and ran(gain_row, dm):
            found = [lower(e) for e in r.estimates[dm]]
            missed = sum(f and v != COUNTED for f, v in zip(found, r.verdicts))
            lines.append(f"  primary row finds it {r.rate(gain_row, lower):.3f}; demeaned row {np.mean(found):.3f}; "
                         f"head-level placebo flags {r.rate(pl, lower):.3f}; reading rule counts it {counted:.3f}")
            check("within-head gain counted", missed <= max_count(n, NOMINAL_FPR),
                  f"{missed} of {n} replications where the demeaned row finds the gain and the rule does not count "
                  f"it (target: at most {max_count(n, NOMINAL_FPR)})")
        elif sc in ("head-identity", "head-constant") and ran(gain_row, pl, dm):
            lines.append(f"  primary row finds a (spurious) gain in {r.rate(gain_row, lower):.3f}, mean rho "
                         f"{np.mean([e.rho for e in r.estimates[gain_row]]):+.3f}; head-level placebo flags "
                         f"{r.rate(pl, lower):.3f}; demeaned row finds a gain {r.rate(dm, lower):.3f}")
            check(f"{sc} flagged", within_rate(counted, n, NOMINAL_FPR),
                  f"the reading rule counts the block as geometry in {counted:.3f} (target: not above "
                  f"{NOMINAL_FPR}, at most {max_count(n, NOMINAL_FPR)} of {n})")
            if sc == "head-constant":
                worst = max(abs(e.delta) for e in r.estimates[dm])
                check("head-constant block dropped when demeaned", worst == 0.0,
                      f"largest |Delta| of the demeaned row {worst:.3g} (target exactly 0)")
        elif sc in REDRAWN and ran(loho):
            if _descriptive(r, loho):
                lines.append(f"  [descriptive] {loho}: {MIN_LOHO_HEADS} heads a family needed for an interval; the "
                             f"study prints this row without one at this shape")
                continue
            fpr = r.rate(loho, lower)
            check(f"leave-one-head-out false-positive rate ({sc})", within_rate(fpr, n, NOMINAL_FPR),
                  f"{fpr:.3f} (heads redrawn each replication; target: not above {NOMINAL_FPR}, at most "
                  f"{max_count(n, NOMINAL_FPR)} of {n})")
            check(f"leave-one-head-out coverage ({sc})", *_coverage_floor(
                r.coverage(loho), n, " of rho intervals cover the mean over head draws",
                "the head jackknife may be conservative"))
            lines.append(f"  se/sd {_se_sd(r, loho):.2f}; mean rho {np.mean([e.rho for e in r.estimates[loho]]):+.3f}")
    return lines, failed


def _se_sd(r: CalibrationResult, row: str) -> float:
    """Mean calibrated se of rho over the simulated sd of rho."""
    rhos = [e.rho for e in r.estimates[row]]
    sd = float(np.std(rhos, ddof=1)) if len(rhos) > 1 else float("nan")
    return float(np.mean([e.rho_se for e in r.estimates[row]]) / sd) if sd > 0 else float("nan")


def with_sources(shape: Shape, sources: int) -> Shape:
    """``shape`` with every family's sources set to ``sources`` (the pools keep their names)."""
    return Shape(tuple((n, h, sources, p) for n, h, _, p in shape.families), shape.head_constant)


@dataclass(frozen=True)
class ScanPoint:
    """The primary row under the planted gain at ``sources`` per family: coverage of the simulation mean rho
    and the mean calibrated se over the simulated sd."""

    sources: int
    coverage: float
    se_sd: float
    replications: int


def source_scan(shape: Shape, grid, replications: int, seed: int, rho: float = 0.08) -> list:
    """``[ScanPoint]`` at each number of sources per family of ``grid`` (the ``gain`` scenario's primary row)."""
    out = []
    for s in grid:
        r = calibrate(with_sources(shape, int(s)), "gain", replications, seed, rho=rho, permutations=1,
                      rows=[_c("B1", "G")])
        row = "B1 vs B1+G"
        out.append(ScanPoint(int(s), r.coverage(row), _se_sd(r, row), replications))
    return out


def caution_threshold(points) -> int | None:
    """The smallest number of sources per family of the scan at which the coverage reaches ``COVERAGE_FLOOR``
    and se/sd ``SE_SD_FLOOR`` (None: no grid point does; ``numeric.study.caution.threshold``)."""
    return threshold([(p.sources, p.coverage, p.se_sd) for p in points])

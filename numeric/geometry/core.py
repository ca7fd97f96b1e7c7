"""Intrinsic interaction geometry of one attention cell (issue 7, MATH.md section 3).

For the target ``A = softmax_row(H)`` of stored float64 logits ``H`` this module
computes the paper's intrinsic profile, every piece of it invariant under
Q/K gauges because it depends on ``H`` only through ``C = P_m H P_n``:

- the visible interaction ``C = P_m (log A) P_n = P_m H P_n`` (the row constant
  ``logsumexp`` of ``log A`` is killed by ``P_n``);
- the residual ``q(M) = min_b max_i osc_j(M_ij - b_j)``. It is an LP, solved
  here exactly as a *maximum cycle mean*: with ``D_jj' = max_i (M_ij - M_ij')``,
  ``max_i osc_j(M_ij - b_j) = max_{j,j'} (D_jj' - b_j + b_j')`` and the LP dual
  of ``min_b`` of that is the best mean weight of a cycle of D (Karp's
  algorithm). A cycle is an exact lower certificate (on a closed walk the
  potentials cancel), the potentials ``b`` an exact upper one;
- ``tau(T) = 2 tanh(q(C - T)/4)`` (the Hilbert-metric bound, paper's (7));
- a bracket on the size ``kappa(T) = inf {R(X) R(Y) : T = X Y^T}``: the
  double-difference lower bound ``max |T_ij - T_ij' - T_i'j + T_i'j'| / 4`` and
  the minimum-enclosing-ball (MEB) radius product of balanced SVD factors with
  the gauge optimised (J.1, D.1, F.1);
- the logit-SVD family of Appendix J.2: for retained ranks r, ``T_r`` the
  rank-r truncated SVD of C, ``kappa(T_r)`` and ``tau(T_r)`` from the same T
  (H.2: size and residual must come from the same T), and a prefactor-free
  shape score (a diagnostic, C_r unknown; never a certificate).

Every number claimed as a bound has a rigorous version next to the float one
(``*_cert`` columns): exact integer arithmetic on the dyadic floats, FLINT
products, and arb for ``tanh``. These are descriptor bounds, not rank
certificates; ranks only ever come from the exact tier.

Gauge optimisation (our derivation, documented in docs/geometry.md). By D.1
every factorisation of a rank-r T compresses to ``X = X0 G``,
``Y = Y0 G^-T`` with balanced SVD factors ``X0 = U S^1/2``, ``Y0 = V S^1/2``.
With ``W = G G^T``, ``R(X0 G)^2 = max_{lam in simplex} tr(Sigma_lam(X0) W)``
(the MEB dual, ``Sigma_lam`` the lam-weighted covariance), and likewise
``R(Y0 G^-T)^2 = max_mu tr(Sigma_mu(Y0) W^-1)``. For fixed weights the product
is minimised by the matrix geometric mean ``W = Sigma_lam^-1 # Sigma_mu``;
we iterate damped geodesic steps towards it with backtracking on the true
objective. Weak duality gives a lower bound for *any* weights:
``kappa(T) >= || D_lam^1/2 T D_mu^1/2 ||_*`` with ``D_lam = diag(lam) - lam lam^T``
(nuclear norm of a product <= product of Frobenius norms, and the weighted
variance is at most the squared radius); the double-difference bound is the
case of two-point weights. The gap between the two is reported.

Reproducibility (issue 7 item 4): the optimiser stops inside its gap at a
point that depends on discrete decisions, so the size problems run on C
rounded to a fixed dyadic grid (``canonical_interaction``): logits that differ
by rounding, as under a dense Q/K gauge, give bit-identical size descriptors,
and the exactly computed ones (q, tau, double difference) are continuous in C.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from numeric.heads.extract import softmax_rows
from numeric.search.norms import row_l1_norm

__all__ = [
    "SVD_RANKS",
    "cell_descriptors",
    "visible_interaction",
    "canonical_interaction",
    "residual_q",
    "QResidual",
    "double_difference",
    "kappa_factors",
    "KappaBracket",
    "meb_radius",
    "tau_of_q",
    "shape_score",
    "intrinsic_profile_score",
    "one_blas_thread",
    "IntRat",
    "tanh_bounds",
]

# Retained ranks of the logit-SVD family (J.2) reported as columns. Powers of
# two up to 32 span the interaction ranks seen on 64-dim heads at a cost of
# one MEB optimisation each; ranks >= rank(C) are skipped (T_r = C there).
SVD_RANKS = (1, 2, 4, 8, 16, 32)

# Singular values below this fraction of the largest are treated as zero when
# factoring C. Dropping them is sound: the dropped part is charged to the
# rigorous kappa upper bound through subadditivity (see _kappa_cert).
RANK_RTOL = 1e-11

# MEB solver (away-step Frank-Wolfe on the dual QP): stop when the duality gap
# R_up^2 - f(lam) is below this fraction of R_up^2, i.e. about 1e-12 relative
# on the radius -- far below every tolerance a descriptor is compared at.
MEB_GAP_RTOL = 1e-12
# Frank-Wolfe steps (to 1e-2 relative gap) before the active-set polish, and
# the most polish pivots (each adds or drops one support point; the optimal
# support has at most dim + 1 points).
MEB_FW_STEPS = 60
MEB_FW_RTOL = 1e-2
MEB_POLISH_STEPS = 400
# Ridge on the Gram matrix in the polish, relative to its largest diagonal
# entry: moves R^2 by at most this relative amount (far below MEB_GAP_RTOL's
# effect on any descriptor) and makes the active-set systems nonsingular.
MEB_REG = 1e-14

# Gauge optimisation: at most this many outer steps; stop when the primal
# (radius product) and dual (weighted nuclear norm) agree to this relative gap.
# The dual ascent converges like Frank-Wolfe (sublinearly), so the budget is a
# compromise with the per-cell time limit (a 256 x 256 head in a few seconds):
# 0.1% relative gap is far finer than any comparison the report makes, and the
# gap actually reached is reported per cell (kappa_gap).
GAUGE_MAX_OUTER = 25
GAUGE_GAP_RTOL = 1e-3
# golden-section steps of the dual line search (0.618^14 ~ 1e-3 in t)
GAUGE_LINE_STEPS = 14

# Canonical input of the size optimisation (issue 7 item 4). The gauge and MEB
# solvers take discrete decisions (argmax picks, active sets, early stops), so
# inputs that differ by float rounding -- the same cell read through a dense
# Q/K gauge -- can end at different points inside the ~1% duality gap. They
# therefore run on C rounded to the dyadic grid g = 2^(e + b - CANON_BITS),
# 2^(e-1) <= max|C| < 2^e, b = ceil(log2(m n)): two copies of C that differ by
# delta round to the same bits unless an entry lies within delta of a grid
# boundary, expected count sum_ij |delta_ij| / g, about 2^(CANON_BITS - e)
# times the mean |delta_ij|: measured 1.3e-4 per 256 x 256 cell under dense
# gauges of condition 4 and 16 (mean |delta| 1.7e-16, max 2e-15 relative to
# max|C|; no cell of 300 rounded differently). The rounding (at most g/2 per
# entry, ~1e-6 of max|C| at 256 x 256) is charged to the rigorous bound
# through the exact tail C - X0 Y0^T (see _kappa_cert): +2e-7 relative there.
CANON_BITS = 40

# A size problem whose gap on the canonical input closes below this relative
# amount is solved, so its value is a property of C rather than of the solver
# path: it is re-solved on C itself (no rounding) to GAUGE_EXACT_RTOL. The
# threshold sits far above the rounding-induced change (~1e-7 relative) and far
# below the gaps of unconverged learned heads (1e-3 to 2e-2).
GAUGE_CONVERGED_RTOL = 1e-6
GAUGE_EXACT_RTOL = 1e-13

# Relative Tikhonov term for the weighted covariances before the geometric
# mean: they are singular when few points are on the ball.
GAUGE_REG = 1e-6

# Eigenvalue floor (relative) for inverse square roots of gauges: keeps every
# gauge's condition number below 1e12, so factors stay finite in float64.
SPD_FLOOR = 1e-12


def one_blas_thread():
    """Context limiting BLAS to one thread (threadpoolctl, when installed).

    The descriptors work on many small matrices, where a multi-threaded
    OpenBLAS on a shared machine is 10 to 30 times slower than one thread.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def tau_of_q(q: float) -> float:
    """``2 tanh(q / 4)`` (MATH.md section 3, the paper's (7)).

    >>> round(tau_of_q(math.log(4.0)), 12)
    0.666666666667
    """
    return 2.0 * math.tanh(q / 4.0)


def visible_interaction(logits: np.ndarray) -> np.ndarray:
    """``C = P_m H P_n`` in float64 (gauge invariant; MATH.md section 3)."""
    h = np.asarray(logits, dtype=np.float64)
    c = h - h.mean(axis=1, keepdims=True)
    return c - c.mean(axis=0, keepdims=True)


def canonical_interaction(C: np.ndarray) -> tuple[np.ndarray, float, float]:
    """C rounded to the dyadic grid of ``CANON_BITS`` (issue 7 item 4).

    Returns ``(C_round, g, margin)``: ``g`` the grid (a power of two,
    ``2^(e + ceil(log2(m n)) - CANON_BITS)`` with ``2^(e-1) <= max|C| < 2^e``),
    ``margin`` the largest max-norm perturbation of C, relative to max|C|, that
    provably leaves ``C_round`` bit-identical (distance of the nearest entry to
    a rounding boundary). Scaling by a power of two and ``np.round`` are exact,
    so ``C_round`` is exactly ``g * round(C / g)``.

    >>> Cr, g, _ = canonical_interaction(np.array([[1.0 + 2.0**-45, -1.0]]))
    >>> Cr.tolist(), g == 2.0**-38
    ([[1.0, -1.0]], True)
    """
    C = np.asarray(C, dtype=np.float64)
    amax = float(np.abs(C).max()) if C.size else 0.0
    if amax == 0.0:
        return C.copy(), 0.0, math.inf
    e = math.frexp(amax)[1]  # amax = f 2^e with 1/2 <= f < 1
    b = (C.size - 1).bit_length()  # ceil(log2(m n))
    g = math.ldexp(1.0, e + b - CANON_BITS)
    t = C / g
    k = np.round(t)
    margin = float((0.5 - np.abs(t - k)).min()) * g / amax
    return k * g, g, margin


# ---------------------------------------------------------------------------
# residual q(M): max cycle mean


def _pair_max(M: np.ndarray, want_arg: bool = False):
    """``D[j, j'] = max_i (M_ij - M_ij')`` (and the row index attaining it)."""
    MT = np.ascontiguousarray(np.asarray(M, dtype=np.float64).T)
    n = MT.shape[0]
    D = np.empty((n, n))
    arg = np.empty((n, n), dtype=np.int64) if want_arg else None
    rows = np.arange(n)
    for j in range(n):
        diff = MT[j][None, :] - MT
        if want_arg:
            a = diff.argmax(axis=1)
            arg[j] = a
            D[j] = diff[rows, a]
        else:
            D[j] = diff.max(axis=1)
    return D, arg


def _karp(D: np.ndarray) -> tuple[float, list[int], np.ndarray]:
    """Maximum cycle mean of the complete digraph with weights D (Karp 1978).

    Walks may start anywhere (a zero-weight super source). Returns the value,
    the best closed walk found on the optimal n-step walk (its mean is an exact
    lower bound) and potentials ``pi`` with ``D_uv + pi_u - pi_v <= value``
    (up to rounding), read off the same table: ``pi(v) = max_k F_k(v) - k value``.
    """
    n = D.shape[0]
    F = np.empty((n + 1, n))
    pred = np.zeros((n + 1, n), dtype=np.int64)
    F[0] = 0.0
    cols = np.arange(n)
    DT = np.ascontiguousarray(D.T)
    for k in range(1, n + 1):
        S = DT + F[k - 1][None, :]
        p = S.argmax(axis=1)
        pred[k] = p
        F[k] = S[cols, p]
    ks = np.arange(n)
    ratios = (F[n][None, :] - F[:n]) / (n - ks)[:, None]
    per_v = ratios.min(axis=0)
    v = int(per_v.argmax())
    lam = float(per_v[v])
    walk = [v]
    for k in range(n, 0, -1):
        walk.append(int(pred[k][walk[-1]]))
    walk.reverse()
    best_cycle, best_mean = [walk[0]], -math.inf
    last = {}
    for t, u in enumerate(walk):
        if u in last:
            cyc = walk[last[u] : t]
            w = sum(D[cyc[s], cyc[(s + 1) % len(cyc)]] for s in range(len(cyc))) / len(cyc)
            if w > best_mean:
                best_mean, best_cycle = w, cyc
        last[u] = t
    pi = (F - np.arange(n + 1)[:, None] * lam).max(axis=0)
    return lam, best_cycle, pi


@dataclass(frozen=True)
class QResidual:
    """``q(M)`` with its LP certificates (MATH.md section 3).

    ``value``: max cycle mean in float; ``b``: column shift attaining it (up to
    rounding); ``cycle``: columns j_0 -> j_1 -> ... -> j_0 whose mean weight
    lower-bounds q exactly; ``lower``/``upper``: exact rationals when
    certified (None otherwise).
    """

    value: float
    b: np.ndarray
    cycle: tuple
    lower: Fraction | None = None
    upper: Fraction | None = None


def residual_q(M, *, exact: "IntRat | None" = None) -> QResidual:
    """``q(M) = min_b max_i osc_j(M_ij - b_j)`` as a maximum cycle mean.

    With ``exact`` (the exact rational image of M) also returns rigorous
    ``lower`` (mean of the cycle, exactly) and ``upper`` (max oscillation with
    the found b, exactly) bounds.

    >>> r = residual_q(np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> r.value  # the two rows' differences are +1 and -1: q = |2| / 2
    1.0
    """
    M = np.asarray(M, dtype=np.float64)
    m, n = M.shape
    if n == 1 or m == 1:
        b = M[0].copy() if m == 1 else np.zeros(n)
        res = QResidual(0.0, b, (0,))
        if exact is not None:
            res = QResidual(0.0, b, (0,), Fraction(0), _osc_exact(exact, b))
        return res
    D, _ = _pair_max(M)
    lam, cycle, pi = _karp(D)
    b = -pi
    lam = max(lam, 0.0)
    if exact is None:
        return QResidual(lam, b, tuple(cycle))
    lo = _cycle_mean_exact(exact, cycle)
    hi = _osc_exact(exact, b)
    return QResidual(lam, b, tuple(cycle), max(lo, Fraction(0)), hi)


def _osc_exact(M: "IntRat", b: np.ndarray) -> Fraction:
    """``max_i osc_j(M_ij - b_j)`` exactly: an upper bound on q(M) for any b."""
    B = IntRat.from_float(np.asarray(b, dtype=np.float64)[None, :])
    diff = M - B
    num = diff.num
    osc = (num.max(axis=1) - num.min(axis=1)).max()
    return Fraction(int(osc), diff.den)


def _cycle_mean_exact(M: "IntRat", cycle) -> Fraction:
    """Exact mean of ``D`` around a closed walk: a lower bound on q(M)."""
    num = M.num
    total = 0
    L = len(cycle)
    for s in range(L):
        j, jn = cycle[s], cycle[(s + 1) % L]
        total += int((num[:, j] - num[:, jn]).max())
    return Fraction(total, M.den * L)


def double_difference(M) -> tuple[float, tuple[int, int, int, int]]:
    """``max |M_ij - M_ij' - M_i'j + M_i'j'|`` and an attaining (i, i', j, j').

    O(m n^2) through ``D_jj' + D_j'j`` with ``D_jj' = max_i (M_ij - M_ij')``: the
    double difference at (i, i', j, j') is ``(M_ij - M_ij') + (M_i'j' - M_i'j)``,
    each bracket maximised over its own row. kappa(M) >= value / 4 (MATH.md 3).

    >>> double_difference(np.array([[1.0, -1.0], [-1.0, 1.0]]))[0]
    4.0
    """
    M = np.asarray(M, dtype=np.float64)
    if M.shape[0] < 2 or M.shape[1] < 2:
        return 0.0, (0, 0, 0, 0)
    D, arg = _pair_max(M, want_arg=True)
    S = D + D.T
    j, jp = np.unravel_index(int(S.argmax()), S.shape)
    return float(S[j, jp]), (int(arg[j, jp]), int(arg[jp, j]), int(j), int(jp))


def _dd_exact(M: "IntRat", idx) -> Fraction:
    i, ip, j, jp = idx
    v = M.num[i, j] - M.num[i, jp] - M.num[ip, j] + M.num[ip, jp]
    return Fraction(abs(int(v)), M.den)


# ---------------------------------------------------------------------------
# minimum enclosing balls and the gauge-optimised size


def _meb_gram(K: np.ndarray, lam0: np.ndarray | None = None):
    """MEB of points with Gram matrix K, through its dual QP.

    Dual: ``max_{lam in simplex} f(lam) = lam.diag(K) - lam^T K lam`` (the
    lam-weighted variance). Any lam gives the centre ``c = sum lam_i x_i`` and
    the upper bound ``R^2 <= max_i |x_i - c|^2``, and f(lam) <= R^2. A few
    away-step Frank-Wolfe steps find the active set, then a primal active-set
    method (equal distances on the support, KKT) polishes to machine
    precision. Returns (R2_upper, f_lower, lam).
    """
    m = K.shape[0]
    dg = np.diag(K).copy()
    if lam0 is None or not np.isfinite(lam0).all():
        lam = np.zeros(m)
        lam[int((dg - 2 * K[0] + K[0, 0]).argmax())] = 1.0
    else:
        lam = lam0.copy()

    def stats(lam):
        Kl = K @ lam
        lKl = float(lam @ Kl)
        d2 = dg - 2.0 * Kl + lKl
        return Kl, lKl, d2

    for _ in range(MEB_FW_STEPS):
        Kl, lKl, d2 = stats(lam)
        g = dg - 2.0 * Kl
        s = int(g.argmax())
        R2 = float(d2[s])
        f = float(lam @ dg - lKl)
        if R2 - f <= MEB_FW_RTOL * max(R2, 1e-300):
            break
        lg = float(lam @ g)
        supp = np.flatnonzero(lam > 0)
        a = int(supp[g[supp].argmin()])
        gd_fw, gd_aw = g[s] - lg, lg - g[a]
        if gd_fw >= gd_aw or lam[a] >= 1.0:
            dKd = K[s, s] - 2.0 * Kl[s] + lKl
            gamma = 1.0 if dKd <= 0 else min(1.0, gd_fw / (2.0 * dKd))
            lam *= 1.0 - gamma
            lam[s] += gamma
        else:
            gmax = lam[a] / (1.0 - lam[a])
            dKd = lKl - 2.0 * Kl[a] + K[a, a]
            gamma = gmax if dKd <= 0 else min(gmax, gd_aw / (2.0 * dKd))
            lam *= 1.0 + gamma
            lam[a] = 0.0 if gamma == gmax else lam[a] - gamma
        lam = np.clip(lam, 0.0, None)
        lam /= lam.sum()

    # Active-set polish on the regularised dual (K + tau I: every equality
    # system is nonsingular, so the method cannot stall on affinely dependent
    # supports). On the support S solve 2 (K + tau I)_SS l - rho 1 = diag_S,
    # 1.l = 1; step towards it until a weight hits zero (drop it), or, when it
    # is feasible, add the point with the largest gradient if it violates KKT.
    tau = MEB_REG * max(float(dg.max()), 1e-300)
    best = None
    S = list(np.flatnonzero(lam > 0))
    for _ in range(MEB_POLISH_STEPS):
        Kl, lKl, d2 = stats(lam)
        R2 = float(d2.max())
        f = float(lam @ dg - lKl)
        if best is None or R2 < best[0]:
            best = (R2, f, lam.copy())
        if R2 - f <= MEB_GAP_RTOL * max(R2, 1e-300):
            break
        k = len(S)
        M = np.zeros((k + 1, k + 1))
        M[:k, :k] = 2.0 * K[np.ix_(S, S)] + 2.0 * tau * np.eye(k)
        M[:k, k] = -1.0
        M[k, :k] = 1.0
        rhs = np.concatenate([dg[S], [1.0]])
        try:
            target = np.linalg.solve(M, rhs)[:k]
        except np.linalg.LinAlgError:
            break
        cur = lam[S]
        if (target >= 0).all():
            lam = np.zeros(m)
            lam[S] = target
            g = dg - 2.0 * (K @ lam) - 2.0 * tau * lam
            rho = float(g[S].max())
            outside = np.setdiff1d(np.arange(m), S)
            if outside.size == 0:
                continue
            j = int(outside[g[outside].argmax()])
            if g[j] > rho + MEB_GAP_RTOL * max(float(dg.max()), 1e-300):
                S.append(j)
            else:
                Kl, lKl, d2 = stats(lam)
                R2 = float(d2.max())
                f = float(lam @ dg - lKl)
                if R2 < best[0]:
                    best = (R2, f, lam.copy())
                break
        else:
            step = target - cur
            neg = step < 0
            ratios = np.where(neg, cur / np.where(neg, -step, 1.0), np.inf)
            t = float(min(1.0, ratios.min()))
            newl = np.clip(cur + t * step, 0.0, None)
            newl[int(ratios.argmin())] = 0.0
            lam = np.zeros(m)
            lam[S] = newl
            lam /= lam.sum()
            S = [i for i in S if lam[i] > 0]
    R2, f, lam = best
    if R2 - f > MEB_GAP_RTOL * max(R2, 1e-300) and lam0 is not None:
        # a warm start can leave an affinely dependent support that the
        # equal-distance system cannot resolve: restart cold, keep the better.
        cold = _meb_gram(K, None)
        if cold[0] < R2:
            return cold
    return R2, f, lam


def meb_radius(points: np.ndarray) -> tuple[float, np.ndarray]:
    """Float MEB radius of the rows of ``points`` and its centre.

    >>> r, c = meb_radius(np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 0.5]]))
    >>> round(r, 9), np.round(c, 9).tolist()
    (1.0, [1.0, 0.0])
    """
    P = np.asarray(points, dtype=np.float64)
    if P.shape[0] == 0:
        raise ValueError("no points")
    mu = P.mean(axis=0)
    Pc = P - mu
    R2, _, lam = _meb_gram(Pc @ Pc.T)
    c = lam @ Pc
    r = float(np.sqrt(((Pc - c) ** 2).sum(axis=1).max()))
    return r, c + mu


def _psd_fn(A: np.ndarray, fn, floor: float = 0.0) -> np.ndarray:
    """``fn`` applied to the eigenvalues of the symmetric part of A, clipped at
    ``floor * max eigenvalue`` (``floor > 0`` for negative powers)."""
    w, V = np.linalg.eigh((A + A.T) / 2)
    top = max(float(w.max()), 0.0) if w.size else 0.0
    w = np.clip(w, floor * top, None)
    return (V * fn(w)) @ V.T


def _weighted_cov(X: np.ndarray, lam: np.ndarray) -> np.ndarray:
    xb = lam @ X
    return X.T @ (lam[:, None] * X) - np.outer(xb, xb)


def _nuclear_pair(A: np.ndarray, B: np.ndarray) -> float:
    """``sum sqrt(eig(A B))`` = ``||A^1/2 B^1/2||_*`` for PSD A, B."""
    Ah = _psd_fn(A, np.sqrt)
    ev = np.linalg.eigvalsh(Ah @ B @ Ah)
    return float(np.sqrt(np.clip(ev, 0.0, None)).sum())


def _geo_mean(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A^-1 # B = A^-1/2 (A^1/2 B A^1/2)^1/2 A^-1/2`` (so that W A W = B)."""
    Ah = _psd_fn(A, np.sqrt)
    Aih = _psd_fn(A, lambda w: 1.0 / np.sqrt(w), SPD_FLOOR)
    mid = _psd_fn(Ah @ B @ Ah, np.sqrt)
    return Aih @ mid @ Aih


def _geodesic(W: np.ndarray, Z: np.ndarray, t: float) -> np.ndarray:
    """``W #_t Z = W^1/2 (W^-1/2 Z W^-1/2)^t W^1/2`` on the SPD cone."""
    Wh = _psd_fn(W, np.sqrt)
    Wih = _psd_fn(W, lambda w: 1.0 / np.sqrt(w), SPD_FLOOR)
    inner = _psd_fn(Wih @ Z @ Wih, lambda w: w**t, SPD_FLOOR)
    out = Wh @ inner @ Wh
    return (out + out.T) / 2


@dataclass(frozen=True)
class KappaBracket:
    """Bracket on ``kappa(T)`` for ``T = X0 Y0^T`` (MATH.md section 3).

    ``upper``: radius product of the gauge-optimised factors ``X, Y`` (float);
    ``balanced``: the same without gauge optimisation (W = I); ``dual``: the
    best weighted-nuclear-norm lower bound met (float, weak duality);
    ``dd``: the double-difference bound / 4 (float); ``X``, ``Y``, centres
    ``cx``, ``cy``: the factors behind ``upper``; ``steps``: outer iterations.
    """

    upper: float
    balanced: float
    dual: float
    dd: float
    X: np.ndarray = field(repr=False)
    Y: np.ndarray = field(repr=False)
    cx: np.ndarray = field(repr=False)
    cy: np.ndarray = field(repr=False)
    steps: int = 0
    Wh: np.ndarray | None = field(default=None, repr=False)
    Wih: np.ndarray | None = field(default=None, repr=False)

    @property
    def lower(self) -> float:
        return max(self.dual, self.dd)


def kappa_factors(
    X0: np.ndarray, Y0: np.ndarray, *, dd: float | None = None, gap_rtol: float = GAUGE_GAP_RTOL
) -> KappaBracket:
    """Gauge-optimised MEB radius product for ``T = X0 Y0^T`` (J.1, D.1, F.1).

    Any gauge gives a valid upper bound ``R(X0 G) R(Y0 G^-T)``; the returned
    one is the best met. ``dd``: a precomputed double-difference value of T;
    ``gap_rtol``: stop once primal and dual agree to this relative gap (or
    after ``GAUGE_MAX_OUTER`` steps). Deterministic: bit-identical inputs give
    bit-identical outputs (BLAS limited to one thread by the callers).
    """
    X0 = np.asarray(X0, dtype=np.float64)
    Y0 = np.asarray(Y0, dtype=np.float64)
    m, r = X0.shape
    n = Y0.shape[0]
    # Translating X0 (Y0) by a constant row changes neither radii nor the
    # gauge problem; centred copies condition the Gram matrices. The returned
    # factors are the uncentred ones, so that X Y^T = X0 Y0^T still holds.
    X0raw, Y0raw = X0, Y0
    X0 = X0 - X0.mean(axis=0)
    Y0 = Y0 - Y0.mean(axis=0)
    if dd is None:
        dd = double_difference(X0 @ Y0.T)[0]
    if r == 0:
        z = np.zeros((m, 0))
        return KappaBracket(0.0, 0.0, 0.0, dd / 4, z, np.zeros((n, 0)), np.zeros(0), np.zeros(0))
    eye = np.eye(r)

    def evaluate(W, lx=None, ly=None):
        X = X0 @ _psd_fn(W, np.sqrt)
        Y = Y0 @ _psd_fn(W, lambda w: 1.0 / np.sqrt(w), SPD_FLOOR)
        if not (np.isfinite(X).all() and np.isfinite(Y).all()):
            return math.inf, W, lx, ly
        rx2, fx, lx = _meb_gram(X @ X.T, lx)
        ry2, fy, ly = _meb_gram(Y @ Y.T, ly)
        return math.sqrt(max(rx2, 0.0) * max(ry2, 0.0)), W, lx, ly

    val, _, lx, ly = evaluate(eye)
    balanced = val
    best = (val, eye, lx, ly)
    reg = GAUGE_REG * eye

    def dual_value(la, mu):
        return _nuclear_pair(_weighted_cov(X0, la), _weighted_cov(Y0, mu))

    def argmin_w(la, mu):
        A = _weighted_cov(X0, la)
        B = _weighted_cov(Y0, mu)
        tA, tB = np.trace(A) / r, np.trace(B) / r
        if not (tA > 0 and tB > 0):
            return None
        Z = _geo_mean(A / tA + reg, B / tB + reg)
        return Z / (np.trace(Z) / r)

    # Dual ascent with best responses (a Frank-Wolfe method on the concave
    # dual g(lam, mu)): W_k minimises the Lagrangian at the current weights,
    # the MEBs in the metrics W_k, W_k^-1 give the best responses, and an exact
    # line search on g moves the weights towards them. f(W_k) >= kappa >= g.
    la, mu = lx.copy(), ly.copy()
    dual = dual_value(la, mu)
    steps = 0
    for steps in range(1, GAUGE_MAX_OUTER + 1):
        if best[0] - dual <= gap_rtol * best[0]:
            break
        W = argmin_w(la, mu)
        if W is None:
            break
        cand = evaluate(W, lx, ly)
        _, _, lx, ly = cand
        if cand[0] < best[0]:
            best = cand
        if best[0] - dual <= gap_rtol * best[0]:
            break
        # golden-section line search for max_t g((1-t) la + t lx, (1-t) mu + t ly)
        def g_at(t, la=la, mu=mu, lx=lx, ly=ly):
            return dual_value((1 - t) * la + t * lx, (1 - t) * mu + t * ly)

        a, b = 0.0, 1.0
        gr = (math.sqrt(5.0) - 1.0) / 2.0
        c1, c2 = b - gr * (b - a), a + gr * (b - a)
        g1, g2 = g_at(c1), g_at(c2)
        for _ in range(GAUGE_LINE_STEPS):
            if g1 >= g2:
                b, c2, g2 = c2, c1, g1
                c1 = b - gr * (b - a)
                g1 = g_at(c1)
            else:
                a, c1, g1 = c1, c2, g2
                c2 = a + gr * (b - a)
                g2 = g_at(c2)
        t = c1 if g1 >= g2 else c2
        gt = max(g1, g2)
        if gt <= dual:
            break
        la, mu = (1 - t) * la + t * lx, (1 - t) * mu + t * ly
        dual = gt
    val, W, lx, ly = best
    Wh = _psd_fn(W, np.sqrt)
    Wih = _psd_fn(W, lambda w: 1.0 / np.sqrt(w), SPD_FLOOR)
    X = X0raw @ Wh
    Y = Y0raw @ Wih
    return KappaBracket(val, balanced, min(dual, val), dd / 4, X, Y, lx @ X, ly @ Y, steps, Wh, Wih)


# ---------------------------------------------------------------------------
# shape scores (diagnostics only)


def shape_score(kappa: float, tau: float, eps: float, r: int) -> float:
    """Prefactor-free log cover size ``(r/2) log(1 + kappa) - r log(eps - tau)``.

    Theorem 1's ``N_r(kappa, e)`` is of order ``kappa^(r/2)`` at fixed r and
    error e = eps - tau; the unknown constant C_r is dropped (set to one), so
    this is a *shape diagnostic*, never a certificate. ``inf`` when tau >= eps.

    >>> shape_score(0.0, 0.0, 1.0, 3)
    0.0
    """
    if not tau < eps:
        return math.inf
    return 0.5 * r * math.log1p(max(kappa, 0.0)) - r * math.log(eps - tau)


def intrinsic_profile_score(row: dict, eps: float) -> float:
    """Best prefactor-free shape score over the J.2 family in a descriptor row.

    Uses the same-T pairs (svd_r{r}_kappa, svd_r{r}_tau) and (kappa_upper, 0)
    at r = rank(C); 0.0 when tau0 <= eps (Theorem 1's rank-one branch).
    Values may be strings (a CSV row); missing or unparsable ones are skipped.

    >>> intrinsic_profile_score({"tau0": "0.1"}, 0.25)
    0.0
    """

    def num(key):
        try:
            v = float(row.get(key))
        except (TypeError, ValueError):
            return math.nan
        return v

    eps = float(eps)
    tau0 = num("tau0")
    if math.isfinite(tau0) and tau0 <= eps:
        return 0.0
    best = math.inf
    k, rank = num("kappa_upper"), num("c_rank")
    if math.isfinite(k) and math.isfinite(rank):
        best = shape_score(k, 0.0, eps, int(rank))
    for r in SVD_RANKS:
        k, t = num(f"svd_r{r}_kappa"), num(f"svd_r{r}_tau")
        if math.isfinite(k) and math.isfinite(t):
            best = min(best, shape_score(k, t, eps, r))
    return best


# ---------------------------------------------------------------------------
# rigorous versions


def _rowsq_max(A: "IntRat") -> Fraction:
    """``max_i sum_j A_ij^2`` exactly."""
    if A.num.size == 0:
        return Fraction(0)
    return Fraction(int((A.num * A.num).sum(axis=1).max()), A.den**2)


def _tail_bound(E: "IntRat") -> Fraction:
    """Rigorous upper bound on ``kappa(E)`` for an exact matrix E.

    Factor ``E = E I_n^T``: the rows of I_n lie on the sphere of radius
    ``sqrt((n-1)/n)`` about ``1/n``, and the rows of E in the ball of radius
    ``max_i |E_i|`` about 0 (or the same with columns).
    """
    m, n = E.num.shape
    sq = E.num * E.num
    e_row = Fraction(int(sq.sum(axis=1).max()), E.den**2)
    e_col = Fraction(int(sq.sum(axis=0).max()), E.den**2)
    return min(sqrt_up(e_row) * sqrt_up(Fraction(n - 1, n)), sqrt_up(e_col) * sqrt_up(Fraction(m - 1, m)))


def _kappa_cert(X0: np.ndarray, Y0: np.ndarray, kb: KappaBracket, tail: Fraction) -> Fraction:
    """Rigorous upper bound on ``kappa(T)`` given ``kappa(T - X0 Y0^T) <= tail``.

    ``kappa`` is subadditive (stack the factors of two summands, rescaled so
    that ``R(X)^2 <= a^2 R1^2 + b^2 R2^2`` and ``R(Y)^2 <= R1'^2/a^2 + R2'^2/b^2``;
    Cauchy-Schwarz gives ``R1 R1' + R2 R2'``). With the gauge factors taken
    exactly, ``X = X0 Wh`` and ``Y = Y0 Wih`` (m x r x r products, cheap), the
    rounding defect is ``X0 Y0^T - X Y^T = X0 D Y0^T`` with
    ``D = I - Wh Wih`` exact, and ``kappa(X0 D Y0^T) <= max|x0_i D| max|y0_j|``
    (radii about 0). Radii of X, Y are bounded from the float centres exactly.
    """
    r = X0.shape[1]
    if r == 0:
        return tail
    X0x, Y0x = IntRat.from_float(X0), IntRat.from_float(Y0)
    Whx, WihTx = IntRat.from_float(kb.Wh), IntRat.from_float(kb.Wih.T)
    Xx = X0x.matmul_t(IntRat.from_float(kb.Wh.T))
    Yx = Y0x.matmul_t(WihTx)
    rx2 = _rowsq_max(Xx - IntRat.from_float(kb.cx[None, :]))
    ry2 = _rowsq_max(Yx - IntRat.from_float(kb.cy[None, :]))
    D = IntRat.from_float(np.eye(r)) - Whx.matmul_t(WihTx)
    X0D = X0x.matmul_t(IntRat(D.num.T.copy(), D.den))
    defect = sqrt_up(_rowsq_max(X0D) * _rowsq_max(Y0x))
    return sqrt_up(rx2 * ry2) + defect + tail


# ---------------------------------------------------------------------------
# the per-cell entry point


def _check_inputs(logits, matrix) -> np.ndarray:
    if logits is None:
        if matrix is None:
            raise ValueError("cell_descriptors needs logits or a strictly positive matrix")
        A = np.asarray(matrix)
        if A.dtype != np.float64 or A.ndim != 2:
            raise ValueError(f"matrix must be a 2-D float64 array, got {A.dtype} with shape {A.shape}")
        if not np.isfinite(A).all() or (A <= 0).any():
            raise ValueError("matrix must be finite and strictly positive to take log A (pass logits)")
        return np.log(A)
    H = np.asarray(logits)
    if H.dtype != np.float64 or H.ndim != 2:
        raise ValueError(f"logits must be a 2-D float64 array, got {H.dtype} with shape {H.shape}")
    if H.size == 0:
        raise ValueError("logits are empty")
    if not np.isfinite(H).all():
        raise ValueError("logits contain NaN or Inf (masked entries are outside the common-support theorem)")
    if matrix is not None:
        A = np.asarray(matrix)
        if A.shape != H.shape:
            raise ValueError(f"matrix shape {A.shape} differs from logits shape {H.shape}")
    return H


def cell_descriptors(logits, matrix=None, *, ranks=SVD_RANKS, certify: bool = True, eps=None) -> dict:
    """The intrinsic profile of one cell as a flat dict of floats and ints.

    ``logits``, ``matrix``: float64 m x n with ``matrix = softmax_row(logits)``
    (matrix is only compared with the logits; pass ``logits=None`` to use
    ``log(matrix)``). Columns (MATH.md section 3, paper J.2):

    - ``q_residual``: q(C); ``tau0 = 2 tanh(q(C)/4)`` (Theorem 1's rank-one branch);
    - ``kappa_lower`` (double difference / 4), ``kappa_upper`` (gauge-optimised
      MEB radius product), ``kappa_dual`` (weighted nuclear norm, weak
      duality), ``kappa_balanced`` (no gauge), ``kappa_gap``;
    - ``c_rank``, ``c_sigma1``, ``c_frobenius``;
    - for r in ``ranks``: ``svd_r{r}_kappa`` (upper), ``svd_r{r}_kappa_lower``,
      ``svd_r{r}_tau`` = tau(T_r), ``svd_r{r}_shape = (r/2) log(1 + kappa)``;
      for r >= rank(C), T_r = C (tau 0);
    - with ``certify``: ``*_cert`` rigorous bounds (``q_residual_lower_cert``,
      ``q_residual_upper_cert``, ``tau0_lower_cert``, ``tau0_upper_cert``,
      ``kappa_lower_cert``, ``kappa_upper_cert``, ``svd_r{r}_tau_cert``,
      ``svd_r{r}_kappa_cert``): floats rounded outward from exact rationals;
    - with ``eps``: ``profile_score``, the best prefactor-free shape score.

    - ``canon_grid``, ``canon_margin``, ``kappa_resolved``, ``kappa_steps``:
      diagnostics of the computation (see :func:`canonical_interaction`).

    Gauge invariant: depends on the logits only through C. The size problems
    run on the canonical (rounded) C, so logits that differ by rounding (a
    dense gauge) give bit-identical size descriptors whenever C moves by less
    than ``canon_margin * max|C|``; problems solved on it are re-solved on C.
    """
    with one_blas_thread():
        return _cell_descriptors(logits, matrix, ranks=ranks, certify=certify, eps=eps)


def _cell_descriptors(logits, matrix, *, ranks, certify, eps) -> dict:
    t0 = time.perf_counter()
    H = _check_inputs(logits, matrix)
    m, n = H.shape
    out: dict = {"geom_m": m, "geom_n": n}
    if logits is not None and matrix is not None:
        A = np.asarray(matrix, dtype=np.float64)
        out["softmax_mismatch"] = row_l1_norm(softmax_rows(H) - A)
    C = visible_interaction(H)
    Cx = IntRat.from_float(H).double_centre() if certify else None

    q = residual_q(C, exact=Cx)
    out["q_residual"] = q.value
    out["tau0"] = tau_of_q(q.value)
    dd, idx = double_difference(C)
    out["kappa_lower"] = dd / 4.0

    U, s, Vt = np.linalg.svd(C, full_matrices=False)
    rank = int((s > s[0] * RANK_RTOL).sum()) if s.size and s[0] > 0 else 0
    # The size problems run on the canonical (rounded) C, truncated at the rank
    # of C itself, so that inputs differing by rounding give bit-identical
    # factors and optimiser paths (CANON_BITS); the exact tail C - X0 Y0^T in
    # the certificate pays for the rounding.
    Cr, grid, margin = canonical_interaction(C)
    out["canon_grid"] = grid
    out["canon_margin"] = margin
    Ur, sr, Vtr = np.linalg.svd(Cr, full_matrices=False)
    root = np.sqrt(sr[:rank])
    X0 = Ur[:, :rank] * root
    Y0 = Vtr[:rank].T * root
    kb = kappa_factors(X0, Y0, dd=dd)
    out["kappa_resolved"] = 0
    if rank and kb.upper - kb.dual <= GAUGE_CONVERGED_RTOL * kb.upper:
        # solved on the canonical input: the optimum is a property of C, so
        # re-solve on C's own factors to full accuracy (GAUGE_CONVERGED_RTOL).
        root = np.sqrt(s[:rank])
        X0, Y0 = U[:, :rank] * root, Vt[:rank].T * root
        kb = kappa_factors(X0, Y0, dd=dd, gap_rtol=GAUGE_EXACT_RTOL)
        out["kappa_resolved"] = 1
    out["kappa_upper"] = kb.upper
    out["kappa_dual"] = kb.dual
    out["kappa_balanced"] = kb.balanced
    out["kappa_gap"] = (kb.upper - kb.lower) / kb.upper if kb.upper > 0 else 0.0
    out["kappa_steps"] = kb.steps
    out["c_rank"] = rank
    out["c_sigma1"] = float(s[0]) if s.size else 0.0
    out["c_frobenius"] = float(np.sqrt((s**2).sum()))
    if certify:
        out["q_residual_lower_cert"] = float_down(q.lower)
        out["q_residual_upper_cert"] = float_up(q.upper)
        lo, hi = tanh_bounds(q.lower, q.upper)
        out["tau0_lower_cert"] = float_down(lo)
        out["tau0_upper_cert"] = float_up(hi)
        out["kappa_lower_cert"] = float_down(_dd_exact(Cx, idx) / 4)
        tail = _tail_bound(Cx - IntRat.from_float(X0).matmul_t(IntRat.from_float(Y0))) if rank else _tail_bound(Cx)
        out["kappa_upper_cert"] = float_up(_kappa_cert(X0, Y0, kb, tail))

    for r in ranks:
        key = f"svd_r{r}"
        if r >= rank:
            out[f"{key}_kappa"] = kb.upper
            out[f"{key}_kappa_lower"] = kb.lower
            out[f"{key}_tau"] = 0.0
            out[f"{key}_shape"] = 0.5 * rank * math.log1p(kb.upper)
            if certify:
                # the family member is T = C itself: q(C - C) = 0 exactly.
                out[f"{key}_tau_cert"] = 0.0
                out[f"{key}_kappa_cert"] = out["kappa_upper_cert"]
            continue
        # T_r: the rank-r truncated SVD of the canonical C (J.2); the same T
        # for size and residual (H.2), bit-identical for inputs that round alike.
        root_r = np.sqrt(sr[:r])
        Xr, Yr = Ur[:, :r] * root_r, Vtr[:r].T * root_r
        Tr = Xr @ Yr.T
        Rx = None
        if certify:
            Trx = IntRat.from_float(Xr).matmul_t(IntRat.from_float(Yr))
            Rx = Cx - Trx
        qr = residual_q(C - Tr, exact=Rx)
        kbr = kappa_factors(Xr, Yr)
        out[f"{key}_kappa"] = kbr.upper
        out[f"{key}_kappa_lower"] = kbr.lower
        out[f"{key}_tau"] = tau_of_q(qr.value)
        out[f"{key}_shape"] = 0.5 * r * math.log1p(kbr.upper)
        if certify:
            out[f"{key}_tau_cert"] = float_up(tanh_bounds(qr.lower, qr.upper)[1])
            out[f"{key}_kappa_cert"] = float_up(_kappa_cert(Xr, Yr, kbr, Fraction(0)))
    if eps is not None:
        out["profile_score"] = intrinsic_profile_score(out, float(eps))
    out["geometry_seconds"] = time.perf_counter() - t0
    return out


# ---------------------------------------------------------------------------
# exact integer arithmetic on dyadic floats (MATH.md "Exactness")

# float64 has a 53-bit significand: frexp's mantissa times 2**53 is an exact integer.
_MANT_BITS = 53


def _dyadic(a: np.ndarray) -> tuple[np.ndarray, int]:
    """Integers N (object array) and shift s with ``a == N * 2**s`` exactly."""
    a = np.asarray(a, dtype=np.float64)
    if not np.isfinite(a).all():
        raise ValueError("non-finite entry in an array that must be exact")
    mant, ex = np.frexp(a)
    mant = (mant * 2.0**_MANT_BITS).astype(np.int64)
    ex = ex.astype(np.int64) - _MANT_BITS
    nz = mant != 0
    s = int(ex[nz].min()) if nz.any() else 0
    shifts = np.where(nz, ex - s, 0).astype(object)
    return np.left_shift(mant.astype(object), shifts), s


@dataclass(frozen=True)
class IntRat:
    """An exact rational array ``num / den`` (num: object array of int, den > 0)."""

    num: np.ndarray
    den: int

    @classmethod
    def from_float(cls, a) -> "IntRat":
        """Exact image of a float64 array.

        >>> IntRat.from_float(np.array([0.5, 0.25])).fractions()
        [Fraction(1, 2), Fraction(1, 4)]
        """
        n, s = _dyadic(a)
        if s >= 0:
            return cls(n * (1 << s), 1)
        return cls(n, 1 << (-s))

    def rescale(self, den: int) -> np.ndarray:
        """Numerators over ``den`` (which must be a multiple of ``self.den``)."""
        if den % self.den:
            raise ValueError("denominator is not a multiple")
        f = den // self.den
        return self.num * f if f != 1 else self.num

    def __sub__(self, other: "IntRat") -> "IntRat":
        den = math.lcm(self.den, other.den)
        return IntRat(self.rescale(den) - other.rescale(den), den)

    def __add__(self, other: "IntRat") -> "IntRat":
        den = math.lcm(self.den, other.den)
        return IntRat(self.rescale(den) + other.rescale(den), den)

    def double_centre(self) -> "IntRat":
        """``P_m M P_n`` exactly (MATH.md section 3)."""
        m, n = self.num.shape
        rs = self.num.sum(axis=1)
        cs = self.num.sum(axis=0)
        tot = rs.sum()
        # mn C = mn H - m (row sums) - n (column sums) + total
        num = (m * n) * self.num - m * rs[:, None] - n * cs[None, :] + tot
        return IntRat(num, self.den * m * n)

    def matmul_t(self, other: "IntRat") -> "IntRat":
        """``self @ other.T`` exactly, through FLINT's fmpz_mat."""
        from flint import fmpz_mat

        a, b = self.num, other.num
        m, k = a.shape
        n, k2 = b.shape
        if k != k2:
            raise ValueError("inner dimensions differ")
        if k == 0:
            return IntRat(np.zeros((m, n), dtype=object) * 0, 1)
        fa = fmpz_mat(m, k, a.ravel().tolist())
        fb = fmpz_mat(n, k, b.ravel().tolist())
        prod = fa * fb.transpose()
        # Python ints: numpy object arithmetic mixing int and fmpz is ~25x slower
        num = np.array([int(x) for x in prod.entries()], dtype=object).reshape(m, n)
        return IntRat(num, self.den * other.den)

    def fractions(self) -> list:
        return [Fraction(int(x), self.den) for x in self.num.ravel()]


def float_down(q: Fraction) -> float:
    """Largest float64 not above ``q`` (Python's int division rounds correctly)."""
    f = q.numerator / q.denominator
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def float_up(q: Fraction) -> float:
    """Smallest float64 not below ``q``."""
    f = q.numerator / q.denominator
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def sqrt_up(q: Fraction, bits: int = 80) -> Fraction:
    """A rational upper bound on ``sqrt(q)`` (q >= 0), relative error about 2**-bits."""
    if q < 0:
        raise ValueError("negative")
    if q == 0:
        return Fraction(0)
    scale = 1 << (2 * bits)
    # sqrt(p/d) = sqrt(p*d)/d; isqrt gives floor, +1 makes it an upper bound.
    p, d = q.numerator, q.denominator
    num = p * d * scale
    return Fraction(math.isqrt(num) + 1, d * (1 << bits))


def sqrt_down(q: Fraction, bits: int = 80) -> Fraction:
    """A rational lower bound on ``sqrt(q)`` (q >= 0)."""
    if q <= 0:
        return Fraction(0)
    p, d = q.numerator, q.denominator
    return Fraction(math.isqrt(p * d * (1 << (2 * bits))), d * (1 << bits))


def tanh_bounds(q_lo: Fraction, q_hi: Fraction, prec: int = 128) -> tuple[Fraction, Fraction]:
    """Rigorous rational bounds ``lo <= 2 tanh(q/4) <= hi`` for q in [q_lo, q_hi] (arb).

    tanh is increasing, so the endpoints bound the whole interval.
    """
    from flint import arb, ctx, fmpq

    def _frac(x) -> Fraction:
        man, ex = x.man_exp()
        man, ex = int(man), int(ex)
        return Fraction(man * (1 << ex)) if ex >= 0 else Fraction(man, 1 << (-ex))

    with ctx.workprec(prec):
        lo = (arb(fmpq(q_lo.numerator, q_lo.denominator)) / 4).tanh() * 2
        hi = (arb(fmpq(q_hi.numerator, q_hi.denominator)) / 4).tanh() * 2
        return _frac(lo.lower()), _frac(hi.upper())

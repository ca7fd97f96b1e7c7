"""Identities and counterexamples: A.1, A.2/D.2, A.3, D.3, F.2, the all-N G.1/H.1 step.

Labels follow the paper's appendix headings. A.1, A.2, A.3, D.2 and D.3 are
headings only in ``../shared/paper.txt``; what is checked is the project's
reading, written in ``docs/proofs-checks.md``.
"""
from __future__ import annotations

import itertools
import random

import sympy as sp
from flint import arb, fmpq, fmpq_mat

from ._core import Recorder, centring, qmat, qstr, register, row1, arb_precision
from ._residual import contrast_bound, residual
from .geometry import meb_sq, rowspace_projector
from .grid import grid_points, neumann_gap

__all__ = ["theta_upper", "all_n_bound", "anchor", "two_bit", "sign_norm"]


def _rows(M: fmpq_mat):
    return [[M[i, j] for j in range(M.ncols())] for i in range(M.nrows())]


def _rq(rng, lo=-5, hi=5, den=3):
    return fmpq(rng.randint(lo, hi), rng.randint(1, den))


# ------------------------------------------------------------------ G.1 / H.1 for every N

#: Terms summed exactly before the geometric tail bound.
THETA_TERMS = 6


def theta_upper(beta, terms: int = THETA_TERMS, prec: int = 128) -> arb:
    """An arb upper bound on ``theta(beta) = sum_{t in Z} exp(-beta t^2)``.

    ``theta = 1 + 2 sum_{t>=1} exp(-beta t^2)``; for ``t >= T+1``, ``t^2 >= (T+1) t`` so the
    tail is at most ``exp(-beta (T+1)^2) / (1 - exp(-beta (T+1)))`` (a geometric series).
    """
    b = arb(fmpq(beta)) if not isinstance(beta, arb) else beta
    with arb_precision(prec):
        head = sum(((-b * t * t).exp() for t in range(1, terms + 1)), arb(0))
        T1 = terms + 1
        tail = (-b * T1 * T1).exp() / (1 - (-b * T1).exp())
        return 1 + 2 * (head + tail)


def all_n_bound(beta, r: int) -> arb:
    """``2 (1 - theta(beta)^-r)``: every row of every grid ``{0..N-1}^r`` has
    ``S_i = sum_j exp(-beta |x_i - x_j|^2) <= theta^r`` (a sub-sum of the lattice sum), so
    ``||A - I||_row1 = max_i 2 (1 - 1/S_i) <= 2 (1 - theta^-r)`` for every N."""
    with arb_precision(128):
        return 2 * (1 - 1 / theta_upper(beta) ** r)


def kappa_closed_form():
    """sympy: for symbolic N, r, beta the grid's kappa(C) bounds meet at beta r (N-1)^2 / 2.

    Lower: the rectangular contrast of C at opposite vertices x = 0 and x' = (N-1) 1 equals
    that of H (double centring removes only row and column terms), ``2 beta |x - x'|^2``,
    divided by 4. Upper: ``C = (sqrt(2 beta) Xc)(sqrt(2 beta) Xc)^T`` with both radii from the
    cube centre, ``R^2 = 2 beta r ((N-1)/2)^2``.
    """
    N, r, beta = sp.symbols("N r beta", positive=True)
    sq = lambda a, b: r * (a - b) ** 2  # |x - x'|^2 for x = a 1, x' = b 1
    H = lambda a, b: -beta * sq(a, b)
    contrast = H(0, 0) - H(0, N - 1) - H(N - 1, 0) + H(N - 1, N - 1)
    lower = sp.simplify(sp.Abs(contrast) / 4)
    upper = sp.simplify(2 * beta * r * ((N - 1) / 2) ** 2)
    return lower, upper, sp.simplify(beta * r * (N - 1) ** 2 / 2)


ALL_N_BETA, ALL_N_EPS, ALL_N_R = 4, fmpq(1, 4), (1, 2, 3)


def all_n_run(beta=ALL_N_BETA, eps=ALL_N_EPS, rs=ALL_N_R):
    """The check body (parametrised for the negative control)."""
    rec = Recorder()
    table = []
    for r in rs:
        b = all_n_bound(beta, r)
        rec.require(b < (1 - eps) / 2, f"r={r}: 2(1 - theta^-r) {b} not certainly < (1-eps)/2")
        # sanity, and a test of the bound itself: a finite grid's exact gap lies below it
        fin = neumann_gap(grid_points(3, r), beta)
        rec.require(fin <= b, f"r={r}: finite-grid gap {fin} above the all-N bound {b}")
        table.append({"r": r, "beta": beta, "2(1-theta^-r)<=": f"{float(b.mid()) + float(b.rad()):.6f}",
                      "(1-eps)/2": qstr((1 - eps) / 2)})
    lower, upper, formula = kappa_closed_form()
    rec.require(sp.simplify(lower - formula) == 0 and sp.simplify(upper - formula) == 0,
                f"kappa bounds {lower}, {upper} != beta r (N-1)^2/2")
    with arb_precision(128):
        th = theta_upper(beta)
    return (f"every N: ||A - I|| <= 2(1 - theta(beta)^-r) < (1-eps)/2 for r = {list(rs)} (arb, tail bound); "
            "kappa closed form symbolic",
            {"beta": beta, "eps": qstr(eps), "theta_upper": f"{float(th.mid()) + float(th.rad()):.12f}",
             "theta_terms": THETA_TERMS, "kappa(C)": str(formula)}, rec, table)


@register("G.1-all", "G.1/H.1 Neumann step for every N")
def check_all_n():
    """G.1/H.1 for every N: ``theta(beta) = sum_t exp(-beta t^2)`` bounded above with a
    geometric tail; ``2 (1 - theta^-r) < (1 - eps)/2`` (arb) for r = 1, 2, 3 at beta = 4,
    eps = 1/4, so every grid of every size has r_eps = n; kappa closed form in sympy."""
    return all_n_run()


# ------------------------------------------------------------------ A.1

#: The bounded values of A.1 (a negative control sets {0, 1}).
SIGN_VALUES = (-1, 1)


def sign_norm(M: fmpq_mat, values=None) -> fmpq:
    """``max_{V in {-1,1}^n} max_i |(M V)_i|``: the worst output error over sign values."""
    n = M.ncols()
    best = fmpq(0)
    for signs in itertools.product(SIGN_VALUES if values is None else values, repeat=n):
        for i in range(M.nrows()):
            v = sum((M[i, j] * s for j, s in enumerate(signs)), fmpq(0))
            best = max(best, abs(v))
    return best


def two_bit(t: fmpq, s: fmpq) -> fmpq_mat:
    """``A(t, s) = K(t) (x) K(s)``, ``K(t) = t I + (1 - t) J / 2`` (MATH.md section 4)."""
    def K(u):
        return [[u + (1 - u) / 2, (1 - u) / 2], [(1 - u) / 2, u + (1 - u) / 2]]
    a, b = K(t), K(s)
    return qmat([[a[i // 2][j // 2] * b[i % 2][j % 2] for j in range(4)] for i in range(4)])


WALSH = [[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 1, -1], [1, -1, -1, 1]]    # labels 00, 10, 01, 11


def walsh_truncations(t: fmpq, s: fmpq):
    """``A - B`` for B = A minus some Walsh components (B keeps the others): every such
    difference is a signed sum of projectors ``lambda_c w_c w_c^T / 4``."""
    lams = [fmpq(1), t, s, t * s]
    A = two_bit(t, s)
    out = []
    for drop in itertools.chain.from_iterable(itertools.combinations(range(4), k) for k in range(1, 4)):
        D = fmpq_mat(4, 4, [sum((lams[c] * WALSH[c][i] * WALSH[c][j] / 4 for c in drop), fmpq(0))
                            for i in range(4) for j in range(4)])
        out.append((drop, A, D))
    return out


#: The six cells' (t, s): MATH.md section 4 (the paper lists only the ranks).
TWO_BIT_TS = ((fmpq(3, 4), fmpq(1, 2)), (fmpq(3, 4), fmpq(3, 4)))


@register("A.1", "value-output identity")
def check_a1():
    """A.1 (project's reading): ``max_{V in {-1,1}^n} max_i |(M V)_i| = ||M||_row1``, exactly, on
    random rational M and on ``A - B`` for the two-bit matrices and their Walsh truncations B
    and ``B = (7/64) J``; the maximising V is the sign pattern of the worst row."""
    rec = Recorder()
    rng = random.Random(101)
    mats = []
    for _ in range(40):
        m, n = rng.randint(1, 5), rng.randint(1, 6)
        mats.append(("random", qmat([[_rq(rng, -7, 7, 5) for _ in range(n)] for _ in range(m)])))
    for t, s in TWO_BIT_TS:
        for drop, A, D in walsh_truncations(t, s):
            mats.append((f"A({t},{s})-B drop {drop}", D))
    A = two_bit(fmpq(3, 4), fmpq(3, 4))
    mats.append(("A(3/4,3/4) - 7/64 J", A - qmat([[fmpq(7, 64)] * 4] * 4)))
    for name, M in mats:
        rec.require(sign_norm(M) == row1(M), f"{name}: sign-value error {sign_norm(M)} != row1 {row1(M)}")
    err = row1(mats[-1][1])
    rec.require(err == fmpq(3, 4), f"A(3/4,3/4) - (7/64) J has error {err}, MATH.md says 3/4")
    return (f"{len(mats)} matrices: worst sign-value output error = row-l1 norm, exactly",
            {"matrices": len(mats), "two_bit_differences": len(mats) - 40, "A-7/64J": qstr(err)}, rec)


# ------------------------------------------------------------------ A.2 / D.2

def anchor(M) -> list[list]:
    """``M_ij - M_i0 - M_0j + M_00``: the anchored matrix (first row and column vanish)."""
    return [[M[i][j] - M[i][0] - M[0][j] + M[0][0] for j in range(len(M[0]))] for i in range(len(M))]


def enclosure_misses(H: fmpq_mat, C: fmpq_mat, prec: int = 128) -> list:
    """Entries (i, j) where the arb ball of ``P_m log(softmax_row(H)) P_n`` fails to contain
    the exact rational ``C_ij`` certainly, or is wider than 2^-100 (empty: all contained)."""
    m, n = H.nrows(), H.ncols()
    bad = []
    with arb_precision(prec):
        logA = []
        for i in range(m):
            e = [arb(H[i, j]).exp() for j in range(n)]
            Z = sum(e, arb(0))
            logA.append([(x / Z).log() for x in e])
        rm = [sum(row, arb(0)) / n for row in logA]
        cm = [sum((logA[i][j] for i in range(m)), arb(0)) / m for j in range(n)]
        gm = sum(rm, arb(0)) / m
        for i in range(m):
            for j in range(n):
                ball = logA[i][j] - rm[i] - cm[j] + gm
                if not ((ball - C[i, j]).contains(0) is True and ball.rad() < fmpq(1, 2 ** 100)):
                    bad.append((i, j))
    return bad


#: Added to every entry of the exact C before the containment test (a negative control moves it).
A2_C_OFFSET = fmpq(0)


@register("A.2", "anchored quotient and common base weights (D.2 identity)")
def check_a2():
    """A.2/D.2 (project's reading): for rational logits H, arb encloses
    ``P_m log(softmax_row(H)) P_n`` and every ball contains the exact ``C = P_m H P_n``;
    exactly, anchoring is blind to row and column terms: ``anchor(C) = anchor(H)``, and
    ``H - C`` is a row term plus a column term (the common base weights ``exp(b0)``)."""
    rec = Recorder()
    rng = random.Random(202)
    cases = 0
    for _ in range(12):
        m, n = rng.randint(2, 5), rng.randint(2, 5)
        H = qmat([[_rq(rng, -9, 9, 4) for _ in range(n)] for _ in range(m)])
        C = centring(m) * H * centring(n) + fmpq_mat(m, n, [A2_C_OFFSET] * (m * n))
        bad = enclosure_misses(H, C)
        rec.require(not bad, f"entries {bad[:3]}: the arb ball of P log A P does not contain C")
        Hr, Cr = _rows(H), _rows(C)
        rec.require(anchor(Cr) == anchor(Hr), "anchor(C) = anchor(H) exactly")
        Rm = [[Hr[i][j] - Cr[i][j] for j in range(n)] for i in range(m)]
        rec.require(all(v == 0 for row in anchor(Rm) for v in row), "H - C = a 1^T + 1 b0^T exactly")
        # C is recovered from the anchored matrix by centring
        Am = qmat(anchor(Hr))
        rec.require(centring(m) * Am * centring(n) == C, "C = P anchor(H) P")
        cases += 1
    return (f"{cases} rational-logit instances: arb P log A P contains exact P H P; anchoring identity exact",
            {"instances": cases, "ball_radius_below": "2^-100"}, rec)


# ------------------------------------------------------------------ A.3

def shift_candidates(H: fmpq_mat):
    """Row and column terms ``(a, b)`` to try: none, row and column means, every anchoring at a
    pivot (i0, j0) (``a_i = H_{i j0}``, ``b_j = H_{i0 j} - H_{i0 j0}``), and 6 seeded random
    rational pairs. The search is not told C."""
    m, n = H.nrows(), H.ncols()
    yield "none", [fmpq(0)] * m, [fmpq(0)] * n
    rm = [sum((H[i, j] for j in range(n)), fmpq(0)) / n for i in range(m)]
    yield "row means", rm, [fmpq(0)] * n
    if A3_ANCHORS:
        for i0 in range(m):
            for j0 in range(n):
                yield f"anchor({i0},{j0})", [H[i, j0] for i in range(m)], [H[i0, j] - H[i0, j0] for j in range(n)]
    rng = random.Random(m * 31 + n)
    for t in range(6):
        yield f"random{t}", [_rq(rng) for _ in range(m)], [_rq(rng) for _ in range(n)]


#: Whether the search tries the anchorings (a negative control removes them).
A3_ANCHORS = True


def minimal_dimension(H: fmpq_mat):
    """The least latent dimension k of a realisation ``H = Q K^T + a 1^T + 1 b^T``, by search.

    Upper bound: ``min rank(H - a 1^T - 1 b^T)`` over :func:`shift_candidates` (each is a
    realisation with Q, K from a rank factorisation). Lower bound (the lemma): ``P_m`` and
    ``P_n`` annihilate ``a 1^T`` and ``1 b^T``, so every realisation has
    ``k >= rank(Q K^T) >= rank(P (Q K^T) P) = rank(P H P)``. Returns (upper, lower, where).
    """
    m, n = H.nrows(), H.ncols()
    best, where = None, None
    for name, a, b in shift_candidates(H):
        k = (H - fmpq_mat(m, n, [a[i] + b[j] for i in range(m) for j in range(n)])).rank()
        if best is None or k < best:
            best, where = k, name
    lower = (centring(m) * H * centring(n)).rank()
    return best, lower, where


def _a3_instance(rng, m, n, c):
    """An instance whose interaction is U V^T (rank c) hidden under random row and column terms."""
    U = qmat([[_rq(rng) for _ in range(c)] for _ in range(m)])
    V = qmat([[_rq(rng) for _ in range(c)] for _ in range(n)])
    a = [_rq(rng) for _ in range(m)]
    b = [_rq(rng) for _ in range(n)]
    H = U * V.transpose() + fmpq_mat(m, n, [a[i] + b[j] for i in range(m) for j in range(n)])
    C = centring(m) * U * V.transpose() * centring(n)
    return H + A3_EXTRA(m, n), C


#: A term added to the logits after C is fixed (a negative control adds a non-row/column term).
A3_EXTRA = lambda m, n: fmpq_mat(m, n)


@register("A.3", "exact visible dimension is rank C")
def check_a3():
    """A.3 (project's reading): the least latent dimension of a realisation
    ``H = Q K^T + a 1^T + 1 b^T`` (row and column terms are invisible to softmax rows and to C)
    is rank C. For 100 instances (rank 1 to 3 interactions hidden under random row and column
    terms) :func:`minimal_dimension` searches the shifts without being told C: its best
    realisation's dimension (upper) meets the lemma's lower bound ``rank(P H P)``, and both
    equal the rank of the C the instance was built from, while ``rank H`` exceeds it."""
    rec = Recorder()
    rng = random.Random(303)
    jumps = trials = 0
    found: dict[str, int] = {}
    for _ in range(100):
        m, n, c = rng.randint(3, 6), rng.randint(3, 6), rng.randint(1, 3)
        H, C = _a3_instance(rng, m, n, c)
        upper, lower, where = minimal_dimension(H)
        rc = C.rank()
        rec.require(upper == lower, f"{m}x{n}: searched dimension {upper} above the lower bound {lower}")
        rec.require(upper == rc, f"{m}x{n}: minimal dimension {upper} != rank C = {rc}")
        found[where.split("(")[0]] = found.get(where.split("(")[0], 0) + 1
        jumps += H.rank() > rc
        trials += 1
    rec.require(jumps > 0, "no instance had rank H > rank C (the check would be vacuous)")
    return (f"{trials} instances: searched minimal latent dimension = lower bound rank(PHP) = rank C; "
            f"rank H > rank C in {jumps}",
            {"instances": trials, "rank_H_above_rank_C": jumps, "best_shift_found_by": found}, rec)


# ------------------------------------------------------------------ D.3

#: D.3's shifts (a negative control replaces one by a term that is not a shift).
D3_ROW_SHIFT = lambda a1, a2: sp.Matrix([[a1, a1], [a2, a2]])
D3_COL_SHIFT = lambda b1, b2: sp.Matrix([[b1, b2], [b1, b2]])


@register("D.3", "why centring matters")
def check_d3():
    """D.3 (project's reading), sympy: ``H = Q K^T`` with Q = K = (1, -1)^T. A row shift
    ``H + a 1^T`` leaves A unchanged (and a column shift changes A only by base weights); in
    both the centred C, its kappa and its top singular direction stay put, while the
    uncentred radius product (norms about the origin) and the uncentred SVD selection move."""
    rec = Recorder()
    a1, a2, b1, b2 = sp.symbols("a1 a2 b1 b2", real=True)
    Q = sp.Matrix([[1], [-1]])
    H = Q * Q.T
    P = sp.eye(2) - sp.ones(2, 2) / 2

    def softmax(M):
        E = M.applyfunc(sp.exp)
        return sp.Matrix(2, 2, lambda i, j: E[i, j] / (E[i, 0] + E[i, 1]))

    Hr = H + D3_ROW_SHIFT(a1, a2)                         # row shift a 1^T
    Hc = H + D3_COL_SHIFT(b1, b2)                         # column shift 1 b^T
    rec.require(sp.simplify(softmax(Hr) - softmax(H)) == sp.zeros(2, 2), "row shift: A unchanged")
    rec.require(sp.simplify(P * Hr * P - P * H * P) == sp.zeros(2, 2), "row shift: C unchanged")
    rec.require(sp.simplify(P * Hc * P - P * H * P) == sp.zeros(2, 2), "column shift: C unchanged")
    C = P * H * P
    kappa = sp.Abs(C[0, 0] - C[0, 1] - C[1, 0] + C[1, 1]) / 4
    rec.require(sp.simplify(kappa - 1) == 0, "kappa(C) = 1 (contrast), attained by Q, K radii 1")
    # Uncentred radius product: the shifted head is realised as Q' = [Q | a], K' = [K | 1].
    at = {a1: 3, a2: 3}
    Qs, Ks = sp.Matrix([[1, 3], [-1, 3]]), sp.Matrix([[1, 1], [-1, 1]])
    rec.require(Qs * Ks.T == Hr.subs(at), "Q' K'^T realises the row-shifted logits")
    norm_prod = lambda X, Y: sp.sqrt(max((X.row(i) * X.row(i).T)[0] for i in range(2))) * \
        sp.sqrt(max((Y.row(i) * Y.row(i).T)[0] for i in range(2)))
    before, after = norm_prod(Q, Q), norm_prod(Qs, Ks)
    rec.require(before == 1 and sp.simplify(after - 2 * sp.sqrt(5)) == 0,
                f"uncentred radius product moves: {before} -> {after}")
    # the centred (minimum-enclosing-ball) radii of Q', K' give back kappa = 1
    rq = meb_sq([[fmpq(1), fmpq(3)], [fmpq(-1), fmpq(3)]])
    rk = meb_sq([[fmpq(1), fmpq(1)], [fmpq(-1), fmpq(1)]])
    rec.require(rq * rk == 1, f"centred radii product^2 {rq * rk} = kappa^2 = 1")
    # uncentred SVD selection: the top right singular vector of H is (1,-1)/sqrt2; of the
    # row-shifted H it moves; C's stays.
    def top_vec(M):
        vals = sorted(((v, vecs[0]) for v, _, vecs in (M.T * M).eigenvects()), key=lambda t: -t[0])
        rec.require(bool(vals[0][0] > vals[1][0]) if len(vals) > 1 else True, "strict top eigenvalue")
        v = vals[0][1]
        return sp.simplify(v / sp.sqrt((v.T * v)[0]))
    v0, v1 = top_vec(H), top_vec(Hr.subs(at))
    vc0, vc1 = top_vec(P * H * P), top_vec(P * Hr.subs(at) * P)
    parallel = lambda u, w: sp.simplify(u[0] * w[1] - u[1] * w[0]) == 0
    rec.require(not parallel(v0, v1), f"uncentred SVD direction moves: {list(v0)} -> {list(v1)}")
    rec.require(parallel(vc0, vc1), "centred SVD direction stays put")
    return ("row shift: A, C, kappa fixed; uncentred radius product 1 -> 2 sqrt 5 and uncentred "
            "SVD direction moves",
            {"kappa(C)": "1", "uncentred_radius_product": ["1", "2*sqrt(5)"],
             "uncentred_top_direction": [str(list(v0)), str(list(v1))]}, rec)


# ------------------------------------------------------------------ F.2

def _coord_projectors(k: int):
    for size in range(1, k + 1):
        for S in itertools.combinations(range(k), size):
            yield f"coords{S}", fmpq_mat(k, k, [fmpq(int(i == j and i in S)) for i in range(k) for j in range(k)])


#: F.2's factor scale error and the native subspace used for the residual (negative controls).
F2_BETA_ERROR = fmpq(0)
F2_NATIVE_W = lambda PW, k: PW


@register("F.2", "every native retained subspace gives a feasible intrinsic candidate")
def check_f2():
    """F.2 (project's reading): random rational Q, K, beta; for every coordinate subspace W and
    random orthogonal ones, ``T_W = P (beta Q P_W K^T) P`` factors as ``(P Q P_W)(beta P K P_W)^T``
    exactly, so ``kappa(T_W) <= beta R(Q P_W) R(K P_W)`` (exact minimum enclosing balls; the
    contrast lower bound sits below it), and ``q(C - T_W)`` equals the native residual
    ``q(H - beta Q P_W K^T)`` exactly (row and column terms do not change q)."""
    rec = Recorder()
    rng = random.Random(404)
    cases = 0
    for _ in range(6):
        m, n, k = rng.randint(2, 4), rng.randint(2, 4), rng.randint(2, 3)
        beta = fmpq(rng.randint(1, 5), rng.randint(1, 3))
        Q = qmat([[_rq(rng) for _ in range(k)] for _ in range(m)])
        K = qmat([[_rq(rng) for _ in range(k)] for _ in range(n)])
        H = Q * K.transpose() * beta
        Pm, Pn = centring(m), centring(n)
        C = Pm * H * Pn
        Ws = list(_coord_projectors(k))
        for t in range(2):
            B = qmat([[_rq(rng) for _ in range(k)] for _ in range(rng.randint(1, k - 1))])
            Ws.append((f"random{t}", rowspace_projector(B)))
        for name, PW in Ws:
            TW = Pm * (Q * PW * K.transpose() * beta) * Pn
            X, Y = Pm * Q * PW, Pn * K * PW * (beta + F2_BETA_ERROR)
            rec.require(X * Y.transpose() == TW, f"{name}: T_W = (P Q P_W)(beta P K P_W)^T")
            rx, ry = meb_sq(_rows(Q * PW)), meb_sq(_rows(K * PW))
            rec.require(meb_sq(_rows(X)) == rx and meb_sq(_rows(Y)) == beta * beta * ry,
                        f"{name}: radii are translation invariant (exact MEB)")
            lower = contrast_bound(_rows(TW)) / 2          # max |contrast| / 4
            rec.require(lower * lower <= beta * beta * rx * ry,
                        f"{name}: contrast lower bound {lower} above beta R R")
            native = H - Q * F2_NATIVE_W(PW, k) * K.transpose() * beta
            q1, q2 = residual(_rows(C - TW)).q, residual(_rows(native)).q
            rec.require(q1 == q2, f"{name}: q(C - T_W) = {q1} != native residual {q2}")
            cases += 1
    return (f"{cases} (instance, W) pairs: kappa(T_W) <= beta R(QP_W) R(KP_W) by exact MEB; "
            "q(C - T_W) = native residual",
            {"pairs": cases}, rec)

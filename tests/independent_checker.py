"""An independent certificate checker written with ``fractions.Fraction`` alone.

It re-implements MATH.md section 2 from the text, without importing flint,
numpy or ``exact``, so that the differential tests compare two checkers that
share no code. Matrices are lists of rows of ``Fraction``.

Every check returns a ``Judgement``: ``verified``, the exact ``margin`` of the
deciding inequality (``None`` when the check stopped before it), and the
``stage`` that decided (``shape``, ``rank``, ``basis``, ``eta``, ``final``,
``ok``). The margin conventions are the ones MATH.md implies:

* upper factors (K.1): ``eps - ||A - P Q^T||_row1``, verified when ``>= 0``;
* trivial lower: rank 0 always; rank 1 with margin ``||A||_row1 - eps > 0``;
* reconstruction (K.3) and its row side: ``1 - eta - ||R|| eps > 0``;
* odd map (MATH.md section 2, Borsuk-Ulam): ``min s (a_i . x_S) - eps > 0``
  over the facet label sets S of the subdivided cross-polytope, built here
  from the cross-polytope's faces (sets of signed coordinates);
* Frobenius tail (K.2): a rigorous enclosure of the top-k singular energy
  from the exact characteristic polynomial of ``A^T A`` (Faddeev-LeVerrier)
  and Descartes' rule of signs, which is exact for real-rooted polynomials.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

__all__ = ["Judgement", "fractions_of", "matmul", "transpose", "sub", "identity", "row_l1",
           "frobenius_sq", "check_factors", "check_trivial_upper", "check_trivial_lower",
           "check_reconstruction", "check_row_reconstruction", "top_energy_enclosure",
           "odd_map_vertices", "odd_map_label_sets", "check_odd_map",
           "frobenius_judgement", "charpoly", "count_above", "eigenvalue_enclosures",
           "solve", "min_l1_row", "lp_optimal_R", "pseudo_inverse", "kron", "bsc", "two_bit", "WALSH", "walsh_basis"]


@dataclass(frozen=True)
class Judgement:
    verified: bool
    margin: Fraction | None
    stage: str


def fractions_of(rows) -> list[list[Fraction]]:
    """Rows of ints, floats (exactly), strings or Fractions as Fractions."""
    out = []
    for r in rows:
        row = []
        for x in r:
            if isinstance(x, float):
                row.append(Fraction(*x.as_integer_ratio()))
            else:
                row.append(Fraction(x))
        out.append(row)
    return out


def shape(M) -> tuple[int, int]:
    return (len(M), len(M[0]) if M else 0)


def matmul(A, B):
    if shape(A)[1] != shape(B)[0]:
        raise ValueError("shapes do not multiply")
    Bt = transpose(B)
    return [[sum((a * b for a, b in zip(row, col)), Fraction(0)) for col in Bt] for row in A]


def transpose(A):
    return [list(col) for col in zip(*A)]


def sub(A, B):
    return [[a - b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]


def identity(n):
    return [[Fraction(int(i == j)) for j in range(n)] for i in range(n)]


def row_l1(M) -> Fraction:
    """``||M||_row1 = max_i sum_j |M_ij|`` (MATH.md section 1)."""
    return max(sum((abs(x) for x in row), Fraction(0)) for row in M)


def frobenius_sq(M) -> Fraction:
    return sum((x * x for row in M for x in row), Fraction(0))


# ---------------------------------------------------------------- upper side
def check_factors(A, P, Q, eps: Fraction, rank: int) -> Judgement:
    """K.1: ``||A - P Q^T||_row1 <= eps`` proves ``r_eps(A) <= k`` (k = columns of P)."""
    m, n = shape(A)
    k = shape(P)[1]
    if rank < 0 or rank > min(m, n):
        return Judgement(False, None, "rank")
    if len(P) != m or len(Q) != n or any(len(row) != k for row in P + Q):
        return Judgement(False, None, "shape")
    if k != rank:
        return Judgement(False, None, "rank")
    B = matmul(P, transpose(Q)) if k > 0 else [[Fraction(0)] * n for _ in range(m)]   # k = 0: B = 0
    margin = eps - row_l1(sub(A, B))
    return Judgement(margin >= 0, margin, "final")


def check_trivial_upper(A, eps: Fraction, rank: int) -> Judgement:
    """B = A: ``r_eps(A) <= min(m, n)``."""
    return Judgement(rank == min(shape(A)), None, "final")


# ---------------------------------------------------------------- lower side
def check_trivial_lower(A, eps: Fraction, rank: int) -> Judgement:
    """Rank 0 always; rank 1 iff ``eps < ||A||_row1`` (the only rank-0 B is 0)."""
    if rank == 0:
        return Judgement(True, None, "final")
    if rank != 1 or rank > min(shape(A)):
        return Judgement(False, None, "rank")
    margin = row_l1(A) - eps
    return Judgement(margin > 0, margin, "final")


def _defect_and_final(norm_E, norm_L, norm_F, norm_R, eps) -> Judgement:
    if norm_F >= 1:
        return Judgement(False, None, "basis")
    eta = norm_E * norm_L / (1 - norm_F)
    if eta >= 1:
        return Judgement(False, None, "eta")
    margin = 1 - eta - norm_R * eps
    return Judgement(margin > 0, margin, "final")


def check_reconstruction(A, R, X, L, eps: Fraction, rank: int) -> Judgement:
    """K.3: ``E = R A X - X``, ``F = L X - I``, ``eta = ||E|| ||L|| / (1 - ||F||)``,
    then ``||R|| eps < 1 - eta`` proves ``r_eps(A) >= d``."""
    m, n = shape(A)
    d = shape(X)[1]
    if rank < 0 or rank > min(m, n):
        return Judgement(False, None, "rank")
    if shape(R) != (n, m) or shape(X)[0] != n or shape(L) != (d, n):
        return Judgement(False, None, "shape")
    if d != rank:
        return Judgement(False, None, "rank")
    E = sub(matmul(R, matmul(A, X)), X)
    F = sub(matmul(L, X), identity(d))
    return _defect_and_final(row_l1(E), row_l1(L), row_l1(F), row_l1(R), eps)


def check_row_reconstruction(A, G, Z, M, eps: Fraction, rank: int) -> Judgement:
    """Row side: ``E = Z^T A G - Z^T``, ``F = M Z - I``,
    ``eta = ||E|| ||M^T|| / (1 - ||F^T||)``, then ``||G|| eps < 1 - eta``."""
    m, n = shape(A)
    d = shape(Z)[1]
    if rank < 0 or rank > min(m, n):
        return Judgement(False, None, "rank")
    if shape(G) != (n, m) or shape(Z)[0] != m or shape(M) != (d, m):
        return Judgement(False, None, "shape")
    if d != rank:
        return Judgement(False, None, "rank")
    Zt = transpose(Z)
    E = sub(matmul(matmul(Zt, A), G), Zt)
    F = sub(matmul(M, Z), identity(d))
    return _defect_and_final(row_l1(E), row_l1(transpose(M)), row_l1(transpose(F)), row_l1(G), eps)


# ------------------------------------------------------------ odd map
def odd_map_vertices(d: int) -> list[tuple]:
    """The faces of the d-cross-polytope boundary (nonempty sets of signed coordinates, one sign per
    coordinate), each written as its sign vector, sorted: the vertices of the barycentric subdivision."""
    from itertools import combinations, product
    out = []
    for size in range(1, d + 1):
        for coords in combinations(range(d), size):
            for signs in product((1, -1), repeat=size):
                v = [0] * d
                for c, s in zip(coords, signs):
                    v[c] = s
                out.append(tuple(v))
    return sorted(out)


def odd_map_label_sets(labels, d: int) -> list[tuple]:
    """The distinct label sets of the maximal chains f_1 < ... < f_d of cross-polytope faces, sorted."""
    from itertools import permutations, product
    index = {v: k for k, v in enumerate(odd_map_vertices(d))}
    sets = set()
    for full in product((1, -1), repeat=d):                # a facet of the cross-polytope
        for order in permutations(range(d)):               # a flag of its faces
            labs = set()
            for size in range(1, d + 1):
                face = tuple(full[c] if c in order[:size] else 0 for c in range(d))
                labs.add(labels[index[face]])
            sets.add(tuple(sorted(labs)))
    return sorted(sets)


def check_odd_map(A, labels, points, eps: Fraction, rank: int) -> Judgement:
    """Odd map (MATH.md section 2): odd labels (row, sign) on the subdivided d-cross-polytope, a point
    x_S in [-1,1]^n per facet label set S, ``s (a_i . x_S) > eps`` for every (i, s) in S proves d."""
    m, n = shape(A)
    if rank < 0 or rank > min(m, n):
        return Judgement(False, None, "rank")
    d = next((k for k in range(1, 12) if 3**k - 1 == len(labels)), None)
    if d is None:
        return Judgement(False, None, "shape")
    if d != rank:
        return Judgement(False, None, "rank")
    verts = odd_map_vertices(d)
    index = {v: k for k, v in enumerate(verts)}
    for v, (i, s) in zip(verts, labels):
        if not (0 <= i < m and s in (1, -1)):
            return Judgement(False, None, "labels")
        if labels[index[tuple(-c for c in v)]] != (i, -s):
            return Judgement(False, None, "odd")
    sets = odd_map_label_sets(labels, d)
    if len(points) != len(sets) or any(len(x) != n for x in points):
        return Judgement(False, None, "shape")
    if any(abs(t) > 1 for x in points for t in x):
        return Judgement(False, None, "box")
    low = min(s * sum((a * t for a, t in zip(A[i], x)), Fraction(0)) for S, x in zip(sets, points) for i, s in S)
    margin = low - eps
    return Judgement(margin > 0, margin, "final")


# ------------------------------------------------------------ Frobenius tail
def charpoly(S) -> list[Fraction]:
    """Coefficients ``c[0..n]`` of ``det(x I - S) = sum c[i] x^(n-i)`` (Faddeev-LeVerrier, exact)."""
    n = len(S)
    coeffs = [Fraction(1)]
    M = [[Fraction(0)] * n for _ in range(n)]
    I = identity(n)
    for k in range(1, n + 1):
        M = [[a + coeffs[-1] * b for a, b in zip(rm, ri)] for rm, ri in zip(matmul(S, M) if k > 1 else M, I)]
        AM = matmul(S, M)
        coeffs.append(-sum((AM[i][i] for i in range(n)), Fraction(0)) / k)
    return coeffs


def _taylor_shift(coeffs, x: Fraction) -> list[Fraction]:
    """Coefficients (highest first) of ``p(t + x)`` for ``p`` with coefficients ``coeffs`` (highest first)."""
    c = list(coeffs)
    n = len(c) - 1
    for i in range(n):                     # repeated synthetic division (Horner)
        for j in range(1, n + 1 - i):
            c[j] += x * c[j - 1]
    return c


def count_above(coeffs, x: Fraction) -> int:
    """Roots of the real-rooted polynomial ``coeffs`` strictly above ``x``, with multiplicity.

    Descartes' rule of signs counts positive roots of ``p(t + x)`` exactly when
    every root is real (the polynomial is a characteristic polynomial of a
    symmetric matrix); roots at ``x`` itself show as trailing zero coefficients.
    """
    signs = [v > 0 for v in _taylor_shift(coeffs, x) if v != 0]
    return sum(a != b for a, b in zip(signs, signs[1:]))


def eigenvalue_enclosures(S, k: int, steps: int = 48) -> list[tuple[Fraction, Fraction]]:
    """``[lo_i, hi_i]`` containing ``lambda_i(S)`` for the k largest eigenvalues of a symmetric PSD S."""
    coeffs = charpoly(S)
    top = sum((abs(x) for row in S for x in row), Fraction(0)) + 1   # > every eigenvalue
    out = []
    for i in range(1, k + 1):
        lo, hi = Fraction(-1), top          # invariant: count_above(lo) >= i > count_above(hi)
        for _ in range(steps):
            mid = (lo + hi) / 2
            if count_above(coeffs, mid) >= i:
                lo = mid
            else:
                hi = mid
        out.append((lo, hi))
    return out


def top_energy_enclosure(A, k: int, steps: int = 48) -> tuple[Fraction, Fraction]:
    """``lo <= sum_{i<=k} sigma_i(A)^2 <= hi``, rigorously."""
    if k == 0:
        return Fraction(0), Fraction(0)
    At = transpose(A)
    S = matmul(At, A) if len(A[0]) <= len(A) else matmul(A, At)
    enc = eigenvalue_enclosures(S, k, steps)
    return sum((max(lo, Fraction(0)) for lo, _ in enc), Fraction(0)), sum((hi for _, hi in enc), Fraction(0))


def frobenius_judgement(A, k: int, eps: Fraction) -> tuple[bool, bool]:
    """K.2 decided independently: ``(surely_true, surely_false)`` for ``F_k(A)^2 > m eps^2``."""
    m = len(A)
    lo, hi = top_energy_enclosure(A, k)
    total = frobenius_sq(A)
    need = m * eps * eps
    return total - hi > need, total - lo <= need


# ------------------------------------------- exact witness constructions (tests' own)
def solve(M, b) -> list[Fraction] | None:
    """The solution y of the square system ``M y = b`` (Gauss-Jordan in Fractions), None if singular."""
    n = len(M)
    T = [list(row) + [bi] for row, bi in zip(M, b)]
    for c in range(n):
        p = next((r for r in range(c, n) if T[r][c] != 0), None)
        if p is None:
            return None
        T[c], T[p] = T[p], T[c]
        T[c] = [x / T[c][c] for x in T[c]]
        for r in range(n):
            if r != c and T[r][c] != 0:
                f = T[r][c]
                T[r] = [x - f * y for x, y in zip(T[r], T[c])]
    return [T[r][n] for r in range(n)]


def min_l1_row(M, b) -> list[Fraction]:
    """``argmin ||r||_1`` subject to ``r M = b`` (M is m x d of full column rank), exactly.

    The problem is an LP; an optimum is a basic solution with at most d nonzero
    entries, so enumerating the d-subsets S with ``M[S]`` invertible and
    solving ``r_S M[S] = b`` finds it (fine for the 4 x 4 oracles).
    """
    from itertools import combinations
    m, d = shape(M)
    best = None
    for S in combinations(range(m), d):
        MS_T = transpose([M[i] for i in S])          # M[S]^T r_S = b^T
        rs = solve(MS_T, b)
        if rs is None:
            continue
        r = [Fraction(0)] * m
        for i, v in zip(S, rs):
            r[i] = v
        if best is None or sum(map(abs, r)) < sum(map(abs, best)):
            best = r
    if best is None:
        raise ValueError("M is not of full column rank")
    return best


def lp_optimal_R(A, X):
    """The LP-optimal R on ``W = range X`` (MATH.md K.3): row i minimises ``||r||_1`` with ``r (A X) = X[i, :]``.

    Its norm is exactly ``1 / gamma(W)``."""
    AX = matmul(A, X)
    return [min_l1_row(AX, X[i]) for i in range(len(X))]


def pseudo_inverse(X):
    """``X^+ = (X^T X)^-1 X^T`` for X of full column rank, exactly."""
    Xt = transpose(X)
    G = matmul(Xt, X)
    d = len(G)
    cols = [solve(G, [Fraction(int(i == j)) for i in range(d)]) for j in range(d)]
    return matmul(transpose(cols), Xt)


def kron(A, B):
    return [[a * b for a in ra for b in rb] for ra in A for rb in B]


def bsc(t) -> list[list[Fraction]]:
    """``K(t) = t I_2 + (1 - t) J_2 / 2``, eigenvalues 1 and t (MATH.md section 4)."""
    t = Fraction(t)
    return [[(1 + t) / 2, (1 - t) / 2], [(1 - t) / 2, (1 + t) / 2]]


def two_bit(t, s):
    """``A(t, s) = K(t) (x) K(s)``; index ``2a + b`` for the t-bit a and the s-bit b."""
    return kron(bsc(t), bsc(s))


#: Walsh characters of the two-bit cube, by the eigenvalue they carry: ``chi_uv(a, b) = (-1)^(ua + vb)``.
WALSH = {"1": [1, 1, 1, 1], "s": [1, -1, 1, -1], "t": [1, 1, -1, -1], "ts": [1, -1, -1, 1]}


def walsh_basis(*names) -> list[list[Fraction]]:
    """The 4 x d matrix whose columns are the named Walsh characters."""
    return [[Fraction(WALSH[nm][i]) for nm in names] for i in range(4)]

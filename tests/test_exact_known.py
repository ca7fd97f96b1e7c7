"""Known answers: every certificate kind on matrices whose r_eps is known exactly.

Identity, rank-one, block-diagonal, the 2 x 2 closed form, the two-bit oracle
(MATH.md section 4, all six closing cells and A(3/4, 3/4) at eps = 5/8 with
its norm-4/3 reconstruction witness), the Frobenius tail, the row side, and
the target slack of softmax targets (K.5). Each true claim is verified with
the exact margin the mathematics predicts, each false one refused.
"""
from __future__ import annotations

import math
from fractions import Fraction as Fr

import mpmath
import numpy as np
import pytest
from flint import arb, fmpq

from exact.certificates import (FrobeniusTail, ReconstructionWitness, RowReconstructionWitness, TrivialLower,
                                TrivialUpper, UpperFactors, check_lower, check_upper)
from exact.matrix import ExactMatrix
from exact.frobenius import top_energy_upper_bound
from exact.slack import softmax_slack_bound
from exact.verify import verify_file
from fileio.bracketwriter import rational_string, write_bracket_file
from tests import independent_checker as ind


def E(rows) -> ExactMatrix:
    return ExactMatrix.from_rationals(rows)


def q(x) -> fmpq:
    x = Fr(x)
    return fmpq(x.numerator, x.denominator)


def margin(v) -> Fr | None:
    return None if v.margin is None else Fr(int(v.margin.p), int(v.margin.q))


def I(n):  # noqa: E743 -- the identity matrix, named as in the paper
    return ind.identity(n)


# ------------------------------------------------------------------ identity
@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("eps", [Fr(0), Fr(1, 4), Fr(1, 2), Fr(3, 4)])
def test_identity_every_kind(n, eps):
    """r_eps(I_n) = n for eps < 1 (every B within eps < 1 of I is invertible)."""
    A = E(I(n))
    up = check_upper(A, TrivialUpper(), q(eps), n)
    assert up.verified
    factors = check_upper(A, UpperFactors(A, A), q(eps), n)
    assert factors.verified and margin(factors) == eps
    rec = check_lower(A, ReconstructionWitness(A, A, A), q(eps), n)
    assert rec.verified and margin(rec) == 1 - eps
    row = check_lower(A, RowReconstructionWitness(A, A, A), q(eps), n)
    assert row.verified and margin(row) == 1 - eps
    triv = check_lower(A, TrivialLower(), q(eps), 1)
    assert triv.verified and margin(triv) == 1 - eps
    # Frobenius: F_{n-1}(I) = 1 > sqrt(n) eps iff n eps^2 < 1
    frob = check_lower(A, FrobeniusTail(n - 1), q(eps), n)
    assert frob.verified == (n * eps * eps < 1)
    if frob.verified:
        assert margin(frob) <= 1 - n * eps * eps      # a lower bound on F^2 - m eps^2, tight up to the hint


@pytest.mark.parametrize("n", [1, 2, 3])
def test_identity_at_eps_one_has_rank_zero(n):
    """r_1(I) = 0 (B = 0 has error exactly 1): every positive lower claim is refused."""
    A, one = E(I(n)), q(1)
    assert not check_lower(A, TrivialLower(), one, 1).verified
    assert margin(check_lower(A, TrivialLower(), one, 1)) == 0
    assert not check_lower(A, ReconstructionWitness(A, A, A), one, n).verified
    assert not check_lower(A, RowReconstructionWitness(A, A, A), one, n).verified
    assert not check_lower(A, FrobeniusTail(n - 1), one, n).verified
    assert check_lower(A, TrivialLower(), one, 0).verified


# ------------------------------------------------------------------ rank one
@pytest.mark.parametrize("p", [[Fr(1)], [Fr(1, 2), Fr(1, 2)], [Fr(1, 8), Fr(3, 8), Fr(1, 2)]])
@pytest.mark.parametrize("m", [1, 3])
def test_rank_one_stochastic(p, m):
    """All rows equal p: r_eps = 1 for eps < 1 (B = 1 p^T exactly), 0 for eps >= 1."""
    A = [list(p) for _ in range(m)]
    ones = [[Fr(1)] for _ in range(m)]
    Q = [[x] for x in p]
    for eps in (Fr(0), Fr(1, 3), Fr(99, 100)):
        up = check_upper(E(A), UpperFactors(E(ones), E(Q)), q(eps), 1)
        assert up.verified and margin(up) == eps
        low = check_lower(E(A), TrivialLower(), q(eps), 1)
        assert low.verified and margin(low) == 1 - eps
        if min(m, len(p)) >= 2:    # rank 2 is false: the Frobenius tail F_1 = 0 cannot prove it
            assert not check_lower(E(A), FrobeniusTail(1), q(eps), 2).verified
    assert not check_lower(E(A), TrivialLower(), q(1), 1).verified


# ------------------------------------------------------------ block diagonal
def _blockdiag(*blocks):
    n = sum(len(b[0]) for b in blocks)
    out, col = [], 0
    for b in blocks:
        for row in b:
            out.append([Fr(0)] * col + list(row) + [Fr(0)] * (n - col - len(row)))
        col += len(b[0])
    return out


def test_block_diagonal_of_two_rank_one_blocks():
    """A = diag(J/2, J/2): r_eps = 2 for eps < 1 (rank 2 exactly; gamma = 1 on W = block indicators)."""
    half = [[Fr(1, 2)] * 2] * 2
    A = _blockdiag(half, half)
    X = [[1, 0], [1, 0], [0, 1], [0, 1]]
    R = [[1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]]
    L = ind.pseudo_inverse(ind.fractions_of(X))
    Z = [[1, 0], [0, 0], [0, 1], [0, 0]]            # rows 0 and 2: disjoint supports, gamma_row = 1
    G = [[1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]]
    M = [[1, 0, 0, 0], [0, 0, 1, 0]]
    Q = [[Fr(1, 2), 0], [Fr(1, 2), 0], [0, Fr(1, 2)], [0, Fr(1, 2)]]
    for eps in (Fr(0), Fr(1, 2), Fr(7, 8)):
        assert margin(check_upper(E(A), UpperFactors(E(X), E(Q)), q(eps), 2)) == eps
        rec = check_lower(E(A), ReconstructionWitness(E(R), E(X), E(L)), q(eps), 2)
        assert rec.verified and margin(rec) == 1 - eps
        row = check_lower(E(A), RowReconstructionWitness(E(G), E(Z), E(M)), q(eps), 2)
        assert row.verified and margin(row) == 1 - eps
        # rank 3 would be false (rank A = 2): the Frobenius tail F_2 = 0 cannot prove it
        assert not check_lower(E(A), FrobeniusTail(2), q(eps), 3).verified
    assert not check_lower(E(A), ReconstructionWitness(E(R), E(X), E(L)), q(1), 2).verified


def test_block_diagonal_combines_witnesses():
    """diag(K(1/2), I_1): r_eps = 3 for eps < 1/2, margins the worse block's."""
    K = ind.bsc(Fr(1, 2))
    A = _blockdiag(K, [[Fr(1)]])
    Kinv = [[Fr(3, 2), Fr(-1, 2)], [Fr(-1, 2), Fr(3, 2)]]
    R = _blockdiag(Kinv, [[Fr(1)]])
    for eps in (Fr(1, 8), Fr(3, 8)):
        v = check_lower(E(A), ReconstructionWitness(E(R), E(I(3)), E(I(3))), q(eps), 3)
        assert v.verified and margin(v) == 1 - 2 * eps                   # ||R|| = 2 from the K block
    assert not check_lower(E(A), ReconstructionWitness(E(R), E(I(3)), E(I(3))), q(Fr(1, 2)), 3).verified


# ------------------------------------------------------------ 2 x 2 closed form
@pytest.mark.parametrize("t", [Fr(1, 2), Fr(3, 4), Fr(1, 8), Fr(5, 16), Fr(2, 3)])
def test_two_by_two_symmetric_channel(t):
    """K(t): r_eps = 2 for eps < t, 1 for t <= eps < 1 (B = J/2 has error exactly t; R = K^-1 has norm 1/t)."""
    A = ind.bsc(t)
    Kinv = [[(1 + 1 / t) / 2, (1 - 1 / t) / 2], [(1 - 1 / t) / 2, (1 + 1 / t) / 2]]
    assert ind.matmul(Kinv, A) == I(2)
    ones, half = [[1], [1]], [[Fr(1, 2)], [Fr(1, 2)]]
    below = t - Fr(1, 64)
    rec = check_lower(E(A), ReconstructionWitness(E(Kinv), E(I(2)), E(I(2))), q(below), 2)
    assert rec.verified and margin(rec) == 1 - below / t
    row = check_lower(E(A), RowReconstructionWitness(E(Kinv), E(I(2)), E(I(2))), q(below), 2)
    assert row.verified and margin(row) == 1 - below / t
    # at eps = t the rank is 1: the rank-2 claims are refused with margin exactly 0, the rank-1 upper is tight
    at = check_lower(E(A), ReconstructionWitness(E(Kinv), E(I(2)), E(I(2))), q(t), 2)
    assert not at.verified and margin(at) == 0
    up = check_upper(E(A), UpperFactors(E(ones), E(half)), q(t), 1)
    assert up.verified and margin(up) == 0
    assert not check_upper(E(A), UpperFactors(E(ones), E(half)), q(below), 1).verified
    # Frobenius: F_1 = t > sqrt(2) eps iff eps < t / sqrt(2) (0.7071 t)
    assert check_lower(E(A), FrobeniusTail(1), q(t * Fr(70, 100)), 2).verified
    assert not check_lower(E(A), FrobeniusTail(1), q(t * Fr(71, 100)), 2).verified


def test_square_full_rank_row_side_equals_column_side():
    """For d = m = n both sides need A G = I (G = A^-1) and pay ||A^-1||_row1: equal margins."""
    A = [[Fr(1), Fr(0)], [Fr(1, 2), Fr(1, 2)]]
    Ainv = [[Fr(1), Fr(0)], [Fr(-1), Fr(2)]]                  # row sums 1 and 3
    for eps in (Fr(1, 4), Fr(1, 3), Fr(2, 5)):
        col = check_lower(E(A), ReconstructionWitness(E(Ainv), E(I(2)), E(I(2))), q(eps), 2)
        row = check_lower(E(A), RowReconstructionWitness(E(Ainv), E(I(2)), E(I(2))), q(eps), 2)
        assert col.verified == row.verified == (3 * eps < 1)
        assert margin(col) == margin(row) == 1 - 3 * eps


def test_wide_two_by_three_closed_form():
    """A = [[1/2, 1/2, 0], [0, 1/2, 1/2]]: gamma_row = 1/2 (w = (1, -1)), so r_eps = 2 for eps < 1/2;
    B with both rows (1/4, 1/2, 1/4) has error exactly 1/2, so r_eps = 1 for 1/2 <= eps < 1."""
    A = [[Fr(1, 2), Fr(1, 2), Fr(0)], [Fr(0), Fr(1, 2), Fr(1, 2)]]
    G = [[2, 0], [0, 0], [0, 2]]                               # A G = I_2, ||G|| = 2
    ones, Q = [[1], [1]], [[Fr(1, 4)], [Fr(1, 2)], [Fr(1, 4)]]
    below = Fr(1, 2) - Fr(1, 1024)
    row = check_lower(E(A), RowReconstructionWitness(E(G), E(I(2)), E(I(2))), q(below), 2)
    assert row.verified and margin(row) == 1 - 2 * below
    at = check_lower(E(A), RowReconstructionWitness(E(G), E(I(2)), E(I(2))), q(Fr(1, 2)), 2)
    assert not at.verified and margin(at) == 0
    up = check_upper(E(A), UpperFactors(E(ones), E(Q)), q(Fr(1, 2)), 1)
    assert up.verified and margin(up) == 0
    assert not check_upper(E(A), UpperFactors(E(ones), E(Q)), q(below), 1).verified


# --------------------------------------------------------------- two-bit oracle
def _truncation(t, s, names):
    """Upper factors keeping the named Walsh components of A(t, s): B = X diag(lambda) X^T / 4."""
    lam = {"1": Fr(1), "t": Fr(t), "s": Fr(s), "ts": Fr(t) * Fr(s)}
    X = ind.walsh_basis(*names)
    P = [[x * lam[nm] / 4 for x, nm in zip(row, names)] for row in X]
    return P, X


#: (t, s, eps) -> r_eps, MATH.md section 4, with the witnesses found in the test:
#: lower on the LP-optimal R over the named Walsh subspace, upper a Walsh truncation or c J.
TWO_BIT_CELLS = [
    (Fr(3, 4), Fr(1, 2), Fr(1, 4), 4, ("1", "s", "t", "ts"), None),
    (Fr(3, 4), Fr(1, 2), Fr(7, 16), 3, ("1", "s", "t"), ("1", "s", "t")),
    (Fr(3, 4), Fr(1, 2), Fr(5, 8), 2, ("1", "t"), ("1", "t")),
    (Fr(3, 4), Fr(1, 2), Fr(7, 8), 1, None, Fr(7, 32)),
    (Fr(3, 4), Fr(3, 4), Fr(5, 8), 3, ("1", "s", "t"), ("1", "s", "t")),
    (Fr(3, 4), Fr(3, 4), Fr(3, 4), 1, None, Fr(7, 64)),
]


@pytest.mark.parametrize("t,s,eps,r,lower_names,upper", TWO_BIT_CELLS)
def test_two_bit_cells_close(t, s, eps, r, lower_names, upper):
    A = ind.two_bit(t, s)
    if lower_names is None:
        low = check_lower(E(A), TrivialLower(), q(eps), 1)
    else:
        X = ind.walsh_basis(*lower_names)
        R = ind.lp_optimal_R(A, X)
        low = check_lower(E(A), ReconstructionWitness(E(R), E(X), E(ind.pseudo_inverse(X))), q(eps), r)
    if upper is None:
        up = check_upper(E(A), TrivialUpper(), q(eps), r)
    elif isinstance(upper, Fr):
        up = check_upper(E(A), UpperFactors(E([[1]] * 4), E([[upper]] * 4)), q(eps), 1)
    else:
        P, X = _truncation(t, s, upper)
        up = check_upper(E(A), UpperFactors(E(P), E(X)), q(eps), r)
    assert low.verified, low
    assert up.verified, up
    assert low.rank == up.rank == r


def test_two_bit_three_quarters_at_five_eighths():
    """A(3/4, 3/4), eps = 5/8: Frobenius fails (F_2 = 15/16 <= 2 * 5/8), the truncated pseudo-inverse
    fails (norm 11/6), the LP witness of norm 4/3 gives L = 3 with margin 1/6, the rank-3 truncation
    (error 9/16) gives U = 3 with margin 1/16."""
    t = s = Fr(3, 4)
    A = ind.two_bit(t, s)
    assert A == [[Fr(x, 64) for x in row] for row in [[49, 7, 7, 1], [7, 49, 1, 7], [7, 1, 49, 7], [1, 7, 7, 49]]]
    eps = Fr(5, 8)
    frob = check_lower(E(A), FrobeniusTail(2), q(eps), 3)
    assert not frob.verified
    assert margin(frob) <= Fr(225, 256) - 4 * eps * eps          # F_2^2 = 225/256, m eps^2 = 400/256
    X = ind.walsh_basis("1", "t", "s")
    L = ind.pseudo_inverse(X)
    assert L == [[x / 4 for x in row] for row in ind.transpose(X)]
    # truncated pseudo-inverse: R = X diag(1, 4/3, 4/3) X^T / 4, norm 11/6
    R_pinv = ind.matmul([[x * lam / 4 for x, lam in zip(row, (1, Fr(4, 3), Fr(4, 3)))] for row in X],
                        ind.transpose(X))
    assert ind.row_l1(R_pinv) == Fr(11, 6)
    pinv = check_lower(E(A), ReconstructionWitness(E(R_pinv), E(X), E(L)), q(eps), 3)
    assert not pinv.verified and margin(pinv) == 1 - Fr(11, 6) * eps
    # LP-optimal R on the same W: R_pinv + (1/4) chi_ts chi_ts^T, norm 4/3
    chi = ind.WALSH["ts"]
    R = [[R_pinv[i][j] + Fr(chi[i] * chi[j], 4) for j in range(4)] for i in range(4)]
    assert R == ind.lp_optimal_R(A, X)
    assert ind.row_l1(R) == Fr(4, 3)
    low = check_lower(E(A), ReconstructionWitness(E(R), E(X), E(L)), q(eps), 3)
    assert low.verified and margin(low) == Fr(1, 6)
    P, Q = _truncation(t, s, ("1", "t", "s"))
    up = check_upper(E(A), UpperFactors(E(P), E(Q)), q(eps), 3)
    assert up.verified and margin(up) == eps - Fr(9, 16)
    # at eps = 3/4 the same witness is refused with margin 0, and r_{3/4} = 1 indeed
    at = check_lower(E(A), ReconstructionWitness(E(R), E(X), E(L)), q(Fr(3, 4)), 3)
    assert not at.verified and margin(at) == 0
    assert margin(check_upper(E(A), UpperFactors(E([[1]] * 4), E([[Fr(7, 64)]] * 4)), q(Fr(3, 4)), 1)) == 0


def test_two_bit_through_a_file(tmp_path):
    """The same six cells written as a bracket file and judged by verify_file."""
    tensors, cells = {}, []
    for i, (t, s, eps, r, lower_names, upper) in enumerate(TWO_BIT_CELLS):
        A = ind.two_bit(t, s)
        tensors[f"A{i}"] = np.array(A, dtype=np.float64)
        if lower_names is None:
            lower = {"rank": 1, "witness": {"kind": "trivial"}}
        else:
            X = ind.walsh_basis(*lower_names)
            R = ind.lp_optimal_R(A, X)
            L = ind.pseudo_inverse(X)
            for nm, M in (("R", R), ("X", X), ("L", L)):
                tensors[f"{nm}{i}"] = np.array(M, dtype=np.float64)
            lower = {"rank": r, "witness": {"kind": "reconstruction", "R": f"R{i}", "X": f"X{i}", "L": f"L{i}"}}
        if upper is None:
            up = {"rank": r, "witness": {"kind": "trivial"}}
        else:
            P, Q = (([[1]] * 4, [[upper]] * 4) if isinstance(upper, Fr) else _truncation(t, s, upper))
            tensors[f"P{i}"], tensors[f"Q{i}"] = np.array(P, dtype=np.float64), np.array(Q, dtype=np.float64)
            up = {"rank": r, "witness": {"kind": "factors", "P": f"P{i}", "Q": f"Q{i}"}}
        cells.append({"id": f"twobit-{i}", "eps": rational_string(eps), "target": {"matrix": f"A{i}"},
                      "lower": lower, "upper": up})
    path = write_bracket_file(tmp_path / "twobit.safetensors", cells, tensors)
    reports = verify_file(path)
    # R has entries 7/6, -1/6 (not dyadic): rounded to float64 the witness is slightly off; each cell's
    # verdict must then agree with the independent checker on the stored (float) witness
    for report, cell in zip(reports, cells):
        up = cell["upper"]["witness"]
        assert report.upper.verified
        lw = cell["lower"]["witness"]
        A = ind.fractions_of(tensors[cell["target"]["matrix"]].tolist())
        eps = Fr(cell["eps"])
        if lw["kind"] == "trivial":
            expected = ind.check_trivial_lower(A, eps, 1)
        else:
            R, X, L = (ind.fractions_of(tensors[lw[k]].tolist()) for k in "RXL")
            expected = ind.check_reconstruction(A, R, X, L, eps, cell["lower"]["rank"])
        assert report.lower.verified == expected.verified
        assert margin(report.lower) == expected.margin
        assert report.lower.verified           # the rounding is far below every margin here


# ------------------------------------------------------------------ slack (K.5)
def _softmax64(H):
    Z = np.exp(H - H.max(axis=1, keepdims=True))
    return Z / Z.sum(axis=1, keepdims=True)


def _true_distance(H, A0, dps=60):
    """``||softmax_row(H) - A0||_row1`` to ``dps`` digits with mpmath (an independent computation)."""
    with mpmath.workdps(dps):
        worst = mpmath.mpf(0)
        for hrow, arow in zip(H.tolist(), A0.tolist()):
            e = [mpmath.exp(mpmath.mpf(h)) for h in hrow]
            Z = mpmath.fsum(e)
            worst = max(worst, mpmath.fsum(abs(x / Z - mpmath.mpf(a)) for x, a in zip(e, arow)))
        return worst


@pytest.mark.parametrize("seed", range(6))
def test_slack_bound_encloses_the_true_distance(seed):
    rng = np.random.default_rng(seed)
    m, n = rng.integers(1, 7, size=2)
    H = rng.normal(scale=[0.1, 3.0, 30.0][seed % 3], size=(m, n))
    A0 = _softmax64(H)
    bound = softmax_slack_bound(H, A0)
    true = _true_distance(H, A0)
    with mpmath.workdps(60):
        b = mpmath.mpf(int(bound.p)) / int(bound.q)
        assert b >= true
        assert b - true < mpmath.mpf(2) ** -50            # 64-bit arb: tight, not just safe


def test_slack_bound_is_zero_only_when_exact():
    H = np.zeros((3, 4))
    assert softmax_slack_bound(H, np.full((3, 4), 0.25)) == 0
    A0 = np.full((3, 4), 0.25)
    A0[1, 2] = np.nextafter(0.25, 1.0)                   # one ulp off: the bound sees it
    bound = softmax_slack_bound(H, A0)
    assert bound >= fmpq(*np.float64(np.nextafter(0.25, 1.0) - 0.25).as_integer_ratio())


def test_slack_charged_on_both_sides(tmp_path):
    """softmax([0, -log 3]) ~ (3/4, 1/4): a K(1/2)-like target. Upper at eps - slack, lower at eps + slack."""
    h = -math.log(3.0)
    H = np.array([[0.0, h], [h, 0.0]])
    A0 = _softmax64(H)
    bound = softmax_slack_bound(H, A0)
    assert bound > 0                                     # log 3 is not a float: the target is not A0
    slack = Fr(1, 2**40)
    assert Fr(int(bound.p), int(bound.q)) <= slack
    a = ind.fractions_of(A0.tolist())
    t = a[0][0] - a[0][1]                                # A0 = K(t) up to the rows' own rounding
    ones, half = np.ones((2, 1)), np.full((2, 1), 0.5)
    cells = [
        # r = 2 at eps = 1/4: lower with R = identity-ish inverse of A0, upper trivial
        {"id": "two", "eps": "1/4", "target": {"matrix": "A", "logits": "H", "slack": rational_string(slack)},
         "lower": {"rank": 2, "witness": {"kind": "row_reconstruction", "G": "Kinv", "Z": "I", "M": "I"}},
         "upper": {"rank": 2, "witness": {"kind": "trivial"}}},
        # B = J/2 has error ||A0 - J/2|| = t exactly for A0; at eps = t the slack must make it fail
        {"id": "tight", "eps": rational_string(t), "target": {"matrix": "A", "logits": "H",
                                                              "slack": rational_string(slack)},
         "lower": {"rank": 1, "witness": {"kind": "trivial"}},
         "upper": {"rank": 1, "witness": {"kind": "factors", "P": "ones", "Q": "half"}}},
        {"id": "tight+slack", "eps": rational_string(t + slack), "target": {"matrix": "A", "logits": "H",
                                                                            "slack": rational_string(slack)},
         "lower": {"rank": 1, "witness": {"kind": "trivial"}},
         "upper": {"rank": 1, "witness": {"kind": "factors", "P": "ones", "Q": "half"}}},
        # a slack below the proved bound: both sides refused
        {"id": "unproved", "eps": "1/4", "target": {"matrix": "A", "logits": "H", "slack": "0"},
         "lower": {"rank": 1, "witness": {"kind": "trivial"}},
         "upper": {"rank": 2, "witness": {"kind": "trivial"}}},
    ]
    Kinv = np.array([[1.5, -0.5], [-0.5, 1.5]])
    path = write_bracket_file(tmp_path / "slack.safetensors", cells,
                              {"A": A0, "H": H, "Kinv": Kinv, "I": np.eye(2), "ones": ones, "half": half})
    rep = {r.id: r for r in verify_file(path)}
    assert rep["two"].lower.verified and rep["two"].upper.verified
    proved = rep["two"].slack_bound                      # the float64 bound here (slack 2^-40 is far above it)
    with mpmath.workdps(60):
        assert _true_distance(H, A0) <= mpmath.mpf(int(proved.p)) / int(proved.q)
    assert bound <= proved <= q(slack)
    # the independent check of the row side at eps + slack on the stored matrix
    expected = ind.check_row_reconstruction(a, ind.fractions_of(Kinv.tolist()), I(2), I(2), Fr(1, 4) + slack, 2)
    assert margin(rep["two"].lower) == expected.margin
    assert not rep["tight"].upper.verified and margin(rep["tight"].upper) == -slack
    assert rep["tight"].lower.verified
    assert rep["tight+slack"].upper.verified and margin(rep["tight+slack"].upper) == 0
    assert not rep["unproved"].lower.verified and not rep["unproved"].upper.verified
    assert "slack" in rep["unproved"].lower.reason


def test_slack_bound_encloses_on_random_logits():
    """Hypothesis: the arb bound contains the 60-digit mpmath value, for logits up to +-700 and
    matrices that are the float softmax, a perturbation of it, or unrelated."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**32 - 1), st.sampled_from([0.01, 1.0, 50.0, 700.0]),
           st.sampled_from(["exact", "nudged", "uniform"]))
    def prop(m, n, seed, scale, kind):
        rng = np.random.default_rng(seed)
        H = rng.normal(scale=scale, size=(m, n))
        A0 = {"exact": lambda: _softmax64(H), "uniform": lambda: np.full((m, n), 1.0 / n),
              "nudged": lambda: np.nextafter(_softmax64(H), 1.0)}[kind]()
        bound = softmax_slack_bound(H, A0)
        with mpmath.workdps(60):
            b = mpmath.mpf(int(bound.p)) / int(bound.q)
            true = _true_distance(H, A0)
            assert true <= b <= true + mpmath.mpf(2) ** -50

    prop()


# ------------------------------------------------- weakened checks must fail these (the exact tier's mutation run)
def _slack_cells(slacks):
    """r_{3/10}(softmax_row(0_{2x2})) >= 2 with A0 = I: softmax_row(0) = J/2 is at distance exactly 1 from I.
    With the slack proved, the witness R = X = L = I would prove rank 2 for J/2, which has rank 1."""
    return [{"id": f"slack={s}", "eps": "3/10", "target": {"matrix": "I", "logits": "H", "slack": s},
             "lower": {"rank": 2, "witness": {"kind": "reconstruction", "R": "I", "X": "I", "L": "I"}},
             "upper": {"rank": 2, "witness": {"kind": "trivial"}}} for s in slacks]


def test_slack_bound_of_a_huge_distance_and_of_mismatched_shapes():
    """An arb upper endpoint with a positive binary exponent (a distance near 3e30: entries of A0 far from a
    distribution) converts exactly, and logits and matrix of different shapes, in either order, are refused."""
    bound = softmax_slack_bound(np.zeros((2, 3)), np.full((2, 3), 1e30))
    assert Fr(int(bound.p), int(bound.q)) >= 3 * Fr(1e30) - 1 and bound <= fmpq(31, 10) * 10**30
    for a, b in (((2, 3), (2, 4)), ((2, 4), (2, 3)), ((3, 3), (2, 3))):
        with pytest.raises(ValueError, match="differ in shape"):
            softmax_slack_bound(np.zeros(a), np.full(b, 0.25))


def test_ln2_split_is_checked():
    """The float exp of the slack bound splits ln 2 into a 32-bit head and a tail; the split is proved
    within 2^-80 (arb), and a tail off by 2^-73 is not accepted, nor a head of more than 32 bits (the
    float ln 2 with its exact tail: within 2^-80, but k hi would round)."""
    from exact import slack
    assert slack._ln2_ok() and slack._ln2_split_ok(slack._LN2_HI, slack._LN2_LO)
    with slack.arb_precision(256):
        tail = float(arb(2).log() - fmpq(*math.log(2).as_integer_ratio()))
        assert abs(arb(2).log() - fmpq(*math.log(2).as_integer_ratio()) - fmpq(*tail.as_integer_ratio())) < 2.0**-100
    assert not slack._ln2_split_ok(math.log(2), tail)
    assert not slack._ln2_split_ok(slack._LN2_HI, slack._LN2_LO * (1 + 2.0**-40))
    assert not slack._ln2_split_ok(slack._LN2_HI, slack._LN2_LO * (1 - 2.0**-40))


def test_slack_below_the_distance_is_refused(tmp_path):
    """Every slack in (0, 1) is refused, 3/5 (accepted if the test were ``bound > 2 slack``) included."""
    slacks = ["3/5", "1/2", "1/1000", "9/10", "999999999/1000000000", "1/1000000000000"]
    path = write_bracket_file(tmp_path / "s.safetensors", _slack_cells(slacks),
                              {"I": np.eye(2), "H": np.zeros((2, 2))})
    for rep in verify_file(path):
        assert not rep.lower.verified and not rep.upper.verified, rep.id
        assert "slack" in rep.lower.reason and "slack" in rep.upper.reason
        assert rep.slack_bound is None                 # the true distance is 1: arb stops above the slack
    (above,) = verify_file(write_bracket_file(tmp_path / "a.safetensors", _slack_cells(["11/10"]),
                                              {"I": np.eye(2), "H": np.zeros((2, 2))}))
    assert above.slack_bound <= fmpq(11, 10) and "slack" not in above.lower.reason


def test_slack_claimed_at_the_arb_bound_is_proved(tmp_path):
    """A producer may claim exactly ``softmax_slack_bound``: proved, through the arb fallback (the float
    bound of every row lies above it); nine tenths of it, below the true distance, is refused."""
    rng = np.random.default_rng(7)
    H = rng.normal(scale=3.0, size=(5, 6))
    A0 = np.nextafter(_softmax64(H), 1.0)              # a distance of a few ulps per entry
    bound = softmax_slack_bound(H, A0)
    true = _true_distance(H, A0)
    below = Fr(int(bound.p), int(bound.q)) * Fr(9, 10)
    with mpmath.workdps(60):
        assert mpmath.mpf(below.numerator) / below.denominator < true
    cells = [{"id": name, "eps": "1/4", "target": {"matrix": "A", "logits": "H", "slack": rational_string(s)},
              "lower": {"rank": 0, "witness": {"kind": "trivial"}},
              "upper": {"rank": 5, "witness": {"kind": "trivial"}}}
             for name, s in (("at", Fr(int(bound.p), int(bound.q))), ("below", below))]
    rep = {r.id: r for r in verify_file(write_bracket_file(tmp_path / "b.safetensors", cells, {"A": A0, "H": H}))}
    assert rep["at"].lower.verified and rep["at"].upper.verified and rep["at"].slack_bound <= bound
    assert not rep["below"].lower.verified and "slack" in rep["below"].lower.reason


def _nearly_diagonal(rng, n):
    """diag(a permutation of 1..n) plus one entry 2^-30 .. 2^-69 off the diagonal: LAPACK deflates the
    tiny coupling, the float eigenbasis is exact, and only the Ky Fan term covers the energy it moves."""
    A = np.diag(rng.permutation(np.arange(1, n + 1)).astype(float))
    i, j = rng.choice(n, 2, replace=False)
    A[i, j] = 2.0 ** -int(rng.integers(30, 70))
    return A


def test_frobenius_energy_bound_is_above_the_exact_energy():
    """``top_energy_upper_bound`` against the exact top-k energy (Fraction bisection of the characteristic
    polynomial to 2^-160, ``tests/independent_checker.py``), on matrices where dropping the Ky Fan
    off-diagonal term leaves the bound below the energy by 2^-60 .. 2^-140, and on random ones."""
    rng = np.random.default_rng(11)
    probes = [_nearly_diagonal(rng, int(rng.integers(2, 5))) for _ in range(60)]
    probes += [rng.normal(size=tuple(rng.integers(2, 5, size=2))) for _ in range(20)]
    for A in probes:
        exact_A = ExactMatrix.from_float64(A)
        for k in range(1, min(A.shape)):
            bound = top_energy_upper_bound(exact_A, k)
            lo, _ = ind.top_energy_enclosure(ind.fractions_of(A.tolist()), k, steps=160)
            assert bound is not None and Fr(int(bound.p), int(bound.q)) >= lo, (A, k)


def _path_coupled(n, hub, c):
    """``I + c N`` with ``N`` coupling the hub to its two neighbours (upper triangle): ``S = A^T A`` is
    ``I`` plus ``c`` on a path through the hub plus ``c^2`` on the diagonal, so the off-diagonal mass of
    S sits in the hub's row; every row of one triangle of S holds at most one coupling."""
    A = np.eye(n)
    for other in (hub - 1, hub + 1):
        A[min(hub, other), max(hub, other)] = c
    return A


@pytest.mark.parametrize("c", [2.0 ** -60, 2.0 ** -20, 0.25])
def test_frobenius_ky_fan_term_takes_whole_rows_of_d(monkeypatch, c):
    """The Ky Fan term must be the row-l1 norm of the whole off-diagonal part of D, not of one triangle.
    With a hint that does not diagonalise S (the identity: what LAPACK itself returns at c = 2^-60, where it
    deflates the coupling; forced for larger c) D = S, and the top eigenvalue of S is near
    1 + sqrt(2) c, above ``max diag + c`` (one triangle's row norm) and below ``max diag + 2 c`` (the
    whole rows). Reference: Fraction bisection of the characteristic polynomial to 2^-160."""
    import exact.frobenius as frob
    if c > 2.0 ** -53:
        monkeypatch.setattr(frob.np.linalg, "eigh", lambda S: (np.diag(S), np.eye(len(S))))
    for n, hub in ((3, 1), (4, 1), (4, 2), (5, 2)):
        A = _path_coupled(n, hub, c)
        lo, _ = ind.top_energy_enclosure(ind.fractions_of(A.tolist()), 1, steps=160)
        bound = top_energy_upper_bound(ExactMatrix.from_float64(A), 1)
        one_triangle = 1 + Fr(c) ** 2 + Fr(c)             # what a one-triangle Ky Fan term would give
        assert lo > one_triangle, (n, hub)                # so the test can see that weakening
        assert bound is not None and Fr(int(bound.p), int(bound.q)) >= lo, (n, hub, c)


@pytest.mark.parametrize("kind", ["factors", "reconstruction", "row_reconstruction"])
def test_every_wrong_shape_is_named(kind):
    """A witness matrix one row or column short or long, in each of its dimensions, is refused for its
    shape (never by an exception in the arithmetic, never accepted)."""
    A = E([[Fr(3, 4), Fr(1, 4), 0], [Fr(1, 4), Fr(3, 4), 0]])             # 2 x 3
    shapes = {"factors": [(2, 1), (3, 1)], "reconstruction": [(3, 2), (3, 2), (2, 3)],
              "row_reconstruction": [(3, 2), (2, 2), (2, 2)]}[kind]
    build = {"factors": UpperFactors, "reconstruction": ReconstructionWitness,
             "row_reconstruction": RowReconstructionWitness}[kind]
    check = check_upper if kind == "factors" else check_lower
    for which in range(len(shapes)):
        for axis in (0, 1):
            for delta in (-1, 1):
                dims = [list(s) for s in shapes]
                dims[which][axis] += delta
                if 0 in dims[which]:
                    continue
                witness = build(*(ExactMatrix.zeros(*d) for d in dims))
                rank = dims[0][1] if kind == "factors" else dims[1][1]
                verdict = check(A, witness, q(Fr(1, 4)), min(rank, 2))
                assert not verdict.verified and "shape mismatch" in verdict.reason, (kind, dims, verdict)


@pytest.mark.parametrize("hint", [np.array([[1.0, 1.0], [0.0, 0.0]]), 2 * np.eye(2)])
def test_frobenius_refuses_a_basis_hint_that_is_not_near_orthonormal(monkeypatch, hint):
    """``g = ||V^T V - I||_row1`` of 1 (a singular hint) or 3 (a scaled one): no bound, the claim is refused."""
    import exact.frobenius as frob
    monkeypatch.setattr(frob.np.linalg, "eigh", lambda S: (np.ones(2), hint))
    A = E([[2, 0], [0, 1]])
    assert frob.top_energy_upper_bound(A, 1) is None
    verdict = check_lower(A, FrobeniusTail(1), q(Fr(1, 100)), 2)
    assert not verdict.verified and "could not bound" in verdict.reason


def test_witness_rank_must_equal_the_claimed_rank():
    """Factors with more columns than the claimed rank prove nothing about that rank (B = I has error 0
    but rank 2); fewer columns are refused too. Likewise for the lower witnesses' d and k + 1."""
    A, I2 = E(I(2)), E(I(2))
    for claimed in (1, 0):
        v = check_upper(A, UpperFactors(I2, I2), q(Fr(1, 2)), claimed)
        assert not v.verified and "columns" in v.reason
    one = E([[1], [0]])
    assert not check_upper(A, UpperFactors(one, one), q(Fr(1, 2)), 2).verified
    assert not check_lower(A, ReconstructionWitness(I2, I2, I2), q(Fr(1, 4)), 1).verified
    assert not check_lower(A, RowReconstructionWitness(I2, I2, I2), q(Fr(1, 4)), 1).verified
    assert not check_lower(A, FrobeniusTail(1), q(Fr(1, 4)), 1).verified
    col = E([[1], [0]])                               # d = 1 columns cannot prove rank 2
    assert not check_lower(A, ReconstructionWitness(E([[1, 0]]).T @ E([[1, 0]]), col, E([[1, 0]])),
                           q(Fr(1, 4)), 2).verified
    assert not check_lower(A, RowReconstructionWitness(col @ E([[1, 0]]), col, E([[1, 0]])), q(Fr(1, 4)), 2).verified
    # the trivial witnesses prove min(m, n) above and at most rank 1 below, nothing else
    assert not check_upper(A, TrivialUpper(), q(Fr(1, 4)), 1).verified
    assert not check_lower(A, TrivialLower(), q(Fr(1, 4)), 2).verified


@pytest.mark.parametrize("floats", [False, True])
def test_rank_zero_reconstruction_with_an_empty_basis(floats):
    """d = 0 (X of shape n x 0, L of 0 x n): F is 0 x 0, eta = 0, so rank 0 is proved with margin
    1 - ||R|| eps, on exact and on float-backed matrices alike (the residual norms of empty matrices are 0)."""
    make = (lambda a: ExactMatrix.from_float64(np.asarray(a, dtype=float))) if floats else E
    A, R = make([[1, 0, 0], [0, 1, 0]]), make([[1, 0], [0, 1], [1, 1]])          # ||R|| = 2
    X, L = make(np.zeros((3, 0))) if floats else ExactMatrix.zeros(3, 0), \
        make(np.zeros((0, 3))) if floats else ExactMatrix.zeros(0, 3)
    v = check_lower(A, ReconstructionWitness(R, X, L), q(Fr(1, 4)), 0)
    assert v.verified and margin(v) == Fr(1, 2), v
    Z, M = make(np.zeros((2, 0))) if floats else ExactMatrix.zeros(2, 0), \
        make(np.zeros((0, 2))) if floats else ExactMatrix.zeros(0, 2)
    v = check_lower(A, RowReconstructionWitness(R, Z, M), q(Fr(1, 4)), 0)
    assert v.verified and margin(v) == Fr(1, 2), v
    assert not check_lower(A, ReconstructionWitness(R, X, L), q(Fr(1, 2)), 0).verified    # ||R|| eps = 1


@pytest.mark.parametrize("shape", [(2, 3), (3, 2)])
def test_diagonal_refuses_a_matrix_that_is_not_square(shape):
    """``exact.norms.diagonal`` (the Ky Fan bound's diag(D)) raises on a wide or a tall matrix."""
    from exact.norms import diagonal
    with pytest.raises(ValueError, match="non-square"):
        diagonal(ExactMatrix.zeros(*shape))
    assert diagonal(E([[1, 2], [3, 4]])) == [1, 4]


def test_reconstruction_at_the_defect_boundaries():
    """||F|| = 1 exactly (L = 0, F = -I): refused as a basis defect; eta = 1 exactly (A = diag(0, 1),
    R = X = L = I, E = A - I): refused as a reconstruction defect, each with its exact derived value."""
    I2 = E(I(2))
    v = check_lower(E(I(2)), ReconstructionWitness(I2, I2, ExactMatrix.zeros(2, 2)), q(Fr(1, 4)), 2)
    assert not v.verified and "basis defect" in v.reason and v.derived == "||F|| = 1", v
    v = check_lower(E([[0, 0], [0, 1]]), ReconstructionWitness(I2, I2, I2), q(0), 2)
    assert not v.verified and "reconstruction defect" in v.reason and v.derived == "eta = 1", v

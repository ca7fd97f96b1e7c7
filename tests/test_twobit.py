"""The two-bit oracle (K.6, MATH.md section 4): every stated fact, exactly.

Independent checks use ``fractions.Fraction`` alone: the matrix is rebuilt
from its Kronecker definition, Walsh eigenvalues from the characters, and
optimality claims from the dual certificates (weak duality), not from the
oracle's own bookkeeping.
"""
from __future__ import annotations

import doctest
import json
import subprocess
import sys
from fractions import Fraction
from itertools import product
from pathlib import Path

import pytest
from flint import fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

import oracles._exactlp as exactlp
import oracles.twobit as twobit
from exact.certificates import check_lower, check_upper
from oracles._exactlp import CertificateFailure, Infeasible, LPSolution, Unbounded, check_certificate, solve
from oracles.twobit import (PAPER_CELLS, hierarchy_fact, lp_optimal_reconstruction, row_stochastic_fact,
                            solve_cell, two_bit_matrix)

ROOT = Path(__file__).resolve().parents[1]
F = Fraction


def q(text: str) -> fmpq:
    return fmpq(F(text).numerator, F(text).denominator)


def fr(x: fmpq) -> Fraction:
    return F(int(x.p), int(x.q))


def kron_matrix(t: Fraction, s: Fraction) -> list[list[Fraction]]:
    """A(t, s) from its definition K(t) (x) K(s), K(t) = t I + (1 - t) J / 2."""
    def K(u):
        return [[u * (i == j) + (1 - u) / 2 for j in range(2)] for i in range(2)]
    kt, ks = K(t), K(s)
    return [[kt[i // 2][j // 2] * ks[i % 2][j % 2] for j in range(4)] for i in range(4)]


def walsh_eigenvalues(t: Fraction, s: Fraction) -> list[Fraction]:
    """Eigenvalues of A(t, s) on the characters (-1)^(a x + b y), checked by A w = lambda w."""
    A = kron_matrix(t, s)
    out = []
    for a, b in product((0, 1), repeat=2):
        w = [(-1) ** (a * (i // 2) + b * (i % 2)) for i in range(4)]
        Aw = [sum(A[i][j] * w[j] for j in range(4)) for i in range(4)]
        lam = Aw[0] / w[0]
        assert Aw == [lam * v for v in w]
        out.append(lam)
    return out


def row1(M) -> Fraction:
    return max(sum(abs(v) for v in row) for row in M)


# ---------------------------------------------------------------- the matrix
def test_matrix_at_three_quarters_matches_math_md():
    A = two_bit_matrix(fmpq(3, 4), fmpq(3, 4))
    expected = [[F(v, 64) for v in row] for row in [[49, 7, 7, 1], [7, 49, 1, 7], [7, 1, 49, 7], [1, 7, 7, 49]]]
    assert A.to_fractions() == expected
    assert A.to_fractions() == kron_matrix(F(3, 4), F(3, 4))


@pytest.mark.parametrize("t,s", [("0", "0"), ("1", "1/3"), ("2/7", "5/9")])
def test_matrix_is_the_kronecker_product(t, s):
    assert two_bit_matrix(q(t), q(s)).to_fractions() == kron_matrix(F(t), F(s))


# ---------------------------------------------------------------- the six cells
@pytest.mark.parametrize("t,s,eps,rank", PAPER_CELLS)
def test_paper_cell_closes_at_stated_rank(t, s, eps, rank):
    cell = solve_cell(q(t), q(s), q(eps))
    assert cell.closed and cell.verified and not cell.problems
    assert cell.lower == cell.upper == rank
    # both sides re-judged here by the exact tier, on the same witnesses
    A = two_bit_matrix(q(t), q(s))
    assert check_upper(A, cell.upper_candidate.witness, q(eps), rank).verified
    assert check_lower(A, cell.lower_test.witness, q(eps), rank).verified
    # the upper error, recomputed with Fractions from the factors
    w = cell.upper_candidate.witness
    if cell.upper_candidate.kind != "trivial":
        P, Q = w.P.to_fractions(), w.Q.to_fractions()
        Af = kron_matrix(F(t), F(s))
        B = [[sum(P[i][k] * Q[j][k] for k in range(len(P[0]))) for j in range(4)] for i in range(4)]
        err = row1([[Af[i][j] - B[i][j] for j in range(4)] for i in range(4)])
        assert err == fr(cell.upper_candidate.error) <= F(eps)


def test_paper_ranks_are_the_claims():
    assert [r for *_, r in PAPER_CELLS] == [4, 3, 2, 1, 3, 1]


# ---------------------------------------------------------------- fact 1: competitor class
def test_fact_row_stochastic_rank_one_error_is_33_32():
    fact = row_stochastic_fact()
    assert fact.holds
    assert fact.cell.lower == fact.cell.upper == 1
    assert fact.cell.upper_candidate.kind == "constant" and fact.cell.upper_candidate.error == fmpq(3, 4)
    assert fact.cell.upper_candidates[0].error == 1            # rank 0: ||A|| = 1 > 3/4
    assert fact.rank_one_error == fmpq(33, 32)
    # the primal point is a probability vector attaining 33/32 ...
    p = [fr(v) for v in fact.p]
    assert all(v >= 0 for v in p) and sum(p) == 1
    A = kron_matrix(F(3, 4), F(3, 4))
    assert max(sum(abs(A[i][j] - p[j]) for j in range(4)) for i in range(4)) == F(33, 32)
    # ... and no probability vector does better: an independent convexity proof.
    # g_j(x) = sum_i |A_ij - x| is convex; a supporting line l_j(x) = a_j + b x
    # gives max_i ||A_i - p|| >= (1/4) sum_j g_j(p_j) >= (1/4)(sum_j a_j + b).
    b = F(2)
    total = F(0)
    for j in range(4):
        col = sorted(A[i][j] for i in range(4))
        a_j = sum(abs(v - col[1]) for v in col) - b * col[1]   # the line through (col[1], g(col[1]))
        # support: l_j <= g_j at every breakpoint, and slopes -4 <= b <= 4 at infinity
        assert all(a_j + b * x <= sum(abs(v - x) for v in col) for x in col)
        total += a_j
    assert (total + b * 1) / 4 == F(33, 32)


def test_fact_row_stochastic_rank_two_within_eps():
    fact = row_stochastic_fact()
    assert fact.rank_two_verdict.verified and fact.rank_two_stochastic
    assert fact.rank_two_error <= fmpq(3, 4)
    # the dual certificate of the rank-one LP checks by weak duality
    assert fact.dual.value == fmpq(33, 32)


def test_fact_hierarchy_at_five_eighths():
    fact = hierarchy_fact()
    assert fact.holds
    assert fact.frobenius.norm == fmpq(225, 256) and fact.frobenius_f2 == fmpq(15, 16)
    assert not fact.frobenius.verified and F(15, 16) <= 2 * F(5, 8)
    assert fact.pinv.norm == fmpq(11, 6) and not fact.pinv.verified and fact.pinv.margin == fmpq(-7, 48)
    assert fact.lp.norm == fmpq(4, 3) and fact.lp.verdict.margin == fmpq(1, 6) and fact.lp.verified
    assert fact.lp.subspace == ("00", "10", "01")
    assert fact.cell.upper_candidate.error == fmpq(9, 16) and (fact.cell.lower, fact.cell.upper) == (3, 3)


def test_hierarchy_singular_values_from_definition():
    # F_2^2 = the two smallest squared singular values of the symmetric PSD A: (3/4)^2 + (9/16)^2
    lam = sorted(walsh_eigenvalues(F(3, 4), F(3, 4)))
    assert lam[0] ** 2 + lam[1] ** 2 == F(15, 16) ** 2


def test_lp_optimal_norm_four_thirds_is_optimal():
    """gamma(W) <= 3/4 from the dual certificate: x = X y has ||A x|| <= 1, ||x|| = 4/3."""
    A = two_bit_matrix(fmpq(3, 4), fmpq(3, 4))
    witness, norm, duals = lp_optimal_reconstruction(A, ("00", "10", "01"))
    assert norm == fmpq(4, 3)
    Af = kron_matrix(F(3, 4), F(3, 4))
    X = witness.X.to_fractions()
    worst = 0
    for i, y in enumerate(duals):
        y = [fr(v) for v in y]
        x = [sum(X[r][k] * y[k] for k in range(3)) for r in range(4)]
        Ax = [sum(Af[r][c] * x[c] for c in range(4)) for r in range(4)]
        assert max(abs(v) for v in Ax) <= 1
        worst = max(worst, max(abs(v) for v in x))
    assert worst == F(4, 3)            # so no R on this W has norm below 4/3


# ---------------------------------------------------------------- property: every rational cell
def rationals(max_den=16):
    return st.integers(1, max_den).flatmap(lambda d: st.integers(0, d).map(lambda n: fmpq(n, d)))


@settings(max_examples=40, deadline=None)
@given(t=rationals(), s=rationals(), eps_list=st.lists(
    st.integers(1, 24).flatmap(lambda d: st.integers(0, 30).map(lambda n: fmpq(n, d))), min_size=2, max_size=4))
def test_every_rational_cell_closes_and_rank_is_monotone(t, s, eps_list):
    lam = walsh_eigenvalues(fr(t), fr(s))
    eps_list = sorted(set(eps_list) | {fmpq(int(v.numerator), int(v.denominator)) for v in lam[1:2]})
    ranks = []
    for eps in eps_list:
        cell = solve_cell(t, s, eps)
        assert cell.closed and cell.verified and not cell.problems, (t, s, eps)
        # the exact tier's margin equals the oracle's for exact reconstruction witnesses (eta = 0)
        if cell.lower_test.kind == "reconstruction":
            assert cell.lower_test.verdict.margin == cell.lower_test.margin
        # finding: r_eps(A(t, s)) = #{Walsh eigenvalues > eps}, checked against the definition
        assert cell.lower == sum(1 for v in lam if v > fr(eps))
        ranks.append(cell.lower)
    assert ranks == sorted(ranks, reverse=True)


@pytest.mark.parametrize("t,s", [("0", "0"), ("0", "1/2"), ("1", "1"), ("1", "1/3"), ("1/2", "1/2")])
def test_degenerate_parameters_close_at_every_breakpoint(t, s):
    lam = walsh_eigenvalues(F(t), F(s))
    for eps in sorted(set(lam) | {F(0), F(1), F(3, 2)}):
        cell = solve_cell(q(t), q(s), fmpq(eps.numerator, eps.denominator))
        assert cell.closed and cell.verified
        assert cell.lower == sum(1 for v in lam if v > eps)


def test_out_of_range_parameters_raise():
    from exact.errors import MalformedInput
    with pytest.raises(MalformedInput):
        solve_cell(fmpq(5, 4), fmpq(1, 2), fmpq(1, 4))
    with pytest.raises(MalformedInput):
        solve_cell(fmpq(1, 2), fmpq(-1, 2), fmpq(1, 4))
    with pytest.raises(MalformedInput):
        solve_cell(fmpq(1, 2), fmpq(1, 2), fmpq(-1, 4))


# ---------------------------------------------------------------- the exact LP
def test_lp_known_optimum_and_certificate():
    sol = solve([1, 1], A_ub=[[-1, -2]], b_ub=[-3])
    assert sol.value == fmpq(3, 2) and sol.x == (0, fmpq(3, 2)) and sol.y_ub == (fmpq(-1, 2),)


def test_lp_infeasible_and_unbounded():
    with pytest.raises(Infeasible):
        solve([1, 0], A_eq=[[1, 1]], b_eq=[-1])
    with pytest.raises(Unbounded):
        solve([-1, 0], A_ub=[[1, -1]], b_ub=[1])


def test_lp_degenerate_problem_terminates():
    # Beale's cycling example: Dantzig's rule cycles, Bland's rule does not.
    c = [fmpq(-3, 4), 150, fmpq(-1, 50), 6]
    A = [[fmpq(1, 4), -60, fmpq(-1, 25), 9], [fmpq(1, 2), -90, fmpq(-1, 50), 3], [0, 0, 1, 0]]
    sol = solve(c, A_ub=A, b_ub=[0, 0, 1])
    assert sol.value == fmpq(-1, 20)


def test_lp_certificate_checker_rejects_tampering():
    sol = solve([1, 1], A_ub=[[-1, -2]], b_ub=[-3])
    args = ([1, 1], [[-1, -2]], [-3], [], [], ())
    check_certificate(*args, sol=sol)
    for bad in (LPSolution(fmpq(1), (fmpq(1), fmpq(0)), sol.y_ub, ()),          # infeasible x
                LPSolution(sol.value, sol.x, (fmpq(-1),), ()),                    # dual infeasible
                LPSolution(sol.value, sol.x, (fmpq(1, 4),), ()),                  # wrong sign
                LPSolution(sol.value, sol.x, (fmpq(-1, 4),), ())):               # duality gap
        with pytest.raises(CertificateFailure):
            check_certificate(*args, sol=bad)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_lp_random_problems_are_certified_or_refused(data):
    n = data.draw(st.integers(1, 4))
    small = st.integers(-3, 3)
    c = data.draw(st.lists(small, min_size=n, max_size=n))
    mu, me = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 2))
    A_ub = [data.draw(st.lists(small, min_size=n, max_size=n)) for _ in range(mu)]
    A_eq = [data.draw(st.lists(small, min_size=n, max_size=n)) for _ in range(me)]
    b_ub = data.draw(st.lists(st.integers(-2, 4), min_size=mu, max_size=mu))
    b_eq = data.draw(st.lists(small, min_size=me, max_size=me))
    free = [j for j in range(n) if data.draw(st.booleans())]
    try:
        sol = solve(c, A_ub, b_ub, A_eq, b_eq, free)
    except (Infeasible, Unbounded):
        return
    check_certificate(c, A_ub, b_ub, A_eq, b_eq, free, sol=sol)


def test_module_doctests():
    for module in (twobit, exactlp):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------- the CLI
def run(*args):
    return subprocess.run([sys.executable, "-m", "oracles.twobit", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_cli_default_prints_table_and_facts():
    out = run()
    assert out.returncode == 0, out.stderr
    assert "Fact 1" in out.stdout and "Fact 2" in out.stdout and "33/32" in out.stdout
    assert "all cells closed and verified" in out.stdout and "MISMATCH" not in out.stdout
    assert "lp_optimal_reconstruction" in out.stdout and "11/6" in out.stdout


def test_cli_json_keys():
    out = run("--json")
    assert out.returncode == 0, out.stderr
    cells = json.loads(out.stdout)
    assert len(cells) == 6
    for cell, (t, s, eps, rank) in zip(cells, PAPER_CELLS):
        assert (cell["t"], cell["s"], cell["eps"]) == (t, s, eps)
        assert cell["lower"] == cell["upper"] == rank and cell["closed"] and cell["verified"]
        for key in ("lower_witness", "upper_witness", "lower_margin", "upper_margin", "upper_error",
                    "lower_norm", "lower_tests"):
            assert key in cell
        assert isinstance(cell["lower"], int) and isinstance(cell["closed"], bool)


def test_cli_single_cell_decimal():
    out = run("--t", "0.75", "--s", "0.75", "--eps", "0.625", "--json")
    assert out.returncode == 0, out.stderr
    (cell,) = json.loads(out.stdout)
    assert (cell["eps"], cell["lower"], cell["upper"], cell["lower_norm"]) == ("5/8", 3, 3, "4/3")


@pytest.mark.parametrize("args", [
    ("--t", "5/4", "--s", "1/2", "--eps", "1/4"),
    ("--t", "1/2", "--s", "-1", "--eps", "1/4"),
    ("--t", "1/2", "--s", "1/2", "--eps", "-1/4"),
    ("--t", "1/2", "--s", "1/2", "--eps=-1/4"),
    ("--t", "1/2", "--s", "1/2", "--eps", "1/4", "--bogus"),
    ("--t", "abc", "--s", "1/2", "--eps", "1/4"),
    ("--t", "1/0", "--s", "1/2", "--eps", "1/4"),
    ("--t", "1e999999999", "--s", "1/2", "--eps", "1/4"),
    ("--t", "1/2"),
])
def test_cli_bad_parameters_exit_2_one_line(args):
    out = run(*args)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "error" in out.stderr and "Traceback" not in out.stderr


def test_cli_export_verifies_with_exact_tier(tmp_path):
    path = tmp_path / "six.safetensors"
    out = run("--export", str(path))
    assert out.returncode == 0, out.stderr
    check = subprocess.run([sys.executable, "-m", "exact", "verify", str(path), "--json"], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    doc = json.loads(check.stdout)
    assert doc["all_verified"] and [c["lower"] for c in doc["cells"]] == [4, 3, 2, 1, 3, 1]


def test_cli_export_single_dyadic_cell_with_rounded_witness(tmp_path):
    path = tmp_path / "one.safetensors"       # R has entries in thirds: rounded, defect absorbed (K.3)
    assert run("--t", "3/4", "--s", "3/4", "--eps", "5/8", "--export", str(path)).returncode == 0
    check = subprocess.run([sys.executable, "-m", "exact", "verify", str(path)], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


def test_cli_export_rank_zero_cell_as_zero_width_factors(tmp_path):
    path = tmp_path / "zero.safetensors"      # eps = ||A||_row1 = 1: B = 0, factors of shape 4 x 0
    assert run("--t", "1/2", "--s", "1/2", "--eps", "1", "--export", str(path)).returncode == 0
    check = subprocess.run([sys.executable, "-m", "exact", "verify", "--json", str(path)], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    (cell,) = json.loads(check.stdout)["cells"]
    assert (cell["lower"], cell["upper"], cell["upper_witness"]) == (0, 0, "factors")


@pytest.mark.parametrize("args,needle", [
    (("--t", "1/3", "--s", "1/2", "--eps", "1/4"), "dyadic"),
    (("--t", "3/4", "--s", "3/4", "--eps", f"{3 * 2**58 - 1}/{2**60}"), "rounding"),   # margin 2^-60 * 4/3
])
def test_cli_export_refuses_unrepresentable_cells(tmp_path, args, needle):
    out = run(*args, "--export", str(tmp_path / "x.safetensors"))
    assert out.returncode == 2 and needle in out.stderr and out.stderr.count("\n") == 1
    assert not (tmp_path / "x.safetensors").exists()


def test_oracle_runs_without_the_float_tier():
    code = ("import sys, oracles.twobit as tb; tb.paper_cells(); tb.row_stochastic_fact(); "
            "bad = [m for m in ('torch', 'scipy', 'highspy', 'transformers') if m in sys.modules]; "
            "print(bad); raise SystemExit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_cli_export_into_a_missing_directory_is_one_line_exit_2(tmp_path, capsys):
    """No directory chain is created for a typo: one line, exit 2, nothing written (in-process);
    negative control: the same command into an existing directory writes the file."""
    from oracles.twobit import main

    target = tmp_path / "no" / "such" / "dir" / "x.safetensors"
    assert main(["--t", "1/2", "--s", "1/2", "--eps", "1/4", "--export", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err and "Traceback" not in err
    assert not (tmp_path / "no").exists()
    target = tmp_path / "x.safetensors"
    assert main(["--t", "1/2", "--s", "1/2", "--eps", "1/4", "--export", str(target)]) == 0
    assert target.is_file()

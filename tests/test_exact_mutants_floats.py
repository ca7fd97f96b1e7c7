"""The float filter's error terms against the formulas that prove them (mutation-run survivors).

``exact.floats`` bounds rounding errors by formulas (module docstring: ``g_n``
times the row sums of ``|A||B|``, ``2^-52`` times each rounded sum, ``up``
after every operation). Each term is much larger than the error that real
inputs make, so a test of soundness alone (bound >= exact value) cannot see
a term that was dropped or shrunk: the mutation run
(``bench/mutation.py --only floats.py --kind rounding``) showed it. Here each
bound is compared, in exact rational arithmetic, with the formula of its
proof computed from the same floats: it must be at least the formula
(soundness of the implementation of the proof) and at most the formula plus
a few ulps of relative slack per rounding (tightness: a loosened term would
make the filter pick every row).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from flint import fmpq, fmpq_mat

from exact import floats

U52 = Fraction(1, 2**52)


def fr(M) -> np.ndarray:
    """Exact Fraction copy of a float array."""
    return np.vectorize(Fraction, otypes=[object])(np.asarray(M, dtype=np.float64))


def rowsum(M) -> list:
    return [sum(row, Fraction(0)) for row in M]


def _nonneg(rng, *shape):
    """Non-negative floats whose sums round: magnitudes over 2^40, odd mantissas."""
    return np.abs(rng.normal(size=shape)) * 2.0 ** rng.integers(-20, 20, size=shape)


@pytest.mark.parametrize("seed", range(4))
def test_sum_up_and_mv_up_bound_the_exact_values_within_their_formula(seed):
    """``_sum_up(M) >= sum_j M_ij`` and ``_mv_up(M, x) >= M x`` (exact), each within its formula's
    ``1 + g_n`` and a few ulps: ``<= (1 + g_n + 4 2^-52)`` times the float result, plus TINY terms."""
    rng = np.random.default_rng(seed)
    M, x = _nonneg(rng, 5, 9), _nonneg(rng, 9)
    n, g = 9, floats.g(9)
    exact_sums, exact_mv = rowsum(fr(M)), list(fr(M) @ fr(x))
    s, mv = floats._sum_up(M), floats._mv_up(M, x)
    tiny = Fraction(floats.TINY)
    for i in range(5):
        assert Fraction(s[i]) >= exact_sums[i]
        assert Fraction(s[i]) <= Fraction(M.sum(axis=1)[i]) * (1 + Fraction(g) + 4 * U52) + 2 * tiny
        assert Fraction(mv[i]) >= exact_mv[i] + n * tiny            # the underflow term is in the formula
        assert Fraction(mv[i]) <= Fraction((M @ x)[i]) * (1 + Fraction(g) + 8 * U52) + (n + 4) * tiny
    assert (floats._sum_up(np.array([[1.0, 1.0]])) > 2.0).all()       # a sum that rounds exactly still moves up


def test_mv_up_covers_underflow():
    """Products below 2^-1075 vanish in float (``M x`` computes 0): the bound keeps the formula's
    underflow term ``n 2^-1022`` (n = 4 products per entry), above the exact ``4 2^-1100``."""
    M, x = np.full((3, 4), 2.0**-600), np.full(4, 2.0**-500)
    assert (M @ x == 0).all()
    for b in floats._mv_up(M, x):
        assert Fraction(b) >= 4 * Fraction(floats.TINY) > 4 * Fraction(2) ** -1100


def _product_formula(X, Y):
    """The error formula of ``floats._product``'s docstring, exactly, from the same splits and sums."""
    (Xh, Xl, bX), (Yh, Yl, bY) = X, Y
    k = Xh.shape[1]
    tau = floats._tau(k)
    sx, sy = floats._split(Xh, 1, tau), floats._split(Yh, 0, tau)
    pairs = [(sx[0], sy[1]), (sx[1], sy[0]), (sx[1], sy[1]), (Xh, Yl), (Xl, Yh), (Xl, Yl)]
    pairs = [(A, B) for A, B in pairs if A is not None and B is not None]
    products = [rowsum(abs(fr(A)) @ abs(fr(B))) for A, B in pairs]
    rest, sums = None, []
    for A, B in pairs:
        rest = A @ B if rest is None else rest + A @ B
        sums.append(rowsum(abs(fr(rest))))
    absX = abs(fr(Xh)) + (0 if Xl is None else abs(fr(Xl)))
    absY = abs(fr(Yh)) + (0 if Yl is None else abs(fr(Yl)))
    out = []
    for i in range(Xh.shape[0]):
        e = Fraction(floats.g(k)) * sum(p[i] for p in products) + U52 * sum(s[i] for s in sums[1:])
        if bY is not None:
            e += sum(absX[i, j] * Fraction(bY[j]) for j in range(k))
        if bX is not None:
            e += Fraction(bX[i]) * (max(rowsum(absY)) + (0 if bY is None else max(map(Fraction, bY))))
        out.append(e)
    return out, rest


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("with_lo", [None, (-27, -70), (-27, -40)])
@pytest.mark.parametrize("scale", [0, -476])
def test_product_error_bound_is_its_formula(seed, with_lo, scale):
    """``_product``'s beta is at least the docstring's formula (g_k times the row sums of |A||B| over the
    products, 2^-52 times each rounded sum, |X| dY, max(|Y| 1 + dY) dX, and the underflow term ``k 2^-1022``
    per entry of each float product) and at most 2^-40 (relative) plus twice that underflow term above it.
    Operands as the chain makes them: lo parts about 2^-27 of the hi parts (the cross products of a
    split), error bounds small (2^-70: the g_k term decides) or not (2^-40: the dX, dY terms decide);
    entries near 1, or near 2^-476 (the smallest grids allowed: the underflow term is then seen)."""
    rng = np.random.default_rng(seed)
    m, k, n = 4, 5, 3
    s = 2.0**scale
    Xh, Yh = rng.normal(size=(m, k)) * s, rng.normal(size=(k, n)) * s
    if with_lo:
        lo, b = with_lo
        X = (Xh, rng.normal(size=(m, k)) * s * 2.0**lo, np.abs(rng.normal(size=m)) * s * 2.0**b)
        Y = (Yh, rng.normal(size=(k, n)) * s * 2.0**lo, np.abs(rng.normal(size=k)) * s * 2.0**b)
    else:
        X, Y = (Xh, None, None), (Yh, None, None)
    T, rest, beta = floats._product(X, Y)
    formula, rest_again = _product_formula(X, Y)
    assert np.array_equal(rest, rest_again)
    underflow = (3 if with_lo is None else 6) * k * n * Fraction(floats.TINY)
    for i in range(m):
        assert formula[i] + underflow <= Fraction(beta[i]) <= formula[i] * (1 + Fraction(1, 2**40)) + 2 * underflow


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("nfactors", [0, 2, 3])
def test_row_bounds_are_the_proved_enclosure(seed, nfactors):
    """``row_bounds``: with ``D = fl(fl(C - hi) - lo)`` and beta the chain's bound, the exact row sums of
    |D| widened by ``beta + 2^-52 (row sums of |C - hi| and of |D|)`` lie inside [lo, hi], and lo, hi are
    within 2^-40 (relative) of that interval."""
    rng = np.random.default_rng(seed)
    m, k, n = 6, 3, 5
    factors = [rng.normal(size=(m, k)), rng.normal(size=(k, n)), rng.normal(size=(n, n))][:nfactors]
    if nfactors == 2:
        factors[1] = rng.normal(size=(k, n))
    C = rng.normal(size=(m, n))
    lo, hi = floats.row_bounds(C, factors)
    if factors:
        h, l, beta = floats._chain(factors)
        first = C - h
        D = first if l is None else first - l
        widen = [(0 if beta is None else Fraction(beta[i])) + U52 * (a + b)
                 for i, (a, b) in enumerate(zip(rowsum(abs(fr(first))), rowsum(abs(fr(D)))))]
    else:
        D, widen = C, [Fraction(0)] * m
    S = rowsum(abs(fr(D)))
    slack = Fraction(1, 2**40)
    for i in range(m):
        top, bottom = S[i] + widen[i], S[i] - widen[i]
        assert top <= Fraction(hi[i]) <= top * (1 + slack)
        assert bottom * (1 - slack) <= Fraction(lo[i]) <= bottom


def _fmpq_mat(M):
    return fmpq_mat(M.shape[0], M.shape[1], [fmpq(*v.as_integer_ratio()) for v in M.ravel().tolist()])


def test_exact_pieces_sum_exactly_on_full_mantissas():
    """``exact_pieces``: products of slices whose exact sum is the product, on operands of full 53-bit
    mantissas and mixed signs (every slice at its largest number of grid steps, inner dimensions 1 to 8).
    A grid taken 4 times finer after the first split (more steps than ``_tau`` allows) breaks it."""
    for seed in range(100):
        rng = np.random.default_rng(seed)
        k = int(rng.integers(1, 9))
        X = rng.uniform(0.5, 1, size=(3, k)) * rng.choice([-1, 1], size=(3, k))
        Y = rng.uniform(0.5, 1, size=(k, 3)) * rng.choice([-1, 1], size=(k, 3))
        pieces = floats.exact_pieces([X], Y)
        assert pieces is not None and all(np.isfinite(p).all() for p in pieces)
        total = _fmpq_mat(pieces[0])
        for p in pieces[1:]:
            total += _fmpq_mat(p)
        assert total == _fmpq_mat(X) * _fmpq_mat(Y), seed


def test_exact_pieces_stop_past_max_pieces_and_not_before():
    """``exact_pieces(..., max_pieces)`` returns the pieces when there are at most ``max_pieces`` of them,
    and None (FLINT takes over) when there would be more."""
    rng = np.random.default_rng(0)
    X, Y = rng.uniform(0.5, 1, size=(3, 4)), rng.uniform(0.5, 1, size=(4, 3))
    count = len(floats.exact_pieces([X], Y))
    assert count > 1
    assert len(floats.exact_pieces([X], Y, max_pieces=count)) == count
    assert floats.exact_pieces([X], Y, max_pieces=count - 1) is None


def _spy(monkeypatch, name: str) -> list:
    """Record (function, source line) of every call of ``floats.up`` or ``floats.down``."""
    import linecache
    import sys

    calls, real = [], getattr(floats, name)

    def spy(x):
        frame = sys._getframe(1)
        calls.append((frame.f_code.co_name, linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()))
        return real(x)

    monkeypatch.setattr(floats, name, spy)
    return calls


def test_every_error_term_rounds_up_and_only_the_lower_sum_rounds_down(monkeypatch):
    """The direction of every rounding in the filter (module docstring): an error term, a bound on an
    absolute value or a sum, and the upper row sum are rounded *up*; only the lower row sum ``lo_sum``
    is rounded *down*. A value test cannot see one rounding turned the other way (each term carries
    more margin than one rounding: ``bench/mutation.py --only floats.py``), so the calls are audited:
    every call of ``down`` comes from the ``lo_sum`` line, and no call of ``up`` does. Chains of both
    multiplication orders with lo parts and error bounds on each side reach every branch of
    ``_product`` (asserted)."""
    ups, downs = _spy(monkeypatch, "up"), _spy(monkeypatch, "down")
    rng = np.random.default_rng(5)
    for shapes in ([(6, 3), (3, 4), (4, 5)], [(6, 5), (5, 4), (4, 2)], [(2, 5), (5, 4), (4, 6)], [(6, 2), (2, 7), (7, 5), (5, 5)]):
        factors = [rng.normal(size=s) for s in shapes]
        assert floats.row_bounds(rng.normal(size=(shapes[0][0], shapes[-1][1])), factors) is not None
    X = (rng.normal(size=(4, 3)), rng.normal(size=(4, 3)) * 2.0**-30, np.full(4, 2.0**-60))
    Y = (rng.normal(size=(3, 5)), rng.normal(size=(3, 5)) * 2.0**-30, np.full(3, 2.0**-60))
    assert floats._product(X, Y) is not None          # lo parts on both sides: not reached by a chain
    assert downs and all(fn == "row_bounds" and line.startswith("lo_sum =") for fn, line in downs)
    assert not any(line.startswith("lo_sum =") for _, line in ups)
    lines = {line for fn, line in ups if fn == "_product"}
    for part in ("err = up(err + _mv_up(np.abs(A)", "rounding = up(rounding", "absX = ",
                 "err = up(err + _mv_up(absX", "ymax = ", "err = up(err + up(bX"):
        assert any(line.startswith(part) for line in lines), part
    assert {fn for fn, _ in ups} >= {"_sum_up", "_mv_up", "_product", "row_bounds"}


@pytest.mark.parametrize("seed", range(3))
def test_row_bounds_upper_sum_is_at_least_its_docstring_formula(seed):
    """``hi = S (1 + g_n) + beta + 2^-52 (row sums of |C - hi| and of |D|)`` exactly (``S`` the float
    row sum of |D|, ``g_n`` and beta the code's own floats), and at most 3 2^-52 S above it: the
    ``2^-52`` terms for the two roundings of D are each needed (either one dropped or subtracted
    falls below the formula on some row), while ``g_n`` covers the sum ``S`` itself."""
    rng = np.random.default_rng(seed)
    m, k, n = 400, 3, 4
    F1, F2 = rng.normal(size=(m, k)), rng.normal(size=(k, n))
    C = F1 @ F2 + rng.normal(size=(m, n)) * 2.0**-20       # cancellation: D much smaller than C - hi
    lo, hi = floats.row_bounds(C, [F1, F2])
    h, l, beta = floats._chain([F1, F2])
    first = C - h
    D = first if l is None else first - l
    S = np.abs(D).sum(axis=1)
    gn = Fraction(floats.g(n))
    for i in range(m):
        base = Fraction(S[i]) * (1 + gn) + (0 if beta is None else Fraction(beta[i]))
        formula = base + U52 * (sum(abs(fr(first[i]))) + sum(abs(fr(D[i]))))
        assert formula <= Fraction(hi[i]) <= formula + 3 * U52 * Fraction(S[i]) + U52 * formula, i

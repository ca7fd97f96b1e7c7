"""Mutants of ``exact/`` that change no behaviour, each with its reason (used by ``bench/mutation.py``).

Two kinds: truly equivalent (the same thing on every input the checker can
reach), and *same value, cost only* (the same exact value by another route,
or with other intermediate integers: only the work changes).
"""
from __future__ import annotations

_PROBE = "the probe gives the same answer as the original in all six environments that " \
         "test_the_arithmetic_probe_refuses_every_other_environment sets (4 rounding modes, FTZ, DAZ): another clause decides"
_PROBE_LINES = {
    "return bool((one + 2.0**-54 == 1.0)[0] and (one + 3 * 2.0**-54 == 1.0 + 2.0**-52)[0]":
        [(21, "+", "-"), (32, "==", "<="), (32, "==", ">="), (67, "==", ">=")],
    "and (-one - 3 * 2.0**-54 == -1.0 - 2.0**-52)[0]": [(41, "==", "<="), (41, "==", ">=")],
    "and (np.full(1, 2.0**-1074) * 2 * 2.0**1000 == 2.0**-73)[0]": [(60, "==", "<="), (60, "==", ">=")],
    "and (np.full(1, 2.0**-1022) / 4 * 2.0**1000 == 2.0**-24)[0])": [(60, "==", "<="), (60, "==", ">=")],
}
_KINDS = ("the kinds a file may name are checked by exact.bracketfile (trivial, factors, reconstruction, "
          "row_reconstruction, frobenius, odd_map), and on each reachable one the order comparison agrees with the original")
_TINY = ("a TINY (2^-1022) term moves only terms below 2^-1000: every row holds exp(0) = 1 at its maximum, so Z "
         "and dev (>= 2 delta / n > 2^-60) round to the same floats: the result is bitwise the same")
_ZERO = ("the shifts already give 0 there: magnitude < 2^53, so a right shift by 53 or more (down is clipped "
         "to 63) is 0, and a left shift by 62 or more (up clipped to 63) leaves no bit under the 62-bit mask")
_FLINT_SHAPES = ("shapes that do not fit and pass this order test meet FLINT's own shape check: ValueError as "
                 "well (tests/test_exact_mutants_matrix.py); the certificate checks compare shapes before they combine")
_ROUTE = 'same value, cost only: the floats only choose a route (and rows); every route computes the norm exactly'
#: (file, line text, original, mutant[, column]) -> why the mutant computes the same thing. The column is
#: given where one line holds the same operator twice and only one of the two mutants is equivalent.
EQUIVALENT = {
    **{("floats.py", text, old, new, col): _PROBE for text, spans in _PROBE_LINES.items() for col, old, new in spans},
    ("floats.py", "while k * (2 ** (52 - tau) + 1) ** 2 > 2**53:", ">", ">="):
        "k (2^(52 - tau) + 1)^2 is never 2^53: the squared factor is odd",
    ("floats.py", "while x.shape[1] > 1:", ">", "!="):
        "pairwise_row_sums only sees rows of a non-empty target (empty targets are refused), where both loops stop at width 1",
    ('frobenius.py', 'if k == 0:', '==', '<'):
        'k >= 0 is checked before, and the general formula gives 0 at k = 0',
    ('frobenius.py', 'if k == 0:', '==', '<='):
        'k >= 0 is checked before, and the general formula gives 0 at k = 0',
    ('frobenius.py', 'S = A.T @ A if A.ncols <= A.nrows else A @ A.T', '<=', '!='):
        'same verdict, cost only: A^T A and A A^T have the same non-zero eigenvalues',
    ('frobenius.py', 'S = A.T @ A if A.ncols <= A.nrows else A @ A.T', '<=', '<'):
        'same verdict, cost only: A^T A and A A^T have the same non-zero eigenvalues',
    ('frobenius.py', 'S = A.T @ A if A.ncols <= A.nrows else A @ A.T', '<=', '=='):
        'same verdict, cost only: A^T A and A A^T have the same non-zero eigenvalues',
    ('frobenius.py', 'S = A.T @ A if A.ncols <= A.nrows else A @ A.T', '<=', '>'):
        'same verdict, cost only: A^T A and A A^T have the same non-zero eigenvalues',
    ('frobenius.py', 'S = A.T @ A if A.ncols <= A.nrows else A @ A.T', '<=', '>='):
        'same verdict, cost only: A^T A and A A^T have the same non-zero eigenvalues',
    ('frobenius.py', 'hint = S.scale(fmpq(1, 2**shift) if shift >= 0 else fmpq(2**(-shift))).to_float64()', '>=', '>'):
        'at shift 0 both branches scale by 1',
    ('reconstruction.py', 'if eta >= 1:', '>=', '=='):
        'same verdict: eta > 1 makes the final margin 1 - eta - ||R|| eps negative anyway (only the reason changes)',
    ('trivial.py', 'if rank != p:', '!=', '<'):
        'a rank above p is refused earlier (exact.certificates)',
    ('trivial.py', 'if rank == 0:', '==', '<='):
        'a rank is never negative',
    ('trivial.py', 'if rank != 1:', '!=', '>'):
        'a rank is never negative, and rank 0 returned before',
    ("floats.py", 'if not (((sigma >= _GRID_MIN) & (sigma <= _GRID_MAX)) | ~active).all():', ">=", ">"):
        "same value, cost only: a grid exactly at 2^-450 is refused and that product goes to FLINT",
    ("floats.py", 'if not (((sigma >= _GRID_MIN) & (sigma <= _GRID_MAX)) | ~active).all():', "<=", "<"):
        "same value, cost only: a grid exactly at 2^450 is refused and that product goes to FLINT",
    ("floats.py", 'step = None if len(out) == MAX_SLICES else _split(rest, axis, tau, sigma)', "==", ">="):
        "len(out) grows by one from 0, so len(out) >= MAX_SLICES first holds where == does",
    ("floats.py", 'step = None if len(out) == MAX_SLICES else _split(rest, axis, tau, sigma)', "==", ">"):
        "same value, cost only: one slice more is allowed, and every slice is exact",
    ("floats.py", "return from_right <= from_left", "<=", '!='):
        "same value, cost only: the other multiplication order, which gives a proved bound (filter) or the same exact product",
    ("floats.py", "return from_right <= from_left", "<=", '<'):
        "same value, cost only: the other multiplication order, which gives a proved bound (filter) or the same exact product",
    ("floats.py", "return from_right <= from_left", "<=", '=='):
        "same value, cost only: the other multiplication order, which gives a proved bound (filter) or the same exact product",
    ("floats.py", "return from_right <= from_left", "<=", '>'):
        "same value, cost only: the other multiplication order, which gives a proved bound (filter) or the same exact product",
    ("floats.py", "return from_right <= from_left", "<=", '>='):
        "same value, cost only: the other multiplication order, which gives a proved bound (filter) or the same exact product",
    ("slack.py", 'abs(arb(2).log() - fmpq(*hi.as_integer_ratio()) - fmpq(*lo.as_integer_ratio())) < _LN2_ERR)', "<", "<="):
        "arb's < and <= differ only on a ball that is exactly the point 2^-80; ln 2 is irrational, so the ball has a radius",
    ("slack.py", "live = t >= _DEAD", ">=", '!='):
        "at t <= _DEAD the clamped exp is below 2^-1074, so v (1 - delta) - TINY < 0 and lo is 0 whether live or not",
    ("slack.py", "live = t >= _DEAD", ">=", '>'):
        "at t <= _DEAD the clamped exp is below 2^-1074, so v (1 - delta) - TINY < 0 and lo is 0 whether live or not",
    **{("slack.py", "if not above and (value is None or value > slack):", old, new): why for old, new, why in (
        ("is", "is not", "value is None is not reached (after the shift Z >= 1 and every ball is finite); the mutant "
                         "encloses every row the float bound left again at 256 bits: same verdict, cost only"),
        (">", "!=", "same verdict, cost only: a row 64 bits proved is enclosed again at 256 bits, a ball inside "
                    "[distance, 64-bit bound] up to 2^-250"),
        (">", ">=", "same verdict, cost only: a row whose 64-bit bound is the slack itself is enclosed again, "
                    "finer"))},
    ("slack.py", "if exponent >= 0:", ">=", ">"):
        "at exponent 0 both branches give fmpq(mantissa)",
    ("norms.py", "nonzero = np.abs(block[block != 0])", "!=", "=="):
        "same value, cost only: every block is then scaled by 2^0, and K undoes any scaling exactly",
    ("norms.py", "e = 0 if nonzero.size == 0 else int(np.frexp(nonzero.max())[1])", "==", ">="):
        "same value, cost only: every block is then scaled by 2^0, and K undoes any scaling exactly",
    ("norms.py", "e = 0 if nonzero.size == 0 else int(np.frexp(nonzero.max())[1])", "==", "<="):
        "a size is never negative",
    ('norms.py', 'if nonzero.size and np.frexp(nonzero.min())[1] - e < -1021:', '<', '!='):
        "same value, cost only: the block is left unscaled more often, which is always exact",
    ('norms.py', 'if nonzero.size and np.frexp(nonzero.min())[1] - e < -1021:', '<', '<='):
        "same value, cost only: the block is left unscaled more often, which is always exact",
    **{('norms.py', 'low, side = min(exps), n <= r                     # side by side: coefficients (n q) x n, else r x (r q)', '<=', new): "same value, cost only: side by side or stacked, the +-2^k coefficients give the same signed sum" for new in ('!=', '<', '==', '>', '>=')},
    **{('norms.py', 'if floats and C.nrows > 1:', '>', new): _ROUTE for new in ('!=', '<', '<=', '==', '>=')},
    ('norms.py', 'chosen = np.flatnonzero(hi >= lo.max())', '>=', '>'):
        "hi > lo strictly (up/down move by at least an ulp), so the row with the largest lo stays; a row dropped, hi = max lo, can at most tie the maximum",
    **{('norms.py', 'if floats and (len(chosen) <= FEW_ROWS or not factors):', '<=', new): _ROUTE for new in ('!=', '<', '==', '>', '>=')},
    ('norms.py', 'whole = bounds is None and len(chosen) <= ROW_BLOCK', 'is', 'is not'):
        _ROUTE,
    **{('norms.py', 'whole = bounds is None and len(chosen) <= ROW_BLOCK', '<=', new): _ROUTE for new in ('!=', '<', '==', '>', '>=')},
    ('norms.py', 'if len(factors) > 1 and right_first([(len(chosen), factors[0].ncols)] + [F.shape for F in factors[1:]]):', '>', '=='):
        _ROUTE,
    ('norms.py', 'if len(factors) > 1 and right_first([(len(chosen), factors[0].ncols)] + [F.shape for F in factors[1:]]):', '>', '>='):
        _ROUTE,
    ("matrix.py", "if m == 0 or n == 0:", "==", "<="):
        "a shape is never negative",
    **{("matrix.py", "if not (0 <= i < self.nrows and 0 <= j < self.ncols):", "<", new, col):
       "an index at or past the end (never below 0, checked first) meets fmpz_mat's own bounds check: IndexError as well"
       for new in ("<=", "!=") for col in (23, 47)},
    **{("matrix.py", text, "!=", new): _FLINT_SHAPES
       for text in ("if self.ncols != other.nrows:", "if self.shape != other.shape:") for new in ("<", ">")},
    ("matrix.py", "part = np.where(rel >= 0, magnitude << up, magnitude >> down)", ">=", ">"):
        "at rel = 0 both shifts are by 0",
    **{("matrix.py", "part[(rel >= _LIMB) | (rel <= -53)] = 0", old, new): _ZERO
       for old, new in ((">=", ">"), (">=", "=="), ("<=", "<"), ("<=", "=="))},
    ("matrix.py", "limbs.append(np.where(ints < 0, -part.astype(np.int64), part.astype(np.int64)))", "<", "<="):
        "where ints = 0, part is 0 and -0 = 0",
    ("matrix.py", "if not allow_empty and (m == 0 or n == 0):", "==", "<="):
        "a shape is never negative",
    ("__main__.py", 'if __name__ == "__main__":', "==", "<="):
        'run as python -m exact, __name__ is "__main__" (both true); imported, it is "exact.__main__", and "e" > "_"',
    **{("cli.py", "if workers <= 1 or len(tasks) <= 1:", "<=", "==", col): why for col, why in (
        (15, "workers >= 1 (main refuses --workers below 1)"), (34, "there is a task per file at least, and a file at least"))},
    ("cli.py", 'closed = sum(c["lower"] == c["upper"] and c["lower_verified"] and c["upper_verified"] for c in cells)', "==", ">="):
        "a cell verified on both sides has lower <= upper (a lower rank above the upper one refutes both sides)",
    ("bracketfile.py", "if len(raw) != n:", "!=", "<"):
        "a read of n bytes never returns more than n",
    ("bracketfile.py", "if begin > covered:", ">", "!="):
        "the line before refuses begin < covered, so here begin != covered is begin > covered",
    ("cellspec.py", 'ok = isinstance(value, str) if typ == "tensor" else type(value) is int and value >= 0', "==", ">="):
        'field types are "tensor" and "int" only (UPPER_KINDS, LOWER_KINDS), and "int" < "tensor"',
    ("cellspec.py", "raise ValueError(f\"{what} witness {key} must be a {'tensor name' if typ == 'tensor' else 'int >= 0'}\")",
     "==", ">="):
        'field types are "tensor" and "int" only (UPPER_KINDS, LOWER_KINDS), and "int" < "tensor"',
    ("bracketfile.py", 'if typ == "tensor":', "==", ">="):
        'field types are "tensor" and "int" only (UPPER_KINDS, LOWER_KINDS), and "int" < "tensor"',
    ("bracketfile.py", 'if set(metadata) != {"softrank"}:', "!=", ">"):
        "the line before requires the key softrank, so the key set differs from {softrank} exactly when it is a proper superset",
    ("bracketfile.py", "if covered != data_size:", "!=", "<"):
        "every tensor's end is <= data_size (checked above), so covered <= data_size and != is <",
    ("bracketfile.py", "while pos < end or (keep and not parts):", "<", "!="):
        "each step is at most end - pos, so pos never passes end: pos != end is pos < end",
    ("cli.py", "if count > 1:", ">", ">="):
        "a one-cell file is judged whole or as the cells [0]: the same report, in the same process",
    ("cli.py", "count, header = header_facts(p) if workers > 1 else (0, None)", ">", "!="):
        "workers >= 1 (main refuses --workers below 1 before it makes tasks)",
    ("cli.py", 'return "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in str(text))', "<=", "<"):
        "the one character then escaped (a space, or a tilde) is its own ascii() image: the same text",
    **{("slack.py", text, old, new, col): _TINY for text, old, new, col in (
        ("lo = np.maximum(v * (1 - delta) - TINY, 0.0) * live", "-", "+", 36),
        ("hi = v * (1 + delta) + TINY", "+", "-", 25),
        ("s_lo = lo / zhi[:, None] * (1 - 2.0**-50) - TINY      # e_j / Z lies in [s_lo, s_hi]", "-", "+", 46),
        ("s_hi = hi / zlo[:, None] * (1 + 2.0**-50) + TINY", "+", "-", 46))},
    **{("slack.py", "bad = (np.abs(r) > 0.35).any(axis=1) | ~np.isfinite(hi).all(axis=1)", ">", new):
       "|r| <= ln 2 / 2 + 2^-40 < 0.35 for every t (k = rint(t / ln 2)): the guard is never met, at 0.35 neither"
       for new in ("==", ">=")},
    **{("slack.py", "return s_lo, s_hi, g, zlo > 0", ">", new):
       "zlo is a sum of lo >= 0 times 1 - g, never negative; at zlo = 0, s_hi is hi / 0 and dev not finite (NaN anyway)"
       for new in ("!=", ">=")},
    ("rational.py", "if q is not None and int(q) == 0:", "==", "<="):
        "q matches [0-9]+, so int(q) is never negative",
    ("rational.py", 'return -value if sign == "-" else value', "==", ">="):
        'sign matches [+-]?: of "", "+" and "-" only "-" is >= "-"',
    ("rational.py", "value = fmpq(digits * 10**e, 1) if e >= 0 else fmpq(digits, 10**(-e))", ">=", ">"):
        "at e = 0 both branches give fmpq(digits)",
    ("rational.py", 'return str(q.p) if q.q == 1 else f"{q.p}/{q.q}"', "==", "<="):
        "a canonical denominator is never below 1",
    **{("verify.py", text, "==", new): _KINDS for text, new in (
        ('if kind == "trivial":', ">="), ('if kind == "factors":', "<="), ('if kind == "row_reconstruction":', ">="),
        ('if kind == "frobenius":', "<="), ('if kind == "odd_map":', "<="), ('if kind == "odd_map":', ">="))},
    ("verify.py", 'return TrivialUpper() if side == "upper" else TrivialLower()', "==", ">="):
        'side is "lower" or "upper", and "lower" < "upper"',
    ("verify.py", 'if eps < 0 and claim.kind != "trivial":', "!=", "<"):
        _KINDS,
    ("oddmap.py", "return d if count == vertices else None", "==", "<="):
        "the loop above ends with count >= vertices, so count <= vertices is count == vertices",
    ("oddmap.py", "grow(nxt, rest, acc | {labels[nxt - (nxt > middle)]})", ">", ">="):
        "nxt is the product index of a nonzero sign vector, never the zero vector's index middle",
    ("oddmap.py", "ok = (np.abs(a[:, 0]) < 2.0**53) & (a[:, 0] == np.floor(a[:, 0])) & (np.abs(a[:, 1]) == 1)",
     "==", "<=", 48): "a finite float is never below its floor, so a <= floor(a) is a == floor(a)",
    ("oddmap.py", "ok = (np.abs(a[:, 0]) < 2.0**53) & (a[:, 0] == np.floor(a[:, 0])) & (np.abs(a[:, 1]) == 1)",
     "floor", "ceil"): "a finite float equals its ceiling exactly when it equals its floor (an integer)",
}

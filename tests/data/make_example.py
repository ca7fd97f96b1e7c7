"""Regenerate ``tests/data/example.safetensors``, the worked example of ``docs/bracket-format.md``.

Cells of every witness kind on matrices whose r_eps is known (MATH.md
sections 2 and 4): the two-bit oracle's closing cells (reconstruction
witnesses LP-optimal on a Walsh subspace, then rounded to float64, so their
defect terms E are small but nonzero), a 2 x 2 channel by the row side, the
identity by the Frobenius tail, a wide 2 x 3 matrix by the row side, and a
softmax target with a proved slack. Deterministic: running it twice writes
the same bytes.

    python -m tests.data.make_example [OUT]        # default: next to this script
    python -m exact verify tests/data/example.safetensors
"""
from __future__ import annotations

import argparse
import math
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np


from exact.cellspec import CellSpec, Claim, TargetSpec
from fileio.bracketwriter import rational_string, write_bracket_file
from tests import independent_checker as ind

DEFAULT_OUT = Path(__file__).resolve().with_name("example.safetensors")


def f64(rows) -> np.ndarray:
    """Exact Fractions rounded to the nearest float64 (witnesses may be rounded; targets here are dyadic)."""
    return np.array([[float(x) for x in row] for row in rows], dtype=np.float64)


def build():
    """(cells, tensors) of the worked example."""
    tensors: dict[str, np.ndarray] = {}
    cells: list[CellSpec] = []

    def cell(cid, eps, target, lower, upper, note):
        cells.append(CellSpec(cid, rational_string(eps), target, lower, upper,
                              {"source": "tests/data/make_example.py", "note": note}))

    # two-bit oracle, MATH.md section 4: the six closing cells
    lam = lambda t, s: {"1": Fr(1), "t": Fr(t), "s": Fr(s), "ts": Fr(t) * Fr(s)}
    six = [((3, 4), (1, 2), Fr(1, 4), 4, ("1", "s", "t", "ts"), None),
           ((3, 4), (1, 2), Fr(7, 16), 3, ("1", "s", "t"), ("1", "s", "t")),
           ((3, 4), (1, 2), Fr(5, 8), 2, ("1", "t"), ("1", "t")),
           ((3, 4), (1, 2), Fr(7, 8), 1, None, Fr(7, 32)),
           ((3, 4), (3, 4), Fr(5, 8), 3, ("1", "s", "t"), ("1", "s", "t")),
           ((3, 4), (3, 4), Fr(3, 4), 1, None, Fr(7, 64))]
    for i, (t, s, eps, r, lower_names, upper) in enumerate(six):
        t, s = Fr(*t), Fr(*s)
        A = ind.two_bit(t, s)
        name = f"A_{t.numerator}_{t.denominator}_{s.numerator}_{s.denominator}"
        tensors[name] = f64(A)
        if lower_names is None:
            lower = Claim.of(1, "trivial")
        else:
            X = ind.walsh_basis(*lower_names)
            tensors[f"R{i}"], tensors[f"X{i}"] = f64(ind.lp_optimal_R(A, X)), f64(X)
            tensors[f"L{i}"] = f64(ind.pseudo_inverse(X))
            lower = Claim.of(r, "reconstruction", R=f"R{i}", X=f"X{i}", L=f"L{i}")
        if upper is None:
            up = Claim.of(r, "trivial")
        elif isinstance(upper, Fr):
            tensors[f"P{i}"], tensors[f"Q{i}"] = np.ones((4, 1)), np.full((4, 1), float(upper))
            up = Claim.of(1, "factors", P=f"P{i}", Q=f"Q{i}")
        else:
            X = ind.walsh_basis(*upper)
            lv = lam(t, s)
            tensors[f"P{i}"] = f64([[x * lv[nm] / 4 for x, nm in zip(row, upper)] for row in X])
            tensors[f"Q{i}"] = f64(X)
            up = Claim.of(r, "factors", P=f"P{i}", Q=f"Q{i}")
        cell(f"twobit-t{t}-s{s}-eps{eps}", eps, TargetSpec(name), lower, up,
             f"A(t, s) = K(t) (x) K(s), MATH.md section 4: r_eps = {r}")

    # K(3/4), row side with G = K^-1 (norm 4/3): r_eps = 2 for eps < 3/4
    tensors["K34"] = f64(ind.bsc(Fr(3, 4)))
    tensors["K34inv"] = f64([[Fr(7, 6), Fr(-1, 6)], [Fr(-1, 6), Fr(7, 6)]])
    tensors["I2"] = np.eye(2)
    cell("channel-row-side", Fr(1, 2), TargetSpec("K34"),
         Claim.of(2, "row_reconstruction", G="K34inv", Z="I2", M="I2"),
         Claim.of(2, "trivial"), "K(3/4): r_eps = 2 for eps < 3/4")

    # identity 3 x 3 by the Frobenius tail: F_2 = 1 > sqrt(3) / 4
    tensors["I3"] = np.eye(3)
    cell("identity-frobenius", Fr(1, 4), TargetSpec("I3"),
         Claim.of(3, "frobenius", k=2),
         Claim.of(3, "factors", P="I3", Q="I3"), "I_3: r_eps = 3 for eps < 1")

    # wide 2 x 3: gamma_row = 1/2, rank-one B of error 1/2
    tensors["W"] = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    tensors["WG"] = np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
    tensors["ones2"], tensors["Wq"] = np.ones((2, 1)), np.array([[0.25], [0.5], [0.25]])
    cell("wide-row-side", Fr(3, 8), TargetSpec("W"),
         Claim.of(2, "row_reconstruction", G="WG", Z="I2", M="I2"),
         Claim.of(2, "trivial"), "r_eps = 2 for eps < 1/2")
    cell("wide-rank-one", Fr(1, 2), TargetSpec("W"),
         Claim.of(1, "trivial"),
         Claim.of(1, "factors", P="ones2", Q="Wq"), "r_eps = 1 for 1/2 <= eps < 1")

    # a softmax target: rows softmax(0, -log 3) ~ (3/4, 1/4); slack charged on both sides (K.5)
    h = -math.log(3.0)
    H = np.array([[0.0, h], [h, 0.0]])
    Z = np.exp(H - H.max(axis=1, keepdims=True))
    tensors["H"], tensors["softH"] = H, Z / Z.sum(axis=1, keepdims=True)
    tensors["K12inv"] = np.array([[1.5, -0.5], [-0.5, 1.5]])
    cell("softmax-slack", Fr(1, 4), TargetSpec("softH", "H", rational_string(Fr(1, 2**40))),
         Claim.of(2, "reconstruction", R="K12inv", X="I2", L="I2"),
         Claim.of(2, "trivial"), "softmax of K(1/2)-like logits: r_eps = 2 for eps < ~1/2")
    return cells, tensors


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.data.make_example", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    cells, tensors = build()
    path = write_bracket_file(args.out, cells, tensors)
    print(f"wrote {path}: {len(cells)} cells, {len(tensors)} tensors")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

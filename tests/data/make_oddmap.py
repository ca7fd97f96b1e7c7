"""Regenerate ``tests/data/oddmap.safetensors``: odd-map certificates of the known-answer controls.

Two cells (MATH.md section 2, docs/oddmap.md), both found by the float tier
(``numeric.search.oddmap``: nerve LPs, then SAT, python-sat needed) and
judged by ``python -m exact verify``:

- ``cycle5``: the 5 x 5 edge matrix of the 5-cycle (row i = (e_i + e_{i+1})/2)
  at eps = 99/100, ``r_eps = 3``: the odd map proves 3 where both Bernstein
  widths stop at 2; the upper side is the rank-3 truncated SVD (error 0.4);
- ``example4x4``: the 4 x 4 example of MATH.md at eps = 9/20, lower 3 (trivial upper 4).

    python -m tests.data.make_oddmap [OUT]        # default: next to this script
    python -m exact verify tests/data/oddmap.safetensors
"""
from __future__ import annotations

import argparse
import sys
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np


from fileio.bracketwriter import write_bracket_file
from numeric.search.oddmap import find_odd_map, odd_map_cell

CYCLE5 = np.array([[(j in (i, (i + 1) % 5)) / 2 for j in range(5)] for i in range(5)])
EXAMPLE4 = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1]]) / 2


#: The factors are rounded to multiples of 2^-GRID_BITS, so that the file is the same bytes on every machine: LAPACK's
#: SVD differs in the last bits between CPUs (a 5 x 5 SVD moved by 5e-16 between two machines), and the
#: upper claim (error 0.4 against eps 0.99) has room for a 1e-12 change. A zero is written as +0.0: an entry
#: of about 1e-17 rounds to 0 with the sign of the CPU's last bits (-0.0 on an AVX-512 FP16 Xeon).
GRID_BITS = 40


def svd_factors(A: np.ndarray, k: int) -> dict:
    U, s, Vt = np.linalg.svd(A)
    grid = float(2 ** GRID_BITS)
    P, Q = np.round(U[:, :k] * s[:k] * grid) / grid + 0.0, np.round(Vt[:k].T * grid) / grid + 0.0
    return {"rank": k, "P": P, "Q": Q}


def cells() -> tuple[list, dict]:
    out, tensors = [], {}
    for name, A, eps, d, upper in (("cycle5", CYCLE5, Fr(99, 100), 3, svd_factors(CYCLE5, 3)),
                                   ("example4x4", EXAMPLE4, Fr(9, 20), 3, None)):
        found = find_odd_map(A, float(eps), d)
        if found is None:
            raise SystemExit(f"no odd map found for {name}")
        cell, ts = odd_map_cell(name, A, eps, d, *found, upper=upper, prefix=f"{name}/")
        out.append(cell)
        tensors.update(ts)
    return out, tensors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(Path(__file__).with_name("oddmap.safetensors")))
    args = ap.parse_args(argv)
    print(write_bracket_file(args.out, *cells()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

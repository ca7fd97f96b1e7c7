"""The two-bit sweep behind ``docs/twobit.md`` "Finding" (replaces a one-off script).

Seeded and deterministic. Cells: random rational (t, s, eps) with denominators up to 16,
plus every degenerate pair with t or s in {0, 1} (the other in {0, 1/4, 1/2, 3/4, 1}) at
every eigenvalue breakpoint eps in {1, t, s, ts} and 1/64 on either side of it. Each cell is
closed by ``oracles.twobit.solve_cell`` (every rank proved by the exact tier); the sweep
checks that it closes (L = U) and that the rank equals ``#{Walsh eigenvalues > eps}``, a
formula the oracle never uses. Exit 0 iff every cell does.

    python -m research.twobit_sweep            # 120 random cells + the degenerate grid
    python -m research.twobit_sweep --random 40
"""
from __future__ import annotations

import argparse
import random
import sys

from flint import fmpq

from oracles.twobit import solve_cell


def _predicted(t, s, eps) -> int:
    return sum(1 for lam in (fmpq(1), t, s, t * s) if lam > eps)


def cells(n_random: int, seed: int = 2026):
    rng = random.Random(seed)
    for _ in range(n_random):
        qt, qs, qe = rng.randint(1, 16), rng.randint(1, 16), rng.randint(1, 16)
        yield ("random", fmpq(rng.randint(0, qt), qt), fmpq(rng.randint(0, qs), qs),
               fmpq(rng.randint(0, qe + qe // 4), qe))
    others = (fmpq(0), fmpq(1, 4), fmpq(1, 2), fmpq(3, 4), fmpq(1))
    seen = set()
    for edge in (fmpq(0), fmpq(1)):
        for other in others:
            for t, s in ((edge, other), (other, edge)):
                for lam in {fmpq(1), t, s, t * s}:
                    for eps in (lam - fmpq(1, 64), lam, lam + fmpq(1, 64)):
                        if eps >= 0 and (t, s, eps) not in seen:
                            seen.add((t, s, eps))
                            yield ("breakpoint", t, s, eps)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=120, help="random cells (default 120)")
    args = ap.parse_args(argv)
    counts = {"random": 0, "breakpoint": 0}
    bad = []
    for kind, t, s, eps in cells(args.random):
        c = solve_cell(t, s, eps)
        counts[kind] += 1
        if not (c.verified and c.closed and c.lower == _predicted(t, s, eps)):
            bad.append((t, s, eps, c.lower, c.upper))
    total = sum(counts.values())
    print(f"{total} cells ({counts['random']} random, {counts['breakpoint']} at breakpoints): "
          f"{total - len(bad)} closed with r_eps = #{{eigenvalues > eps}}, {len(bad)} not")
    for b in bad[:10]:
        print(f"  not: t={b[0]} s={b[1]} eps={b[2]} bracket [{b[3]}, {b[4]}]")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())

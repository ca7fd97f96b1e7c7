"""Rebuild ``numeric.study.caution.SCAN``: the self-check's source scan at the recorded shapes.

    python research/study_caution_scan.py --replications 100 > scan.txt

Prints, per shape, one ``(sources, coverage, se/sd, replications)`` row per grid point and the threshold.
"""
from __future__ import annotations

import argparse

from numeric.study.calibrate import RECORDED_FOUR_FAMILY_SPEC, caution_threshold, parse_shape, source_scan
from numeric.study.caution import GRID

SHAPES = {"four families": RECORDED_FOUR_FAMILY_SPEC, "MiniLM": "encoder=24x16@text"}


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--replications", type=int, default=100)
    p.add_argument("--seed", type=int, default=20260415)
    p.add_argument("--shapes", default=",".join(SHAPES))
    a = p.parse_args(argv)
    for name in a.shapes.split(","):
        pts = source_scan(parse_shape(SHAPES[name]), GRID, a.replications, a.seed)
        print(f"{name!r}: (" + ", ".join(f"({q.sources}, {q.coverage:.3f}, {q.se_sd:.3f}, {q.replications})"
                                        for q in pts) + "),", f"# threshold {caution_threshold(pts)}", flush=True)


if __name__ == "__main__":
    main()

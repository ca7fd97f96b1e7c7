"""The small-panel caution: below how many sources a family the study's intervals are not calibrated.

The threshold is measured, not set: ``numeric.study.calibrate.source_scan`` runs
the self-check's planted-gain scenario (rho 0.08) at a shape with its sources
per family set to each point of a grid, and ``caution_threshold`` reads off the
smallest number of sources per family at which the primary interval's coverage
of the simulation mean reaches ``COVERAGE_FLOOR`` and its calibrated se over the
simulated sd reaches ``SE_SD_FLOOR``. A larger grid point that misses a floor is
reported by the scan, not hidden: at the recorded four-family shape the
24-source point missed both (the study's docs say what that means). ``SCAN`` tabulates that scan at
the two recorded shapes (rebuilt by ``python research/study_caution_scan.py``);
``CALIBRATED_SOURCES`` is the larger of their thresholds, computed from the
table when the module loads. ``python -m numeric study --calibrate DIR`` runs
the scan at a panel's own shape.
"""
from __future__ import annotations

__all__ = ["COVERAGE_FLOOR", "SE_SD_FLOOR", "SCAN", "threshold", "CALIBRATED_SOURCES", "GRID"]

#: What the primary interval must reach at a number of sources per family.
COVERAGE_FLOOR, SE_SD_FLOOR = 0.94, 0.9
#: Sources per family of the scan.
GRID = (4, 6, 8, 12, 16, 24)

#: shape -> ((sources per family, coverage, se/sd, replications), ...), from
#: ``python research/study_caution_scan.py`` (seed 20260415, planted rho 0.08).
SCAN: dict = {
    "four families": ((4, 0.960, 0.761, 100), (6, 0.960, 0.867, 100), (8, 0.930, 1.053, 100),
                      (12, 0.950, 1.019, 100), (16, 0.960, 1.001, 100), (24, 0.900, 0.880, 100)),
    "MiniLM": ((4, 0.960, 0.874, 100), (6, 0.960, 1.018, 100), (8, 0.980, 1.139, 100), (12, 0.960, 0.951, 100),
               (16, 0.950, 1.030, 100), (24, 0.990, 1.084, 100)),
}


def threshold(points) -> int | None:
    """The smallest number of sources of ``points`` ((sources, coverage, se/sd, ...) rows) at which both floors
    are reached (None: at none).

    >>> threshold([(4, 0.90, 0.80, 100), (8, 0.95, 0.85, 100), (12, 0.95, 0.95, 100), (16, 0.96, 1.0, 100)])
    12
    """
    ok = [int(p[0]) for p in points if p[1] >= COVERAGE_FLOOR and p[2] >= SE_SD_FLOOR]
    return min(ok) if ok else None


def _calibrated(scan: dict) -> int:
    found = [threshold(rows) for rows in scan.values()]
    if not found or any(t is None for t in found):
        return max(GRID) + 1   # no tabulated shape qualifies within the grid: caution everywhere
    return max(t for t in found if t is not None)


#: Below this many sources in a family the study runs but says its intervals are not calibrated there.
CALIBRATED_SOURCES = _calibrated(SCAN)

"""Effort presets, per-cell seeds and run provenance.

A bracket depends on the input, the code, the seed and the effort preset,
and on nothing else: budgets count work (steps, LP work by size, rows tried),
never seconds. This module names the presets, derives the seed of a cell
from its identity, and records what produced a run.

>>> parse_effort("default")
'default'
>>> cell_seed("minilm", 0, 3, 1) == cell_seed("minilm", 0, 3, 1)
True
>>> cell_seed("minilm", 0, 3, 1) == cell_seed("minilm", 0, 3, 2)
False
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from numeric.search.refine import FULL_ITERS, step_work

__all__ = ["BASE", "EFFORTS", "DEFAULT_EFFORT", "parse_effort", "cell_seed", "package_versions", "code_version",
           "Effort", "PRESETS", "effort_budgets", "expected_seconds", "expected_bytes", "available_bytes"]

#: The effort presets, cheapest first. The budgets of each live with the
#: searches that spend them; the name is what a file records.
EFFORTS = ("quick", "default", "thorough")
DEFAULT_EFFORT = "default"
#: Packages whose versions can change a float result.
VERSIONED = ("numpy", "torch", "python-flint", "highspy", "scipy", "transformers", "softrank-verify")


def parse_effort(text: object) -> str:
    """A known preset name, or ``ValueError`` with a one-line message."""
    if not isinstance(text, str) or text not in EFFORTS:
        raise ValueError(f"unknown effort {text!r}: choose one of {', '.join(EFFORTS)}")
    return text


def cell_seed(*identity: object) -> int:
    """A 63-bit seed derived from a cell's identity (model, layer, head, source, eps, ...).

    The identity's ``repr`` is hashed with SHA-256, so the seed is the same
    on every machine and in every process (Python's ``hash`` is salted).
    """
    digest = hashlib.sha256(repr(tuple(identity)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages that can change a float result (``None`` if absent)."""
    out: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


class CodeInfo(TypedDict):
    """``code_version``'s answer (None where unknown)."""

    version: str | None
    commit: str | None
    dirty: bool | None


def code_version() -> CodeInfo:
    """The project version and, when the source is a git checkout, its commit and dirtiness."""
    root = Path(__file__).resolve().parents[2]
    info: CodeInfo = {"version": package_versions()["softrank-verify"], "commit": None, "dirty": None}
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return info
    info["commit"], info["dirty"] = commit, bool(status.strip())
    return info


@dataclass(frozen=True)
class Effort:
    """Named work budgets of one search, per tolerance.

    Every number counts work, never seconds. The default figures are the work
    that the former wall-clock budgets allowed on an idle core (MiniLM
    heads, 256 x 256, ``bench/suites/quality.py``), rounded up; quick is about a
    quarter of default, thorough four times default.
    """

    name: str
    #: Adam work units (``refine.step_work``: 64 per step plus the rank, at 256 x 256) of the upper
    #: rank bisection and polish (trials start while units are left; was 10 s).
    upper_work: int
    #: The rank at which ``upper_work`` is counted: a cell whose truncated-SVD rank k is above it
    #: gets ``step_work(k) / step_work(upper_rank)`` times the units, so its rank bisection
    #: affords as many Adam steps as a cell at that rank (ranks near n get as many
    #: steps as ranks near 10). Default and quick: 65,536 (never above: no scaling).
    upper_rank: int
    #: 1: thorough's upper mechanics: narrowing trials that miss from the compressed and SVD
    #: starts also start from coordinate columns for near-one-hot rows plus the SVD
    #: (``upper.hybrid_factors``), and the boundary phase gallops down and spends the
    #: rest of the budget on restarts below the best rank (``upper._restarts``, the annealed upper trials); 0: the
    #: boundary phase descends one rank at a time and stops at the first clear miss.
    upper_hybrid: int
    #: Without ``upper_hybrid``: full-length trials (``refine.FULL_ITERS`` steps) that a boundary at a
    #: sharp rank, at least half of min(m, n), affords beyond ``upper_work`` (``upper.search_upper``'s
    #: ``sharp_trials``; the budget is topped up to them when the narrowing ends there). 0: none.
    upper_sharp_trials: int
    #: LP work units (``lp.decoder_work``: a solve of d rows costs about (d/16)^3 thousand) of the
    #: far-rows LP extension (was 3 s of HiGHS).
    far_lp_work: int
    #: HiGHS iterations per LP solve (interior point and simplex each): a solve that needs more fails.
    lp_iterations: int
    #: Adam steps of the far-rows descent extension (was 3 s).
    descent_steps: int
    #: Adam steps of the screened greedy growth's map re-optimisations (was 2 s).
    greedy_steps: int
    #: Candidate rows the screened greedy growth may try in all.
    greedy_rows: int
    #: LP work units of the swap search on small row sets (was 3 s).
    swap_work: int
    #: LP work units of the LP growth of mid-sized row sets (was 2 s).
    lp_append_work: int
    #: Row LPs of the LP on singular subspaces (was 1.5 s).
    lp_svd_solves: int
    #: LP work units of the backward elimination of row sets (``row_backward.rows_backward``); 0: none.
    backward_work: int = 0

    def upper_units(self, m: int, n: int, svd_rank: int) -> int:
        """The upper search's work units on an m x n cell whose truncated-SVD rank is ``svd_rank``.

        >>> e = PRESETS["thorough"]; e.upper_units(256, 256, 16) == e.upper_work
        True
        >>> e.upper_units(256, 256, 200) > e.upper_work == 4 * PRESETS["default"].upper_units(256, 256, 200)
        True
        """
        k = max(int(svd_rank), 1)
        if k <= self.upper_rank:
            return self.upper_work
        return int(self.upper_work * step_work(m, n, k) / step_work(m, n, self.upper_rank))

    def budgets(self) -> dict[str, int]:
        """Every budget by name (what a bracket file records)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "name"}

    def replace(self, **budgets: Any) -> "Effort":
        """This preset with some budgets overridden (positive integers; ValueError otherwise)."""
        known = set(self.budgets())
        for k, v in budgets.items():
            if k not in known:
                raise ValueError(f"unknown budget {k!r}: choose one of {', '.join(sorted(known))}")
            if k == "upper_hybrid" and v in (0, 1) and not isinstance(v, bool):
                continue
            if k in ("upper_sharp_trials", "backward_work"):
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise ValueError(f"budget {k} must be a non-negative integer, got {v!r}")
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"budget {k} must be a positive integer, got {v!r}")
        return dataclasses.replace(self, **budgets)


#: The presets. Default: the former wall-clock budgets of an idle core, in work
#: units that grow with the size of each piece of work as its time does, so a large LP or a
#: high-rank descent spends more of its budget, as it spent more seconds: upper 640,000 Adam
#: units (``refine.step_work``; 8,000 steps at rank 16 on 256 x 256; was 10 s), far-rows LP
#: 7,000, swap 3,500 and LP growth 3,000 LP units (``lp.decoder_work``; 1,000 is one LP of
#: 16 rows over 256 columns; were 3, 3 and 2 s), descent 3,000 steps (3 s), greedy 3,000
#: steps and 12 rows (2 s), LP on singular subspaces 100 row LPs (1.5 s), at most 5,000
#: HiGHS iterations per solve. Chosen side by side with the clock budgets on the MiniLM
#: heads of ``bench/suites/quality.py`` (docs/explanation/search-lessons.md: same medians, no cell wider,
#: 0.95 times the seconds). Quick is a quarter of it, thorough four times, with its upper
#: budget counted in Adam steps at the cell's SVD rank (``upper_rank`` 16) and hybrid starts
#: for sharp heads (``upper_hybrid``). Default's boundary at a rank of at least n/2 affords two
#: full trials beyond its upper units (``upper_sharp_trials``; docs/explanation/search-lessons.md), quick's none.
PRESETS = {
    "default": Effort("default", upper_work=640000, upper_rank=65536, upper_hybrid=0, upper_sharp_trials=2,
                      far_lp_work=7000, lp_iterations=5000, descent_steps=3000, greedy_steps=3000, greedy_rows=12,
                      swap_work=3500, lp_append_work=3000, lp_svd_solves=100),
}
PRESETS["quick"] = dataclasses.replace(PRESETS["default"].replace(
    upper_work=160000, upper_sharp_trials=0, far_lp_work=1750, descent_steps=750, greedy_steps=750, greedy_rows=3,
    swap_work=875, lp_append_work=750, lp_svd_solves=25), name="quick")
PRESETS["thorough"] = dataclasses.replace(PRESETS["default"].replace(
    upper_work=2560000, upper_rank=16, upper_hybrid=1, far_lp_work=28000, descent_steps=12000, greedy_steps=12000,
    greedy_rows=48, swap_work=14000, lp_append_work=12000, lp_svd_solves=400, backward_work=400000), name="thorough")


#: Presets that keep another preset's witnesses (thorough is never wider than default):
#: at each tolerance the search runs the base preset first (with the base's own chain of row
#: sets across tolerances, so its witnesses are those a base run finds), then its own budgets,
#: and keeps the larger verified L and the smaller verified U (the base's on ties).
BASE = {"thorough": "default"}


def effort_budgets(effort: str | Effort) -> Effort:
    """The ``Effort`` of a preset name (``parse_effort``) or an ``Effort`` itself.

    >>> effort_budgets("quick").upper_work < effort_budgets("default").upper_work
    True
    """
    if isinstance(effort, Effort):
        return effort
    return PRESETS[parse_effort(effort)]


#: One-core rates behind ``expected_seconds`` (an announcement, never a budget): an Adam work
#: unit (``refine.step_work``) took about 16 microseconds (1.3 ms a step of 80 units, 256 x 256),
#: an LP work unit (``lp.decoder_work``) about 1 ms, a row-map descent step about 1.3 ms per 256
#: columns, a row LP about 15 ms per 256 columns; a dense SVD about 1e-9 s per m n min(m, n).
ADAM_UNIT_SECONDS = 16e-6
LP_UNIT_SECONDS = 1e-3
MAP_STEP_SECONDS = 1.3e-3
ROW_LP_SECONDS = 15e-3
SVD_SECONDS_PER_FLOP = 1e-9


def expected_seconds(effort: str | Effort, m: int, n: int, tolerances: int = 1) -> float:
    """About how long a search of an m x n target takes on one core when every budget is spent
    (the upper budget and the sharp boundary's full trials at the largest rank), for the
    announcement of long runs.

    >>> round(expected_seconds("default", 256, 256, 3) / 60)       # minutes, three tolerances
    3
    >>> expected_seconds("thorough", 4096, 4096, 1) > 3600             # over an hour a tolerance
    True
    """
    e = effort_budgets(effort)
    cols = n / 256
    per_tol = ((e.upper_units(m, n, min(m, n)) + e.upper_sharp_trials * FULL_ITERS * step_work(m, n, min(m, n)))
               * ADAM_UNIT_SECONDS
               + (e.far_lp_work + e.swap_work + e.lp_append_work + e.backward_work) * LP_UNIT_SECONDS
               + (e.descent_steps + e.greedy_steps) * MAP_STEP_SECONDS * cols
               + e.lp_svd_solves * ROW_LP_SECONDS * cols)
    base = expected_seconds(BASE[e.name], m, n, tolerances) - SVD_SECONDS_PER_FLOP * m * n * min(m, n) \
        if e.name in BASE else 0.0
    return SVD_SECONDS_PER_FLOP * m * n * min(m, n) + tolerances * per_tol + base


#: Memory of a search beside the m x n entries (``expected_bytes``): the interpreter with numpy,
#: torch and flint loaded, about 0.4 GiB; per entry, the float64 target, its SVD factors and the
#: residual copies (about 40 bytes), and the exact tier's conversion of the target to integers
#: (python-flint, about 120 bytes an entry while it is built: 165 measured at 512 x 512). The
#: bracket command at 4096 x 4096 peaked at 1.58 GiB (docs/explanation/search-lessons.md), below this estimate.
BASE_BYTES = 512 * 2**20
BYTES_PER_ENTRY = 160


def expected_bytes(m: int, n: int) -> int:
    """About the peak memory of a search of an m x n target (an upper estimate, for the input check).

    >>> round(expected_bytes(4096, 4096) / 2**30, 1)
    3.0
    """
    return BASE_BYTES + BYTES_PER_ENTRY * int(m) * int(n)


def _cgroup_room() -> int | None:
    """Bytes the process's cgroup (v2) still allows, or None when unlimited or unknown."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    return None if limit == "max" or not limit.isdigit() else max(int(limit) - used, 0)


def available_bytes() -> int | None:
    """Memory at hand: the smaller of the kernel's ``MemAvailable`` and what the cgroup allows
    (None when neither is known). Read for the input check only, never by a search."""
    room = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                room.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    cg = _cgroup_room()
    if cg is not None:
        room.append(cg)
    return min(room) if room else None

"""Run a recorded run's commands into one output directory, resumably.

Each step is the float tier's own command line, called in this process (``numeric.__main__.main``, which
pins threads per command as ``python -m numeric`` does): a panel resumes its finished cells; a study is
skipped when it finished before on the same panel tables (``OUT/replicate.json`` records, per step, the
SHA-256 of each panel's ``cells.csv`` it read, and the wall and CPU seconds of every call that ran it).

A slice (``--slice K``) runs the first K cells of the run's test slice (``registry.json``) of its first
panel step, with ``python -m numeric panel ... --cells KEYS --no-report``: the run identity, the cells'
seeds and so their brackets are those of the whole run (the roster is not part of a cell's identity;
every tolerance of the run is kept, since the tolerances of one cell share their witnesses).
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import time
from pathlib import Path

from exact.errors import UserInputError
from numeric.__main__ import main as numeric_main
from numeric.panel import arms
from numeric.replicate.registry import Replicate, Step
from fileio.safeio import SafeIOError, read_bytes, read_json, write_text

__all__ = ["STAMP", "ReplicateError", "step_argv", "slice_cells", "run_replicate", "read_stamp"]

STAMP = "replicate.json"
STAMP_BYTES = 1 << 20
TABLE_BYTES = 1 << 30


class ReplicateError(UserInputError):
    """Bad input to the replicate command (one line, exit 2)."""


def slice_cells(rep: Replicate, k: int) -> tuple[str, ...]:
    """The first ``k`` cell keys of the run's test slice."""
    if not rep.slice:
        raise ReplicateError(f"{rep.name} has no test slice")
    if not 1 <= k <= len(rep.slice):
        raise ReplicateError(f"--slice must be in 1..{len(rep.slice)} for {rep.name}")
    return rep.slice[:k]


def step_argv(step: Step, out: Path, *, workers: int | None = None, scheduler: str | None = None,
              cells: tuple[str, ...] = ()) -> list[str]:
    """The command line of ``step`` (``python -m numeric ARGV``, or ``python -m numeric.panel.arms ARGV``)."""
    target = str(out / step.out)
    if step.kind == "panel":
        argv = ["panel", *step.args, "--out", target, "--quiet"]
        argv += ["--workers", str(workers)] if workers else []
        argv += ["--scheduler", scheduler] if scheduler else []
        argv += ["--cells", ",".join(cells), "--no-report"] if cells else []
        return argv
    if step.kind == "study":
        return ["study", *(str(out / p) for p in step.panels), *step.args, "--out", target] + \
            (["--workers", str(workers)] if workers else [])
    return [*step.args, "--out", target] + (["--workers", str(workers)] if workers else [])


def _cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def read_stamp(out: Path) -> dict:
    """``OUT/replicate.json`` (``{}`` when absent); ``ReplicateError`` when unreadable."""
    path = out / STAMP
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        doc = read_json(path, limit=STAMP_BYTES, root=out)
    except SafeIOError as e:
        raise ReplicateError(str(e)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("steps", {}), dict):
        raise ReplicateError(f"{STAMP} is not a replicate record: choose a new --out")
    return doc


def _table_digest(out: Path, panel: str) -> str | None:
    try:
        return hashlib.sha256(read_bytes(out / panel / "cells.csv", limit=TABLE_BYTES, root=out)).hexdigest()
    except SafeIOError:
        return None


def _run(step: Step, argv: list[str]) -> int:
    if step.kind == "arms":
        return int(arms.main(argv))
    return int(numeric_main(argv))


def run_replicate(rep: Replicate, out: Path, *, workers: int | None = None, scheduler: str | None = None,
                  slice_k: int | None = None, say=print) -> int:
    """Run (or resume) every step of ``rep`` into ``out``; the first non-zero exit status, else 0."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = read_stamp(out)
    stamp.setdefault("steps", {})
    stamp["name"] = rep.name if stamp.get("name") in (None, rep.name) else "several"
    cells = slice_cells(rep, slice_k) if slice_k else ()
    steps = rep.panel_steps[:1] if cells else rep.steps
    if scheduler and any(s.kind == "arms" for s in steps):
        say(f"replicate {rep.name}: the arms step runs on local workers (it takes no --scheduler)")
    for step in steps:
        inputs = {p: _table_digest(out, p) for p in step.panels} if step.kind == "study" else {}
        done = stamp["steps"].get(step.out, {})
        if step.kind == "study" and isinstance(done, dict) and done.get("inputs") == inputs \
                and (out / step.out / "study.json").is_file():
            say(f"replicate {rep.name}: {step.label}: done before on the same panel tables, skipped")
            continue
        argv = step_argv(step, out, workers=workers, scheduler=scheduler, cells=cells)
        say(f"replicate {rep.name}: {'python -m numeric.panel.arms' if step.kind == 'arms' else 'python -m numeric'} "
            + " ".join(argv))
        t0, c0 = time.perf_counter(), _cpu()
        rc = _run(step, argv)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        entry = done if isinstance(done, dict) else {}
        got = entry.get("calls")
        calls = got if isinstance(got, list) else []
        calls.append({"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "exit": rc, "slice": list(cells),
                      "scheduler": bool(scheduler), "workers": workers or os.cpu_count()})
        entry.update(calls=calls, inputs=inputs)
        stamp["steps"][step.out] = entry
        write_text(out / STAMP, json.dumps(stamp, indent=1, sort_keys=True), root=out)
        if rc:
            say(f"replicate {rep.name}: {step.label} exited {rc}; rerun the same command to resume")
            return rc
    return 0

"""What the suites and the before/after tools share: Markdown tables, a child process measured in CPU time,
the upper search's work counter, and the before/after helpers (a git ref's tree, the verified brackets of a
folder of bracket files, their median U/L per group).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]

#: The head of a child script that counts the upper search's Adam work units (``refine.step_work``) by
#: wrapping ``driver.search_upper``: after it, ``drv`` is ``numeric.search.driver`` and ``sum(used)`` the units
#: spent so far. It travels as text, not as an import: the child may run in another version's tree
#: (a git ref extracted by :func:`extract_ref`), whose ``bench/`` need not have this module.
COUNT_UPPER = r"""
import numeric.search.driver as drv
used = []
real = drv.search_upper
def counted(A, e, budget, **kw):
    r = real(A, e, budget, **kw)
    used.append(budget.used)
    return r
drv.search_upper = counted
lower_cpu = []
real_lower = drv.lower_candidates
def timed_lower(*a, **kw):
    import time as _t
    t0 = _t.process_time()
    try:
        return real_lower(*a, **kw)
    finally:
        lower_cpu.append(_t.process_time() - t0)
drv.lower_candidates = timed_lower
"""

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> str:
    """A Markdown table; ``align`` has one letter per column, ``l`` or ``r`` (default: first left, rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(sep) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def run_child(argv: Sequence[str], cwd: Path = ROOT, env: dict | None = None, stdout_path: Path | None = None,
              tree: Path = ROOT) -> dict:
    """Run ``argv`` (a Python child when it starts with ``sys.executable``) with one BLAS thread and ``tree`` on
    its path; return its exit code, its own CPU seconds (user + system, ``os.wait4``: other jobs' load does not
    count), its peak resident memory in bytes, its stdout and the last lines of its stderr."""
    full_env = dict(os.environ, **ONE_THREAD, PYTHONPATH=str(tree), **(env or {}))
    out_path = stdout_path or Path(os.devnull)
    with open(out_path, "w+") as out, subprocess.Popen(list(argv), cwd=cwd, env=full_env, stdout=out,
                                                       stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    text = out_path.read_text() if stdout_path else ""
    return {"rc": proc.returncode, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_bytes": usage.ru_maxrss * 1024,
            "stdout": text, "stderr_tail": err.strip().splitlines()[-3:]}


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def median(values: Iterable[float]) -> float | None:
    vals = list(values)
    return float(statistics.median(vals)) if vals else None


def fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


# --- before/after: two versions of the code side by side --------------------------------------------------


def extract_ref(ref: str, dest: Path) -> Path:
    """The tree of ``ref`` under ``dest`` (``git archive``; nothing is checked out in place)."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest.with_suffix(".tar")
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), ref], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return dest


def verified_brackets(out: Path) -> dict:
    """``{(case file, eps): (L, U)}`` of the cells whose both sides the exact tier verifies."""
    from exact.errors import MalformedInput
    from exact.verify import verify_file

    brackets = {}
    for path in sorted(out.glob("*.safetensors")):
        try:
            reports = verify_file(path)
        except MalformedInput as exc:
            print(f"{path}: malformed: {exc}", file=sys.stderr)
            continue
        for rep in reports:
            if rep.verified:
                eps = rep.id.rsplit("/eps=", 1)[-1]
                brackets[(path.stem, eps)] = (rep.lower.rank, rep.upper.rank)
    return brackets


def medians(brackets: dict) -> dict:
    """Median U/L per (group, eps) over cells with L > 0."""
    groups: dict = {}
    for (case, eps), (lo, up) in brackets.items():
        if lo > 0:
            groups.setdefault((case.split("_")[0], eps), []).append(up / lo)
    return {k: statistics.median(v) for k, v in sorted(groups.items())}


def add_heads_args(ap: argparse.ArgumentParser) -> None:
    """The arguments of a before/after run on saved heads: ``--ref``, ``--heads-npz``, ``--heads``, ``--eps``,
    ``--out``."""
    ap.add_argument("--ref", required=True, help="git ref of the 'before' code")
    ap.add_argument("--heads-npz", required=True)
    ap.add_argument("--heads", required=True, help="comma-separated names in the npz")
    ap.add_argument("--eps", default="1/10,1/4,1/2")
    ap.add_argument("--out", required=True)


#: The search of one side, run in its tree: argv = npz, heads, eps, effort, out dir.
SIDE = COUNT_UPPER + r"""
import json, os, sys, time
import numpy as np
from numeric.heads.extract import softmax_rows
from numeric.search.export import write_bracket_file
npz, heads, eps, effort, out = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4], sys.argv[5]
with np.load(npz, allow_pickle=False) as data:
    logits = {h: np.asarray(data[h], dtype=np.float64) for h in heads}
for h in heads:
    H = logits[h]
    A = softmax_rows(H)
    used.clear()
    t = time.process_time()
    res = drv.search_brackets(A, eps, logits=H, id_prefix=h, effort=effort)
    cpu = time.process_time() - t
    write_bracket_file(os.path.join(out, h + ".safetensors"), res.cells, res.tensors)
    print(json.dumps({"head": h, "cpu": cpu, "upper_units": sum(used),
                      "float": {str(r.eps): [r.lower, r.upper] for r in res.results}}), flush=True)
"""


def start(tree: Path, core: int, args, effort: str, out: Path) -> subprocess.Popen:
    """One side of a before/after run: :data:`SIDE` in ``tree`` on core ``core`` (one BLAS thread), its files
    under ``out``, one JSON line per head on its stdout."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(tree))
    cmd = ["taskset", "-c", str(core), sys.executable, "-c", SIDE, str(Path(args.heads_npz).resolve()), args.heads,
           args.eps, effort, str(out)]
    return subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=open(str(out) + ".log", "w"),
                            text=True)

"""The benchmark runner: named suites, one result file per case, machine facts beside every figure.

A suite is a module of ``bench.suites`` that defines ``SUITE`` (a :class:`Suite`). The runner asks it for
its cases at a size (``smoke``: a tiny input for the tests; ``full``: the shipped results; ``large``: what
does not fit the shared machine's budget, one command away), runs each case that has no result file yet
(so an interrupted run resumes where it stopped), and writes ``RESULTS/SUITE/CASE.json``: the case's own
figures (``record``), its parameters, and the facts of the machine it ran on (CPU model, cores, load
average before and after, versions, commit). ``bench.render`` turns the result files into the tables of
``docs/benchmarks.md``; nothing else reads them.
"""
from __future__ import annotations

import importlib
import json
import os
import pkgutil
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SIZES = ("smoke", "full", "large")


@dataclass(frozen=True)
class Case:
    """One measurement of a suite: a name unique in the suite (the result file's stem) and its parameters."""
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Suite:
    """A named benchmark suite.

    ``cases(size)`` lists the cases of a size (``full``'s cases are a subset of ``large``'s, so a large run
    only adds result files); ``run(case, workdir)`` measures one case and returns a JSON-able record
    (``workdir`` is an empty temporary folder); ``tables(results)`` renders the records of the result files
    found (a list of the dicts :func:`run_suite` wrote) as Markdown tables, keyed by table name: the template
    names them ``@@SUITE.TABLE@@``. ``command`` is the command that rebuilds the suite's results.
    """
    name: str
    title: str
    cases: Callable[[str], list[Case]]
    run: Callable[[Case, Path], dict]
    tables: Callable[[list[dict]], dict[str, str]]
    command: str


def suite_names() -> list[str]:
    """Every module of ``bench.suites`` that defines a suite: adding a suite is adding a module."""
    import bench.suites as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def load(name: str) -> Suite:
    if name not in suite_names():
        raise KeyError(f"unknown suite {name!r} (known: {', '.join(suite_names())})")
    suite = importlib.import_module(f"bench.suites.{name}").SUITE
    assert isinstance(suite, Suite) and suite.name == name, name
    return suite


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> dict:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--", "*.py"))}


def machine_facts() -> dict:
    """What the figures depend on: the CPU, the cores, the load, the versions, the code."""
    return {"cpu_model": _cpu_model(), "cores": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "numpy": _version("numpy"), "torch": _version("torch"),
            "python_flint": _version("python-flint"), "platform": platform.platform(terse=True), **_commit()}


def result_path(results: Path, suite: str, case: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9._-]+", case):
        raise ValueError(f"case name {case!r} is not a plain file name")
    return results / suite / f"{case}.json"


def read_results(results: Path, suite: str) -> list[dict]:
    """The result files of one suite, sorted by case name."""
    folder = results / suite
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def _write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.part")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)                       # a killed run leaves no half-written result


def run_suite(suite: Suite, size: str, results: Path = RESULTS, force: bool = False,
              log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
              only: Sequence[str] | None = None) -> list[Path]:
    """Run every case of ``suite`` at ``size`` that has no result file (all of them with ``force``); with
    ``only``, just the cases of those names."""
    import tempfile

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r} (known: {', '.join(SIZES)})")
    written = []
    for case in suite.cases(size):
        if only is not None and case.name not in only:
            continue
        path = result_path(results, suite.name, case.name)
        if path.exists() and not force:
            log(f"{suite.name}/{case.name}: kept (result file exists)")
            continue
        before = machine_facts()
        t0, c0 = time.perf_counter(), time.process_time()
        with tempfile.TemporaryDirectory(prefix=f"bench-{suite.name}-") as tmp:
            record = suite.run(case, Path(tmp))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        doc = {"suite": suite.name, "case": case.name, "size": size, "params": dict(case.params), "record": record,
               "machine": before, "load_average_after": [round(x, 2) for x in os.getloadavg()],
               "runner_wall_s": round(wall, 2), "runner_cpu_s": round(cpu, 2)}
        _write(path, doc)
        written.append(path)
        log(f"{suite.name}/{case.name}: {wall:.1f} s wall, {cpu:.1f} s CPU in this process")
    return written

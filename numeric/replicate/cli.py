"""Rebuild a recorded run with one command, record its manifest, check a rebuild against it.

  python -m numeric replicate --list                       every recorded run: cells, measured time here
  python -m numeric replicate NAME --out DIR               run (or resume) NAME's commands into DIR
  python -m numeric replicate NAME --out DIR --scheduler ADDRESS   the panels on a Dask cluster
  python -m numeric replicate NAME --check DIR             compare DIR with NAME's shipped manifest
  python -m numeric replicate NAME --record DIR            write NAME's manifest from the finished run DIR
  python -m numeric replicate demo --out DIR --slice 1     the first cell of the run's test slice only

A NAME is the exact list of commands with their flags (``numeric/replicate/registry.json``); ``--show``
prints them. ``--check`` re-verifies every bracket file of DIR with the exact tier and compares, per
artifact: identical, the same verified brackets with other bytes (another CPU), or different (the cells
and by how much). Exit 0 when nothing differs; 1 when a verified bracket or a study reading differs, a
cell is missing, an integrity check failed, or a command of the run failed; 2 on bad input (an unknown
NAME, a malformed manifest or run directory: one line); 130 interrupted.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from exact.errors import ExitCode, OneLineParser
from numeric.replicate.check import check_run
from numeric.replicate.manifest import (ManifestError, RecordRefused, expected_keys, manifest_path, read_manifest,
                                       record)
from numeric.replicate.registry import RegistryError, load_registry
from numeric.replicate.run import ReplicateError, run_replicate, slice_cells, step_argv
from fileio.safeio import SafeIOError, escape, write_text

__all__ = ["main", "build_parser", "listing"]

PROG = "python -m numeric replicate"


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", help="a recorded run (see --list)")
    p.add_argument("--list", action="store_true", help="every recorded run: cells and measured time here "
                   "(with --manifest DIR: the manifests in DIR)")
    p.add_argument("--show", action="store_true", help="print NAME's commands")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--out", help="run (or resume) NAME into this directory")
    what.add_argument("--check", metavar="DIR", help="compare the rebuilt run DIR with NAME's manifest")
    what.add_argument("--record", metavar="DIR", help="write NAME's manifest from the finished run DIR")
    p.add_argument("--manifest", help="the manifest file (default: the one shipped for NAME)")
    p.add_argument("--registry", help="another registry file of recorded runs (default: the shipped one)")
    p.add_argument("--slice", type=int, metavar="K", help="only the first K cells of NAME's test slice")
    p.add_argument("--workers", type=int, help="local worker processes of the panels and the exact re-verification")
    p.add_argument("--scheduler", help="Dask scheduler address: the panels' cells on that cluster")
    return p


def _time(measured: dict) -> str:
    if not measured:
        return ""
    wall, cpu = measured.get("wall_s"), measured.get("cpu_s")
    return (f"{wall / 60:.1f} min wall" if isinstance(wall, (int, float)) else "") + \
        (f", {cpu / 60:.1f} min CPU" if isinstance(cpu, (int, float)) else "")


def roster_cells(rep) -> int | None:
    """How many cells the run's panel commands run (their rosters; None when an arms step's are not counted)."""
    if any(s.kind == "arms" for s in rep.steps):
        return None
    return sum(len(expected_keys(s.args, Path(s.out))) for s in rep.panel_steps)


def listing(registry: dict, manifests: Path | None = None) -> list[str]:
    """One line per recorded run: its name, its cells, its brackets and measured time here (from its manifest),
    or 'not measured here'."""
    lines = []
    for name, rep in registry.items():
        path = (manifests / f"{name}.json") if manifests else manifest_path(name)
        m: dict[str, Any]
        try:
            m = read_manifest(path, name) if path.exists() else {"status": "missing", "panels": [], "studies": []}
        except ManifestError as e:
            m = {"status": f"malformed manifest ({e})", "panels": [], "studies": []}
        try:
            n = roster_cells(rep)
        except Exception as e:  # a model not installed: the count is unknown, the listing goes on
            n, m["status"] = None, f"{m['status']}; roster unknown: {type(e).__name__}"
        cells = f"{n:>6,} cells" if n is not None else f"{'?':>6} cells"
        studies = f", {len(rep.study_steps)} stud{'y' if len(rep.study_steps) == 1 else 'ies'}" \
            if rep.study_steps else ""
        if m["status"] == "recorded":
            brackets = sum(len(p["rows"]) for p in m["panels"])
            times = [_time(p.get("measured") or {}) for p in m["panels"]] + \
                    [_time(s.get("measured") or {}) for s in m["studies"]]
            total = [t for t in times if t]
            lines.append(f"{name:<16} {cells}{studies}: {brackets:,} verified brackets; "
                         + (f"measured here: {'; '.join(total)}" if total else
                            "time not measured here (the run was finished by several calls)"))
        else:
            lines.append(f"{name:<16} {cells}{studies}: not measured here ({m['status']})")
    return lines


def _show(rep) -> list[str]:
    lines = [f"{rep.name}: {rep.about}", f"cited in: {', '.join(rep.cited)}"]
    for step in rep.steps:
        prog = "python -m numeric.panel.arms" if step.kind == "arms" else "python -m numeric"
        lines.append(f"  {prog} {' '.join(step_argv(step, Path('OUT')))}")
    if rep.slice:
        lines.append(f"test slice: {', '.join(rep.slice)}")
    return lines


def _manifest(args, name: str) -> dict:
    path = Path(args.manifest) if args.manifest else manifest_path(name)
    m = read_manifest(path, name)
    if m["status"] != "recorded":
        raise ManifestError(f"{name} has no recorded manifest yet ({m['status']}): nothing to check against")
    return m


def _check(args, rep) -> int:
    run = Path(args.check)
    if not run.is_dir() or run.is_symlink():
        raise ReplicateError(f"{escape(args.check, 120)} is not a run directory")
    m = _manifest(args, rep.name)
    keys = slice_cells(rep, args.slice) if args.slice else ()
    out = check_run(m, rep, run, workers=args.workers, slice_keys=keys)
    for line in out.lines:
        print(line)
    summary = ", ".join(f"{v} {k}" for k, v in out.counts.items())
    print(f"{rep.name}: {summary}" + (" (a slice: studies not rebuilt)" if keys else "")
          + ("; DIFFERENT" if out.failed else "; nothing differs"))
    return ExitCode.REFUTED if out.failed else ExitCode.OK


def _record(args, rep) -> int:
    run = Path(args.record)
    if not run.is_dir() or run.is_symlink():
        raise ReplicateError(f"{escape(args.record, 120)} is not a run directory")
    if args.slice:
        raise ReplicateError("--record takes a whole run, not a slice")
    try:
        doc = record(rep, run, workers=args.workers)
    except RecordRefused as e:
        print(f"{PROG}: {rep.name}: not recorded: {escape(str(e), 400)}", file=sys.stderr)
        return ExitCode.REFUTED
    path = Path(args.manifest) if args.manifest else manifest_path(rep.name)
    write_text(path, json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n", root=path.parent)
    cells = sum(p["cells"] for p in doc["panels"])
    print(f"{rep.name}: {cells} verified cells, {sum(len(p['rows']) for p in doc['panels'])} brackets, "
          f"{len(doc['studies'])} stud{'y' if len(doc['studies']) == 1 else 'ies'}; manifest {path}")
    return ExitCode.OK


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        registry = load_registry(Path(args.registry) if args.registry else None)
        if args.list:
            print("\n".join(listing(registry, Path(args.manifest) if args.manifest else None)))
            return ExitCode.OK
        if not args.name:
            raise ReplicateError("give a NAME (see --list)")
        if args.name not in registry:
            raise ReplicateError(f"unknown run {escape(args.name, 40)}; runs: {', '.join(registry)}")
        rep = registry[args.name]
        if args.workers is not None and args.workers < 1:
            raise ReplicateError("--workers must be >= 1")
        if args.show:
            print("\n".join(_show(rep)))
            return ExitCode.OK
        if args.check:
            return _check(args, rep)
        if args.record:
            return _record(args, rep)
        if not args.out:
            raise ReplicateError("give --out DIR, --check DIR, --record DIR or --show")
        if args.slice is not None:
            slice_cells(rep, args.slice)
        return run_replicate(rep, Path(args.out), workers=args.workers, scheduler=args.scheduler,
                             slice_k=args.slice)
    except (RegistryError, ManifestError, ReplicateError, SafeIOError) as e:
        print(f"{PROG}: error: {escape(str(e), 400)}", file=sys.stderr)
        return ExitCode.MALFORMED
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (finished cells are kept; rerun to resume)", file=sys.stderr)
        return ExitCode.STOPPED


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

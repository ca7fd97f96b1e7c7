"""Run the learned-head panel: extract, search, export, verify exactly (paper section 6).

For every (head, source) cell: extract the head, search brackets at each
tolerance with the effort preset and the cell's seed, write one bracket file,
re-verify it with the exact tier, check every upper factorisation directly,
and add a row per tolerance to the cell table ``cells.csv``. ``panel.json``
records the run identity (model, tolerances, effort, package versions, code).

Resumable: a finished cell is skipped on a rerun into the same directory. A
rerun whose identity differs (another effort, tolerance list, code or package
version) is refused: choose a new --out. Local worker processes by default
(one torch thread each); ``--scheduler ADDRESS`` runs the cells on a Dask
cluster instead.

  python -m numeric panel --model minilm --demo --out runs/demo
  python -m numeric panel --model minilm --sources 64 --effort thorough --out runs/full
  python -m numeric panel --model minilm --preset study --effort quick --out runs/study
  python -m numeric panel --model PATH --heads 0.1,3.5 --sources 8 --eps 0.25 --out DIR
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from numeric.panel.cell import CellTask
from numeric.panel.provenance import PanelError, check_resume, run_identity, write_run
from numeric.panel.runner import run_panel
from numeric.panel.table import read_rows, write_table
from numeric.search.attack import SoundnessError
from numeric.search.effort import DEFAULT_EFFORT, EFFORTS, parse_effort

__all__ = ["DEMO_HEADS", "DEMO_SOURCES", "DEFAULT_EPS", "MIN_MASS", "parse_eps", "build_parser", "main"]

PROG = "python -m numeric panel"
# The demo roster: 8 MiniLM heads spread over all 6 layers (layers 0 and 5
# twice), chosen once by hand before any result was seen.
DEMO_HEADS = ((0, 1), (0, 7), (1, 3), (2, 5), (3, 8), (4, 2), (5, 4), (5, 11))
DEMO_SOURCES = 2
DEFAULT_EPS = "0.1,0.25,0.5"  # the paper's three tolerances (section 6)
# The held-out study's preset (issue 15, docs/study.md), fixed before its run:
# in every layer the heads k * H // STUDY_PER_LAYER, k = 0..3 (MiniLM: 0, 3, 6, 9),
# on STUDY_SOURCES sources at eps STUDY_EPS.
STUDY_PER_LAYER = 4
STUDY_SOURCES = 16
STUDY_EPS = "1/4"
MIN_MASS = 0.1  # decoders: drop cells whose mean retained prefix mass is below (project choice)
#: Exit status when some bracket was not verified (as ``python -m exact verify``).
EXIT_UNVERIFIED = 1
EXIT_BAD_INPUT = 2
EXIT_WORKER_DIED = 3  # a worker was killed: the run is incomplete (resumable), not wrong
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention


def parse_eps(text: str) -> tuple:
    """A comma-separated tolerance list as exact rational strings, each item
    parsed by the search's one parser (``numeric.search.parse_eps``).

    >>> parse_eps("0.1, 1/4")
    ('1/10', '1/4')
    """
    from numeric.search import parse_eps as parse_one
    from numeric.search.export import rational_string

    out = []
    for item in text.split(","):
        try:
            out.append(rational_string(parse_one(item.strip())))
        except ValueError as e:
            raise PanelError(str(e)) from None
    return tuple(out)


def _read_config(model: str) -> dict:
    from numeric.heads.models import PRESETS, preset_path

    if model in PRESETS:
        path = preset_path(model)       # a zoo preset's files are checked against its manifest
    else:
        path = Path(model).expanduser()
        if not path.exists():
            raise PanelError(f"model path {model!r} does not exist (presets: {', '.join(PRESETS)})")
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise PanelError(f"model path {model!r} has no config.json")
    try:
        return json.loads(cfg_path.read_text())
    except ValueError:
        raise PanelError(f"{cfg_path} is not JSON") from None


def _preflight(model: str, heads, *, prefix: int, block: int, length: int) -> str:
    """Check the model spec, its config and the head roster before any work (exit 2 on error)."""
    from numeric.heads.models import family_of

    cfg = _read_config(model)
    family = family_of(cfg.get("model_type", "?"))
    layers = cfg.get("num_hidden_layers") or cfg.get("n_layer")
    n_heads = cfg.get("num_attention_heads") or cfg.get("n_head")
    if not layers or not n_heads:
        raise PanelError(f"model {model!r} has no attention layers in its config")
    for layer, head in heads:
        if not (0 <= layer < layers and 0 <= head < n_heads):
            raise PanelError(f"head {layer}.{head} outside the model's {layers} layers x {n_heads} heads")
    max_pos = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    need = prefix + block if family == "decoder" else (length if family == "encoder" else None)
    if need is not None and max_pos and need > max_pos:
        what = f"prefix {prefix} + block {block}" if family == "decoder" else f"sequence length {length}"
        raise PanelError(f"{what} = {need} tokens exceeds the model's {max_pos} positions")
    return family


def build_parser() -> argparse.ArgumentParser:
    from numeric.heads.extract import BLOCK, ENCODER_LENGTH, PREFIX

    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="preset (minilm) or a local model directory")
    p.add_argument("--heads", help="LAYER.HEAD list, e.g. 0.1,3.5 (default with --demo: the demo roster)")
    p.add_argument("--sources", type=int, help=f"number of sources (default {DEMO_SOURCES})")
    p.add_argument("--eps", help=f"tolerances (default {DEFAULT_EPS}; --preset study: {STUDY_EPS})")
    p.add_argument("--effort", default=DEFAULT_EFFORT,
                   help=f"search effort preset: {', '.join(EFFORTS)} (default {DEFAULT_EFFORT})")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--demo", action="store_true", help="the MiniLM demo roster (8 heads, 2 sources) and report")
    p.add_argument("--preset", choices=("study",), help=f"study: {STUDY_PER_LAYER} heads per layer, "
                   f"{STUDY_SOURCES} sources, eps {STUDY_EPS} (issue 15)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local worker processes")
    p.add_argument("--scheduler", help="Dask scheduler address: run the cells on that cluster")
    p.add_argument("--prefix", type=int, default=PREFIX, help=f"decoders: prefix length P (default {PREFIX})")
    p.add_argument("--block", type=int, default=BLOCK, help=f"decoders: block queries (default {BLOCK})")
    p.add_argument("--length", type=int, default=ENCODER_LENGTH,
                   help=f"encoders: sequence length (default {ENCODER_LENGTH})")
    p.add_argument("--min-mass", type=float, default=MIN_MASS, help=f"decoders: mass threshold ({MIN_MASS})")
    p.add_argument("--no-screen", dest="screen", action="store_false", help="decoders: keep local heads")
    p.add_argument("--no-attack", dest="attack", action="store_false", help="skip rank-(L-1) attacks")
    p.add_argument("--geometry", dest="geometry", action="store_true", default=True,
                   help="add the geometry descriptor columns (default)")
    p.add_argument("--no-geometry", dest="geometry", action="store_false")
    p.add_argument("--device", help="torch device for the search (default: the float tier's choice)")
    p.add_argument("--images", help="ViT: directory of images (default: synthetic images)")
    p.add_argument("--report", dest="report", action="store_true", default=None, help="write the report")
    p.add_argument("--no-report", dest="report", action="store_false")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    return p


def _heads(args) -> list:
    from numeric.heads.extract import parse_heads

    if args.heads:
        try:
            heads = parse_heads(args.heads)
        except ValueError as e:
            raise PanelError(str(e)) from None
    elif args.demo:
        heads = list(DEMO_HEADS)
    elif args.preset == "study":
        heads = study_roster(args.model)
    else:
        raise PanelError("give --heads LAYER.HEAD,... or --demo or --preset study")
    return list(dict.fromkeys(heads))   # a head named twice is one cell, run once


def study_roster(model: str) -> list:
    """The study preset's heads: in every layer, ``k * H // STUDY_PER_LAYER`` for k < STUDY_PER_LAYER."""
    cfg = _read_config(model)
    layers = cfg.get("num_hidden_layers") or cfg.get("n_layer") or 0
    n_heads = cfg.get("num_attention_heads") or cfg.get("n_head") or 0
    if n_heads < STUDY_PER_LAYER:
        raise PanelError(f"--preset study needs >= {STUDY_PER_LAYER} heads per layer; the model has {n_heads}")
    return [(l, k * n_heads // STUDY_PER_LAYER) for l in range(layers) for k in range(STUDY_PER_LAYER)]


def _tasks(args) -> tuple[list, dict, Path]:
    """Validate the arguments; the cell tasks, the run identity and the output directory."""
    from numeric.heads.sources import MAX_SOURCES

    heads = _heads(args)
    study = args.preset == "study"
    n_sources = args.sources if args.sources is not None else (STUDY_SOURCES if study else DEMO_SOURCES)
    if not 1 <= n_sources <= MAX_SOURCES:
        raise PanelError(f"--sources must be in 1..{MAX_SOURCES}")
    if args.workers < 1:
        raise PanelError("--workers must be >= 1")
    try:
        effort = parse_effort(args.effort)
    except ValueError as e:
        raise PanelError(str(e)) from None
    eps = parse_eps(args.eps or (STUDY_EPS if study else DEFAULT_EPS))
    if args.images and not Path(args.images).is_dir():
        raise PanelError(f"image directory {args.images!r} does not exist")
    _preflight(args.model, heads, prefix=args.prefix, block=args.block, length=args.length)
    out = Path(args.out)
    from numeric.heads.models import PRESETS

    model = args.model if args.model in PRESETS else str(Path(args.model).expanduser().resolve())
    identity = run_identity(model=model, eps=eps, prefix=args.prefix, block=args.block, length=args.length,
                            min_mass=args.min_mass, screen=args.screen, attack=args.attack,
                            geometry=args.geometry, effort=effort)
    ident = json.dumps(identity, sort_keys=True)
    tasks = [CellTask(model=model, layer=l, head=h, source=s, eps=eps, out=str(out.resolve()), prefix=args.prefix,
                      block=args.block, length=args.length, min_mass=args.min_mass, screen=args.screen,
                      attack=args.attack, geometry=args.geometry, device=args.device, image_dir=args.images,
                      effort=effort, identity=ident)
             for s in range(n_sources) for (l, h) in heads]
    return tasks, identity, out


def _user_errors():
    from numeric.heads.extract import ExtractionError
    from numeric.heads.models import ModelInputError
    from numeric.heads.sources import SourceError

    return (ExtractionError, ModelInputError, SourceError, PanelError)


def _summary(out: Path, counts: dict, seconds: float) -> tuple[dict, list]:
    rows = read_rows(out)
    table = write_table(out, rows)
    ok = [r for r in rows if r.get("status") == "ok"]
    return {"out": str(out), "cells": counts["cells"], "run": counts["run"], "skipped": counts["skipped"],
            "brackets": len(ok), "verified": sum(bool(r.get("verified")) for r in ok),
            "dropped": len(rows) - len(ok), "capped": [r["cell_id"] for r in ok if r.get("capped")],
            "seeds": {f"L{r['layer']}H{r['head']} {r['source']}": r.get("seed") for r in rows},
            "all_verified": all(r.get("verified") for r in ok), "seconds": round(seconds, 2),
            "table": str(table)}, ok


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    argv = sys.argv if argv is None else list(argv)
    try:
        tasks, identity, out = _tasks(args)
        out.mkdir(parents=True, exist_ok=True)
        check_resume(out, identity)
        write_run(out, identity, argv=argv)
        t0 = time.perf_counter()
        counts = run_panel(tasks, workers=args.workers, scheduler=args.scheduler, quiet=args.quiet)
        seconds = time.perf_counter() - t0
    except _user_errors() as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SoundnessError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_UNVERIFIED
    except BrokenProcessPool:
        print(f"{PROG}: a worker process died (finished cells are kept; rerun the same command to resume)",
              file=sys.stderr)
        return EXIT_WORKER_DIED
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (finished cells are kept)", file=sys.stderr)
        return EXIT_INTERRUPTED
    summary, ok = _summary(out, counts, seconds)
    write_run(out, identity, argv=argv, summary=summary)
    if args.report if args.report is not None else args.demo:
        from numeric.panel.report import write_report

        rep = write_report(out)
        summary["report"], summary["report_errors"] = str(rep.path), len(rep.errors)
        summary["all_verified"] = summary["all_verified"] and rep.ok
    if args.json:
        print(json.dumps(summary))
    else:
        _print_rows(ok)
        print(f"{summary['brackets']} brackets, {summary['verified']} verified exactly, "
              f"{summary['dropped']} dropped, {len(summary['capped'])} capped; {counts['run']} cells run, "
              f"{counts['skipped']} skipped; {seconds:.1f} s; table {summary['table']}"
              + (f"; report {summary['report']}" if "report" in summary else ""))
    return 0 if summary["all_verified"] else EXIT_UNVERIFIED


def _print_rows(rows) -> None:
    print(f"{'head':>6} {'source':>10} {'eps':>6} {'L':>4} {'U':>4}  {'lower':<30} {'upper':<18} {'s':>7} ok")
    for r in rows:
        print(f"{r['layer']:>3}.{r['head']:<2} {r['source']:>10} {r['eps']:>6} {r['L']:>4} {r['U']:>4}  "
              f"{str(r['lower_witness']):<30} {str(r['upper_witness']):<18} {r['seconds']:>7.1f} "
              f"{'yes' if r['verified'] else 'NO'}" + ("  CAPPED" if r.get("capped") else ""))


if __name__ == "__main__":
    raise SystemExit(main())

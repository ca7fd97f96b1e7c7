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
  python -m numeric panel --model minilm --demo full --out runs/demo-full
  python -m numeric panel --model minilm --sources 64 --effort thorough --out runs/full
  python -m numeric panel --model minilm --preset study --effort quick --out runs/study
  python -m numeric panel --model PATH --heads 0.1,3.5 --sources 8 --eps 0.25 --out DIR
  python -m numeric panel --preset common-shape --out runs/common      # every family at 128 x 128 (L.4)
  python -m numeric panel --model docgpt2,docqwen2 --heads 1.0 --native --eps 1/4 --out DIR
  python -m numeric panel --model docgpt2 --heads 0.0,3.2 --sources 8 --domains all --out DIR  # docs and code

``--model`` takes a comma-separated list: the cells of every model go into one
directory (file names prefixed with the model's name), and the report compares
the families (architecture audit, identification gate).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from exact.errors import ExitCode, OneLineParser
from numeric.heads.extract import BLOCK, ENCODER_LENGTH, PREFIX, parse_heads, ExtractionError
from numeric.heads.models import PRESETS as MODEL_PRESETS, ModelInputError
from numeric.heads.sources import MAX_SOURCES, SourceError
from numeric.panel.cell import CellTask
from numeric.panel.presets import (COMMON_EPS, COMMON_LENGTH, COMMON_MODELS, COMMON_PER_FAMILY, COMMON_SOURCES,
                                   DEFAULT_DEMO, DEFAULT_EPS, DEMO_HEADS, DEMO_SOURCES, DEMOS, STUDY_EPS,
                                   STUDY_PER_LAYER, STUDY_SOURCES,
                                   model_domains, preflight, spread_roster, study_roster)
from numeric.panel.provenance import PanelError, check_resume, run_identity, write_run
from numeric.panel.report import ReportError, write_report
from numeric.panel.runner import run_panel
from numeric.panel.table import RecordError, read_rows, write_table
from numeric.runtime import offline_hub
from fileio.safeio import SafeIOError, escape
from numeric.search import parse_eps as parse_one
from numeric.search.attack import SoundnessError
from numeric.search.effort import DEFAULT_EFFORT, EFFORTS, parse_effort
from numeric.search.export import rational_string
from numeric.heads.domains import ALL

__all__ = ["DEMO_HEADS", "DEMO_SOURCES", "DEFAULT_EPS", "MIN_MASS", "parse_eps", "build_parser", "main",
           "study_roster"]

PROG = "python -m numeric panel"
MIN_MASS = 0.1  # decoders: drop cells whose mean retained prefix mass is below (project choice)
PRESETS = ("study", "common-shape")


def parse_eps(text: str) -> tuple:
    """A comma-separated tolerance list as exact rational strings, each item
    parsed by the search's one parser (``numeric.search.parse_eps``).

    >>> parse_eps("0.1, 1/4")
    ('1/10', '1/4')
    """
    out = []
    for item in text.split(","):
        try:
            out.append(rational_string(parse_one(item.strip())))
        except ValueError as e:
            raise PanelError(str(e)) from None
    return tuple(out)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="preset (minilm, docgpt2, docqwen2, digitvit) or a local model directory; "
                   f"a comma-separated list runs several (default with --preset common-shape: "
                   f"{','.join(COMMON_MODELS)})")
    p.add_argument("--heads", help="LAYER.HEAD list, e.g. 0.1,3.5, for every model "
                   "(default with --demo: the demo roster)")
    p.add_argument("--domains", help="source domains, comma separated (numeric.heads.domains: docs, code for "
                   "text models; digits, digits-rot90 for digitvit), or 'all': each model's domains it reads; "
                   "--sources sources in each (default: each model's primary domain)")
    p.add_argument("--sources", type=int, help=f"number of sources (default {DEMO_SOURCES}; --preset study "
                   f"{STUDY_SOURCES}; --preset common-shape {COMMON_SOURCES})")
    p.add_argument("--eps", help=f"tolerances (default {DEFAULT_EPS}; --preset study / common-shape: {STUDY_EPS})")
    p.add_argument("--effort", default=DEFAULT_EFFORT,
                   help=f"search effort preset: {', '.join(EFFORTS)} (default {DEFAULT_EFFORT})")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--demo", nargs="?", const=DEFAULT_DEMO, choices=tuple(DEMOS),
                   help="the MiniLM demo roster (8 heads over all 6 layers) and report: "
                   + "; ".join(f"{name}: {n} source(s) at {t} tokens" for name, (n, t) in DEMOS.items())
                   + f" (default {DEFAULT_DEMO})")
    p.add_argument("--preset", choices=PRESETS, help=f"study: {STUDY_PER_LAYER} heads per layer, "
                   f"{STUDY_SOURCES} sources, eps {STUDY_EPS} (the held-out study); common-shape: every family at "
                   f"128 x 128, --per-family heads per model, {COMMON_SOURCES} sources, eps {COMMON_EPS}, "
                   "with the report (Appendix L.4)")
    p.add_argument("--per-family", type=int, default=COMMON_PER_FAMILY,
                   help=f"--preset common-shape: heads per model (default {COMMON_PER_FAMILY})")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local worker processes")
    p.add_argument("--scheduler", help="Dask scheduler address: run the cells on that cluster")
    p.add_argument("--cells", help="run only these cells of the roster (record keys, comma separated, e.g. "
                   "L0H1_s00): a slice of the run; its identity, seeds and brackets are the whole run's")
    p.add_argument("--prefix", type=int, default=PREFIX, help=f"decoders: prefix length P (default {PREFIX})")
    p.add_argument("--block", type=int, default=BLOCK, help=f"decoders: block queries (default {BLOCK})")
    p.add_argument("--length", type=int, help=f"encoders: sequence length (default {ENCODER_LENGTH}; "
                   f"--preset common-shape {COMMON_LENGTH})")
    p.add_argument("--image-size", type=int, help="ViT: image side in pixels (default and only choice: the model's)")
    p.add_argument("--native", action="store_true",
                   help="decoders: add the native-causal cell of the whole P + B window (integrity cells)")
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


def _models(args) -> list:
    """The model specs of the run (presets by name, directories resolved), in the order given."""
    if args.model:
        names = [m.strip() for m in args.model.split(",") if m.strip()]
    elif args.preset == "common-shape":
        names = list(COMMON_MODELS)
    else:
        raise PanelError("give --model (or --preset common-shape)")
    if not names:
        raise PanelError("--model names no model")
    models = [m if m in MODEL_PRESETS else str(Path(m).expanduser().resolve()) for m in names]
    if len(set(models)) != len(models):
        raise PanelError("a model is listed twice")
    return models


def _heads(args, model: str) -> list:
    if args.heads:
        try:
            heads = parse_heads(args.heads)
        except ValueError as e:
            raise PanelError(str(e)) from None
    elif args.demo:
        heads = list(DEMO_HEADS)
    elif args.preset == "study":
        heads = study_roster(model)
    elif args.preset == "common-shape":
        heads = spread_roster(model, args.per_family)
    else:
        raise PanelError("give --heads LAYER.HEAD,... or --demo or --preset study|common-shape")
    return list(dict.fromkeys(heads))   # a head named twice is one cell, run once


def _tag(model: str, several: bool) -> str:
    """The key prefix of a model's cells when several share the directory (its name, file-safe)."""
    if not several:
        return ""
    name = Path(model).name or model
    return "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in name)


def _defaults(args) -> tuple[int, str, int]:
    """Sources, tolerance text and encoder length after the preset's defaults."""
    demo_sources, demo_length = DEMOS[args.demo] if args.demo else (DEMO_SOURCES, ENCODER_LENGTH)
    per = {"study": (STUDY_SOURCES, STUDY_EPS, ENCODER_LENGTH),
           "common-shape": (COMMON_SOURCES, COMMON_EPS, COMMON_LENGTH)}.get(args.preset,
                                                                          (demo_sources, DEFAULT_EPS, demo_length))
    return (args.sources if args.sources is not None else per[0], args.eps or per[1],
            args.length if args.length is not None else per[2])


def _domain_names(args) -> list:
    return [d.strip() for d in (args.domains or "").split(",") if d.strip()]


def _domains(args, model: str) -> list:
    """The model's domains of the run (``""``: its primary one, ``numeric.heads.domains``)."""
    if args.domains is None:
        return [""]
    names = _domain_names(args)
    if not names:
        raise PanelError("--domains names no domain")
    found = model_domains(model, names, args.images)
    if not found:
        raise PanelError(f"model {model} reads none of the domains {', '.join(names)}")
    return found


def _check_domains(args, plan) -> None:
    """Every domain named must be read by some model of the run."""

    for name in _domain_names(args) if args.domains is not None else []:
        if name != ALL and not any(model_domains(model, [name], args.images) for model, *_ in plan):
            raise PanelError(f"no model of the run reads the domain {name!r}")


def _tasks(args) -> tuple[list, dict, Path]:
    """Validate the arguments; the cell tasks, the run identity and the output directory."""
    n_sources, eps_text, length = _defaults(args)
    if not 1 <= n_sources <= MAX_SOURCES:
        raise PanelError(f"--sources must be in 1..{MAX_SOURCES}")
    if args.workers < 1:
        raise PanelError("--workers must be >= 1")
    try:
        effort = parse_effort(args.effort)
    except ValueError as e:
        raise PanelError(str(e)) from None
    eps = parse_eps(eps_text)
    if args.images and not Path(args.images).is_dir():
        raise PanelError(f"image directory {args.images!r} does not exist")
    models = _models(args)
    plan = []
    for model in models:
        heads = _heads(args, model)
        shape = preflight(model, heads, prefix=args.prefix, block=args.block, length=length,
                          image_size=args.image_size)
        plan.append((model, heads, shape.family == "decoder", _domains(args, model)))
    _check_domains(args, plan)
    if args.native and not any(dec for _, _, dec, _ in plan):
        raise PanelError("--native is for decoders (GPT-2, Qwen2): no decoder among the models")
    out = Path(args.out)
    identity = run_identity(model=models[0] if len(models) == 1 else models, eps=eps, prefix=args.prefix,
                            block=args.block, length=length, min_mass=args.min_mass, screen=args.screen,
                            attack=args.attack, geometry=args.geometry, effort=effort, native=args.native,
                            image_size=args.image_size)
    ident = json.dumps(identity, sort_keys=True)
    tasks = [CellTask(model=model, layer=l, head=h, source=s, eps=eps, out=str(out.resolve()), prefix=args.prefix,
                      block=args.block, length=length, min_mass=args.min_mass, screen=args.screen,
                      attack=args.attack, geometry=args.geometry, device=args.device, image_dir=args.images,
                      effort=effort, identity=ident, native=native, tag=_tag(model, len(models) > 1),
                      image_size=args.image_size, domain=domain)
             for model, heads, decoder, domains in plan
             for native in ((False, True) if decoder and args.native else (False,))
             for domain in domains for s in range(n_sources) for (l, h) in heads]
    if args.cells is not None:
        keys = {k.strip() for k in args.cells.split(",") if k.strip()}
        unknown = sorted(keys - {t.key for t in tasks})
        if not keys or unknown:
            raise PanelError(f"--cells names no cell of the roster{': ' + escape(unknown[0], 60) if unknown else ''}")
        tasks = [t for t in tasks if t.key in keys]
    return tasks, identity, out


def _user_errors():
    return (ExtractionError, ModelInputError, SourceError, PanelError, SafeIOError)


@dataclass(frozen=True)
class RunSummary:
    """The summary of a panel run (``panel.json``'s ``summary``; ``--json`` prints it): the directory, the
    cells of the roster, run and resumed (skipped), the brackets, verified and dropped rows, the capped cells,
    the seeds by cell, whether every bracket verified, the wall seconds, the table; after the report, its
    path and error count."""

    out: str
    cells: int
    run: int
    skipped: int
    brackets: int
    verified: int
    dropped: int
    capped: list[str | None]
    seeds: dict[str, int | None]
    all_verified: bool
    seconds: float
    table: str
    report: str | None = None
    report_errors: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, in field order (the report's fields only after a report)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("report", "report_errors") or self.report is not None}


def _summary(out: Path, counts: dict, seconds: float) -> tuple[RunSummary, list]:
    rows = read_rows(out)
    table = write_table(out, rows)
    ok = [r for r in rows if r.ok]
    return RunSummary(str(out), counts["cells"], counts["run"], counts["skipped"], brackets=len(ok),
                      verified=sum(bool(r.verified) for r in ok),
                      dropped=len(rows) - len(ok), capped=[r.cell_id for r in ok if r.capped], seeds=_seeds(rows),
                      all_verified=all(r.verified for r in ok), seconds=round(seconds, 2), table=str(table)), ok


def _seeds(rows) -> dict:
    """The cells' seeds by cell (the model's name first when several models share the run)."""
    several = len({r.model for r in rows}) > 1
    return {(f"{r.model} " if several else "") + f"L{r.layer}H{r.head} {r.source}"
            + (" native" if r.native else ""): r.seed for r in rows}


def main(argv=None) -> int:
    """The panel command; Hugging Face offline for the process (``numeric.runtime.offline_hub``)."""
    offline_hub()
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
        return ExitCode.MALFORMED
    except SoundnessError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return ExitCode.REFUTED
    except BrokenProcessPool:            # not every cell decided: exit 1, and the run resumes
        print(f"{PROG}: a worker process died (finished cells are kept; rerun the same command to resume)",
              file=sys.stderr)
        return ExitCode.REFUTED
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (finished cells are kept)", file=sys.stderr)
        return ExitCode.STOPPED
    try:
        summary, ok = _summary(out, counts, seconds)
    except RecordError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return ExitCode.MALFORMED
    write_run(out, identity, argv=argv, summary=summary.to_dict())
    if args.report if args.report is not None else (args.demo or args.preset == "common-shape"):
        try:
            rep = write_report(out)
        except (ReportError, SafeIOError) as e:
            print(f"{PROG}: error: the report: {e}", file=sys.stderr)
            return ExitCode.MALFORMED
        summary = replace(summary, report=str(rep.path), report_errors=len(rep.errors),
                          all_verified=summary.all_verified and rep.ok)
    if args.json:
        print(json.dumps(summary.to_dict()))
    else:
        _print_rows(ok)
        print(f"{summary.brackets} brackets, {summary.verified} verified exactly, "
              f"{summary.dropped} dropped, {len(summary.capped)} capped; {summary.run} cells run, "
              f"{summary.skipped} skipped; {seconds:.1f} s; table {summary.table}"
              + (f"; report {summary.report}" if summary.report is not None else ""))
    return ExitCode.OK if summary.all_verified else ExitCode.REFUTED


def _print_rows(rows) -> None:
    w = max([len(r.model) for r in rows] + [5])
    print(f"{'model':<{w}} {'head':>6} {'source':>10} {'eps':>6} {'L':>4} {'U':>4}  {'lower':<30} {'upper':<18} "
          f"{'s':>7} ok")
    for r in rows:
        print(f"{r.model:<{w}} {r.layer:>3}.{r.head:<2} {r.source:>10} {r.eps:>6} "
              f"{r.L:>4} {r.U:>4}  "
              f"{str(r.lower_witness):<30} {str(r.upper_witness):<18} {r.seconds:>7.1f} "
              f"{'yes' if r.verified else 'NO'}" + ("  CAPPED" if r.capped else ""))


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

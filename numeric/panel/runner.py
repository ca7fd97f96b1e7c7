"""Run the learned-head panel: extract, search, export, verify exactly (paper section 6).

For every (head, source) cell: extract the head (numeric.heads.extract), search
brackets at each tolerance with the float tier (numeric.search.driver), write one
bracket file, re-verify it with the exact tier (exact.verify, the checker of
``python -m exact verify``), check every upper factorisation directly
(||A - P Q^T||_row1 <= eps - slack, in exact arithmetic) and append a row per
tolerance to the cell table ``cells.csv``.

Resumable: a finished cell leaves ``cells/<key>.json`` and is skipped on a
rerun with the same model, tolerances and block. Local worker processes by
default (one torch thread each); ``--scheduler ADDRESS`` runs the cells on a
Dask cluster instead.

  python -m numeric panel --model minilm --demo --out runs/demo
  python -m numeric panel --model minilm --sources 64 --out runs/full
  python -m numeric panel --model PATH --heads 0.1,3.5 --sources 8 --eps 0.25 --out DIR
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from numeric.search.attack import SoundnessError

__all__ = ["DEMO_HEADS", "DEMO_SOURCES", "DEFAULT_EPS", "PanelError", "CellTask", "run_cell", "run_panel",
           "read_rows", "BASE_COLUMNS", "main"]

# The demo roster: 8 MiniLM heads spread over all 6 layers (layers 0 and 5
# twice), chosen once by hand before any result was seen.
DEMO_HEADS = ((0, 1), (0, 7), (1, 3), (2, 5), (3, 8), (4, 2), (5, 4), (5, 11))
DEMO_SOURCES = 2
DEFAULT_EPS = "0.1,0.25,0.5"  # the paper's three tolerances (section 6)
MIN_MASS = 0.1  # decoders: drop cells whose mean retained prefix mass is below (project choice)

BASE_COLUMNS = [
    "family", "model", "layer", "head", "source", "eps", "n_rows", "n_cols", "L", "U",
    "lower_witness", "upper_witness", "seconds", "slack", "mass", "min_mass", "local_mass",
    "status", "verified", "lower_verified", "upper_verified", "attack_run", "attack_success",
    "direct_checked", "direct_passed", "hf_max_abs_diff", "svd_rank", "cell_id", "file",
]


class PanelError(ValueError):
    """Bad panel input (exit 2)."""


@dataclass(frozen=True)
class CellTask:
    model: str
    layer: int
    head: int
    source: int
    eps: tuple          # exact rational strings
    out: str
    prefix: int
    block: int
    length: int
    min_mass: float
    screen: bool
    attack: bool
    geometry: bool
    device: str | None
    image_dir: str | None

    @property
    def key(self) -> str:
        return f"L{self.layer}H{self.head}_s{self.source:02d}"

    def signature(self) -> dict:
        return {"model": self.model, "eps": list(self.eps), "prefix": self.prefix, "block": self.block,
                "length": self.length, "min_mass": self.min_mass, "screen": self.screen}


_MODELS: dict = {}


def _model(spec: str):
    from numeric.heads.models import load_model

    if spec not in _MODELS:
        _MODELS[spec] = load_model(spec)
    return _MODELS[spec]


def _worker_init(silence_bars: bool = False):
    """One torch thread per worker; pool workers leave the progress bar to the parent."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    try:   # BLAS may already be loaded (numpy imported before the pool started)
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover
        pass
    if silence_bars:
        os.environ["TQDM_DISABLE"] = "1"
        # stdout belongs to the parent (tables, --json): solver banners printed
        # by C code in a worker go to stderr instead
        sys.stdout.flush()
        os.dup2(2, 1)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass


def _optional(module: str, name: str, errors: dict | None = None):
    """``module.name`` or None; an import failure is recorded in ``errors`` (never silent)."""
    try:
        mod = __import__(module, fromlist=[name])
        return getattr(mod, name)
    except ModuleNotFoundError as e:
        if e.name != module and errors is not None:      # the module exists but is broken
            errors[module] = f"{type(e).__name__}: {str(e)[:120]}"
        return None
    except (ImportError, AttributeError) as e:
        if errors is not None:
            errors[module] = f"{type(e).__name__}: {str(e)[:120]}"
        return None


def geometry_available() -> bool:
    return (_optional("numeric.geometry.core", "cell_descriptors") is not None
            or _optional("numeric.geometry.native", "native_features") is not None)


def _geometry_columns(cap) -> dict:
    """Columns from issue 7's modules when they exist; an error is recorded, not raised."""
    cols, errors = {}, {}
    cell_descriptors = _optional("numeric.geometry.core", "cell_descriptors", errors)
    native_features = _optional("numeric.geometry.native", "native_features", errors)
    for module, error in errors.items():
        cols[f"{module.rsplit('.', 1)[1]}_error"] = error
    for fn, args, tag in ((cell_descriptors, (cap.logits, cap.matrix), "geometry"),
                          (native_features, (cap.Q, cap.K, cap.scale), "native")):
        if fn is None:
            continue
        try:
            cols.update({str(k): v for k, v in dict(fn(*args)).items()})
        except Exception as e:  # noqa: BLE001 - descriptors are optional columns
            cols[f"{tag}_error"] = f"{type(e).__name__}: {str(e)[:120]}"
    return cols


def _direct_upper_check(cell: dict, tensors: dict) -> bool | None:
    """||A - P Q^T||_row1 <= eps - slack, recomputed exactly from the file's tensors
    (K.1 with the slack of K.5), outside the certificate code. None when the
    upper witness is not a factorisation."""
    up = cell.get("upper", {}).get("witness", {})
    if up.get("kind") != "factors":
        return None
    from exact.matrix import ExactMatrix
    from exact.norms import row_l1_norm
    from exact.rational import parse_rational

    A = ExactMatrix.from_float64(tensors[cell["target"]["matrix"]])
    P = ExactMatrix.from_float64(tensors[up["P"]])
    Q = ExactMatrix.from_float64(tensors[up["Q"]])
    bound = parse_rational(cell["eps"]) - parse_rational(cell["target"].get("slack", "0"))
    return bool(row_l1_norm(A - P @ Q.T) <= bound)


def _eps_key(s) -> str:
    return str(Fraction(s))


def run_cell(task: CellTask) -> list[dict]:
    """Extract, search, export, verify one (head, source) cell; rows per eps."""
    import numpy as np

    from numeric.heads.extract import extract_heads, source_for

    _worker_init()  # also on Dask workers: one torch thread per worker
    out = Path(task.out)
    marker = out / "cells" / f"{task.key}.json"
    lm = _model(task.model)
    src = source_for(lm, task.source, length=task.length, prefix=task.prefix, block=task.block,
                     image_dir=task.image_dir)
    t0 = time.perf_counter()
    cap = extract_heads(lm, src, [(task.layer, task.head)], prefix=task.prefix, block=task.block)[0]
    base = {"family": lm.family, "model": lm.name, "layer": task.layer, "head": task.head,
            "source": src.source_id, "n_rows": cap.matrix.shape[0], "n_cols": cap.matrix.shape[1],
            "mass": cap.mass, "min_mass": cap.min_mass, "local_mass": cap.local_mass,
            "hf_max_abs_diff": cap.hf_max_abs_diff}
    status = "ok"
    if lm.family == "decoder" and cap.mass < task.min_mass:
        status = "dropped_mass"
    elif lm.family == "decoder" and task.screen and not cap.nonlocal_head:
        status = "dropped_local"
    rows = []
    if status != "ok":
        rows = [dict(base, eps=e, status=status) for e in task.eps]
    else:
        from numeric.search.export import write_bracket_file
        from numeric.search.driver import search_brackets

        eps_values = [Fraction(e) for e in task.eps]
        res = search_brackets(cap.matrix, eps_values, logits=cap.logits, id_prefix=task.key,
                              device=task.device, attack=task.attack, provenance=cap.provenance)
        path = out / "brackets" / f"{task.key}.safetensors"
        write_bracket_file(path, res.cells, res.tensors)
        heads_path = out / "heads" / f"{task.key}.safetensors"
        heads_path.parent.mkdir(parents=True, exist_ok=True)
        from safetensors.numpy import save_file
        save_file({"Q": np.ascontiguousarray(cap.Q), "K": np.ascontiguousarray(cap.K),
                   "logits": np.ascontiguousarray(cap.logits)}, str(heads_path),
                  metadata={"scale": repr(cap.scale), "provenance": json.dumps(cap.provenance)})
        from exact.verify import verify_file
        try:
            reports = {r.id: r for r in verify_file(path)}
        except Exception as e:  # noqa: BLE001 - fail closed: the file's cells count as unverified
            print(f"python -m numeric panel: {path}: exact verification failed: {e}", file=sys.stderr)
            reports = {}
        geo = _geometry_columns(cap) if task.geometry else {}
        by_eps = {_eps_key(c["eps"]): c for c in res.cells}
        for rec in res.results:
            e = _eps_key(rec.eps)
            cell = by_eps.get(e)
            rep = reports.get(cell["id"]) if cell else None
            direct = _direct_upper_check(cell, res.tensors) if cell else None
            row = dict(base, eps=e, L=rec.lower, U=rec.upper, lower_witness=rec.lower_witness,
                       upper_witness=rec.upper_witness, seconds=round(float(rec.seconds), 3),
                       slack=float(rec.slack) if rec.slack is not None else None, status=status,
                       verified=bool(rep and rep.verified),
                       lower_verified=bool(rep and rep.lower.verified),
                       upper_verified=bool(rep and rep.upper.verified),
                       attack_run=bool(task.attack and rec.lower >= 2 and rec.attack_success is not None),
                       attack_success=bool(rec.attack_success),
                       direct_checked=direct is not None, direct_passed=bool(direct),
                       cell_id=cell["id"] if cell else "", file=str(path.relative_to(out)),
                       svd_rank=rec.svd_rank)
            row.update(geo)
            rows.append(row)
            if rec.attack_success:
                raise SoundnessError(f"SOUNDNESS BUG: rank-{rec.lower - 1} attack succeeded on {task.key} "
                                   f"at eps {e} where L = {rec.lower} was certified")
    doc = {"signature": task.signature(), "rows": rows, "seconds": time.perf_counter() - t0}
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, default=_jsonable))
    tmp.replace(marker)
    return rows


def _jsonable(x):
    try:
        return x.item()
    except AttributeError:
        return str(x)


def _done(task: CellTask) -> list[dict] | None:
    marker = Path(task.out) / "cells" / f"{task.key}.json"
    try:
        doc = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if doc.get("signature") != json.loads(json.dumps(task.signature())):
        return None
    rows = doc.get("rows", [])
    for r in rows:
        if r.get("status") == "ok" and not (Path(task.out) / r.get("file", "")).is_file():
            return None
    return rows


def read_rows(out) -> list[dict]:
    """All rows of a panel directory (from its cell markers), sorted."""
    rows = []
    for p in sorted((Path(out) / "cells").glob("*.json")):
        try:
            rows.extend(json.loads(p.read_text()).get("rows", []))
        except ValueError:
            continue
    rows.sort(key=lambda r: (r.get("family", ""), r["layer"], r["head"], str(r["source"]),
                             Fraction(r["eps"])))
    return rows


def write_table(out, rows) -> Path:
    extra = sorted({k for r in rows for k in r} - set(BASE_COLUMNS))
    path = Path(out) / "cells.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=BASE_COLUMNS + extra, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in BASE_COLUMNS + extra})
    return path


def _user_errors():
    from numeric.heads.extract import ExtractionError
    from numeric.heads.models import ModelInputError
    from numeric.heads.sources import SourceError

    return (ExtractionError, ModelInputError, SourceError, PanelError)


def _progress(total, desc, quiet):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="cell", disable=quiet, file=sys.stderr, dynamic_ncols=True)


def run_panel(tasks: list[CellTask], *, workers: int = 1, scheduler: str | None = None,
              quiet: bool = False) -> dict:
    """Run the cells not finished yet; returns counts. Raises on the first failure."""
    todo = [t for t in tasks if _done(t) is None]
    skipped = len(tasks) - len(todo)
    bar = _progress(len(tasks), "panel", quiet)
    bar.update(skipped)
    try:
        if scheduler:
            from distributed import Client, as_completed

            with Client(scheduler) as client:
                futures = client.map(run_cell, todo, pure=False)
                for fut in as_completed(futures):
                    fut.result()
                    bar.update(1)
        elif workers <= 1 or len(todo) <= 1:
            _worker_init()
            for t in todo:
                run_cell(t)
                bar.update(1)
        else:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor, as_completed

            os.environ.setdefault("OMP_NUM_THREADS", "1")
            ctx = mp.get_context("spawn")
            with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx,
                                     initializer=_worker_init, initargs=(True,)) as pool:
                futures = [pool.submit(run_cell, t) for t in todo]
                try:
                    for fut in as_completed(futures):
                        fut.result()
                        bar.update(1)
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
    finally:
        bar.close()
    return {"cells": len(tasks), "run": len(todo), "skipped": skipped}


def _preflight(model: str, heads, *, prefix: int, block: int, length: int):
    """Check the model spec, its config and the head roster before any work (exit 2 on error)."""
    from numeric.heads.models import PRESETS, family_of, minilm_path

    if model in PRESETS:
        path = minilm_path()
    else:
        path = Path(model).expanduser()
        if not path.exists():
            raise PanelError(f"model path {model!r} does not exist (presets: {', '.join(PRESETS)})")
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise PanelError(f"model path {model!r} has no config.json")
    try:
        cfg = json.loads(cfg_path.read_text())
    except ValueError:
        raise PanelError(f"{cfg_path} is not JSON") from None
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


def _parse_eps(text: str) -> tuple:
    from numeric.search.export import rational_string

    out = []
    for item in text.split(","):
        item = item.strip()
        try:
            q = Fraction(item)
        except (ValueError, ZeroDivisionError):
            raise PanelError(f"eps {item!r} is not a number") from None
        if not 0 < q <= 1:
            raise PanelError(f"eps {item!r} outside (0, 1]")
        out.append(rational_string(q))
    if not out:
        raise PanelError("no tolerances given")
    return tuple(out)


def build_parser() -> argparse.ArgumentParser:
    from numeric.heads.extract import BLOCK, ENCODER_LENGTH, PREFIX

    p = argparse.ArgumentParser(prog="python -m numeric panel", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="preset (minilm) or a local model directory")
    p.add_argument("--heads", help="LAYER.HEAD list, e.g. 0.1,3.5 (default with --demo: the demo roster)")
    p.add_argument("--sources", type=int, help=f"number of sources (default {DEMO_SOURCES})")
    p.add_argument("--eps", default=DEFAULT_EPS, help=f"tolerances (default {DEFAULT_EPS})")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--demo", action="store_true", help="the MiniLM demo roster (8 heads, 2 sources) and report")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local worker processes")
    p.add_argument("--scheduler", help="Dask scheduler address: run the cells on that cluster")
    p.add_argument("--prefix", type=int, default=PREFIX, help=f"decoders: prefix length P (default {PREFIX})")
    p.add_argument("--block", type=int, default=BLOCK, help=f"decoders: block queries (default {BLOCK})")
    p.add_argument("--length", type=int, default=ENCODER_LENGTH,
                   help=f"encoders: sequence length (default {ENCODER_LENGTH})")
    p.add_argument("--min-mass", type=float, default=MIN_MASS, help=f"decoders: mass threshold ({MIN_MASS})")
    p.add_argument("--no-screen", dest="screen", action="store_false", help="decoders: keep local heads")
    p.add_argument("--no-attack", dest="attack", action="store_false", help="skip rank-(L-1) attacks")
    p.add_argument("--geometry", dest="geometry", action="store_true", default=None,
                   help="add issue-7 descriptor columns (default: on when numeric.geometry.core imports)")
    p.add_argument("--no-geometry", dest="geometry", action="store_false")
    p.add_argument("--device", help="torch device for the search (default: the float tier's choice)")
    p.add_argument("--images", help="ViT: directory of images (default: synthetic images)")
    p.add_argument("--report", dest="report", action="store_true", default=None, help="write the report")
    p.add_argument("--no-report", dest="report", action="store_false")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from numeric.heads.extract import parse_heads
        from numeric.heads.sources import MAX_SOURCES

        if args.heads:
            try:
                heads = parse_heads(args.heads)
            except ValueError as e:
                raise PanelError(str(e)) from None
        elif args.demo:
            heads = list(DEMO_HEADS)
        else:
            raise PanelError("give --heads LAYER.HEAD,... or --demo")
        n_sources = args.sources if args.sources is not None else DEMO_SOURCES
        if not 1 <= n_sources <= MAX_SOURCES:
            raise PanelError(f"--sources must be in 1..{MAX_SOURCES}")
        if args.workers < 1:
            raise PanelError("--workers must be >= 1")
        eps = _parse_eps(args.eps)
        if args.images and not Path(args.images).is_dir():
            raise PanelError(f"image directory {args.images!r} does not exist")
        _preflight(args.model, heads, prefix=args.prefix, block=args.block, length=args.length)
        geometry = geometry_available() if args.geometry is None else args.geometry
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        model = args.model if args.model == "minilm" else str(Path(args.model).expanduser().resolve())
        tasks = [CellTask(model=model, layer=l, head=h, source=s, eps=eps, out=str(out.resolve()),
                          prefix=args.prefix, block=args.block, length=args.length, min_mass=args.min_mass,
                          screen=args.screen, attack=args.attack, geometry=geometry, device=args.device,
                          image_dir=args.images)
                 for s in range(n_sources) for (l, h) in heads]
        t0 = time.perf_counter()
        counts = run_panel(tasks, workers=args.workers, scheduler=args.scheduler, quiet=args.quiet)
        seconds = time.perf_counter() - t0
    except _user_errors() as e:
        print(f"python -m numeric panel: error: {e}", file=sys.stderr)
        return 2
    except SoundnessError as e:
        print(f"python -m numeric panel: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("python -m numeric panel: interrupted (finished cells are kept)", file=sys.stderr)
        return 130
    rows = read_rows(out)
    table = write_table(out, rows)
    ok = [r for r in rows if r.get("status") == "ok"]
    all_verified = all(r.get("verified") for r in ok)
    summary = {"out": str(out), "cells": counts["cells"], "run": counts["run"], "skipped": counts["skipped"],
               "brackets": len(ok), "verified": sum(bool(r.get("verified")) for r in ok),
               "dropped": len(rows) - len(ok), "all_verified": all_verified, "seconds": round(seconds, 2),
               "table": str(table)}
    (out / "panel.json").write_text(json.dumps({"summary": summary, "argv": sys.argv if argv is None else argv},
                                               indent=1))
    if args.report if args.report is not None else args.demo:
        from numeric.panel.report import write_report
        summary["report"] = str(write_report(out))
    if args.json:
        print(json.dumps(summary))
    else:
        _print_rows(ok)
        print(f"{summary['brackets']} brackets, {summary['verified']} verified exactly, "
              f"{summary['dropped']} dropped; {counts['run']} cells run, {counts['skipped']} skipped; "
              f"{seconds:.1f} s; table {table}" + (f"; report {summary['report']}" if "report" in summary else ""))
    return 0 if all_verified else 1


def _print_rows(rows) -> None:
    print(f"{'head':>6} {'source':>10} {'eps':>6} {'L':>4} {'U':>4}  {'lower':<30} {'upper':<18} {'s':>7} ok")
    for r in rows:
        print(f"{r['layer']:>3}.{r['head']:<2} {r['source']:>10} {r['eps']:>6} {r['L']:>4} {r['U']:>4}  "
              f"{str(r['lower_witness']):<30} {str(r['upper_witness']):<18} {r['seconds']:>7.1f} "
              f"{'yes' if r['verified'] else 'NO'}")


if __name__ == "__main__":
    raise SystemExit(main())

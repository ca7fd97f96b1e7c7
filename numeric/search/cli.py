"""Search, export and verify brackets L <= r_eps(A) <= U for one attention matrix.

The input is a row-stochastic float64 matrix (--matrix) or a float64 logit
matrix (--logits; the claim is then about its exact row softmax, with a
proved slack, K.5), read from .npy (never unpickled) or a safetensors file
(--tensor NAME when it holds several tensors). For each tolerance the float
tier searches witnesses, the exact tier re-checks them before export, the
bracket file is written to --out and re-verified with exact.verify.

The search spends counted work, never seconds: --effort picks a preset of
budgets (quick, default, thorough; ``numeric.search.effort``), --budget
NAME=N overrides one of them, --seed seeds the random choices. The preset,
every budget, the seed and the package versions are recorded in each
cell's provenance, so the same command reproduces the same file.

A run whose budgets could take over ten minutes (``effort.expected_seconds``:
every budget spent, one core), or on a target of a million entries or more,
announces its expected cost on stderr first. Ctrl-C
stops it cleanly: every search ends with the witnesses it has, the
tolerances whose lower side had not started are skipped (the others get
their upper side cut short), and the file holds every cell certified so
far (a second Ctrl-C aborts at once, writing nothing).

Each verified lower bound L is then attacked: a search for a rank-(L-1)
matrix within eps. The table's attack column says "held" when no attack
succeeded (the expected outcome), "-" when none ran (--no-attack), and
"BEAT L" when one succeeded.

Exit status: 0 all cells written and verified, 1 a verification failed or
an attack succeeded (either is a soundness bug), 2 bad input, 130 stopped by
Ctrl-C after writing what was certified.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

from exact.cli import cap_line
from exact.errors import ExitCode, OneLineParser, UserInputError
from exact.verify import CellReport
from numeric.heads.extract import softmax_rows
from fileio.safeio import SafeIOError, check_target, escape
from numeric.search import front
from numeric.runtime import StopToken, sigint_stop
from numeric.search.candidate import LowerCandidate
from numeric.search.hints import read_hints
from numeric.search.progress import search_progress
from numeric.search.effort import Effort, available_bytes, effort_budgets, expected_bytes
from numeric.search.inputs import parse_eps_list, validate_matrix

PROG = "python -m numeric bracket"
#: Runs whose budgets could take longer than this (seconds), or targets of at least
#: ``ANNOUNCE_ENTRIES`` entries, announce their expected cost first (``numeric.search.front``).
ANNOUNCE_SECONDS, ANNOUNCE_ENTRIES = front.ANNOUNCE_SECONDS, front.ANNOUNCE_ENTRIES


class InputError(UserInputError):
    """Bad command-line input: one line, exit 2."""


def _load(path: str, tensor: str | None) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such file")
    if p.suffix == ".npy":
        try:
            a: np.ndarray = np.load(p, allow_pickle=False)
        except Exception as exc:   # pickled object arrays, truncated files, not an .npy at all
            raise InputError(f"{path}: not a readable .npy array ({str(exc).splitlines()[0][:100]})") from None
        return a
    if p.suffix == ".safetensors":
        try:
            tensors = load_file(str(p))
        except Exception as exc:
            raise InputError(f"{path}: not a readable safetensors file ({str(exc).splitlines()[0][:100]})") from None
        if tensor is None:
            if len(tensors) != 1:
                raise InputError(f"{path}: holds {len(tensors)} tensors ({', '.join(sorted(tensors)[:5])}); "
                                 "choose one with --tensor")
            return next(iter(tensors.values()))
        if tensor not in tensors:
            raise InputError(f"{path}: no tensor named {tensor!r}")
        return tensors[tensor]
    raise InputError(f"{path}: expected a .npy or .safetensors file")


def _stored_shape(path: str, tensor: str | None) -> tuple[int, ...] | None:
    """The shape recorded in an input file's header (nothing loaded), or None when it cannot be read
    (``_load`` then says why)."""
    try:
        if path.endswith(".npy"):
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape: tuple[int, ...] = read(f)[0]
                return shape
        if path.endswith(".safetensors"):
            with safe_open(path, "np") as f:
                names = list(f.keys())
                name = tensor if tensor is not None else names[0] if len(names) == 1 else None
                return tuple(f.get_slice(name).get_shape()) if name in names else None
    except Exception:   # unreadable header: _load reports it
        return None
    return None


def _check_memory(shape: tuple[int, ...] | None) -> None:
    """InputError (before any work) when a search of this shape needs more memory than is at hand."""
    if shape is None or len(shape) != 2:
        return
    need, room = expected_bytes(*shape), available_bytes()
    if room is not None and need > room:
        raise InputError(f"a {shape[0]} x {shape[1]} target needs about {need / 2**30:.1f} GiB of memory "
                         f"(estimate), {room / 2**30:.1f} GiB available: too large for this machine")


def _effort(name: str, overrides: list[str]) -> Effort:
    """The ``Effort`` of a preset with ``NAME=N`` budget overrides (InputError on a bad name or number)."""
    try:
        effort = effort_budgets(name)
        budgets: dict[str, int] = {}
        for text in overrides:
            key, sep, value = text.partition("=")
            if not sep or not value.strip().isdigit():
                raise ValueError(f"--budget {text!r}: expected NAME=N with N a positive integer")
            budgets[key.strip()] = int(value)
        return effort.replace(**budgets)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _seed(text: str) -> int:
    if not text.strip().isdigit():
        raise InputError(f"--seed {text!r}: expected a non-negative integer")
    return int(text)


def _clean_stop() -> contextlib.AbstractContextManager[StopToken]:
    """First Ctrl-C: request the run's stop token (the search ends with what it has); second: abort."""
    return sigint_stop(f"{PROG}: stopping: finishing the tolerances started with the witnesses they have "
                       "(Ctrl-C again aborts without writing)")


def _announce(effort: Effort, shape: tuple[int, int], tolerances: int) -> None:
    front.announce(PROG, effort, shape, tolerances, stop="Ctrl-C stops cleanly and writes what is certified")


def _attack_line(outcomes: list[bool | None]) -> str:
    """What the rank-(L-1) attacks did, in words (None: not run; False: no attack succeeded)."""
    ran = [o for o in outcomes if o is not None]
    if not ran:
        return "attacks at rank L-1: none run"
    won = sum(bool(o) for o in ran)
    if not won:
        return f"attacks at rank L-1: no attack succeeded ({len(ran)} of {len(outcomes)} lower bound(s) attacked)"
    return f"attacks at rank L-1: {won} SUCCEEDED against a certified lower bound (a soundness bug)"


def _cap_fields(rep: CellReport | None) -> dict[str, Any]:
    """The convex cap of a cell as its exact re-check judged it (null keys without one)."""
    cap = rep.to_json() if rep is not None else {}
    return {k: cap.get(k) for k in ("convex_cap", "convex_cap_verified", "convex_cap_margin", "convex_cap_reason")}


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog=PROG, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--matrix", help="row-stochastic float64 matrix (.npy or .safetensors)")
    src.add_argument("--logits", help="float64 logits whose row softmax is the target (.npy or .safetensors)")
    ap.add_argument("--tensor", help="tensor name inside a safetensors input")
    ap.add_argument("--eps", required=True, help="comma-separated tolerances in (0, 1], e.g. 0.1,0.25,0.5 or 1/4")
    ap.add_argument("--out", required=True, help="bracket file to write (format v1, .safetensors)")
    ap.add_argument("--id-prefix", default="cell", help="prefix of cell ids and tensor names (default: cell)")
    ap.add_argument("--device", help="torch device for the descent (default: cuda if available, else cpu)")
    ap.add_argument("--no-attack", action="store_true",
                    help="skip the rank-(L-1) attacks on each verified L (one succeeding is a soundness bug, exit 1)")
    ap.add_argument("--json", action="store_true", help="one JSON object per tolerance, one per line")
    ap.add_argument("--effort", default="default",
                    help="budget preset: quick, default or thorough (work budgets, recorded in the file)")
    ap.add_argument("--budget", action="append", default=[], metavar="NAME=N",
                    help="override one budget of the preset (positive integer; upper_hybrid 0 or 1, upper_sharp_trials "
                         "0 or more; repeatable), e.g. upper_work=2560000")
    ap.add_argument("--hints", metavar="FILE",
                    help="an earlier bracket file (e.g. of the same head extracted elsewhere): its lower witnesses "
                         "are re-checked exactly on this matrix beside the search's own, so an L found once is "
                         "not lost to a tiny change of the input")
    ap.add_argument("--seed", default="0", help="seed of the random choices (non-negative integer, default 0)")
    return ap


#: Work limit of the re-check of the file this command has just written (``front.OWN_FILE_WORK``).
OWN_FILE_WORK = front.OWN_FILE_WORK


def _hints(path: str | None) -> tuple[LowerCandidate, ...]:
    """The lower witnesses of ``--hints FILE`` (none without it); ``InputError`` naming the file if it is bad."""
    if path is None:
        return ()
    try:
        return read_hints(path)
    except ValueError as exc:                 # exact.errors.MalformedInput and LimitExceeded are ValueErrors
        raise InputError(f"--hints {path}: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        eps_items = parse_eps_list(args.eps)
        effort, seed = _effort(args.effort, args.budget), _seed(args.seed)
        # refused before the search: a link, a directory, a FIFO, a device (docs/panel.md, trust model)
        check_target(args.out)
        _check_memory(_stored_shape(args.logits or args.matrix, args.tensor))
        hints = _hints(args.hints)
        raw = _load(args.logits or args.matrix, args.tensor)
        if args.logits:
            H = validate_matrix(raw, "logits", stochastic=False)
            A, logits = softmax_rows(H), H
        else:
            A, logits = validate_matrix(raw, "matrix"), None
    except (InputError, ValueError) as exc:     # SafeIOError is a ValueError
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return ExitCode.MALFORMED

    _announce(effort, A.shape, len(eps_items))
    target = front.Target(A, logits, args.id_prefix, {"input": str(args.logits or args.matrix),
                                                      "input_kind": "logits" if args.logits else "matrix"})
    try:
        show = not args.json and sys.stderr.isatty()
        with _clean_stop(), search_progress(PROG, len(eps_items), show=show) as bar:
            (out,) = front.search_targets([target], eps_items, effort=effort, seed=seed, device=args.device,
                                          attack=not args.no_attack, hints=hints,
                                          on_step=bar.step if bar is not None else None)
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return ExitCode.MALFORMED
    except KeyboardInterrupt:
        print(f"{PROG}: aborted: nothing written", file=sys.stderr)
        return ExitCode.STOPPED
    stopped = out.provenance.stopped
    try:
        checked = front.write_checked(args.out, [out], max_work=OWN_FILE_WORK)
    except SafeIOError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return ExitCode.MALFORMED
    path, reports = checked.path, checked.reports
    if reports is None:
        print(f"{PROG}: error: {escape(path, 4096)} is written but its exact re-check stopped: {checked.error}; "
              f"run python -m exact verify {path} --max-work N", file=sys.stderr)
        return ExitCode.REFUTED
    bad = False
    rows: list[dict[str, Any]] = []
    for cell, rec in zip(out.cells, out.results):
        rep = reports.get(cell.id)
        ok = bool(rep and rep.verified)
        bad |= not ok or bool(rec.attack_success)
        rows.append({"id": cell.id, "eps": cell.eps, "lower": rec.lower, "upper": rec.upper,
                     "lower_witness": rec.lower_witness, "upper_witness": rec.upper_witness,
                     "svd_rank": rec.svd_rank, "seconds": round(rec.seconds, 3), "slack": rec.slack,
                     "attack_success": rec.attack_success, "capped": rec.capped, "verified": ok,
                     **_cap_fields(rep)})
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(f"{escape(path, 4096)}: {A.shape[0]} x {A.shape[1]} {'logits' if logits is not None else 'matrix'}"
              + (f", slack <= {out.results[0].slack:.3g}" if logits is not None else ""))
        head = (f"{'eps':>8} {'L':>4} {'U':>4} {'SVD':>4}  {'lower witness':<32} {'upper witness':<17} {'s':>6}"
                "  attack  exact")
        print(head)
        for r in rows:
            att = {None: "-", False: "held", True: "BEAT L"}[r["attack_success"]]
            print(f"{r['eps']:>8} {r['lower']:>4} {r['upper']:>4} {str(r['svd_rank'] or '-'):>4}  "
                  f"{r['lower_witness']:<32} {r['upper_witness']:<17} {r['seconds']:>6.1f}  {att:<7} "
                  f"{'verified' if r['verified'] else 'REFUTED'}")
            if r["convex_cap"] is not None:
                print(f"{'':>8} {cap_line(r)}")
        print(_attack_line([r["attack_success"] for r in rows]))
    for r in rows:
        if r["attack_success"]:
            print(f"{PROG}: SOUNDNESS BUG: a rank-{r['lower'] - 1} attack beat the certified lower bound "
                  f"of {r['id']}", file=sys.stderr)
        if not r["verified"]:
            print(f"{PROG}: exact verification refused {r['id']}", file=sys.stderr)
        if r["capped"]:
            print(f"{PROG}: warning: the stop request ended the search of {r['id']} (recorded as capped)",
                  file=sys.stderr)
    if stopped:
        print(f"{PROG}: stopped by Ctrl-C: {escape(path, 4096)} holds the {len(rows)} of {len(eps_items)} tolerance(s) "
              "searched so far", file=sys.stderr)
    return ExitCode.REFUTED if bad else ExitCode.STOPPED if stopped else ExitCode.OK


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

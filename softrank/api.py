"""The front door as functions: ``bracket``, ``verify``, ``twobit``, ``proofs``.

``bracket`` runs the path of ``python -m numeric bracket``
(``numeric.search.front``): it announces a long search, searches every
matrix with ``search_brackets`` (one thread, the same seed for every matrix
of a batch), writes one bracket file to a temporary directory, lets the exact
tier re-verify that file, and builds its ``Brackets`` from the exact tier's
reports alone.
"""
from __future__ import annotations

import importlib
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from exact.bracketfile import read_bracket_file
from exact.errors import MalformedInput
from exact.limits import MAX_WORK
from numeric._optional import require
from numeric.heads.extract import softmax_rows
from numeric.runtime import stop_scope
from numeric.search import front
from numeric.search.effort import Effort, effort_budgets
from oracles import twobit as tb
from oracles.twobit import CellResult, HierarchyFact, RowStochasticFact, _cell_table
from proofs_checks import CheckResult, all_checks, run_check
from softrank.attention import Attention
from softrank.errors import SoftrankError, SoundnessError, UserInputError
from softrank.inputs import as_matrices, parse_tolerances
from softrank.records import Brackets, Verdicts, read_verified

__all__ = ["PROG", "bracket", "verify", "twobit", "proofs", "TwoBit", "Proofs"]

PROG = "softrank.bracket"


def _progress_class() -> type:
    """The progress bar's class: ``tqdm.auto``'s (a widget in Jupyter) when ``ipywidgets`` is installed (the
    ``notebook`` extra), else ``tqdm.std``'s text bar, which ``tqdm.auto`` would fall back to anyway, after a
    ``TqdmWarning`` that the caller cannot act on."""
    try:
        importlib.import_module("ipywidgets")
    except ImportError:
        bar: type = importlib.import_module("tqdm.std").tqdm
        return bar
    bar = importlib.import_module("tqdm.auto").tqdm
    return bar


def _effort(effort: str | Effort) -> Effort:
    try:
        return effort_budgets(effort)
    except (ValueError, TypeError) as exc:
        raise UserInputError(str(exc)) from None


def _seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserInputError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _device(device: object) -> str | None:
    """A torch device the descents can use, or None (the command line's default)."""
    if device is None:
        return None
    torch = require("torch")

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UserInputError(f"device {device!r}: {str(exc).splitlines()[0][:100]}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserInputError(f"device {device!r} is not available (torch.cuda.is_available() is False)")
    return str(dev)


def _targets(A: object) -> tuple[list[front.Target], tuple[int, ...], int]:
    """(``front.Target`` per matrix in C order, batch shape, n) of a matrix, a batch or an ``Attention``."""
    if isinstance(A, Attention):
        m = as_matrices(A.logits, "logits", stochastic=False)
        logits = m.array
        matrices = [softmax_rows(logits[i]) for i in np.ndindex(m.batch_shape)]
        base = {"input": "softrank.attention", "input_kind": "logits"}
        extra = [{"capture": dict(c.provenance)} for c in A.captures]
    else:
        m = as_matrices(A, "A")
        logits, matrices = None, [np.array(m.array[i]) for i in np.ndindex(m.batch_shape)]   # writable copies
        base = {"input": "softrank.bracket", "input_kind": "matrix"}
        extra = [{} for _ in matrices]
    targets: list[front.Target] = []
    for k, idx in enumerate(np.ndindex(m.batch_shape)):
        prefix = "cell" if not idx else f"cell[{','.join(map(str, idx))}]"
        prov = {**base, "softrank": {**m.provenance(), "index": list(idx), **extra[k]}}
        targets.append(front.Target(matrices[k], None if logits is None else np.array(logits[idx]), prefix, prov,
                                    m.row_tol))
    return targets, m.batch_shape, m.array.shape[-1]


def bracket(A: object, eps: object = (0.1, 0.25, 0.5), effort: str | Effort = "default", seed: int = 0,
            progress: bool = True, *, device: object = None, attack: bool = True) -> Brackets:
    """Verified brackets ``L <= r_eps(A) <= U`` of each matrix of ``A`` at each tolerance.

    ``A``: a numpy array or torch tensor (any device) of shape (n, n) or
    (..., n, n) with row-stochastic rows (``softrank.inputs``), or an
    ``Attention`` from ``softrank.attention`` (then, as in the panel, the
    claim is about the exact row softmax of its logits, with a proved slack,
    K.5). ``eps``: one tolerance or several, each in (0, 1] (float, str such
    as ``"1/4"``, Fraction). ``effort``: ``quick``, ``default`` or
    ``thorough`` (counted work, never seconds); ``seed``: every matrix is
    searched with this seed, so ``bracket(A)[i]`` equals ``bracket(A[i])``.
    ``progress``: a ``tqdm`` bar (a widget in notebooks with ``ipywidgets``), one step per
    side and tolerance. ``device``: the torch device of the descents
    (default, as on the command line: cuda if available, else cpu).

    Returns only what the exact tier verified on the bracket file this call
    wrote. Raises ``UserInputError`` on bad input, ``SoundnessError`` if the
    exact tier refutes a side the search had checked (a bug), and
    ``SoftrankError`` if the exact re-check ran out of its work limit.
    An interrupt (Ctrl-C, a notebook's stop button) aborts and returns nothing.
    """
    targets, batch, n = _targets(A)
    eps_items = parse_tolerances(eps)
    budgets, seed, dev = _effort(effort), _seed(seed), _device(device)
    if not isinstance(progress, bool):
        raise UserInputError(f"progress must be True or False, got {progress!r}")
    front.announce(PROG, budgets, (n, n), len(eps_items), count=len(targets),
                   stop="an interrupt (Ctrl-C, the notebook's stop button) aborts and returns nothing")
    bar = _progress_class()(total=2 * len(eps_items) * len(targets), desc=PROG, unit="side", disable=not progress,
               leave=False)

    def step(i: int, label: str) -> None:
        bar.set_postfix_str(label if not batch else f"{targets[i].id_prefix} {label}", refresh=False)
        bar.update()

    try:
        # a stop scope of its own: no stop request of an earlier or a concurrent run reaches this one
        with stop_scope(), tempfile.TemporaryDirectory(prefix="softrank-") as tmp:
            try:
                outputs = front.search_targets(targets, eps_items, effort=budgets, seed=seed, device=dev,
                                               attack=attack, on_step=step)
            except ValueError as exc:
                raise UserInputError(str(exc)) from None
            bar.set_postfix_str("exact re-check")
            checked = front.write_checked(Path(tmp) / "brackets.safetensors", outputs)
            if checked.reports is None:
                raise SoftrankError(f"the exact re-check of the bracket file stopped: {checked.error}")
            data = checked.path.read_bytes()
            bf = read_bracket_file(checked.path)
    finally:
        bar.close()
    if len(outputs) < len(targets) or any(o.provenance.stopped for o in outputs):
        raise SoftrankError("the search was stopped (a stop request) before every matrix was bracketed")
    for out in outputs:
        for cell, res in zip(out.cells, out.results):
            if res.attack_success:
                raise SoundnessError(f"a rank-{res.lower - 1} attack beat the verified lower bound of {cell.id}")
    return Brackets._from_own_file(bf, [checked.reports[c.id] for c in bf.cells], data)


def verify(path_or_bytes: object, max_work: int = MAX_WORK) -> Verdicts:
    """The exact tier on a bracket file (a path, or the file's bytes): a ``Verdicts`` of every cell.

    A refuted side is a verdict, not an exception; a file that cannot be read
    as a bracket file is a ``UserInputError``. ``max_work``: the exact tier's
    work limit (``exact.limits``)."""
    if isinstance(max_work, bool) or not isinstance(max_work, int) or max_work < 1:
        raise UserInputError(f"max_work must be a positive integer, got {max_work!r}")
    return read_verified(path_or_bytes, max_work)


# ---------------------------------------------------------------- the exact oracles
@dataclass(frozen=True)
class TwoBit:
    """The two-bit oracle's cells (``oracles.twobit.CellResult``, each with the paper's rank or None)
    and, for the paper's cells, its two facts; ``ok``: every cell closed and verified, every rank
    the paper's, every fact proved (as ``python -m oracles.twobit`` exits 0)."""

    cells: tuple[tuple[CellResult, int | None], ...]
    facts: tuple[RowStochasticFact | HierarchyFact, ...]

    @property
    def ok(self) -> bool:
        return (all(c.closed and c.verified and (p is None or p == c.lower) for c, p in self.cells)
                and all(f.holds for f in self.facts))

    def table(self) -> str:
        return _cell_table(list(self.cells))


def twobit(t: object = None, s: object = None, eps: object = None) -> TwoBit:
    """The exact two-bit known-answer control (Appendix K.6): the paper's six cells and two facts,
    or with ``t``, ``s``, ``eps`` (rationals, e.g. ``"3/4"``) one cell."""
    given = [v is not None for v in (t, s, eps)]
    try:
        if any(given) and not all(given):
            raise UserInputError("t, s and eps go together")
        if all(given):
            cell = tb.solve_cell(*(tb._parse(str(v), name) for v, name in ((t, "t"), (s, "s"), (eps, "eps"))))
            return TwoBit(((cell, None),), ())
        return TwoBit(tuple(tb.paper_cells()), (tb.row_stochastic_fact(), tb.hierarchy_fact()))
    except MalformedInput as exc:
        raise UserInputError(str(exc)) from None


@dataclass(frozen=True)
class Proofs:
    """The appendix checks run (``proofs_checks.CheckResult``, paper order); ``ok``: all passed."""

    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    def table(self) -> str:
        return "\n".join(f"{r.label:6} {r.name[:44]:44} {'PASS' if r.passed else 'FAIL':6} {r.summary}"
                         for r in self.results)


def proofs(only: str | Iterable[str] | None = None) -> Proofs:
    """The paper's appendix constructions as exact checks (``python -m proofs_checks``); ``only``:
    a label or labels such as ``"G.1"``."""
    entries = all_checks()
    if only is not None:
        wanted = {str(w).strip().upper() for w in ([only] if isinstance(only, str) else only)}
        unknown = sorted(wanted - {e.label.upper() for e in entries})
        if unknown:
            raise UserInputError(f"unknown label(s) {', '.join(unknown)}; known: {', '.join(e.label for e in entries)}")
        entries = [e for e in entries if e.label.upper() in wanted]
    return Proofs(tuple(run_check(e) for e in entries))


"""Mutation run of the trusted core: does a test catch every weakened comparison or rounding?

Every single-operator mutant of the comparison and rounding lines of
``exact/`` is applied, one at a time, to a private copy of the repository,
and a fast targeted subset of the exact tier's tests runs against it. A
mutant is *killed* when that subset fails (a test fails, or the mutated
module no longer imports) or runs past the timeout. Each subset must first
pass on the unmutated copy (the copy carries ``fileio/``, the
bracket writer the tests import), so a kill is never an artefact of the copy.

* Comparison mutants: each operator of each comparison (``ast.Compare``) is
  replaced by each other relational operator (``<``, ``<=``, ``>``, ``>=``,
  ``==``, ``!=``), ``in`` by ``not in``, ``is`` by ``is not`` (and back).
* Rounding mutants, on the lines that round (a line that calls ``up``,
  ``down``, ``nextafter``, ``rint``, ``ceil``, ``floor``, ``.upper``/``.lower``
  or names ``TINY``, ``_REL_P``, ``2.0**``): each ``+``/``-`` swapped, each
  ``*``/``/`` swapped, and ``up``/``down``, ``upper``/``lower``,
  ``ceil``/``floor``, ``maximum``/``minimum`` exchanged.

Mutants listed in ``EQUIVALENT`` change no behaviour (reason given) and are
reported apart. The run is not part of the pytest suite: about 10 s per
killed mutant and a minute per survivor on the shared 2-core machine.

    python -m bench.mutation [--jobs 2] [--only floats.py] [--match REGEX] [--ops REGEX] [--kind comparison] [--list] [--timeout 300]
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.mutation_equivalent import EQUIVALENT

ROOT = Path(__file__).resolve().parents[1]
EXACT = ROOT / "exact"

RELATIONAL = ["<", "<=", ">", ">=", "==", "!="]
SWAPS = {"in": ["not in"], "not in": ["in"], "is": ["is not"], "is not": ["is"]}
NAME_SWAPS = {"up": "down", "down": "up", "upper": "lower", "lower": "upper", "ceil": "floor", "floor": "ceil",
              "maximum": "minimum", "minimum": "maximum"}
ROUNDING = re.compile(r"\b(up|down)\(|nextafter|\brint\b|\.ceil\(|\.floor\(|\.upper\(|\.lower\(|\bTINY\b|_REL_P|2\.0\s*\*\*")
OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
       ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
BINOPS = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"), ast.Div: ("/", "*")}

#: Tests per module: the fast subset that should kill its mutants (a survivor runs all of it, so each
#: subset holds the tests that exercise that module and no others).
KNOWN = ["tests/test_exact_known.py", "tests/test_exact_mutation.py"]
FLOATS = "tests/test_exact_floats.py"
SLACK = ["tests/test_exact_mutants_slack.py", *(f"tests/test_exact_resources.py::test_{name}" for name in (
             "arb_fallback_is_charged_per_entry_and_stops_above_the_slack", "a_row_exactly_at_a_slack_of_zero_is_proved",
             "one_arb_pass_serves_every_planned_matrix_and_skips_a_refused_one", "exp_and_z_are_enclosed_once_per_logits_row")), f"{FLOATS}::test_float_softmax_bound_is_above_the_true_distance", f"{FLOATS}::test_float_softmax_bound_at_distance_zero",
         f"{FLOATS}::test_slack_proof_uses_arb_only_where_the_float_bound_falls_short", "exact/slack.py",
         *(f"tests/test_exact_known.py::test_slack_{name}" for name in (
             "bound_encloses_the_true_distance", "bound_is_zero_only_when_exact", "charged_on_both_sides",
             "bound_encloses_on_random_logits", "below_the_distance_is_refused", "claimed_at_the_arb_bound_is_proved")),
         "tests/test_exact_cli.py::test_table_shows_the_proved_slack_bound",
         "tests/test_exact_known.py::test_slack_bound_of_a_huge_distance_and_of_mismatched_shapes",
         "tests/test_exact_known.py::test_ln2_split_is_checked"]
#: The float filter's tests, the ones that kill most of its mutants first (a killed mutant stops at its first failure).
FLOATS_FIRST = ["tests/test_exact_mutants_floats.py"] + [f"{FLOATS}::test_{name}" for name in (
    "the_machine_has_the_arithmetic_the_bounds_assume", "the_arithmetic_probe_refuses_every_other_environment",
    "row_bounds_are_tight_on_ordinary_matrices", "exact_pieces_refuse_grids_out_of_range",
    "row_bounds_enclose_the_exact_row_sums", "exact_pieces_sum_to_the_product", "filter_off_gives_the_same_norms",
    "residual_norm_is_the_same_with_and_without_floats")] + [
    "tests/test_exact_cli.py::test_ordinary_cells_never_convert_a_whole_matrix", FLOATS]
CLI = "tests/test_exact_cli.py"
RES = "tests/test_exact_resources.py"
ODDMAP = "tests/test_exact_oddmap.py"
#: test_exact_cli.py, the tests that call ``exact.cli.main`` in-process first (a kill costs seconds), then
#: the whole file (its subprocess and memory tests: what only they reach, e.g. ``python -m exact``).
CLI_FIRST = [f"{CLI}::test_{name}" for name in (
    "each_malformed_file_exits_2", "unreadable_paths", "malformed_file_does_not_stop_the_others", "limit_file_bytes",
    "limit_header_bytes_real", "limit_number_chars_real", "limit_decimal_exponent_real", "limit_matrix_side_real",
    "limit_matrix_entries_real", "limit_matrix_entries_patched", "limit_cells_real", "limit_cells_patched",
    "limit_tensors_patched", "messages_from_files_are_escaped", "devices_and_directories_are_refused",
    "unreferenced_tensors_are_checked_not_kept", "memory_error_is_one_line", "memory_error_while_counting_cells",
    "dead_worker_is_one_line", "work_limit_at_and_over", "shared_work_is_done_once", "exponent_spread_costs_work",
    "ordinary_cells_never_convert_a_whole_matrix", "zero_cell_file_is_refused")] + [CLI]
SUBSETS = {
    "__main__.py": ["exact/__main__.py", f"{CLI}::test_bad_arguments_exit_2", f"{CLI}::test_max_work_must_be_positive"],
    "bracketfile.py": ["tests/test_exact_mutants_bracketfile.py", "exact/bracketfile.py", RES, *CLI_FIRST,
                       "tests/test_exact_mutants_verify.py", ODDMAP],
    "cli.py": ["tests/test_exact_mutants_cli.py", "exact/cli.py", RES, *CLI_FIRST],
    "limits.py": [RES, *CLI_FIRST],
    "rational.py": ["exact/rational.py", *CLI_FIRST] + KNOWN,
    "verdict.py": ["tests/test_exact_mutants_verify.py", *KNOWN, *CLI_FIRST],
    "floats.py": FLOATS_FIRST,
    "norms.py": ["tests/test_exact_mutants_norms.py", "exact/norms.py",
                 "tests/test_exact_known.py::test_diagonal_refuses_a_matrix_that_is_not_square",
                 "tests/test_exact_known.py::test_rank_zero_reconstruction_with_an_empty_basis", *FLOATS_FIRST],
    "matrix.py": ["tests/test_exact_mutants_matrix.py", "exact/matrix.py", "tests/test_exact_differential.py::test_exact_arithmetic_matches_fractions",
                  "tests/test_exact_differential.py::test_float64_conversion_is_exact", FLOATS],
    "slack.py": SLACK,
    "verify.py": ["tests/test_exact_mutants_verify.py", f"{RES}::test_exp_and_z_are_enclosed_once_per_logits_row", *KNOWN, ODDMAP],
    "cellspec.py": ["tests/test_exact_mutants_cellspec.py", "exact/cellspec.py", "tests/test_exact_mutants_bracketfile.py", *KNOWN,
                    *CLI_FIRST],
    "oddmap.py": [ODDMAP, "exact/oddmap.py", "tests/test_exact_differential.py::test_odd_map_agrees",
                  "tests/test_exact_differential.py::test_odd_map_agrees_on_the_known_answers_and_their_mutants"],
}
#: The certificate checks (factors, reconstruction, trivial, frobenius, certificates, verdict, verify):
#: the known answers (margins exactly 0 at the boundaries, shapes, slack) and the mutation suite.
DEFAULT_SUBSET = KNOWN


@dataclass(frozen=True)
class Mutant:
    file: str
    line: int
    start: int            # column span of the operator or name on that line
    end: int
    original: str
    replacement: str
    text: str             # the source line, stripped

    def key(self):
        return (self.file, self.text, self.original, self.replacement)

    def equivalent(self) -> str | None:
        """Why this mutant changes no behaviour (``EQUIVALENT``), or None."""
        return EQUIVALENT.get(self.key() + (self.start,), EQUIVALENT.get(self.key()))

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        line = lines[self.line - 1]
        assert line[self.start:self.end] == self.original, (self, line)
        lines[self.line - 1] = line[:self.start] + self.replacement + line[self.end:]
        return "".join(lines)


def _between(lines, a, b, word: str):
    """The span of ``word`` in the source between the end of node a and the start of node b (one line)."""
    if a.end_lineno != b.lineno:
        return None
    segment = lines[b.lineno - 1][a.end_col_offset:b.col_offset]
    match = re.search(r"not\s+in|is\s+not|<=|>=|==|!=|<|>|\bin\b|\bis\b|[-+*/]", segment)
    if match is None or re.sub(r"\s+", " ", match.group()) != word:
        return None
    return a.end_col_offset + match.start(), a.end_col_offset + match.end()


def mutants_of(path: Path) -> list[Mutant]:
    source = path.read_text()
    lines = source.splitlines()
    out = []

    def add(line, span, original, replacements):
        if span is None:
            return
        for new in replacements:
            out.append(Mutant(path.name, line, span[0], span[1], original, new, lines[line - 1].strip()))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                word = OPS[type(op)]
                others = [o for o in RELATIONAL if o != word] if word in RELATIONAL else SWAPS[word]
                add(right.lineno, _between(lines, left, right, word), word, others)
                left = right
        rounding = hasattr(node, "lineno") and ROUNDING.search(lines[node.lineno - 1])
        if not rounding:
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
            word, other = BINOPS[type(node.op)]
            add(node.right.lineno, _between(lines, node.left, node.right, word), word, [other])
        elif isinstance(node, ast.Name) and node.id in NAME_SWAPS:
            add(node.lineno, (node.col_offset, node.end_col_offset), node.id, [NAME_SWAPS[node.id]])
        elif isinstance(node, ast.Attribute) and node.attr in NAME_SWAPS and node.end_lineno == node.lineno:
            end = node.end_col_offset
            add(node.lineno, (end - len(node.attr), end), node.attr, [NAME_SWAPS[node.attr]])
    return sorted(set(out), key=lambda m: (m.file, m.line, m.start, m.replacement))


def _copy(dest: Path) -> Path:
    # fileio: the writer the exact tier's tests use, and its safe writes
    for name in ("exact", "fileio", "tests", "bench"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def _pytest(tests, repo: Path, timeout: float):
    env = dict(os.environ, PYTHONPATH=str(repo), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                           "--hypothesis-seed=0", *tests], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=timeout)


def run_one(mutant: Mutant, repo: Path, timeout: float) -> tuple[bool, float, str]:
    """(killed, seconds, how) for one mutant applied in the copy ``repo`` (restored afterwards)."""
    target = repo / "exact" / mutant.file
    original = target.read_text()
    target.write_text(mutant.apply(original))
    tests = SUBSETS.get(mutant.file, DEFAULT_SUBSET)
    t0 = time.time()
    try:
        proc = _pytest(tests, repo, timeout)
        how = (proc.stdout.strip().splitlines() or ["?"])[-1]
        killed = proc.returncode != 0            # the subset passed unmutated: a failure or an import error
                                                 # (exit 2: the mutated module does not load) is the mutant's
    except subprocess.TimeoutExpired:
        killed, how = True, f"timeout after {timeout:.0f} s"
    finally:
        target.write_text(original)
    return killed, time.time() - t0, how


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.mutation", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2, help="mutants run in parallel, each in its own copy")
    ap.add_argument("--only", action="append", default=[], metavar="FILE", help="only these exact/ files")
    ap.add_argument("--match", default=None, metavar="REGEX", help="only mutants whose 'file:line' matches")
    ap.add_argument("--kind", choices=["all", "comparison", "rounding"], default="all",
                    help="only the comparison mutants, or only the rounding ones")
    ap.add_argument("--ops", default=None, metavar="REGEX", help="only mutants whose 'original->replacement' matches")
    ap.add_argument("--list", action="store_true", help="list the mutants and stop")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant (past it: killed)")
    args = ap.parse_args(argv)
    files = sorted(p for p in EXACT.glob("*.py") if not args.only or p.name in args.only)
    mutants = [m for p in files for m in mutants_of(p) if not args.match or re.search(args.match, f"{m.file}:{m.line}")]
    if args.ops:
        mutants = [m for m in mutants if re.search(args.ops, f"{m.original}->{m.replacement}")]
    if args.kind != "all":
        mutants = [m for m in mutants if (m.original in RELATIONAL or m.original in SWAPS) == (args.kind == "comparison")]
    equivalent = [m for m in mutants if m.equivalent()]
    live = [m for m in mutants if not m.equivalent()]
    if args.list:
        for m in mutants:
            tag = "  (equivalent)" if m in equivalent else ""
            print(f"{m.file}:{m.line}: {m.original!r} -> {m.replacement!r}  {m.text}{tag}")
        print(f"{len(mutants)} mutants, {len(equivalent)} equivalent")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        copies = [_copy(Path(tmp) / f"copy{j}") for j in range(max(1, args.jobs))]
        for tests in {tuple(SUBSETS.get(m.file, DEFAULT_SUBSET)) for m in live}:   # each subset passes unmutated
            proc = _pytest(tests, copies[0], 10 * args.timeout)
            if proc.returncode != 0:
                print(f"the unmutated copy fails {' '.join(tests)}:\n{proc.stdout[-2000:]}", file=sys.stderr)
                return 2
        free = list(copies)

        def job(m):
            repo = free.pop()
            try:
                return m, run_one(m, repo, args.timeout)
            finally:
                free.append(repo)
        t0 = time.time()
        survivors = []
        with ThreadPoolExecutor(max_workers=len(copies)) as pool:
            for n, (m, (killed, seconds, how)) in enumerate(pool.map(job, live), start=1):
                if not killed:
                    survivors.append(m)
                print(f"[{n}/{len(live)}] {'killed ' if killed else 'SURVIVED'} {seconds:6.1f} s  "
                      f"{m.file}:{m.line}: {m.original!r} -> {m.replacement!r}  {m.text[:70]}", flush=True)
    killed = len(live) - len(survivors)
    print(f"\n{len(mutants)} mutants of {len(files)} files ({len(equivalent)} equivalent, not run): "
          f"{killed}/{len(live)} killed ({100 * killed / max(len(live), 1):.1f} %) in {time.time() - t0:.0f} s")
    for m in equivalent:
        print(f"  equivalent: {m.file}:{m.line}: {m.original!r} -> {m.replacement!r}: {m.equivalent()}")
    for m in survivors:
        print(f"  SURVIVED: {m.file}:{m.line}: {m.original!r} -> {m.replacement!r}  {m.text}")
    return 0 if not survivors else 1


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

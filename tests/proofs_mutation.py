"""Mutation run over the deciding lines of ``proofs_checks``: does a verdict move?

A *deciding comparison* is a comparison inside the first argument of a
``require(...)`` call (what a check records) or of a ``facts.append(...)``
call (what ``growth.prove_law`` hands to the check), or inside the ``return``
of a function in ``DECIDERS`` (the arb channel test, the exact gap test, the
law's integer bracket). Each one is mutated, one operator at a time:

* ``negate``: ``<`` -> ``>=``, ``<=`` -> ``>``, ``==`` -> ``!=`` (and back),
  ``is`` -> ``is not``, ``in`` -> ``not in``: the test asks the opposite;
* ``boundary``: ``<`` <-> ``<=``, ``>`` <-> ``>=``: equality moves sides;
* ``true``: the whole comparison replaced by ``True`` (the fact is no longer
  checked): only a negative control that perturbs exactly this fact kills it.

The mutated package is a private copy of ``proofs_checks/`` put first on
``PYTHONPATH`` (the rest of the repository is the worktree's). A mutant is
*killed* when a check it reaches no longer passes, or when a negative control
of such a check stops failing (the control's assertion breaks), or when the
mutated package no longer imports; it *survives* when every check still passes
and every control still fails. The checks a mutant reaches are the registered
checks whose static call graph (by function name, inside ``proofs_checks``)
contains the mutated function. Mutants listed in ``EQUIVALENT`` change no
verdict (reason given) and are reported apart.

    python tests/proofs_mutation.py --list [--only FILE] [--kind negate]
    python tests/proofs_mutation.py [--only FILE] [--match FUNC_REGEX] [--kind negate] [--jobs 1] [--timeout 600]

Not part of the pytest suite (seconds to a minute per mutant);
``tests/test_proofs_mutation.py`` runs a few cheap mutants.
"""
from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "proofs_checks"
CONTROLS = ROOT / "tests" / "test_proofs_checks_controls.py"

#: Functions whose ``return`` decides (their result is required by a check).
DECIDERS = {"certify", "visible_key_gap", "m_bounds", "round_error_ok", "law_bracket", "minimal_dimension"}

OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
       ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "==",
          "in": "not in", "not in": "in", "is": "is not", "is not": "is"}
BOUNDARY = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
OP_NODE = {v: k for k, v in OPS.items()}

#: (file, function, line text stripped, from, to) -> why no verdict can move.
EQUIVALENT: dict[tuple, str] = {}

#: label -> the pytest name prefixes of its negative controls in test_proofs_checks_controls.py.
CONTROL_PREFIX = {
    "A.1": ("test_a1_",), "A.2": ("test_a2_",), "A.3": ("test_a3_",), "D.1": ("test_d1_",), "D.3": ("test_d3_",),
    "E.2": ("test_e2_",), "E.3": ("test_e3_",), "E.4": ("test_e4_",), "F.1": ("test_f1_",), "F.2": ("test_f2_",),
    "G.1": ("test_grid_checks_fail_at_beta_one",), "H.1": ("test_grid_checks_fail_at_beta_one", "test_k5_"),
    "I.2": ("test_grid_checks_fail_at_beta_one", "test_i2_"), "I.3": ("test_i3_",), "I.1": ("test_i1_",),
    "G.1-all": ("test_all_n_",), "G.2": ("test_g2_",), "G.3": ("test_g3_",), "(7)": ("test_hilbert_",),
    "H.2": ("test_h2_",), "H.3": ("test_h3_",), "H.4": ("test_h4_",), "I.4": ("test_i4_",),
    "J.1": ("test_j1_",), "J.2": ("test_j2_",), "K.2": ("test_soundness_",), "K.3": ("test_soundness_",),
}


@dataclass(frozen=True)
class Mutant:
    file: str
    func: str
    line: int
    col: int
    index: int          # which operator of the comparison
    old: str
    new: str
    kind: str
    text: str

    @property
    def key(self) -> tuple:
        return (self.file, self.func, self.text, self.old, self.new)

    def describe(self) -> str:
        return f"{self.file}:{self.line} {self.func}: {self.old} -> {self.new}  [{self.text[:80]}]"


def _parents(tree):
    par = {}
    for n in ast.walk(tree):
        for ch in ast.iter_child_nodes(n):
            par[ch] = n
    return par


def _deciding_nodes(tree):
    """Compare nodes inside require(...)/facts.append(...) first arguments and deciders' returns."""
    out = []
    par = _parents(tree)

    def func_of(node):
        while node in par:
            node = par[node]
            if isinstance(node, ast.FunctionDef):
                return node.name
        return "<module>"

    for n in ast.walk(tree):
        roots = []
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args:
            if n.func.attr == "require" or (n.func.attr == "append" and isinstance(n.func.value, ast.Name)
                                            and n.func.value.id == "facts"):
                roots.append(n.args[0])
        if isinstance(n, ast.Return) and n.value is not None and func_of(n) in DECIDERS:
            roots.append(n.value)
        if isinstance(n, ast.Assign) and func_of(n) in DECIDERS:
            roots.append(n.value)
        for r in roots:
            for x in ast.walk(r):
                if isinstance(x, ast.Compare):
                    out.append((x, func_of(x)))
    seen, uniq = set(), []
    for x, f in out:
        if id(x) not in seen:
            seen.add(id(x))
            uniq.append((x, f))
    return uniq


def mutants(only: str | None = None, kind: str = "all", match: str | None = None) -> list[Mutant]:
    out = []
    for p in sorted(PKG.glob("*.py")):
        if p.name == "__main__.py" or (only and p.name != only):
            continue
        src = p.read_text()
        tree = ast.parse(src)
        lines = src.splitlines()
        for node, func in _deciding_nodes(tree):
            if match and not re.search(match, func):
                continue
            for i, op in enumerate(node.ops):
                old = OPS[type(op)]
                news = []
                if kind in ("all", "negate"):
                    news.append((NEGATE[old], "negate"))
                if kind in ("all", "boundary") and old in BOUNDARY:
                    news.append((BOUNDARY[old], "boundary"))
                if kind in ("all", "true") and i == 0:
                    news.append(("True", "true"))
                for new, k in news:
                    out.append(Mutant(p.name, func, node.lineno, node.col_offset, i, old, new, k,
                                      lines[node.lineno - 1].strip()))
    return out


def apply(m: Mutant, src: str) -> str:
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and node.lineno == m.line and node.col_offset == m.col:
            if m.new == "True":           # `True is True`: the comparison always holds
                node.left, node.ops, node.comparators = ast.Constant(True), [ast.Is()], [ast.Constant(True)]
            else:
                node.ops[m.index] = OP_NODE[m.new]()
            return ast.unparse(tree)
    raise LookupError(m.describe())


@functools.lru_cache(maxsize=1)
def call_graph() -> tuple[dict, dict]:
    """(function -> names it calls, check function -> label), statically, over proofs_checks."""
    calls, checks = {}, {}
    for p in sorted(PKG.glob("*.py")):
        tree = ast.parse(p.read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.FunctionDef):
                names = set()
                for x in ast.walk(n):
                    if isinstance(x, ast.Call):
                        f = x.func
                        names.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
                    elif isinstance(x, ast.Name):
                        names.add(x.id)       # functions passed as values (partial, callbacks)
                calls.setdefault(n.name, set()).update(names)
                for d in n.decorator_list:
                    if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "register":
                        checks[n.name] = d.args[0].value
    return calls, checks


def labels_reaching(func: str) -> list[str]:
    calls, checks = call_graph()
    out = []
    for check, label in checks.items():
        seen, todo = set(), [check]
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            todo.extend(c for c in calls.get(f, ()) if c in calls)
        if func in seen:
            out.append(label)
    return sorted(out)


def judge(labels: list[str]) -> dict:
    """In the mutated process: run each check (must pass) and each of its controls (must still fail)."""
    import importlib.util

    import pytest

    from proofs_checks import all_checks
    from proofs_checks._core import run_check
    entries = {e.label: e for e in all_checks()}
    out = {"positive_failed": [], "control_passed": []}
    for lab in labels:
        r = run_check(entries[lab])
        if not r.passed:
            out["positive_failed"].append(f"{lab}: {list(r.failures)[:2]}")
            return out                       # killed: no need to run its controls
    spec = importlib.util.spec_from_file_location("proofs_controls", CONTROLS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    prefixes = tuple(p for lab in labels for p in CONTROL_PREFIX.get(lab, ()))
    for name in sorted(dir(mod)):
        fn = getattr(mod, name)
        if not (name.startswith(prefixes) and callable(fn)) or not prefixes:
            continue
        params: list[tuple] = [()]
        for mark in getattr(fn, "pytestmark", []):
            if mark.name == "parametrize":
                many = "," in mark.args[0]
                params = [tuple(v) if many else (v,) for v in mark.args[1]]
        for args in params:
            with pytest.MonkeyPatch.context() as mp:
                kw = {}
                code = fn.__code__.co_varnames[:fn.__code__.co_argcount]
                if "monkeypatch" in code:
                    kw["monkeypatch"] = mp
                if "tmp_path" in code:
                    kw["tmp_path"] = Path(tempfile.mkdtemp(prefix="pcm_"))
                pos = list(args)
                names = [c for c in code if c not in ("monkeypatch", "tmp_path")]
                kw.update(dict(zip(names, pos)))
                try:
                    fn(**kw)
                except AssertionError as exc:
                    out["control_passed"].append(f"{name}{list(args)}: {str(exc)[:120]}")
                except Exception as exc:     # the check body crashed: a failure (fail closed), not a kill
                    note = f"{name}{list(args)}: {type(exc).__name__}: {exc}"[:160]
                    out.setdefault("control_crashed", []).append(note)
    return out


def run_mutant(m: Mutant, timeout: int) -> tuple[str, str]:
    labels = labels_reaching(m.func)
    if not labels:
        return "unreached", "no registered check reaches this function"
    with tempfile.TemporaryDirectory(prefix="pcmut_") as tmp:
        pkg = Path(tmp) / "proofs_checks"
        shutil.copytree(PKG, pkg, ignore=shutil.ignore_patterns("__pycache__"))
        src = (PKG / m.file).read_text()
        (pkg / m.file).write_text(apply(m, src))
        out = Path(tmp) / "out"
        out.mkdir()
        env = dict(os.environ, PYTHONPATH=f"{tmp}{os.pathsep}{ROOT}", PROOFS_CHECKS_OUT=str(out))
        try:
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--judge", *labels],
                                  cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed", f"timeout after {timeout} s"
        try:
            doc = json.loads(proc.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            return "killed", f"no verdict (exit {proc.returncode}): {proc.stderr.strip()[-200:]}"
        if doc["positive_failed"]:
            return "killed", f"check fails: {doc['positive_failed'][0]}"[:200]
        if doc["control_passed"]:
            return "killed", f"control no longer fails: {doc['control_passed'][0]}"[:200]
        return "survived", f"checks {labels} pass, their controls fail"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--only", help="one file of proofs_checks, e.g. growth.py")
    ap.add_argument("--match", help="regex on the enclosing function's name")
    ap.add_argument("--kind", default="all", choices=("all", "negate", "boundary", "true"))
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--json", metavar="FILE", help="append one JSON line per mutant")
    ap.add_argument("--judge", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.judge:
        print(json.dumps(judge(args.judge)))
        return 0
    ms = mutants(args.only, args.kind, args.match)
    if args.list:
        for m in ms:
            print(m.describe(), "->", labels_reaching(m.func))
        print(f"{len(ms)} mutants")
        return 0
    counts = {"killed": 0, "survived": 0, "equivalent": 0, "unreached": 0}
    for m in ms:
        if m.key in EQUIVALENT:
            verdict, why = "equivalent", EQUIVALENT[m.key]
        else:
            verdict, why = run_mutant(m, args.timeout)
        counts[verdict] += 1
        print(f"{verdict:10} {m.describe()}  -- {why}", flush=True)
        if args.json:
            with open(args.json, "a") as fh:
                fh.write(json.dumps({"mutant": m.describe(), "verdict": verdict, "why": why}) + "\n")
    print(json.dumps(counts))
    return 0 if counts["survived"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

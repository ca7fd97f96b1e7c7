"""The second checker (``crosscheck``): independence, its reader, its numbers, hostile files.

Independence is read from the source (``ast``) and from a fresh interpreter's
``sys.modules``. The reader is judged against the format and against the
exact tier's reader: every malformed file of ``tests/bracket_files.py`` is
refused by both, with one line naming the fault and exit 2; the rational
grammar is compared string by string with the exact tier's parser.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crosscheck
from crosscheck import _limits
from crosscheck._numbers import parse
from crosscheck._reader import _depth
from tests.bracket_files import MALFORMED, base_cell, bracket_bytes, container, doc

ROOT = Path(__file__).resolve().parents[1]
#: What the second checker may not import: the other checker, the float tier, its arithmetic, float machinery.
FORBIDDEN = ("exact", "fileio", "numeric", "oracles", "proofs_checks", "flint", "torch", "transformers", "scipy",
             "sklearn", "highspy", "safetensors", "sympy")


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def _violations(folder: Path) -> list:
    return [f"{p.name} imports {name}" for p in sorted(folder.rglob("*.py")) for name in _imports(p)
            if name.split(".")[0] in FORBIDDEN]


def test_crosscheck_imports_nothing_of_the_exact_tier_or_the_float_tier():
    assert not _violations(ROOT / "crosscheck")


def test_numpy_only_where_its_use_is_exact_or_a_hint():
    """numpy may hold the floats (an exact decomposition: frexp, power-of-two scalings, truncation), run
    int64 arithmetic whose bounds are proved (the row filter, the slack's vector pass), and supply the
    untrusted eigenvector hint; nowhere else."""
    users = sorted(p.name for p in (ROOT / "crosscheck").rglob("*.py") if "numpy" in set(_imports(p)))
    assert users == ["_dyadic.py", "_rows.py", "_slack.py", "_spectral.py", "_verify.py"]


def test_the_import_rule_catches_a_violation(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    from exact.verify import verify_file\n    import flint\n")
    assert len(_violations(tmp_path)) == 2


def test_importing_crosscheck_loads_no_forbidden_module():
    code = ("import sys, crosscheck, crosscheck.__main__\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_limits_are_the_formats():
    """docs/bracket-format.md section 4 defines the size limits; both checkers must use the same values."""
    from exact import limits
    from exact.oddmap import MAX_ODDMAP_DIM

    for name in ("MAX_FILE_BYTES", "MAX_HEADER_BYTES", "MAX_NUMBER_CHARS", "MAX_DECIMAL_EXPONENT",
                 "MAX_MATRIX_SIDE", "MAX_MATRIX_ENTRIES", "MAX_CELLS", "MAX_TENSORS"):
        assert getattr(_limits, name) == getattr(limits, name), name
    assert _limits.MAX_ODDMAP_DIM == MAX_ODDMAP_DIM


# ---------------------------------------------------------------- numbers
GRAMMAR = ["1/4", "-1/4", "+3", "0", "-0", "0.25", ".5", "5.", "1e-3", "-2.5E+2", "1e1000", "1e1001", "1e-1001",
           "1/0", "1//2", "1/2/3", "/2", "1/", "", ".", "e5", "1e", "1e+", "1.2.3", "1e5e3", "1E5e3", "--1", "+-1",
           " 1", "1 ", "nan", "inf", "0x10", "1_000", "\u0663", "1/2e3", "12345678901234567890/3", "0.000",
           "00012.5000e-2", "+.5e3", "-.e1"]


@pytest.mark.parametrize("text", GRAMMAR)
def test_rational_grammar_agrees_with_the_exact_tier(text):
    from exact.errors import MalformedInput
    from exact.rational import parse_rational

    try:
        theirs = parse_rational(text)
    except MalformedInput:
        theirs = None
    try:
        mine = parse(text)
    except crosscheck.Malformed:
        mine = None
    assert (None if theirs is None else Fraction(int(theirs.p), int(theirs.q))) == mine, text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789+-./eE ", max_size=12))
def test_rational_grammar_agrees_on_random_strings(text):
    test_rational_grammar_agrees_with_the_exact_tier(text)


def test_number_limits():
    with pytest.raises(crosscheck.LimitReached):
        parse("1" * (_limits.MAX_NUMBER_CHARS + 1))
    assert parse("1" * _limits.MAX_NUMBER_CHARS) == int("1" * _limits.MAX_NUMBER_CHARS)
    with pytest.raises(crosscheck.LimitReached):
        parse(f"1e{_limits.MAX_DECIMAL_EXPONENT + 1}")


# ---------------------------------------------------------------- hostile files
@pytest.fixture(scope="module")
def malformed(tmp_path_factory):
    d = tmp_path_factory.mktemp("malformed")
    paths = {}
    for name, (blob, _) in MALFORMED.items():
        paths[name] = d / f"{name}.safetensors"
        paths[name].write_bytes(blob)
    return paths


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_every_malformed_file_is_refused_with_its_reason(name, malformed):
    with pytest.raises(crosscheck.Malformed) as err:
        crosscheck.verify_file(malformed[name])
    message = str(err.value)
    assert "\n" not in message and len(message) < 400
    assert MALFORMED[name][1].lower() in message.lower(), message
    assert all(" " <= c <= "~" for c in message), message


def test_malformed_files_one_line_each_exit_2_in_one_subprocess(malformed):
    names = sorted(malformed)
    proc = subprocess.run([sys.executable, "-m", "crosscheck", *(str(malformed[n]) for n in names), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == len(names)
    out = json.loads(proc.stdout)
    assert out["cells"] == [] and out["all_verified"] is False and len(out["malformed"]) == len(names)


def test_a_refusal_by_both_checkers_is_agreement(malformed):
    from exact.errors import MalformedInput
    from exact.verify import verify_file as exact_verify

    for name in ("nan-entry", "unknown-lower-kind", "trailing-bytes"):
        with pytest.raises(MalformedInput) as err:
            exact_verify(malformed[name])
        a = crosscheck.agreement(malformed[name], {"error": str(err.value)})
        assert a.ok and a.error is not None and a.cells == 0


def test_unreadable_paths_are_refused(tmp_path):
    for path in (tmp_path / "nope.safetensors", tmp_path):
        with pytest.raises(crosscheck.Malformed):
            crosscheck.verify_file(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(crosscheck.Malformed, match="a FIFO, not a regular file"):
        crosscheck.verify_file(fifo)
    with pytest.raises(crosscheck.Malformed, match="a character device, not a regular file"):
        crosscheck.verify_file("/dev/zero")


def test_json_depth_is_checked_before_parsing(tmp_path):
    deep = doc()
    deep["cells"][0]["provenance"] = {"x": json.loads("[" * 300 + "]" * 300)}     # the exact tier reads it
    p = tmp_path / "deep.safetensors"
    p.write_bytes(bracket_bytes(deep))
    with pytest.raises(crosscheck.LimitReached, match="nests deeper"):
        crosscheck.verify_file(p)
    shallow = doc()
    shallow["cells"][0]["provenance"] = {"x": json.loads("[" * 200 + "]" * 200)}
    p.write_bytes(bracket_bytes(shallow))
    assert crosscheck.verify_file(p)[0].verified
    assert _depth('{"a": "[[[[{{{{", "b": [[]]}') == 3


def test_a_header_of_pure_brackets_is_refused_quickly(tmp_path):
    p = tmp_path / "brackets.safetensors"
    p.write_bytes(container("[" * 10**6))
    with pytest.raises(crosscheck.LimitReached):
        crosscheck.verify_file(p)


def test_odd_map_witness_structure_is_malformed(tmp_path):
    import numpy as np

    A = np.eye(2)
    bad = {"three-columns": np.zeros((8, 3)), "row-out-of-range": np.array([[5.0, 1.0]] * 8),
           "sign-two": np.array([[0.0, 2.0]] * 8), "fractional-row": np.array([[0.5, 1.0]] * 8)}
    for name, labels in bad.items():
        cell = base_cell(lower={"rank": 2, "witness": {"kind": "odd_map", "labels": "lab", "points": "pts"}})
        p = tmp_path / f"{name}.safetensors"
        p.write_bytes(bracket_bytes(doc([cell]), tensors={"A": A, "lab": labels, "pts": np.zeros((6, 2))}))
        with pytest.raises(crosscheck.Malformed):
            crosscheck.verify_file(p)
    cell = base_cell(lower={"rank": 8, "witness": {"kind": "odd_map", "labels": "lab", "points": "pts"}})
    p = tmp_path / "d8.safetensors"
    p.write_bytes(bracket_bytes(doc([cell]), tensors={"A": A, "lab": np.zeros((3**8 - 1, 2)), "pts": np.zeros((1, 2))}))
    with pytest.raises(crosscheck.LimitReached, match="dimension 8"):
        crosscheck.verify_file(p)


def test_the_work_limit_refuses_the_file(tmp_path):
    from tests.bracket_files import EXAMPLE

    with pytest.raises(crosscheck.LimitReached, match="work limit"):
        crosscheck.verify_file(EXAMPLE, max_work=10)
    proc = subprocess.run([sys.executable, "-m", "crosscheck", str(EXAMPLE), "--max-work", "10"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "work limit" in proc.stderr


HOSTILE_HEADERS = {                      # each took the old regex scan quadratic time (a 40 KB one: 30 s and more)
    "escaped quotes": '"' + '\\"' * 2**19,
    "backslash quote": '"\\' * 2**19,
    "open string": '"' + "a" * 2**20,
}


def test_hostile_1mb_headers_are_refused_not_left_running(tmp_path):
    """A 1 MB header built against the depth scan is refused at once (one fresh interpreter, a hang guard)."""
    files = []
    for k, text in enumerate(HOSTILE_HEADERS.values()):
        files.append(tmp_path / f"h{k}.safetensors")
        files[-1].write_bytes(container(text))
    code = ("import sys, crosscheck\nfor p in sys.argv[1:]:\n    try:\n        crosscheck.verify_file(p)\n"
            "    except crosscheck.Malformed:\n        pass\n    else:\n        raise SystemExit(1)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code, *map(str, files)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_depth_scan_memory_is_linear_in_the_header():
    """The scan keeps no state per character: a 2 MiB JSON string with escapes costs at most a couple of
    copies of the text (the old pattern held about 120 bytes per character)."""
    import tracemalloc

    text = json.dumps({"provenance": {"note": 'x\\"[{' * 2**19}, "cells": [[1, [2]], {}]})
    tracemalloc.start()
    try:
        assert _depth(text) == 4
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(text) + 2**20, peak


@pytest.mark.parametrize("text", ['{"a": "\\\\", "b": [[["\\"]"]]]}', '["\\\\\\"[[", {"k\\\\": [[]]}]',
                                  '[{"a": "x"}, "\\u005b", [[[[]]]]]', '"only a string"', "[]"])
def test_depth_scan_agrees_with_the_parsed_depth(text):
    def parsed(x):
        return 1 + max(map(parsed, x.values() if isinstance(x, dict) else x), default=0) \
            if isinstance(x, (dict, list)) else 0
    assert _depth(text) == parsed(json.loads(text))

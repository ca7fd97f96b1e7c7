"""The CLI's printing helpers at their boundaries.

Found by the mutation run (``bench/mutation.py --only cli.py``): each test
pins a boundary that no other test reached.
"""
from __future__ import annotations

import numpy as np
import pytest

import re
from fractions import Fraction

from flint import fmpq

from exact.cli import _approx, _clean, main
from fileio.bracketwriter import write_bracket_file


def test_clean_keeps_printable_ascii_and_escapes_everything_else():
    """``_clean``: every printable ASCII character (space to tilde, the backslash and quotes included)
    is kept as it is; every other character becomes a printable escape."""
    printable = "".join(map(chr, range(0x20, 0x7F)))
    assert _clean(printable) == printable
    for c in ["\x00", "\n", "\r", "\x1b", "\x1f", "\x7f", "\x80", "\x9b", "\u2028", "\ud800", "\U0001f600"]:
        out = _clean(f"a{c}b")
        assert out != f"a{c}b" and out.startswith("a") and out.endswith("b")
        assert all(" " <= ch <= "~" for ch in out), (c, out)


def test_table_says_proved_for_a_slack_equal_to_its_bound(tmp_path, capsys):
    """softmax of a zero row of length 2 is exactly (1/2, 1/2): slack 0 is proved with bound 0, and the
    table says so (``bound <= slack``, equality included)."""
    cells = [{"id": "exact", "eps": "1/4", "target": {"matrix": "A", "logits": "H", "slack": "0"},
              "lower": {"rank": 0, "witness": {"kind": "trivial"}}, "upper": {"rank": 2, "witness": {"kind": "trivial"}}}]
    path = write_bracket_file(tmp_path / "b.safetensors", cells, {"A": np.full((2, 2), 0.5), "H": np.zeros((2, 2))})
    assert main(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(proved: bound +0.000e+00)" in out and "NOT proved" not in out


def test_approx_prints_every_rational_as_a_short_decimal():
    """``_approx``: a signed 4-digit scientific image, within 0.05 % of the value, for rationals in float
    range (the table's ``+1.234e-05`` form) and far beyond it (numerators or denominators of 10^300 and
    more go through arb: never an OverflowError)."""
    cases = [fmpq(0), fmpq(-3, 7), fmpq(1, 3), fmpq(9 * 10**299), fmpq(1, 9 * 10**299), fmpq(10**300),
             fmpq(1, 10**300), fmpq(-(10**400) - 1), fmpq(1, 10**400), fmpq(10**500, 3)]
    for q in cases:
        text = _approx(q)
        assert re.fullmatch(r"[+-]?[0-9]\.[0-9]{3}e[+-][0-9]+", text), (q, text)
        shown, exact = Fraction(text), Fraction(int(q.p), int(q.q))
        assert abs(shown - exact) <= abs(exact) * Fraction(5, 10**4), (q, text)
    for q in cases[:5]:                                   # in float range: the sign is always printed
        assert _approx(q)[0] in "+-"


def test_one_worker_reads_each_file_once(tmp_path, capsys, monkeypatch):
    """With ``--workers 1`` the cells are not counted first (no second read of the file)."""
    import exact.cli
    cells = [{"id": "c", "eps": "1/4", "target": {"matrix": "A"},
              "lower": {"rank": 0, "witness": {"kind": "trivial"}}, "upper": {"rank": 2, "witness": {"kind": "trivial"}}}]
    path = write_bracket_file(tmp_path / "b.safetensors", cells, {"A": np.full((2, 2), 0.5)})
    counted = []
    real = exact.cli.header_facts
    monkeypatch.setattr(exact.cli, "header_facts", lambda p: counted.append(p) or real(p))
    assert main(["verify", "--workers", "1", str(path)]) == 0 and not counted
    assert main(["verify", "--workers", "2", str(path)]) == 0 and counted == [str(path)]


def test_no_process_pool_for_one_worker_or_one_task(tmp_path, capsys, monkeypatch):
    """``--workers 1`` judges every file in this process, and so does ``--workers 2`` with a single task
    (one file of one cell): no process pool is started. Two files with ``--workers 2`` do start one."""
    import exact.cli
    cells = [{"id": "c", "eps": "1/4", "target": {"matrix": "A"},
              "lower": {"rank": 0, "witness": {"kind": "trivial"}}, "upper": {"rank": 2, "witness": {"kind": "trivial"}}}]
    paths = [str(write_bracket_file(tmp_path / f"b{i}.safetensors", cells, {"A": np.full((2, 2), 0.5)})) for i in (1, 2)]

    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool was started")
    monkeypatch.setattr(exact.cli, "ProcessPoolExecutor", no_pool)
    monkeypatch.setattr(exact.cli, "_cores", lambda: 2)
    assert main(["verify", "--workers", "1", *paths]) == 0
    assert main(["verify", "--workers", "2", paths[0]]) == 0
    with pytest.raises(AssertionError, match="process pool"):              # two tasks, two workers: a pool
        main(["verify", "--workers", "2", *paths])


def _trivial_file(tmp_path, eps="1/4", name="b.safetensors"):
    cells = [{"id": "c", "eps": eps, "target": {"matrix": "A"},
              "lower": {"rank": 0, "witness": {"kind": "trivial"}}, "upper": {"rank": 2, "witness": {"kind": "trivial"}}}]
    return str(write_bracket_file(tmp_path / name, cells, {"A": np.full((2, 2), 0.5)}))


def test_table_prints_eps_as_written_up_to_24_characters(tmp_path, capsys):
    """eps as the file writes it when it has at most 24 characters, else its short decimal image."""
    short, long = "1/" + "3" * 22, "1/" + "3" * 23
    assert len(short) == 24 and len(long) == 25
    for eps, shown in ((short, short), (long, _approx(fmpq(long))), ("1/4", "1/4")):
        assert main(["verify", _trivial_file(tmp_path, eps)]) == 0
        assert f"eps={shown} " in capsys.readouterr().out, eps


def test_max_work_of_one_unit_is_a_limit_not_a_usage_error(tmp_path, capsys):
    """``--max-work 1`` is legal (the file is then refused for its work, exit 2, not by argparse);
    0 and negative values are usage errors."""
    assert main(["verify", "--max-work", "1", _trivial_file(tmp_path)]) in (0, 2)
    assert "must be >= 1" not in capsys.readouterr().err
    for bad in ("0", "-3"):
        with pytest.raises(SystemExit) as exc:
            main(["verify", "--max-work", bad, _trivial_file(tmp_path)])
        assert exc.value.code == 2 and "--max-work must be >= 1" in capsys.readouterr().err


def test_summary_counts_closed_cells(tmp_path, capsys):
    """A cell verified with L = U counts as closed, the two with L < U do not."""
    closed = {"id": "closed", "eps": "1/4", "target": {"matrix": "A"},
              "lower": {"rank": 1, "witness": {"kind": "trivial"}}, "upper": {"rank": 1, "witness": {"kind": "trivial"}}}
    open_ = {**closed, "id": "open", "lower": {"rank": 0, "witness": {"kind": "trivial"}}}
    path = write_bracket_file(tmp_path / "b.safetensors", [closed, open_, {**open_, "id": "open 2"}], {"A": np.ones((1, 1))})
    assert main(["verify", str(path)]) == 0
    assert "3/3 cells verified on both sides, 1 closed (L = U)" in capsys.readouterr().out


def test_workers_are_capped_at_the_cores_with_a_note(tmp_path, capsys, monkeypatch):
    """``--workers 64`` on a 2-core machine starts 2 processes, not 64, and says so; at the core count
    itself (and below) nothing is capped and nothing is said."""
    import exact.cli
    paths = [_trivial_file(tmp_path, name=f"b{i}.safetensors") for i in range(4)]
    started = []
    real = exact.cli._run
    monkeypatch.setattr(exact.cli, "_cores", lambda: 2)
    monkeypatch.setattr(exact.cli, "_run", lambda tasks, workers: started.append(workers) or real(tasks, workers))
    assert main(["verify", "--workers", "64", *paths]) == 0
    assert started == [2]
    assert capsys.readouterr().err.splitlines() == ["python -m exact verify: note: --workers 64 capped at 2, "
                                                     "the cores available"]
    for n in (2, 1):
        assert main(["verify", "--workers", str(n), *paths]) == 0
        assert started[-1] == n and capsys.readouterr().err == ""


def test_cores_are_counted_from_the_affinity():
    import os

    from exact.cli import _cores
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    assert _cores() == max(1, expected) >= 1

"""``--hints FILE``: the lower witnesses of an earlier bracket file, re-checked exactly on a new matrix.

A head extracted twice differs by about 1e-6 per entry; a search of the second copy with the first
copy's file as hints keeps the first copy's L when its certificates still hold there (their margin is far
above 1e-6), whatever the search itself finds. A hint is never believed: on a matrix where it does not
hold, the exact tier refuses it and L does not move (the negative control)."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from exact.errors import ExitCode
from exact.verify import verify_file
from numeric.search import search_brackets
from numeric.search.cli import main as bracket_main
from numeric.search.effort import PRESETS
from numeric.search.hints import hints_for, read_hints

EPS = ["1/4"]


def _head(n: int = 32, seed: int = 3) -> np.ndarray:
    """A banded head: its row-side certificates have margin far above 1e-6."""
    rng = np.random.default_rng(seed)
    i = np.arange(n, dtype=float)
    H = -((i[:, None] - i[None, :]) ** 2) / 4.0 + 0.3 * rng.normal(size=(n, n))
    E = np.exp(H - H.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _nudged(A: np.ndarray) -> np.ndarray:
    B = A * (1 + 1e-6 * np.random.default_rng(0).uniform(-1, 1, A.shape))
    return B / B.sum(axis=1, keepdims=True)


#: A search too small to find much: one LP growth unit, no descent, no swap (what a hint must make up for),
#: and a small upper search (the upper side is not what these tests look at).
TINY = PRESETS["quick"].replace(upper_work=1000, far_lp_work=1, descent_steps=1, greedy_steps=1, greedy_rows=1,
                                swap_work=1, lp_append_work=1, lp_svd_solves=1)


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    """The bracket file of the head at default (the earlier extraction's file)."""
    d = tmp_path_factory.mktemp("hints")
    np.save(d / "A.npy", _head())
    assert bracket_main(["--matrix", str(d / "A.npy"), "--eps", ",".join(EPS), "--out", str(d / "A.safetensors"),
                         "--no-attack", "--json", "--effort", "quick", "--budget", "upper_work=1000"]) == 0
    return d / "A.safetensors"


def test_hints_keep_the_earlier_L_on_a_nudged_copy(earlier):
    (hint,) = read_hints(earlier)
    B = _nudged(_head())
    alone = search_brackets(B, EPS, effort=TINY, attack=False).results[0]
    helped = search_brackets(B, EPS, effort=TINY, attack=False, hints=[hint]).results[0]
    assert alone.lower < hint.rank <= helped.lower                 # the tiny search alone falls short
    assert helped.lower_witness.endswith("/hint") or helped.lower > hint.rank


def test_a_hint_that_does_not_hold_is_refused_and_L_does_not_move(earlier, tmp_path):
    """Negative control: the banded head's certificate on a near-uniform matrix (r_eps = 1 at 1/4)."""
    (hint,) = read_hints(earlier)
    n = _head().shape[0]
    U = np.full((n, n), 1.0 / n) + 1e-3 * np.eye(n)
    U /= U.sum(axis=1, keepdims=True)
    alone = search_brackets(U, EPS, effort=TINY, attack=False)
    out = search_brackets(U, EPS, effort=TINY, attack=False, hints=[hint])
    assert out.results[0].lower == alone.results[0].lower <= 1 < hint.rank


def test_a_hint_of_another_shape_is_dropped(earlier):
    hints = read_hints(earlier)
    assert hints_for(hints, (32, 32)) == hints and hints_for(hints, (31, 32)) == ()


def test_the_file_written_with_hints_verifies_exactly(earlier, tmp_path, capsys):
    np.save(tmp_path / "B.npy", _nudged(_head()))
    out = tmp_path / "B.safetensors"
    assert bracket_main(["--matrix", str(tmp_path / "B.npy"), "--eps", ",".join(EPS), "--out", str(out),
                         "--no-attack", "--json", "--hints", str(earlier), "--effort", "quick",
                         *[a for b in ("upper_work=1000", "descent_steps=1", "greedy_steps=1", "swap_work=1",
                                       "far_lp_work=1", "lp_append_work=1") for a in ("--budget", b)]]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["verified"] and row["lower"] >= read_hints(earlier)[0].rank
    (report,) = verify_file(str(out))
    assert report.verified


@pytest.mark.parametrize("content, what", [(b"not a bracket file", "--hints"), (None, "--hints")])
def test_a_bad_hints_file_is_one_line_exit_2(tmp_path, capsys, content, what):
    np.save(tmp_path / "A.npy", _head(8))
    bad = tmp_path / "bad.safetensors"
    if content is not None:
        bad.write_bytes(content)
    rc = bracket_main(["--matrix", str(tmp_path / "A.npy"), "--eps", "1/4", "--out", str(tmp_path / "o.safetensors"),
                       "--hints", str(bad)])
    err = capsys.readouterr().err
    assert rc == ExitCode.MALFORMED and what in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.safetensors").exists()


def test_hints_change_nothing_when_absent():
    """Without hints the search is the search: the same brackets as a call that does not name them."""
    A = _head(16)
    a = search_brackets(A, [Fraction(1, 4)], effort=TINY, attack=False)
    b = search_brackets(A, [Fraction(1, 4)], effort=TINY, attack=False, hints=())
    assert [(r.lower, r.upper, r.lower_witness) for r in a.results] == \
           [(r.lower, r.upper, r.lower_witness) for r in b.results]

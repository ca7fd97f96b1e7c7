"""The trusted core's resources and output under a hostile file: work charged at its cost, memory bounded
before reading, workers that cannot mix two versions of a file, output a file cannot forge.

Each test fails on the code before these fixes: the work meter (a list popped by value, shared by
threads), the arb fallback of the slack (charged 8 units an entry, never stopped, one pass per
(logits, matrix) pair), memory that followed the declared tensor bytes, ``--workers N`` starting N
processes and re-reading a file without checking it, ids printed whole, a file named twice counted twice,
1e400 read as inf.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from flint import fmpq

import exact.cli
import exact.slack
from exact.bracketfile import read_bracket_file
from exact.cli import main
from exact.limits import LimitExceeded, charge, work_limit
from exact.slack import (ARB_CHUNK, ARB_DEV_UNITS, ARB_EXP_UNITS, FLOAT_DEV_UNITS, FLOAT_EXP_UNITS, SlackProof,
                         SoftmaxSlacks, softmax_slack_bound)
from exact.verify import judge_file
from fileio.bracketwriter import rational_string
from tests.bracket_files import base_cell, bracket_bytes, container, doc, rss_run, write_file

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the work meter
def test_meter_is_popped_by_identity():
    """Two nested meters with equal contents: leaving the inner one leaves the outer one metering."""
    with work_limit(10) as outer:
        with work_limit(10) as inner:
            pass
        charge(3, "after the inner block")
    assert outer.used == 3 and inner.used == 0


def test_meter_is_per_thread():
    """Two threads, each in its own work_limit, interleaved: each meter counts its own thread's work."""
    barrier, used = threading.Barrier(2), {}

    def worker(name, units):
        with work_limit(100) as meter:
            barrier.wait()                     # both meters open
            charge(units, name)
            barrier.wait()                     # both charged
        used[name] = meter.used
    threads = [threading.Thread(target=worker, args=(n, u)) for n, u in (("a", 5), ("b", 7))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert used == {"a": 5, "b": 7}


def test_meter_refuses_past_its_limit():
    with pytest.raises(LimitExceeded, match="work limit"):
        with work_limit(4):
            charge(4, "at the limit")
            charge(1, "one past it")


def test_nothing_runs_arb_or_sets_its_precision_at_import():
    """Importing the exact tier creates no arb number (the ln 2 split is checked at its first use), and the
    caller's precision is what it was."""
    code = ("import flint; real = flint.arb; made = []\n"
            "class Counting:\n"
            "    def __new__(cls, *a): made.append(a); return real(*a)\n"
            "flint.arb = Counting; flint.ctx.prec = 100\n"
            "import exact.cli, exact.slack, exact.verify\n"
            "print(len(made), flint.ctx.prec, exact.slack._ln2_ok.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["0", "100", "0"], out.stderr


def test_precision_is_the_module_s_whatever_the_caller_s():
    """The slack bound is the same at the caller's precision 20 as at 53: it sets its own, per call."""
    from flint import ctx
    H = np.random.default_rng(2).normal(size=(3, 5))
    A0 = np.nextafter(np.exp(H) / np.exp(H).sum(axis=1, keepdims=True), 1.0)
    want = softmax_slack_bound(H, A0)
    old = ctx.prec
    try:
        ctx.prec = 20
        assert softmax_slack_bound(H, A0) == want and ctx.prec == 20
    finally:
        ctx.prec = old


# ---------------------------------------------------------------- the slack's arb fallback
def _softmax(H):
    E = np.exp(H - H.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def test_arb_fallback_is_charged_per_entry_and_stops_above_the_slack():
    """A slack of 1/10 against a matrix far from the softmax: the first row's arb pass stops after its first
    chunk and no other row is computed. The work is the float pass, one row of exp(h) and Z, one chunk of
    the deviation sum; asking again at that slack or a smaller one costs nothing, a slack above the
    distance is proved."""
    m, n = 3, 4 * ARB_CHUNK
    H = np.random.default_rng(0).normal(scale=3.0, size=(m, n))
    A0 = np.full((m, n), 1.0 / n)
    with work_limit(2**40) as meter:
        proof = SlackProof(H, A0)
        assert proof.bound_for(fmpq(1, 10)) is None
        assert list(proof.arb) == [0] and proof.arb[0] == (True, fmpq(1, 10))
        assert meter.used == (FLOAT_EXP_UNITS + FLOAT_DEV_UNITS) * m * n + ARB_EXP_UNITS * n + ARB_DEV_UNITS * ARB_CHUNK
        before = meter.used
        assert proof.bound_for(fmpq(1, 10)) is None and proof.bound_for(fmpq(0)) is None and meter.used == before
    true = softmax_slack_bound(H, A0)
    assert proof.bound_for(fmpq(2)) <= fmpq(2) and proof.bound_for(true) == true


def test_a_row_exactly_at_a_slack_of_zero_is_proved():
    """softmax(0) = (1/2, 1/2) exactly: the arb deviation sum is exactly 0, not above a slack of 0."""
    proof = SlackProof(np.zeros((2, 2)), np.full((2, 2), 0.5))
    assert not (proof.fast <= 0).any()                  # the float bound is a few ulps: arb decides
    assert proof.bound_for(fmpq(0)) == 0 and proof.arb[0] == (False, fmpq(0))


def _nudged(H, times):
    A = _softmax(H)
    for _ in range(times):
        A = np.nextafter(A, 1.0)
    return A


def test_exp_and_z_are_enclosed_once_per_logits_row(monkeypatch):
    """Two logits tensors and three matrices each, every row by arb (equal rows, slacks at the arb bound):
    exp(h) is enclosed once per logits row, not once per (logits, matrix) pair."""
    made = []
    real = exact.slack.arb
    monkeypatch.setattr(exact.slack, "arb", lambda *a: made.append(a) or real(*a))
    rng = np.random.default_rng(4)
    tensors, cells = {}, []
    m, n = 3, 16
    for i in range(2):
        H = np.repeat(rng.normal(scale=3.0, size=(1, n)), m, axis=0)
        tensors[f"H{i}"] = H
        for j in range(3):
            tensors[f"A{i}{j}"] = A = _nudged(H, j + 1)
            b = softmax_slack_bound(H, A)
            cells.append(base_cell(id=f"c{i}{j}", target={"matrix": f"A{i}{j}", "logits": f"H{i}",
                                                          "slack": rational_string(Fraction(int(b.p), int(b.q)))}))
    path = write_file(Path(os.environ.get("TMPDIR", "/tmp")), f"shared{os.getpid()}.safetensors",
                  bracket_bytes(doc(cells), tensors))
    made.clear()
    try:
        reports, _ = judge_file(read_bracket_file(path))
    finally:
        os.unlink(path)
    assert all(r.lower.verified and r.slack_bound is not None for r in reports)
    assert sum(isinstance(a[0], float) for a in made) == 2 * m * (n + 1)    # each entry and its row's maximum


def test_one_arb_pass_serves_every_planned_matrix_and_skips_a_refused_one():
    """One logits tensor, five matrices: two need arb on every row, one is refused on its first chunk (slack
    0, far away) and gets no other row, two pass on their float bound, claimed exactly (as the float tier
    writes it) or far above it. The work is counted exactly."""
    m, n = 3, 2 * ARB_CHUNK
    H = np.repeat(np.random.default_rng(5).normal(scale=3.0, size=(1, n)), m, axis=0)
    A1, A2 = _nudged(H, 1), _nudged(H, 2)
    b1, b2 = softmax_slack_bound(H, A1), softmax_slack_bound(H, A2)
    easy = fmpq(*float(SlackProof(H, A1).fast.max()).as_integer_ratio())
    matrices = {"a1": A1, "a2": A2, "far": np.full((m, n), 1.0 / n), "easy": A1, "loose": A2}
    plan = {"a1": {b1}, "a2": {b2, b2 * 2}, "far": {fmpq(0)}, "easy": {easy}, "loose": {fmpq(2)}}
    with work_limit(2**40) as meter:
        proof = SoftmaxSlacks(H, matrices, plan)
        assert proof.bound("a1", b1) == b1
        assert proof.bound("a2", b2) == b2 and proof.bound("far", fmpq(0)) is None
        assert proof.bound("easy", easy) == easy and proof.bound("loose", fmpq(2)) < fmpq(1, 10**12)
    assert sorted(proof.rows) == sorted([(k, i) for k in ("a1", "a2") for i in range(m)] + [("far", 0)])
    assert proof.refused == {"far"}
    assert meter.used == ((FLOAT_EXP_UNITS + 5 * FLOAT_DEV_UNITS) * m * n + ARB_EXP_UNITS * m * n
                          + 2 * ARB_DEV_UNITS * m * n + ARB_DEV_UNITS * ARB_CHUNK)


# ---------------------------------------------------------------- memory: declared tensor bytes
def _kept_file(tmp_path, name="k.safetensors"):
    """A (2 x 2) target and a spare (3 x 3) tensor no cell names: 32 bytes kept, 72 checked and dropped."""
    tensors = {"A": np.full((2, 2), 0.5), "spare": np.ones((3, 3))}
    return write_file(tmp_path, name, bracket_bytes(doc([base_cell()]), tensors))


def test_tensor_bytes_limit_at_and_over(tmp_path, capsys):
    path = _kept_file(tmp_path)
    assert main(["verify", path, "--max-tensor-bytes", "32"]) == 0
    capsys.readouterr()
    assert main(["verify", path, "--max-tensor-bytes", "31"]) == 2
    err = capsys.readouterr().err
    assert "hold 32 bytes, limit 31" in err and "--max-tensor-bytes" in err and len(err.strip().splitlines()) == 1
    assert main(["verify", path, "--max-tensor-bytes", "0"]) == 2          # legal: every file is refused
    assert "must be >= 0" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["verify", path, "--max-tensor-bytes", "-1"])
    assert exc.value.code == 2 and "--max-tensor-bytes must be >= 0" in capsys.readouterr().err


def test_declared_tensor_bytes_are_refused_before_reading(tmp_path):
    """Five 4096 x 4096 targets (640 MiB, zeros in a sparse file) under the default limit of 512 MiB:
    refused from the header, without reading the data."""
    side, count = 4096, 5
    size = 8 * side * side
    header = {f"T{i}": {"dtype": "F64", "shape": [side, side], "data_offsets": [i * size, (i + 1) * size]}
              for i in range(count)}
    cells = [base_cell(id=f"c{i}", target={"matrix": f"T{i}"}) for i in range(count)]
    header["__metadata__"] = {"softrank": json.dumps(doc(cells))}
    path = tmp_path / "big.safetensors"
    blob = container(header)
    with open(path, "wb") as fh:
        fh.write(blob)
        fh.truncate(len(blob) + count * size)
    rc, err, rss = rss_run(path)
    assert rc == 2 and "limit 536870912" in err and rss < 300, (err, rss)


# ---------------------------------------------------------------- workers
def test_workers_start_at_most_one_process_per_task(tmp_path, monkeypatch, capsys):
    started = []
    real = exact.cli.ProcessPoolExecutor

    def recording(max_workers=None, **kwargs):
        started.append(max_workers)
        return real(max_workers=max_workers, **kwargs)
    monkeypatch.setattr(exact.cli, "ProcessPoolExecutor", recording)
    one = write_file(tmp_path, "one.safetensors", bracket_bytes(doc([base_cell()])))
    two = write_file(tmp_path, "two.safetensors", bracket_bytes(doc([base_cell()])))
    assert main(["verify", "--workers", "8", one, two]) == 0
    assert started == [2]


def _cells_file(path, n_true, n_false):
    """``n_true`` true cells and ``n_false`` false ones (rank 2 at eps = 1, where r = 0)."""
    cells = [base_cell(id=f"t{i}") for i in range(n_true)]
    cells += [base_cell(id=f"f{i}", eps="1", lower={"rank": 2, "witness": {"kind": "trivial"}}) for i in range(n_false)]
    Path(path).write_bytes(bracket_bytes(doc(cells)))


@pytest.mark.parametrize("before,after", [((2, 0), (2, 2)), ((4, 0), (1, 2))])
def test_a_file_replaced_after_it_was_counted_is_refused(tmp_path, monkeypatch, capsys, before, after):
    """The parent counts the true cells of one version; the file is then replaced by another, with false
    cells, more or fewer. The workers see another header: the file is refused (exit 2), never judged on
    the cells the parent counted."""
    path = str(tmp_path / "swap.safetensors")
    _cells_file(path, *before)
    real = exact.cli._tasks

    def counted_then_swapped(*args):
        tasks = real(*args)
        new = tmp_path / "new.safetensors"
        _cells_file(new, *after)
        os.replace(new, path)
        return tasks
    monkeypatch.setattr(exact.cli, "_tasks", counted_then_swapped)
    assert main(["verify", "--workers", "2", path]) == 2
    err = capsys.readouterr().err
    assert "changed while it was being verified" in err and len(err.strip().splitlines()) == 1


_REAL_JUDGE = exact.cli._judge


def _judged_rising(task):
    """A worker whose file hash differs per chunk of cells, rising (module level: the pool pickles it)."""
    out = _REAL_JUDGE(task)
    return (*out[:3], f"{out[3]}-{task[1][0]}")


def _judged_falling(task):
    out = _REAL_JUDGE(task)
    return (*out[:3], f"{out[3]}-{9 - task[1][0]}")


@pytest.mark.parametrize("judged", [_judged_rising, _judged_falling])
def test_workers_that_read_two_versions_refuse_the_file(tmp_path, monkeypatch, capsys, judged):
    """Two workers of one file report different file hashes (the data changed between their reads): the
    file is refused, whatever each of them judged."""
    path = str(tmp_path / "f.safetensors")
    _cells_file(path, 2, 0)
    assert main(["verify", "--workers", "2", path]) == 0
    monkeypatch.setattr(exact.cli, "_judge", judged)
    assert main(["verify", "--workers", "2", path]) == 2
    assert "changed while it was being verified" in capsys.readouterr().err


def test_worker_file_hash_is_the_file_s_sha256(tmp_path):
    import hashlib
    path = _kept_file(tmp_path)
    bf = read_bracket_file(path)
    blob = Path(path).read_bytes()
    n = int.from_bytes(blob[:8], "little")
    assert bf.sha256 == hashlib.sha256(blob).hexdigest()
    assert bf.header_sha256 == hashlib.sha256(blob[:8 + n]).hexdigest()
    assert exact.cli.header_facts(path) == (1, bf.header_sha256)


# ---------------------------------------------------------------- output a file cannot forge
def test_same_file_named_twice_is_judged_once(tmp_path, capsys, monkeypatch):
    path = write_file(tmp_path, "a.safetensors", bracket_bytes(doc([base_cell()])))
    link = tmp_path / "link.safetensors"
    link.symlink_to(path)
    monkeypatch.chdir(tmp_path)
    assert main(["verify", path, path, "./a.safetensors", str(link)]) == 0
    out = capsys.readouterr().out
    assert "1/1 cells verified on both sides" in out and out.count("'c0'") == 1
    assert main(["verify", "--json", path, "a.safetensors", "missing", "missing"]) == 2
    cap = capsys.readouterr()
    assert len(json.loads(cap.out)["cells"]) == 1 and cap.err.count("missing") == 1


def test_a_padded_id_cannot_draw_a_verified_line(tmp_path):
    """An id padded to a terminal's width so that its tail wraps into a fake "verified" line: the table
    shows the id cut to 40 characters, the tail never; an id of exactly 40 (as ascii() shows it) is whole."""
    fake = "c0  eps=1  [2, 2]  lower: verified trivial margin -  upper: verified trivial"
    padded = "x" + " " * 200 + fake
    exact40 = "y" * 38                                   # ascii() adds the two quotes: 40 characters
    cells = [base_cell(id=padded, eps="1", lower={"rank": 2, "witness": {"kind": "trivial"}}), base_cell(id=exact40),
             base_cell(id="s")]
    path = write_file(tmp_path, "p.safetensors", bracket_bytes(doc(cells)))
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", path], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert fake not in proc.stdout and "lower: verified trivial margin -  upper" not in proc.stdout.split("REFUTED")[0]
    line = next(x for x in proc.stdout.splitlines() if "REFUTED" in x)
    assert line.startswith("  'x" + " " * 35 + "...  eps=1"), line
    assert f"  '{exact40}'  eps=1/4" in proc.stdout and "  's'  eps=1/4" in proc.stdout
    assert json.loads(subprocess.run([sys.executable, "-m", "exact", "verify", "--json", path], cwd=ROOT,
                                     capture_output=True, text=True, timeout=60).stdout)["cells"][0]["id"] == padded


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5e999"])
def test_a_number_beyond_float_range_is_refused(tmp_path, capsys, number):
    text = json.dumps(doc([base_cell(provenance={"seed": 0})])).replace('{"seed": 0}', '{"seed": ' + number + "}")
    path = write_file(tmp_path, "n.safetensors", bracket_bytes(softrank_text=text))
    assert main(["verify", path]) == 2
    err = capsys.readouterr().err
    assert "beyond float range" in err and len(err.strip().splitlines()) == 1
    ok = write_file(tmp_path, "ok.safetensors", bracket_bytes(softrank_text=text.replace(number, "1e300")))
    assert main(["verify", ok]) == 0

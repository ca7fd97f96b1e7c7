"""``python -m exact verify``: malformed input, resource limits, inconsistent claims, workers, JSON.

Malformed files are hand-built byte by byte (the writer refuses most of
them). Each must give exit 2 and exactly one line on stderr naming the file,
never a traceback. All of them go through one CLI subprocess together (one
line per file) and each one alone through ``exact.cli.main`` in-process (exit
status per file); a few also alone through a subprocess. Limits are tested at
limit + 1 with the real number where that is cheap, else monkeypatched small.
"""
from __future__ import annotations

import hashlib
import os
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import exact.bracketfile
import exact.cli
import exact.matrix
from exact import limits
from exact.cli import main
from tests.bracket_files import (EXAMPLE, MALFORMED, K, base_cell, bracket_bytes, container, doc, rss_run,
                                 write_file)

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "exact", "verify", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def malformed_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("malformed")
    paths = {}
    for name, (blob, _) in MALFORMED.items():
        p = d / f"{name}.safetensors"
        p.write_bytes(blob)
        paths[name] = p
    return paths


def test_every_malformed_file_one_line_exit_2_in_one_subprocess(malformed_dir):
    """All malformed files in one CLI call: exit 2, one stderr line per file, no traceback."""
    names = sorted(malformed_dir)
    proc = run_cli(*(malformed_dir[n] for n in names), "--json")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == len(names), proc.stderr[-3000:]
    for name in names:
        mine = [ln for ln in lines if f"/{name}.safetensors:" in ln]
        assert len(mine) == 1, name
        assert "malformed" in mine[0]
        assert MALFORMED[name][1].lower() in mine[0].lower(), (name, mine[0])
        assert len(mine[0]) < 400, (name, mine[0][:500])
    out = json.loads(proc.stdout)
    assert out["all_verified"] is False and out["cells"] == []
    assert {Path(m["file"]).stem for m in out["malformed"]} == set(names)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_each_malformed_file_exits_2(name, malformed_dir, capsys):
    assert main(["verify", str(malformed_dir[name])]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert MALFORMED[name][1].lower() in err.lower()


@pytest.mark.parametrize("name", ["random-bytes", "nan-entry", "eps-million-digits", "unknown-lower-kind"])
def test_malformed_alone_through_subprocess(name, malformed_dir):
    proc = run_cli(malformed_dir[name])
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_unreadable_paths(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "does-not-exist.safetensors")]) == 2
    assert main(["verify", str(tmp_path)]) == 2                   # a directory
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 2 and "Traceback" not in err


def test_malformed_file_does_not_stop_the_others(tmp_path, capsys):
    good, bad = tmp_path / "good.safetensors", tmp_path / "bad.safetensors"
    good.write_bytes(bracket_bytes())
    bad.write_bytes(b"garbage")
    assert main(["verify", str(good), str(bad), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in out["cells"]] == ["c0"] and out["cells"][0]["lower_verified"]


def test_bad_arguments_exit_2():
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", "--workers", "0", "x"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- resource limits
def _verdict(path, capsys):
    rc = main(["verify", path, "--json"])
    cap = capsys.readouterr()
    return rc, cap.err


def test_limit_file_bytes(tmp_path, capsys, monkeypatch):
    path = write_file(tmp_path, "f.safetensors", bracket_bytes())
    size = Path(path).stat().st_size
    monkeypatch.setattr(exact.bracketfile, "MAX_FILE_BYTES", size)
    assert _verdict(path, capsys)[0] == 0
    monkeypatch.setattr(exact.bracketfile, "MAX_FILE_BYTES", size - 1)
    rc, err = _verdict(path, capsys)
    assert rc == 2 and "limit" in err


def test_limit_header_bytes_real(tmp_path, capsys):
    """A real header of exactly MAX_HEADER_BYTES (padded with spaces) is read; one byte more is refused."""
    blob = bracket_bytes()
    n = int.from_bytes(blob[:8], "little")
    header, data = blob[8:8 + n], blob[8 + n:]
    pad = limits.MAX_HEADER_BYTES - len(header)
    at = write_file(tmp_path, "at.safetensors", container(header + b" " * pad, data))
    over = write_file(tmp_path, "over.safetensors", container(header + b" " * (pad + 1), data))
    assert _verdict(at, capsys)[0] == 0
    rc, err = _verdict(over, capsys)
    assert rc == 2 and "limit" in err


def test_limit_number_chars_real(tmp_path, capsys):
    at = "0." + "0" * (limits.MAX_NUMBER_CHARS - 3) + "1"          # exactly MAX_NUMBER_CHARS characters
    assert len(at) == limits.MAX_NUMBER_CHARS
    over = "0" + at
    assert _verdict(write_file(tmp_path, "a.safetensors", bracket_bytes(doc([base_cell(eps=at)]))), capsys)[0] == 0
    rc, err = _verdict(write_file(tmp_path, "b.safetensors", bracket_bytes(doc([base_cell(eps=over)]))), capsys)
    assert rc == 2 and "limit" in err


def test_limit_decimal_exponent_real(tmp_path, capsys):
    e = limits.MAX_DECIMAL_EXPONENT
    ok = write_file(tmp_path, "a.safetensors", bracket_bytes(doc([base_cell(eps=f"1e-{e}")])))
    assert _verdict(ok, capsys)[0] == 0
    for text in (f"1e-{e + 1}", f"1e{e + 1}", f"1e+{e + 1}"):
        rc, err = _verdict(write_file(tmp_path, "b.safetensors", bracket_bytes(doc([base_cell(eps=text)]))), capsys)
        assert rc == 2 and "exponent" in err


def test_limit_matrix_side_real(tmp_path, capsys):
    side = limits.MAX_MATRIX_SIDE
    for n, expected in ((side, 0), (side + 1, 2)):
        row = np.full((1, n), 1.0 / n) if n & (n - 1) == 0 else np.zeros((1, n))
        row[0, 0] += 1.0 - row.sum()
        cell = base_cell(upper={"rank": 1, "witness": {"kind": "trivial"}})
        rc, err = _verdict(write_file(tmp_path, f"s{n}.safetensors", bracket_bytes(doc([cell]), {"A": row})), capsys)
        assert rc == expected, err
        if expected == 2:
            assert "limit" in err


def test_limit_matrix_entries_real(tmp_path, capsys):
    """[4097, 4096] has 2^24 + 4096 entries with both sides within MAX_MATRIX_SIDE: refused before any data."""
    shape = [4097, 4096]
    assert max(shape) <= limits.MAX_MATRIX_SIDE and shape[0] * shape[1] == limits.MAX_MATRIX_ENTRIES + 4096
    blob = bracket_bytes(tensors={"A": K}, tensor_entries={
        "B": {"dtype": "F64", "shape": shape, "data_offsets": [32, 32 + 8 * shape[0] * shape[1]]}})
    rc, err = _verdict(write_file(tmp_path, "e.safetensors", blob), capsys)
    assert rc == 2 and "limit" in err


def test_limit_matrix_entries_patched(tmp_path, capsys, monkeypatch):
    """At the limit a tensor is read; one entry over it is refused (reader and ExactMatrix both)."""
    monkeypatch.setattr(exact.bracketfile, "MAX_MATRIX_ENTRIES", 4)
    assert _verdict(write_file(tmp_path, "a.safetensors", bracket_bytes()), capsys)[0] == 0
    wide = np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]])
    rc, err = _verdict(write_file(tmp_path, "b.safetensors", bracket_bytes(tensors={"A": wide})), capsys)
    assert rc == 2 and "limit" in err
    monkeypatch.setattr(exact.matrix, "MAX_MATRIX_ENTRIES", 4)
    exact.matrix.ExactMatrix.from_float64(K)
    with pytest.raises(exact.errors.LimitExceeded):
        exact.matrix.ExactMatrix.from_float64(wide)
    monkeypatch.setattr(exact.matrix, "MAX_MATRIX_SIDE", 2)
    with pytest.raises(exact.errors.LimitExceeded):
        exact.matrix.ExactMatrix.from_float64(np.zeros((1, 3)))


def test_limit_cells_real(tmp_path, capsys):
    """MAX_CELLS + 1 (empty) cells: refused on the count, before any cell is read."""
    cells = [{}] * (limits.MAX_CELLS + 1)
    rc, err = _verdict(write_file(tmp_path, "c.safetensors", bracket_bytes(doc(cells))), capsys)
    assert rc == 2 and "cells, limit" in err and str(limits.MAX_CELLS) in err


def test_limit_cells_patched(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(exact.bracketfile, "MAX_CELLS", 3)
    at = [base_cell(id=f"c{i}") for i in range(3)]
    assert _verdict(write_file(tmp_path, "a.safetensors", bracket_bytes(doc(at))), capsys)[0] == 0
    rc, err = _verdict(write_file(tmp_path, "b.safetensors", bracket_bytes(doc(at + [base_cell(id="c3")]))), capsys)
    assert rc == 2 and "limit" in err


def test_limit_tensors_patched(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(exact.bracketfile, "MAX_TENSORS", 2)
    two = {"A": K, "B": K}
    assert _verdict(write_file(tmp_path, "a.safetensors", bracket_bytes(tensors=two)), capsys)[0] == 0
    rc, err = _verdict(write_file(tmp_path, "b.safetensors", bracket_bytes(tensors=dict(two, C=K))), capsys)
    assert rc == 2 and "limit" in err


# ---------------------------------------------------------------- inconsistent claims
def test_inconsistent_claims_refuted_other_cells_judged(tmp_path):
    cells = [
        base_cell(id="ok"),
        base_cell(id="rank-above-p", upper={"rank": 3, "witness": {"kind": "trivial"}}),
        base_cell(id="lower-above-p", lower={"rank": 3, "witness": {"kind": "frobenius", "k": 2}}),
        base_cell(id="lower-above-upper", lower={"rank": 2, "witness": {"kind": "reconstruction",
                                                                        "R": "Kinv", "X": "I", "L": "I"}},
                  upper={"rank": 1, "witness": {"kind": "factors", "P": "one", "Q": "half"}}),
        base_cell(id="ok-too", eps="1/8", lower={"rank": 2, "witness": {"kind": "reconstruction",
                                                                        "R": "Kinv", "X": "I", "L": "I"}}),
    ]
    tensors = {"A": K, "Kinv": np.array([[1.5, -0.5], [-0.5, 1.5]]), "I": np.eye(2),
               "one": np.ones((2, 1)), "half": np.full((2, 1), 0.5)}
    path = write_file(tmp_path, "i.safetensors", bracket_bytes(doc(cells), tensors))
    proc = run_cli(path, "--json")
    assert proc.returncode == 1 and proc.stderr == ""
    out = {c["id"]: c for c in json.loads(proc.stdout)["cells"]}
    assert out["ok"]["lower_verified"] and out["ok"]["upper_verified"]
    assert out["ok-too"]["lower_verified"] and out["ok-too"]["upper_verified"]
    assert not out["rank-above-p"]["upper_verified"] and "min(m, n)" in out["rank-above-p"]["upper_reason"]
    assert out["rank-above-p"]["lower_verified"]           # the other side is judged on its own witness
    assert not out["lower-above-p"]["lower_verified"] and out["lower-above-p"]["lower_reason"]
    bad = out["lower-above-upper"]
    assert not bad["lower_verified"] and not bad["upper_verified"]
    assert "inconsistent" in bad["lower_reason"] and "inconsistent" in bad["upper_reason"]
    # the human table says the same, with a summary line
    table = run_cli(path)
    assert table.returncode == 1 and "REFUTED" in table.stdout and "2/5 cells verified" in table.stdout


# ---------------------------------------------------------------- workers, JSON, hashes
def test_workers_agree_and_json_keys(tmp_path):
    other = write_file(tmp_path, "i.safetensors", bracket_bytes(doc([
        base_cell(id="a"), base_cell(id="b", eps="1"), base_cell(id="c", eps="3/4")])))
    one = run_cli(EXAMPLE, other, "--json", "--workers", "1")
    two = run_cli(EXAMPLE, other, "--json", "--workers", "2")
    assert one.returncode == two.returncode == 1                  # cell "b": rank 1 at eps = ||A|| = 1
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert a == b
    required = {"id", "eps", "lower", "upper", "lower_verified", "upper_verified", "lower_reason", "upper_reason"}
    for cell in a["cells"]:
        assert required <= cell.keys()
        assert isinstance(cell["lower_verified"], bool) and isinstance(cell["upper_verified"], bool)
        assert isinstance(cell["lower"], int) and isinstance(cell["upper"], int)
    assert isinstance(a["all_verified"], bool) and a["all_verified"] is False


def test_example_file_verifies_and_hashes_tie_to_the_matrices():
    proc = run_cli(EXAMPLE, "--json")
    assert proc.returncode == 0, proc.stdout[-2000:]
    out = json.loads(proc.stdout)
    assert out["all_verified"] and len(out["cells"]) >= 10
    kinds = {c["lower_witness"] for c in out["cells"]} | {c["upper_witness"] for c in out["cells"]}
    assert {"trivial", "factors", "reconstruction", "row_reconstruction", "frobenius"} <= kinds
    from exact.bracketfile import read_bracket_file
    bf = read_bracket_file(EXAMPLE)
    for cell, report in zip(bf.cells, out["cells"]):
        arr = bf.tensors[cell.target.matrix]
        assert report["target_sha256"] == hashlib.sha256(arr.astype("<f8").tobytes()).hexdigest()
    table = run_cli(EXAMPLE)
    assert table.returncode == 0 and "verified on both sides" in table.stdout


def test_example_file_is_regenerated_byte_for_byte(tmp_path):
    out = tmp_path / "example.safetensors"
    proc = subprocess.run([sys.executable, "-m", "tests.data.make_example", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == EXAMPLE.read_bytes()


def test_long_margins_print_in_the_table(tmp_path):
    """Regression: margins longer than MAX_NUMBER_CHARS (eps = 1e-900) crashed the human table."""
    path = write_file(tmp_path, "m.safetensors", bracket_bytes(doc([base_cell(eps="1e-900")])))
    proc = run_cli(path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr


def test_exact_imports_no_float_tier():
    code = ("import exact, exact.cli, exact.verify; import sys; "
            "assert not any(m.split('.')[0] in ('torch','transformers','scipy','numeric') for m in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_messages_from_files_are_escaped(malformed_dir, capsys):
    """Newlines, ESC and other control characters from a file never reach the terminal raw."""
    for name in ("dtype-with-newline", "version-with-newline", "tensor-name-with-escape"):
        assert main(["verify", str(malformed_dir[name])]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and all(" " <= ch <= "~" for ch in err.rstrip("\n")), (name, err)
        assert "\\n" in err or "\\x1b" in err, (name, err)


# ---------------------------------------------------------------- reading: header first, regular files only
def _tiny_valid(tmp_path, name="v.safetensors") -> Path:
    p = tmp_path / name
    p.write_bytes(bracket_bytes(doc([base_cell(id="a"), base_cell(id="b", eps="1/8")])))
    return p


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    proc = run_cli(fifo, timeout=30)                  # reading a FIFO would block forever
    assert proc.returncode == 2 and "a FIFO, not a regular file" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_devices_and_directories_are_refused(tmp_path, capsys):
    assert main(["verify", "/dev/zero"]) == 2          # reading it would never end
    assert main(["verify", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("not a regular file") == 2 and "Traceback" not in err
    assert "a character device, not" in err and "a directory, not" in err        # named as what they are


def test_sparse_file_at_and_over_the_size_limit_is_refused_from_the_header(tmp_path):
    """MAX_FILE_BYTES of zeros (a sparse file): refused on its header at once, without reading the rest;
    one byte more: refused on the size limit."""
    at, over = tmp_path / "at.safetensors", tmp_path / "over.safetensors"
    for p, size in ((at, limits.MAX_FILE_BYTES), (over, limits.MAX_FILE_BYTES + 1)):
        with open(p, "wb") as fh:
            fh.truncate(size)
    rc, err, rss = rss_run(at)
    assert rc == 2 and "header" in err and "limit" not in err and rss < 300, (err, rss)
    rc, err, rss = rss_run(over)
    assert rc == 2 and "limit" in err and rss < 300


def test_padded_valid_file_is_refused_on_trailing_bytes(tmp_path):
    """A valid file padded to 2.5 GiB (sparse): refused for its trailing bytes, read no further."""
    p = _tiny_valid(tmp_path)
    with open(p, "r+b") as fh:
        fh.truncate(5 * 2**29)
    rc, err, rss = rss_run(p)
    assert rc == 2 and "trailing bytes" in err and rss < 300, (err, rss)


def test_unreferenced_tensors_are_checked_not_kept(tmp_path, capsys):
    """A tensor no cell names is still checked for NaN (chunk by chunk) but not loaded."""
    ok = write_file(tmp_path, "ok.safetensors", bracket_bytes(tensors={"A": K, "spare": np.ones((3, 3))}))
    assert main(["verify", ok]) == 0
    from exact.bracketfile import read_bracket_file
    assert set(read_bracket_file(ok).tensors) == {"A"}
    bad = write_file(tmp_path, "bad.safetensors", bracket_bytes(tensors={"A": K, "spare": np.full((3, 3), np.nan)}))
    assert main(["verify", bad]) == 2 and "NaN" in capsys.readouterr().err


# ---------------------------------------------------------------- out of memory
def _raise_memory_error(*args, **kwargs):
    raise MemoryError


@pytest.mark.parametrize("workers", ["1", "2"])
def test_memory_error_is_one_line(tmp_path, capsys, monkeypatch, workers):
    p = _tiny_valid(tmp_path)
    monkeypatch.setattr(exact.cli, "judge_file", _raise_memory_error)     # forked workers inherit it
    assert main(["verify", str(p), "--workers", workers]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"python -m exact verify: {p}: out of memory"], err


def test_memory_error_while_counting_cells(tmp_path, capsys, monkeypatch):
    p = _tiny_valid(tmp_path)
    monkeypatch.setattr(exact.cli, "header_facts", _raise_memory_error)
    monkeypatch.setattr(exact.cli, "judge_file", _raise_memory_error)
    assert main(["verify", str(p), "--workers", "2"]) == 2
    assert "out of memory" in capsys.readouterr().err


def _die(*args, **kwargs):
    os._exit(9)                                        # what the kernel's OOM killer leaves behind


def test_dead_worker_is_one_line(tmp_path, capsys, monkeypatch):
    p = _tiny_valid(tmp_path)
    monkeypatch.setattr(exact.cli, "judge_file", _die)
    assert main(["verify", str(p), "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "out of memory" in err and "Traceback" not in err


# ---------------------------------------------------------------- work: limited, and shared work done once
def _work(path) -> int:
    from exact.bracketfile import read_bracket_file
    from exact.verify import judge_file
    return judge_file(read_bracket_file(path))[1]


def _witness_file(tmp_path, name, cells_of) -> str:
    rng = np.random.default_rng(3)
    A = rng.random((24, 24))
    A /= A.sum(axis=1, keepdims=True)
    U, s, Vt = np.linalg.svd(A)
    tensors = {"A": A, "P": U[:, :6] * s[:6], "Q": Vt[:6].T.copy(), "R": np.linalg.inv(A), "I": np.eye(24),
               "H": np.log(A)}
    return write_file(tmp_path, name, bracket_bytes(doc(cells_of()), tensors))


def _factor_cell(i, eps="1/2"):
    return base_cell(id=f"f{i}", eps=eps, target={"matrix": "A", "logits": "H", "slack": "1/1000000"},
                     upper={"rank": 6, "witness": {"kind": "factors", "P": "P", "Q": "Q"}},
                     lower={"rank": 24, "witness": {"kind": "reconstruction", "R": "R", "X": "I", "L": "I"}})


def test_work_limit_at_and_over(tmp_path, capsys):
    path = _witness_file(tmp_path, "w.safetensors", lambda: [_factor_cell(0)])
    need = _work(path)
    assert need > 0
    assert main(["verify", path, "--max-work", str(need)]) in (0, 1)
    capsys.readouterr()
    assert main(["verify", path, "--max-work", str(need - 1)]) == 2
    err = capsys.readouterr().err
    assert "work limit" in err and "--max-work" in err and len(err.strip().splitlines()) == 1


def test_max_work_must_be_positive():
    proc = subprocess.run([sys.executable, "-m", "exact", "verify", "--max-work", "0", "x"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_shared_work_is_done_once(tmp_path):
    """200 cells re-checking one (target, factors, reconstruction, slack) at several eps, and 40
    identical Frobenius cells, cost what one cell costs: every derived quantity is kept by its inputs."""
    one = _work(_witness_file(tmp_path, "one.safetensors", lambda: [_factor_cell(0)]))
    many = _work(_witness_file(tmp_path, "many.safetensors",
                               lambda: [_factor_cell(i, eps=f"{1 + i % 7}/16") for i in range(200)]))
    assert many == one
    frob = lambda n: [base_cell(id=f"g{i}", lower={"rank": 3, "witness": {"kind": "frobenius", "k": 2}})
                      for i in range(n)]
    big = np.random.default_rng(1).random((16, 16))
    f1 = _work(write_file(tmp_path, "f1.safetensors", bracket_bytes(doc(frob(1)), {"A": big})))
    f40 = _work(write_file(tmp_path, "f40.safetensors", bracket_bytes(doc(frob(40)), {"A": big})))
    assert f40 == f1 > 0


def test_exponent_spread_costs_work(tmp_path, capsys):
    """One subnormal in the target and 1e300 in a witness: the exact integers get long, the work counted
    grows with them, and the work limit refuses the file at its need + 1 (the worst case is the limit)."""
    n = 48
    A = np.full((n, n), 1.0 / n)
    A[0, 0] = 5e-324
    R = np.eye(n)
    R[0, 1] = 1e300
    cell = base_cell(lower={"rank": n, "witness": {"kind": "reconstruction", "R": "R", "X": "I", "L": "I"}},
                     upper={"rank": n, "witness": {"kind": "trivial"}})
    spread = write_file(tmp_path, "spread.safetensors", bracket_bytes(doc([cell]), {"A": A, "R": R, "I": np.eye(n)}))
    A[0, 0], R[0, 1] = 1.0 / n, 0.0
    plain = write_file(tmp_path, "plain.safetensors", bracket_bytes(doc([cell]), {"A": A, "R": R, "I": np.eye(n)}))
    need = _work(spread)
    assert need > 3 * _work(plain)
    assert main(["verify", spread, "--max-work", str(need)]) == 1
    assert main(["verify", spread, "--max-work", str(need - 1)]) == 2
    assert "work limit" in capsys.readouterr().err


def test_ordinary_cells_never_convert_a_whole_matrix(tmp_path, monkeypatch):
    """On ordinary float files the float filter picks the rows and exact float products compute them:
    no n x n tensor is turned into FLINT integers, so the cost follows the float64 work."""
    from bench.suites.exact_speed import make_cell
    from fileio.bracketwriter import write_bracket_file
    from exact.verify import verify_file
    cells, tensors, _, _ = make_cell(64, 12, 4)
    converted = []
    original = exact.matrix.ExactMatrix._convert

    def spy(self):
        converted.append(self.shape)
        original(self)
    monkeypatch.setattr(exact.matrix.ExactMatrix, "_convert", spy)
    for cell in cells:
        (report,) = verify_file(write_bracket_file(tmp_path / f"{cell.id}.safetensors", [cell], tensors))
        assert report.lower.verified and report.upper.verified
    assert converted and (64, 64) not in converted and max(m * n for m, n in converted) < 100 * 64, converted


# ---------------------------------------------------------------- output that cannot be forged
def test_lone_surrogate_id(tmp_path):
    path = write_file(tmp_path, "s.safetensors", bracket_bytes(doc([base_cell(id="\ud800"), base_cell(id="ok")])))
    table = run_cli(path)
    assert table.returncode == 0 and "Traceback" not in table.stderr
    assert "'\\ud800'" in table.stdout and "'ok'" in table.stdout
    out = json.loads(run_cli(path, "--json").stdout)
    assert [c["id"] for c in out["cells"]] == ["\ud800", "ok"]           # JSON stays exact


def test_id_with_newline_and_ansi_cannot_forge_a_line(tmp_path):
    forged = "x\n  c1  eps=1/4  [1, 2]  lower: verified\x1b[2K\r\n2/2 cells verified on both sides\x1b[A"
    bad = base_cell(id=forged, eps="1", lower={"rank": 1, "witness": {"kind": "trivial"}})
    path = write_file(tmp_path, "f.safetensors", bracket_bytes(doc([bad])))
    proc = run_cli(path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and "REFUTED" in lines[1] and lines[2].startswith("0/1 cells verified")
    assert all(" " <= ch <= "~" for ch in proc.stdout.replace("\n", ""))
    assert json.loads(run_cli(path, "--json").stdout)["cells"][0]["id"] == forged


# ---------------------------------------------------------------- honest summaries
def test_all_malformed_run_says_nothing_to_verify(tmp_path):
    a, b = write_file(tmp_path, "a.safetensors", b"junk"), write_file(tmp_path, "b.safetensors", bracket_bytes(doc([])))
    proc = run_cli(a, b)
    assert proc.returncode == 2 and "0/0" not in proc.stdout
    assert proc.stdout.strip() == "0 cells: nothing to verify (2 file(s) refused)"
    out = json.loads(run_cli(a, b, "--json").stdout)
    assert out["all_verified"] is False and out["cells"] == [] and len(out["malformed"]) == 2


def test_zero_cell_file_is_refused(tmp_path, capsys):
    path = write_file(tmp_path, "z.safetensors", bracket_bytes(doc([])))
    assert main(["verify", path, "--json"]) == 2
    cap = capsys.readouterr()
    assert json.loads(cap.out)["all_verified"] is False and "nothing to verify" in cap.err


def test_refused_file_counts_in_the_summary(tmp_path):
    good, bad = _tiny_valid(tmp_path), write_file(tmp_path, "bad.safetensors", b"junk")
    proc = run_cli(good, bad)
    assert proc.returncode == 2
    assert "2/2 cells verified on both sides, 0 closed (L = U); 1 file(s) refused" in proc.stdout


def test_table_shows_the_proved_slack_bound(tmp_path):
    """softmax(0) = J/2 is at distance exactly 1 from A0 = I: a claimed slack of 3/5 is not proved."""
    cell = base_cell(eps="3/10", target={"matrix": "I", "logits": "H", "slack": "3/5"},
                     lower={"rank": 2, "witness": {"kind": "reconstruction", "R": "I", "X": "I", "L": "I"}})
    path = write_file(tmp_path, "t.safetensors", bracket_bytes(doc([cell]), {"I": np.eye(2), "H": np.zeros((2, 2))}))
    proc = run_cli(path)
    assert proc.returncode == 1
    assert "slack +6.000e-01 (NOT proved: no bound)" in proc.stdout           # arb stops above the slack
    ok = write_file(tmp_path, "ok.safetensors", bracket_bytes(doc([base_cell(
        target={"matrix": "A", "logits": "H", "slack": "1/1000"})]),
        {"A": np.full((2, 2), 0.5), "H": np.zeros((2, 2))}))
    shown = run_cli(ok).stdout
    assert "slack +1.000e-03 (proved: bound +" in shown
    assert float(shown.split("(proved: bound ")[1].split(")")[0]) < 1e-12     # the float64 bound

"""fileio.safeio and every writer that uses it (docs/panel.md, trust model).

Each command that writes a file refuses a target that exists and is not a
regular file (a character device made here, skipped where ``mknod`` is not
permitted; a FIFO; a symbolic link; a directory) with one line on stderr and
exit 2, and leaves the target as it was. The reader opens regular files only,
never blocks on a FIFO, and has size and depth limits.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from fileio import safeio
from fileio.safeio import SafeIOError

KINDS = ("chardev", "fifo", "symlink", "directory")


def plant(path: Path, kind: str, outside: Path) -> None:
    """Put a non-regular file of ``kind`` at ``path`` (a link points at ``outside``, a regular file)."""
    if kind == "chardev":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except (PermissionError, OSError) as e:
            pytest.skip(f"mknod not permitted here ({e})")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        outside.write_text("precious")
        path.symlink_to(outside)
    else:
        path.mkdir()


def unchanged(path: Path, kind: str, outside: Path) -> None:
    mode = os.lstat(path).st_mode
    assert {"chardev": stat.S_ISCHR, "fifo": stat.S_ISFIFO, "symlink": stat.S_ISLNK,
            "directory": stat.S_ISDIR}[kind](mode)
    if kind == "symlink":
        assert outside.read_text() == "precious"


def one_line(err: str, *needles) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(n in lines[0] for n in needles), (needles, lines)


@pytest.mark.parametrize("kind", KINDS)
def test_write_refuses_what_is_not_a_regular_file(tmp_path, kind):
    target, outside = tmp_path / "t", tmp_path / "outside.txt"
    plant(target, kind, outside)
    with pytest.raises(SafeIOError, match="refusing to replace"):
        safeio.write_bytes(target, b"x")
    unchanged(target, kind, outside)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []   # no temporary left behind


def test_write_is_atomic_and_replaces_a_regular_file(tmp_path):
    target = tmp_path / "a" / "b.txt"
    safeio.write_text(target, "one", root=tmp_path)
    safeio.write_text(target, "two", root=tmp_path)
    assert target.read_text() == "two" and sorted(p.name for p in target.parent.iterdir()) == ["b.txt"]


def test_no_link_followed_below_root(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "figures").symlink_to(elsewhere)
    with pytest.raises(SafeIOError, match="figures is a symbolic link"):
        safeio.write_bytes(out / "figures" / "a.png", b"x", root=out)
    with pytest.raises(SafeIOError, match="symbolic link"):
        safeio.read_bytes(out / "figures" / "a.png", limit=10, root=out)
    with pytest.raises(SafeIOError, match="symbolic link"):
        safeio.make_dirs(out / "figures", root=out)
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(SafeIOError, match=r"'\.\.'"):
        safeio.write_bytes(out / ".." / "x", b"x", root=out)
    # the root itself is the caller's choice: a link given as root is followed
    link = tmp_path / "link"
    link.symlink_to(elsewhere)
    safeio.write_bytes(link / "ok.txt", b"ok", root=link)
    assert (elsewhere / "ok.txt").read_bytes() == b"ok"


@pytest.mark.parametrize("kind", KINDS)
def test_read_refuses_what_is_not_a_regular_file_without_blocking(tmp_path, kind):
    target, outside = tmp_path / "t", tmp_path / "outside.txt"
    plant(target, kind, outside)
    with pytest.raises(SafeIOError, match="not a regular file"):
        safeio.read_bytes(target, limit=100)      # a FIFO would block an ordinary open forever
    with pytest.raises(SafeIOError):
        safeio.read_json(target, limit=100)


def test_read_limits(tmp_path):
    p = tmp_path / "big.json"
    p.write_text(json.dumps(list(range(1000))))
    with pytest.raises(SafeIOError, match="limit"):
        safeio.read_bytes(p, limit=100)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SafeIOError, match="too deep"):
        safeio.read_json(deep, limit=1 << 20)
    mid = tmp_path / "mid.json"
    mid.write_text("[" * (safeio.MAX_DEPTH + 1) + "]" * (safeio.MAX_DEPTH + 1))
    with pytest.raises(SafeIOError, match="deeper than"):
        safeio.read_json(mid, limit=1 << 20)
    ok = tmp_path / "ok.json"
    ok.write_text("[" * safeio.MAX_DEPTH + "]" * safeio.MAX_DEPTH)
    safeio.read_json(ok, limit=1 << 20)          # the limit itself is accepted (negative control)


def test_escape_cuts_and_escapes():
    s = safeio.escape("id\x1b[1A\x1b[2K verified\n" + "x" * 500)
    assert "\x1b" not in s and "\n" not in s and len(s) <= safeio.ESCAPE_CHARS
    assert safeio.escape("plain-id/eps=1/4") == "plain-id/eps=1/4"


def test_snapshot_hashes_what_it_copies(tmp_path):
    import hashlib

    src, dst = tmp_path / "a.bin", tmp_path / "b.bin"
    src.write_bytes(b"abc" * 1000)
    assert safeio.snapshot(src, dst, limit=10_000) == hashlib.sha256(src.read_bytes()).hexdigest()
    assert dst.read_bytes() == src.read_bytes()


# ------------------------------------------------------------------ every command that writes


@pytest.mark.parametrize("kind", KINDS)
def test_bracket_cli_out(tmp_path, kind, capsys):
    from numeric.search.cli import main

    m = tmp_path / "m.npy"
    np.save(m, np.full((3, 3), 1 / 3))
    target, outside = tmp_path / "out.safetensors", tmp_path / "outside.txt"
    plant(target, kind, outside)
    assert main(["--matrix", str(m), "--eps", "1/2", "--out", str(target), "--effort", "quick"]) == 2
    one_line(capsys.readouterr().err, "python -m numeric bracket: error:", "refusing")
    unchanged(target, kind, outside)


@pytest.mark.parametrize("kind", KINDS)
def test_twobit_export(tmp_path, kind, capsys):
    from oracles.twobit import main

    target, outside = tmp_path / "out.safetensors", tmp_path / "outside.txt"
    plant(target, kind, outside)
    assert main(["--t", "1/2", "--s", "1/2", "--eps", "1/4", "--export", str(target)]) == 2
    one_line(capsys.readouterr().err, "python -m oracles.twobit: error:", "refusing")
    unchanged(target, kind, outside)


def test_twobit_export_path_echoed_escaped(tmp_path, capsys):
    from oracles.twobit import main

    d = tmp_path / "a\x1b[2Kb"
    d.mkdir()
    target = d / "x.safetensors"
    assert main(["--t", "1/2", "--s", "1/2", "--eps", "1/4", "--export", str(target)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "a\\x1b[2Kb" in out and target.is_file()


@pytest.mark.parametrize("kind", KINDS)
def test_panel_table_writer(tmp_path, kind):
    """Every panel file (records, cells.csv, panel.json, verified records, head and bracket files) goes
    through ``table.atomic_write`` or the bracket writer, both ``fileio.safeio``."""
    from fileio.bracketwriter import write_bracket_file
    from numeric.panel.table import write_record, write_table

    out, outside = tmp_path / "run", tmp_path / "outside.txt"
    (out / "cells").mkdir(parents=True)
    plant(out / "cells" / "k.json", kind, outside)
    with pytest.raises(SafeIOError):
        write_record(out, "k", {"rows": []})
    unchanged(out / "cells" / "k.json", kind, outside)
    plant(out / "cells.csv", kind, tmp_path / "outside2.txt")
    with pytest.raises(SafeIOError):
        write_table(out, [])
    plant(out / "b.safetensors", kind, tmp_path / "outside3.txt")
    with pytest.raises(SafeIOError):
        write_bracket_file(out / "b.safetensors", [], {"A": np.eye(2)}, root=out)
    unchanged(out / "b.safetensors", kind, tmp_path / "outside3.txt")


@pytest.mark.parametrize("kind", KINDS)
def test_proofs_checks_export(tmp_path, kind, capsys):
    """``python -m proofs_checks --export DIR`` refuses, before any check runs, a file it would write that is a
    device, FIFO, link or directory: one line, exit 2, the target untouched."""
    from proofs_checks.__main__ import main

    target, outside = tmp_path / "G.1.safetensors", tmp_path / "outside.txt"
    plant(target, kind, outside)
    assert main(["--only", "G.1", "--export", str(tmp_path)]) == 2
    one_line(capsys.readouterr().err, "python -m proofs_checks: error:", "refusing")
    unchanged(target, kind, outside)


STUDY_TARGETS = ("study.json", "predictions.csv", "study.md", "figures/gains.png", "figures/heldout.png")


@pytest.mark.parametrize("name", STUDY_TARGETS)
@pytest.mark.parametrize("kind", KINDS)
def test_study_out(tmp_path, kind, name, capsys):
    """``python -m numeric study DIR --out OUT`` refuses, before it reads DIR, an output file that is a device,
    FIFO, link or directory: one line, exit 2, the target untouched. With nothing planted the same command
    gets past the check (negative control: DIR is not a panel, so it fails there instead)."""
    from numeric.study.cli import main

    out, outside = tmp_path / "out", tmp_path / "outside.txt"
    out.mkdir()
    for _ in range(2):       # an OUT without figures/ (created by the write), then with it
        assert main([str(tmp_path / "nopanel"), "--out", str(out)]) == 2
        one_line(capsys.readouterr().err, "python -m numeric study: error:", "does not exist")
        (out / "figures").mkdir(exist_ok=True)
    plant(out / name, kind, outside)
    assert main([str(tmp_path / "nopanel"), "--out", str(out)]) == 2
    one_line(capsys.readouterr().err, "python -m numeric study: error:", "refusing")
    unchanged(out / name, kind, outside)


@pytest.mark.parametrize("kind", ("symlink", "fifo", "chardev"))
def test_study_out_figures_dir(tmp_path, kind, capsys):
    """``OUT/figures`` planted as a link to elsewhere (or as a FIFO, a device) is refused, never followed."""
    from numeric.study.cli import main

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    if kind == "symlink":
        (out / "figures").symlink_to(elsewhere)
    else:
        plant(out / "figures", kind, tmp_path / "unused")
    assert main([str(tmp_path / "nopanel"), "--out", str(out)]) == 2
    one_line(capsys.readouterr().err, "python -m numeric study: error:", "figures is", "refused")
    assert list(elsewhere.iterdir()) == []


def _study_inputs():
    """A small synthetic study (one family, 4 heads x 4 sources, every column) and one comparison's result."""
    from numeric.study.calibrate import Shape, synthetic
    from numeric.study.compare import compare
    from numeric.study.protocol import comparisons

    shape = Shape((("a", 4, 4, "text"),), ("b0_depth",))
    rngs = [np.random.default_rng(s) for s in (0, 1, 2)]
    data = synthetic(shape, "null", rngs[0], rngs[1], rng_extra=rngs[2])
    setup = {"panel": "synthetic", "target": "u_over_n", "eps": "1/4", "cells": len(data), "sources": 4, "heads": 4,
             "families": ["a"], "folds": 4, "replicates": 0, "permutations": 1, "seed": 0, "seconds": 0.0}
    return data, compare(data, comparisons()[:1], seed=0, permutations=1), setup


def test_study_writer_refuses_a_link_below_out_even_unchecked(tmp_path, monkeypatch):
    """The writer itself (``write_outputs``, with the early check switched off) writes through
    ``fileio.safeio`` with ``root=out``: ``figures`` -> elsewhere is refused, nothing lands elsewhere; a clean
    ``out`` gets every file (positive control)."""
    from numeric.study import write
    from numeric.study.results import StudyResults, comparison_records

    data, results, setup = _study_inputs()
    record = StudyResults("cmd", setup, {}, comparison_records(results), [])
    write.write_outputs(tmp_path / "ok", data, record)
    assert sorted(str(p.relative_to(tmp_path / "ok")) for p in (tmp_path / "ok").rglob("*") if p.is_file()) == \
        sorted(write.OUTPUTS)
    monkeypatch.setattr(write, "check_outputs", lambda out: None)
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "figures").symlink_to(elsewhere)
    with pytest.raises(SafeIOError, match="figures is a symbolic link"):
        write.write_outputs(out, data, record)
    assert list(elsewhere.iterdir()) == []
    (out / "figures").unlink()
    outside = tmp_path / "outside.txt"
    plant(out / "study.md", "symlink", outside)
    with pytest.raises(SafeIOError, match="refusing"):
        write.write_outputs(out, data, record)
    unchanged(out / "study.md", "symlink", outside)


def test_check_target_allows_a_directory_the_write_creates(tmp_path):
    """``check_target`` refuses what ``write_bytes`` would refuse and nothing else: a missing directory below
    root is created by the write (no refusal), a link on the way is refused whether or not it dangles."""
    out = tmp_path / "out"
    out.mkdir()
    safeio.check_target(out / "figures" / "a.png", root=out)            # figures does not exist yet
    safeio.check_target(tmp_path / "new" / "figures" / "a.png", root=tmp_path / "new")
    (out / "figures").symlink_to(tmp_path / "nowhere")                 # a dangling link
    with pytest.raises(SafeIOError, match="figures is a symbolic link"):
        safeio.check_target(out / "figures" / "a.png", root=out)
    (out / "figures").unlink()
    (out / "figures").symlink_to(tmp_path)                             # a link to a directory
    with pytest.raises(SafeIOError, match="figures is a symbolic link"):
        safeio.check_target(out / "figures" / "sub" / "a.png", root=out)
    (out / "figures").unlink()
    (out / "figures").mkdir()
    plant(out / "figures" / "a.png", "fifo", tmp_path / "unused")
    with pytest.raises(SafeIOError, match="refusing"):
        safeio.check_target(out / "figures" / "a.png", root=out)
    safeio.write_bytes(out / "figures" / "new" / "b.png", b"x", root=out)   # the write agrees


def test_check_output_dir_refuses_anything_but_a_directory(tmp_path):
    import os

    from fileio.safeio import check_output_dir, missing_reason

    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "d")
    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    for name, words in (("link", "a symbolic link"), ("f", "a regular file"), ("fifo", "a FIFO")):
        with pytest.raises(SafeIOError, match=words):
            check_output_dir(tmp_path / name)
    check_output_dir(tmp_path / "d")                  # a directory, and a path not there yet: accepted
    check_output_dir(tmp_path / "new")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert missing_reason(tmp_path / "loop") == "is a symbolic link loop"
    assert missing_reason(tmp_path / "dangling") == "is a dangling symbolic link"
    assert missing_reason(tmp_path / "nowhere") == "does not exist"
    assert missing_reason(tmp_path / "f" / "x") == "has a path component that is not a directory"

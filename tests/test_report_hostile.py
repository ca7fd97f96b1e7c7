"""A panel directory is untrusted input (docs/panel.md, trust model): a corpus of hostile directories.

Each case copies a small real panel (``tests/report_panel.build_panel``: two
8 x 8 heads, two tolerances, bracket files, head files and records), damages
it the way an attacker who can write the directory would, and runs the
report. Each must end in its documented exit status (1: an error listed, the
report written; 2: an input or output path refused, nothing written), with
every stderr line one ``python -m numeric report:`` line (no traceback, no
raw control character), within a bounded time (``signal.alarm``). Two
mutation tests show that the forged-record and substitution tests can fail:
with re-verification disabled, or the binding check disabled, the attack
succeeds.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from numeric.panel import audit as audit_mod
from numeric.panel import vcache
from numeric.panel.report import main
from tests.report_panel import IDENTITY

PROG = "python -m numeric report:"
#: Seconds any one case may take (the clean report takes about 2 s of CPU here).
BOUND = 120
KEY = "L0H0_s00"


@pytest.fixture(autouse=True)
def no_plots(request, monkeypatch):
    """The figures are drawn only where a case is about them (they take most of a report's time)."""
    if "figures" not in request.node.name and "clean" not in request.node.name:
        monkeypatch.setattr("numeric.panel.report.plot_all", lambda rows, figdir, root=None: {})


@contextlib.contextmanager
def bounded(seconds=BOUND):
    def fire(*_):
        raise TimeoutError(f"the report ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run(capsys, out, *extra, code, needle=None):
    """The report on ``out`` in this process: its exit status is ``code``, stderr is one-line errors, one
    with ``needle``; the report text (or None when nothing was written)."""
    with bounded():
        rc = main([str(out), "--workers", "1", *extra])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == code, err
    assert "Traceback" not in err and all(line.startswith(PROG) for line in lines), err
    assert all(c == "\t" or " " <= c <= "~" for c in err.replace("\n", "")), repr(err)
    if needle is not None:
        assert any(needle in line for line in lines), (needle, lines)
    report = out / "report.md"
    return report.read_text() if code == 1 and report.is_file() and not report.is_symlink() else None


def record(out, key=KEY) -> tuple[Path, dict]:
    p = out / "cells" / f"{key}.json"
    return p, json.loads(p.read_text())


def bracket(path) -> tuple[dict, dict]:
    from safetensors import safe_open
    from safetensors.numpy import load_file

    with safe_open(str(path), "np") as f:
        meta = json.loads(f.metadata()["softrank"])
    return meta, load_file(str(path))


def write_bracket(path, meta, tensors) -> None:
    from safetensors.numpy import save_file

    save_file(tensors, str(path), metadata={"softrank": json.dumps(meta)})


def test_clean_panel_passes(panel, capsys):
    """The negative control: the untouched copy is reported with exit 0."""
    with bounded():
        assert main([str(panel), "--workers", "1"]) == 0
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- finding 1: forged records of the exact pass


def forge_refuted(out) -> tuple[str, int]:
    """Make L0H0's first cell claim one rank more than it can (the exact tier refutes it), and write a record of
    the exact pass, with the checker's own digest, that says it verified; the cell record follows the claim."""
    from numeric.heads.zoo.common import file_sha256

    path = out / "brackets" / f"{KEY}.safetensors"
    meta, tensors = bracket(path)
    cell = meta["cells"][0]
    cell["lower"]["rank"] = cell["upper"]["rank"] = claimed = cell["upper"]["rank"] + 1
    cell["lower"]["witness"] = {"kind": "trivial"}
    write_bracket(path, meta, tensors)
    p, doc = record(out)
    doc["rows"][0].update(L=claimed, U=claimed, lower_witness="trivial")
    p.write_text(json.dumps(doc))
    digest = file_sha256(path)
    result = audit_mod._verify_one(str(path))
    for rep in result["cells"].values():
        rep.update(lower_verified=True, upper_verified=True)
    rep = result["cells"][cell["id"]]
    rep.update(lower=claimed, upper=claimed, lower_witness="trivial")
    (out / vcache.VERIFIED_DIR).mkdir(exist_ok=True)
    (out / vcache.VERIFIED_DIR / f"{digest}.json").write_text(json.dumps(
        {"format": vcache._FORMAT, "file_sha256": digest, "checker_sha256": vcache.checker_digest(),
         "result": result}))
    return cell["id"], claimed


def check_forged(panel, capsys, cid):
    text = run(capsys, panel, code=1, needle=f"{cid}: the record says verified = True, the exact pass False")
    assert "no record of an earlier pass was used" in text.splitlines()[2]


def test_forged_record_of_a_refuted_file(panel, capsys):
    cid, _ = forge_refuted(panel)
    check_forged(panel, capsys, cid)


def test_trust_records_is_stated_in_the_first_lines(panel, capsys):
    """With --trust-records the forged record is believed (that is what the flag means), and the report's
    first lines and stderr say the pass came from records."""
    forge_refuted(panel)
    with bounded():
        main([str(panel), "--workers", "1", "--trust-records"])
    err = capsys.readouterr().err
    assert "--trust-records" in err
    head = "\n".join((panel / "report.md").read_text().splitlines()[:4])
    assert "Trusted records" in head and "forge" in head


def test_mutant_without_reverification_fails_the_forged_record_test(panel, capsys, monkeypatch):
    """Mutation: an audit that reads records by default (the old behaviour), with the second checker off,
    reports the refuted file verified."""
    real = audit_mod.audit
    monkeypatch.setattr("numeric.panel.report.audit",
                        lambda out, workers=None, reverify=True, independent=True: real(out, workers, False, False))
    cid, _ = forge_refuted(panel)
    with pytest.raises(AssertionError):
        check_forged(panel, capsys, cid)


def test_second_checker_catches_a_forged_record_the_exact_pass_believed(panel, capsys, monkeypatch):
    """Defence in depth: with the same mutant (records read, not re-verified) but the second checker on, the
    forged record disagrees with the second checker's own pass of the file, and the report exits 1."""
    real = audit_mod.audit
    monkeypatch.setattr("numeric.panel.report.audit",
                        lambda out, workers=None, reverify=True, independent=True: real(out, workers, False, True))
    cid, _ = forge_refuted(panel)
    run(capsys, panel, code=1, needle="independent checker:")


def test_forged_record_of_an_unchanged_file(panel, capsys):
    """A record that moves a head's ranks for an unchanged file is never read: the file is re-verified."""
    from numeric.heads.zoo.common import file_sha256

    path = panel / "brackets" / f"{KEY}.safetensors"
    digest = file_sha256(path)
    result = audit_mod._verify_one(str(path))
    for rep in result["cells"].values():
        rep.update(lower=5, upper=5)
    (panel / vcache.VERIFIED_DIR).mkdir(exist_ok=True)
    (panel / vcache.VERIFIED_DIR / f"{digest}.json").write_text(json.dumps(
        {"format": vcache._FORMAT, "file_sha256": digest, "checker_sha256": vcache.checker_digest(), "result": result}))
    p, rec = record(panel)
    for r in rec["rows"]:
        r.update(L=5, U=5)
    p.write_text(json.dumps(rec))
    run(capsys, panel, code=1, needle="the record says L = 5, the exact pass")


# ---------------------------------------------------------------- finding 2: rows bound to their heads


def substitute(out) -> None:
    """Replace L0H0's bracket file by an honest one about another matrix, carrying L0H0's ids and provenance,
    with records that say what it says."""
    from numeric.heads.extract import softmax_rows
    from numeric.search import search_brackets
    from numeric.search.export import write_bracket_file

    logits = 0.1 * np.random.default_rng(99).standard_normal((8, 8))     # nearly uniform: rank 1
    prov = {"model": "m", "family": "encoder", "cell_kind": "full", "layer": 0, "head": 0, "source": "text:0"}
    res = search_brackets(softmax_rows(logits), ["1/4", "1/2"], logits=logits, id_prefix=KEY, attack=False,
                          effort="quick", provenance=prov)
    path = out / "brackets" / f"{KEY}.safetensors"
    path.unlink()
    write_bracket_file(path, res.cells, res.tensors)
    p, doc = record(out)
    by_eps = {str(Fraction(c.eps)): c for c in res.cells}
    for r in doc["rows"]:
        c = by_eps[r["eps"]]
        r.update(L=c.lower.rank, U=c.upper.rank, lower_witness=c.lower.kind,
                 upper_witness=c.upper.kind, slack=float(Fraction(c.target.slack)))
    p.write_text(json.dumps(doc))


def test_substituted_bracket_file(panel, capsys):
    substitute(panel)
    run(capsys, panel, code=1, needle="not bound to its head: the exact pass's logits are not those of heads/L0H0_s00")


def test_mutant_without_binding_fails_the_substitution_test(panel, capsys, monkeypatch):
    monkeypatch.setattr(audit_mod, "bind_row", lambda *a: None)
    substitute(panel)
    with pytest.raises(AssertionError):
        test_substituted_bracket_file(panel, capsys)


@pytest.mark.parametrize("change, needle", [
    ({"layer": 1}, "its key L0H0_s00 another head"),
    ({"domain": "code"}, "its key L0H0_s00 another domain"),   # a forged domain column
    ({"file": "brackets/L0H1_s00.safetensors"}, "names the file brackets/L0H1_s00.safetensors"),
    ({"n_rows": 9}, "the record says n_rows = 9, the exact pass 8"),
    ({"lower_witness": "odd_map"}, "the record says lower_witness = 'odd_map'"),
    ({"slack": 0.5}, "the record says slack = 0.5"),
    ({"model": "another"}, "the row says model = 'another', the file's provenance 'm'"),
])
def test_rows_claiming_what_the_exact_pass_never_saw(panel, capsys, change, needle):
    p, doc = record(panel)
    doc["rows"][0].update(change)
    p.write_text(json.dumps(doc))
    run(capsys, panel, code=1, needle=needle)


def test_row_pointed_at_another_heads_cell(panel, capsys):
    """L0H1's record names L0H0's file and cells; L0H0's record is gone: the cells of L0H1's file are unnamed."""
    p1, doc1 = record(panel, "L0H1_s00")
    _, doc0 = record(panel)
    (panel / "cells" / f"{KEY}.json").unlink()
    doc1["rows"] = [dict(r, layer=0, head=1) for r in doc0["rows"]]
    p1.write_text(json.dumps(doc1))
    run(capsys, panel, code=1, needle="names the file brackets/L0H0_s00.safetensors")


def test_head_file_replaced_or_missing(panel, capsys):
    shutil.copy(panel / "heads" / "L0H1_s00.safetensors", panel / "heads" / f"{KEY}.safetensors")
    run(capsys, panel, code=1, needle="hold the same head")
    (panel / "heads" / f"{KEY}.safetensors").unlink()
    run(capsys, panel, code=1, needle=f"heads/{KEY}.safetensors is missing")


# ---------------------------------------------------------------- findings 3, 4: integrity lines, identity


@pytest.mark.parametrize("change, needle", [({"attack_success": True}, "attack succeeded"),
                                            ({"direct_passed": False}, "failed its direct check")])
def test_failed_integrity_lines_exit_1(panel, capsys, change, needle):
    p, doc = record(panel)
    doc["rows"][1].update(change)
    p.write_text(json.dumps(doc))
    run(capsys, panel, code=1, needle=needle)


def test_panel_json_identity_checked_against_the_files(panel, capsys):
    ident = dict(IDENTITY, effort="thorough")
    run_doc = json.loads((panel / "panel.json").read_text())
    run_doc["identity"] = ident
    (panel / "panel.json").write_text(json.dumps(run_doc))
    for p in (panel / "cells").glob("*.json"):
        doc = json.loads(p.read_text())
        doc["signature"]["identity"] = ident
        p.write_text(json.dumps(doc))
    run(capsys, panel, code=1, needle="panel.json's effort (thorough) is not that of the file's provenance (quick)")


# ---------------------------------------------------------------- findings 5, 6: writes that cannot destroy


@pytest.mark.parametrize("name", ["report.md", "figures", "verified"])
@pytest.mark.parametrize("kind", ["symlink", "fifo", "chardev"])
def test_planted_outputs_are_refused(panel, capsys, tmp_path, name, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("precious")
    target = panel / name
    shutil.rmtree(target, ignore_errors=True)
    if kind == "symlink":
        target.symlink_to(outside / "precious.txt" if name == "report.md" else outside)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        try:
            os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except (PermissionError, OSError) as e:
            pytest.skip(f"mknod not permitted here ({e})")
    run(capsys, panel, code=2, needle="refus")
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert (outside / "precious.txt").read_text() == "precious"
    assert os.lstat(target).st_mode & 0o170000 == {"symlink": stat.S_IFLNK, "fifo": stat.S_IFIFO,
                                                   "chardev": stat.S_IFCHR}[kind]


# ---------------------------------------------------------------- findings 7, 9: crashes and hangs


def _write(path: Path, text: str) -> None:
    path.unlink(missing_ok=True)
    path.write_text(text)


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _dir(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.mkdir()


def _zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def _row(out, value) -> None:
    p, doc = record(out)
    doc["rows"][0] = value
    p.write_text(json.dumps(doc))


REC = f"cells/{KEY}.json"
BR = f"brackets/{KEY}.safetensors"
HOSTILE = {
    "record not JSON": (lambda o: _write(o / REC, "{not json"), "not JSON"),
    "record without rows": (lambda o: _write(o / REC, json.dumps({"signature": {"identity": IDENTITY}})),
                            "rows is not a list"),
    "record rows an object": (lambda o: _write(o / REC, json.dumps({"signature": {}, "rows": {"a": 1}})),
                              "rows is not a list"),
    "record nested 100000 deep": (lambda o: _write(o / REC, "[" * 100_000 + "]" * 100_000), "too deep"),
    "record a directory": (lambda o: _dir(o / REC), "is a directory, not a regular file"),
    "record a FIFO": (lambda o: _fifo(o / REC), "is a FIFO, not a regular file"),
    "record a link to /dev/zero": (lambda o: _zero(o / REC), "is a symbolic link, not a regular file"),
    "row not an object": (lambda o: _row(o, [1, 2]), "a row is not an object"),
    "row layer a string": (lambda o: _row(o, dict(record(o)[1]["rows"][0], layer="0")), "layer is not an integer"),
    "row eps out of range": (lambda o: _row(o, dict(record(o)[1]["rows"][0], eps="1e400")), "eps is not in (0, 1]"),
    "row eps not rational": (lambda o: _row(o, dict(record(o)[1]["rows"][0], eps="x")), "eps is not a rational"),
    "bracket file a directory": (lambda o: _dir(o / BR), "is a directory, not a regular file"),
    "bracket file a FIFO": (lambda o: _fifo(o / BR), "is a FIFO, not a regular file"),
    "bracket file a link to /dev/zero": (lambda o: _zero(o / BR), "is a symbolic link"),
    "panel.json a FIFO": (lambda o: _fifo(o / "panel.json"), "is a FIFO, not a regular file"),
    "panel.json wrong types": (lambda o: _write(o / "panel.json", json.dumps(
        {"identity": dict(IDENTITY, effort=5), "summary": {"run": "x"}})), "effort is not a string"),
    "panel.json summary seconds a string": (lambda o: _write(o / "panel.json", json.dumps(
        {"identity": IDENTITY, "summary": {"run": 1, "skipped": 0, "seconds": "x"}})), "summary.seconds"),
    "panel.json a list": (lambda o: _write(o / "panel.json", "[]"), "not an object"),
    "head file a FIFO": (lambda o: _fifo(o / f"heads/{KEY}.safetensors"), "is a FIFO, not a regular file"),
    "head file not safetensors": (lambda o: _write(o / f"heads/{KEY}.safetensors", "junk"), "not a safetensors"),
    "cells a link": (lambda o: (shutil.rmtree(o / "cells"), (o / "cells").symlink_to("/etc")), None),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_directory(panel, capsys, case):
    damage, needle = HOSTILE[case]
    damage(panel)
    run(capsys, panel, code=2 if needle is None else 1, needle=needle)


@pytest.mark.parametrize("result", [{"cells": [1, 2]}, {"error": 5}, {}, {"cells": {"x": {"id": "x"}}}])
def test_malformed_records_of_the_exact_pass_are_not_read(panel, capsys, result):
    """With --trust-records, a record that fails its schema (cells a list, missing, ...) is re-verified."""
    from numeric.heads.zoo.common import file_sha256

    digest = file_sha256(panel / BR)
    (panel / vcache.VERIFIED_DIR).mkdir(exist_ok=True)
    (panel / vcache.VERIFIED_DIR / f"{digest}.json").write_text(json.dumps(
        {"format": vcache._FORMAT, "file_sha256": digest, "checker_sha256": vcache.checker_digest(), "result": result}))
    with bounded():
        assert main([str(panel), "--workers", "1", "--trust-records"]) == 0
    assert "Traceback" not in capsys.readouterr().err


# ---------------------------------------------------------------- finding 15: output a file cannot forge


def _head_file(path, prov) -> None:
    """A head file whose provenance is ``prov`` (a dropped row counts only with one)."""
    from safetensors.numpy import save_file

    logits = np.random.default_rng(9).standard_normal((3, 3))
    matrix = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    save_file({"logits": logits, "matrix": matrix}, str(path), metadata={"provenance": json.dumps(prov)})


def test_strings_from_the_directory_are_escaped(panel, capsys):
    p, doc = record(panel)
    doc["rows"][0]["model"] = "m\x1b[2K\rverified\n| x |"
    p.write_text(json.dumps(doc))
    fake = panel / "brackets" / "\x1b[1Averified.safetensors"
    shutil.copy(panel / BR, fake)
    dropped = dict(doc["rows"][1], model="x\x1b[31m", source="s|\n", status="dropped_mass", layer=9, head=9)
    (panel / "cells" / "L9H9_s00.json").write_text(json.dumps({"signature": doc["signature"], "rows": [dropped]}))
    _head_file(panel / "heads" / "L9H9_s00.safetensors", {k: dropped.get(k) for k in (
        "model", "family", "cell_kind", "layer", "head", "source", "mass", "min_mass", "local_mass")})
    text = run(capsys, panel, code=1, needle="the row says model")
    assert "\x1b" not in text and "\\x1b[2K" in text and "\\x1b[31m" in text and "\r" not in text
    assert "of brackets/\\x1b[1Averified.safetensors that no record names" in text


# ---------------------------------------------------------------- outputs refused up front, head files streamed


@pytest.mark.parametrize("name", ["report.md", "figures", "figures/u_over_n.png", "geometry_family.png"])
def test_a_planted_output_is_refused_before_any_work(panel, capsys, tmp_path, monkeypatch, name):
    """A link where an output goes is refused before the audit starts: nothing is verified, drawn or written
    first (the old report refused report.md only after its whole run)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = panel / name
    if target.is_dir():
        shutil.rmtree(target)
    target.parent.mkdir(exist_ok=True)
    target.symlink_to(outside if name == "figures" else outside / "x")

    def no_work(*a, **kw):
        raise AssertionError("the audit started")
    monkeypatch.setattr("numeric.panel.report.audit", no_work)
    run(capsys, panel, code=2, needle="symbolic link")
    assert not list(outside.iterdir())


def test_head_files_are_streamed_not_read_whole(tmp_path):
    """A head file padded with a 32 MiB tensor: its two tensors are hashed in chunks, so the read holds a few
    MiB (the old reader held the whole file and a copy of each tensor); the digests are those of the arrays."""
    import hashlib
    import tracemalloc

    from safetensors.numpy import save_file

    logits, matrix = np.arange(16.0).reshape(4, 4), np.full((4, 4), 0.25)
    (tmp_path / "heads").mkdir()
    save_file({"logits": logits, "matrix": matrix, "pad": np.zeros((2048, 2048))},
              str(tmp_path / "heads" / f"{KEY}.safetensors"))
    tracemalloc.start()
    try:
        got = audit_mod._head(tmp_path, KEY)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (got.logits, got.matrix) == (hashlib.sha256(logits.astype("<f8").tobytes()).hexdigest(),
                                        hashlib.sha256(matrix.astype("<f8").tobytes()).hexdigest())
    assert peak < 4 * 2**20, peak
    save_file({"logits": logits.astype(np.float32), "matrix": matrix}, str(tmp_path / "heads" / f"{KEY}.safetensors"))
    assert "no 2-D float64 'logits'" in (audit_mod._head(tmp_path, KEY).error or "")       # negative control

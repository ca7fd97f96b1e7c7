"""The panel (numeric.panel): bad input, end to end on tiny saved models,
resumability and its refusal of another run identity, the Dask backend against
a LocalCluster, and the report."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.panel_helpers import SMALL, cli, cli_in_process, in_process, one_line_error, save_tiny

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("gpt2"), "gpt2")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("bert"), "bert")


def test_bad_inputs(tmp_path, tiny_gpt2, capsys):
    # the real entry point once; the other cases through the same main, in-process
    one_line_error(cli("panel", "--model", tmp_path / "missing", "--heads", "0.0", "--out", tmp_path / "o"),
                   "does not exist")
    run = lambda *args: cli_in_process(capsys, *args)
    one_line_error(run("panel", "--model", tmp_path, "--heads", "0.0", "--out", tmp_path / "o"), "config.json")
    # the tiny GPT-2 has 64 positions: the default 128 + 128 block does not fit
    one_line_error(run("panel", "--model", tiny_gpt2, "--heads", "0.0", "--out", tmp_path / "o"), "exceeds")
    one_line_error(run("panel", "--model", tiny_gpt2, "--heads", "7.0", "--out", tmp_path / "o"), "outside")
    one_line_error(run("panel", "--model", tiny_gpt2, "--heads", "0.0", "--eps", "1.5", "--out", tmp_path / "o"),
                   "eps")
    one_line_error(run("panel", "--model", "minilm", "--heads", "0.0", "--length", "600",
                       "--out", tmp_path / "o"), "exceeds")
    unsupported = tmp_path / "t5"
    unsupported.mkdir()
    (unsupported / "config.json").write_text(json.dumps({"model_type": "t5"}))
    one_line_error(run("panel", "--model", unsupported, "--heads", "0.0", "--out", tmp_path / "o"), "not supported")


def test_model_without_attention_outputs(tmp_path, capsys):
    """GPT-2 with reorder_and_upcast_attn bypasses the eager attention function: exit 2."""
    path = save_tiny(tmp_path / "m", "gpt2", reorder_and_upcast_attn=True)
    rc, cap = in_process(capsys, "--model", path, "--heads", "0.0", "--out", tmp_path / "o",
                         "--workers", "1", *SMALL)
    assert rc == 2
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and "attention" in lines[0], cap.err


@pytest.fixture(scope="module")
def decoder_run(tmp_path_factory, tiny_gpt2):
    """One real panel run through the CLI: 2 heads x 2 sources, 2 worker processes."""
    out = tmp_path_factory.mktemp("run")
    args = ["panel", "--model", tiny_gpt2, "--heads", "0.1,1.2", "--sources", "2", "--out", out,
            "--workers", "2", "--no-screen", "--min-mass", "0", "--json", "--report", *SMALL]
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    return out, args, json.loads(proc.stdout.strip().splitlines()[-1])


def test_decoder_panel_end_to_end(decoder_run):
    out, _, summary = decoder_run
    assert summary["cells"] == 4 and summary["run"] == 4 and summary["brackets"] == 8
    assert summary["verified"] == 8 and summary["all_verified"]
    rows = list(csv.DictReader(open(out / "cells.csv")))
    assert len(rows) == 8
    for r in rows:
        assert (r["n_rows"], r["n_cols"]) == ("16", "16")
        assert 1 <= int(r["L"]) <= int(r["U"]) <= 16
        assert r["verified"] == "True" and r["family"] == "decoder-gpt2" and r["cell_kind"] == "prefix-block"
        assert 0 < float(r["mass"]) <= 1 and r["attack_success"] == "False"
    assert len({r["seed"] for r in rows}) == 4 and {r["capped"] for r in rows} == {"False"}
    assert {r["effort"] for r in rows} == {"default"}
    run = json.loads((out / "panel.json").read_text())
    ident = run["identity"]
    assert ident["effort"] == "default" and ident["eps"] == ["1/4", "1/2"] and ident["prefix"] == 16
    assert ident["versions"]["numpy"] == np.__version__ and ident["versions"]["torch"] == torch.__version__
    assert set(ident["tolerances"]) == {"STOCHASTIC_TOL", "UPPER_SAFETY", "LOWER_SAFETY"}
    assert len(ident["code"]["source_sha256"]) == 64 and "commit" in run["code_version"]
    assert sorted(map(str, run["summary"]["seeds"].values())) == sorted({r["seed"] for r in rows})
    assert run["summary"]["capped"] == []
    # every bracket file it wrote passes the exact CLI on its own
    files = sorted((out / "brackets").glob("*.safetensors"))
    assert len(files) == 4
    ver = subprocess.run([sys.executable, "-m", "exact", "verify", "--json", *map(str, files)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert ver.returncode == 0 and json.loads(ver.stdout)["all_verified"]


def test_resume_skips_finished_cells(decoder_run):
    out, args, _ = decoder_run
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout.strip().splitlines()[-1])
    assert again["run"] == 0 and again["skipped"] == 4 and again["brackets"] == 8
    # a changed tolerance list, or a missing bracket file, makes a cell unfinished
    from numeric.panel.cell import CellTask, finished_rows

    identity = json.dumps(json.loads((out / "panel.json").read_text())["identity"], sort_keys=True)
    task = CellTask(model=str(Path(args[2]).resolve()), layer=0, head=1, source=0, eps=("1/4", "1/2"), out=str(out),
                    prefix=16, block=16, length=256, min_mass=0.0, screen=False, attack=True, geometry=False,
                    device=None, image_dir=None, identity=identity)
    assert finished_rows(task) is not None
    assert finished_rows(CellTask(**{**task.__dict__, "eps": ("1/2",)})) is None
    assert finished_rows(CellTask(**{**task.__dict__, "effort": "quick"})) is None


def test_resume_with_another_identity_is_refused(decoder_run, capsys):
    """Another effort or tolerance list into the same directory: exit 2, nothing run, nothing mixed."""
    out, args, _ = decoder_run
    before = (out / "cells.csv").read_text()
    for change in (["--effort", "quick"], ["--eps", "0.5"]):
        argv = [a for a in args[1:] if a not in ("--json", "--report")] + change
        rc, cap = in_process(capsys, *argv)
        assert rc == 2
        lines = cap.err.strip().splitlines()
        assert len(lines) == 1 and "another run identity" in lines[0], cap.err
    assert (out / "cells.csv").read_text() == before
    one_line_error(cli("panel", "--model", args[2], "--heads", "0.0", "--effort", "fast", "--out", out / "x"),
                   "unknown effort 'fast'")


def test_report_cli(decoder_run):
    out, _, _ = decoder_run
    (out / "report.md").unlink()
    proc = cli("report", out)
    assert proc.returncode == 0, proc.stderr
    text = (out / "report.md").read_text()
    assert "## Integrity" in text and "| brackets re-verified exactly (both sides) | 8 | 8 |" in text
    assert "## Errors" not in text and "effort preset `default`" in text
    for png in ("brackets_per_head.png", "u_over_l.png", "resolved_per_layer.png", "u_over_n.png"):
        assert (out / "figures" / png).stat().st_size > 1000
    one_line_error(cli("report", out / "nothing"), "not a panel directory")


def test_mass_and_locality_screens(tmp_path, tiny_gpt2, capsys):
    out = tmp_path / "screen"
    rc, cap = in_process(capsys, "--model", tiny_gpt2, "--heads", "0.0", "--out", out, "--workers", "1",
                         "--min-mass", "1.01", "--json", *SMALL)
    assert rc == 0, cap.err
    rows = list(csv.DictReader(open(out / "cells.csv")))
    assert rows and all(r["status"] == "dropped_mass" and r["L"] == "" for r in rows)
    assert json.loads(cap.out.strip().splitlines()[-1])["brackets"] == 0


def test_dask_backend_local_cluster(tmp_path, tiny_bert):
    distributed = pytest.importorskip("distributed")
    from numeric.panel.cell import CellTask
    from numeric.panel.runner import run_panel
    from numeric.panel.table import read_rows

    tasks = [CellTask(model=str(tiny_bert), layer=1, head=h, source=0, eps=("1/4",), out=str(tmp_path),
                      prefix=16, block=16, length=32, min_mass=0.0, screen=False, attack=True, geometry=False,
                      device=None, image_dir=None) for h in (0, 3)]
    threads = torch.get_num_threads()
    # two cells at once in two threads of this process: the cells touch no process
    # state, and the worker plugin pins the threads and restores them at teardown
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        counts = run_panel(tasks, scheduler=cluster.scheduler_address, quiet=True)
    assert counts == {"cells": 2, "run": 2, "skipped": 0}
    assert torch.get_num_threads() == threads
    rows = read_rows(tmp_path)
    assert [(r.head, r.n_rows, r.verified) for r in rows] == [(0, 32, True), (3, 32, True)]


def test_vit_panel(tmp_path, capsys):
    path = save_tiny(tmp_path / "vit", "vit")
    out = tmp_path / "run"
    rc, cap = in_process(capsys, "--model", path, "--heads", "1.3", "--sources", "2", "--out", out,
                         "--workers", "1", "--eps", "0.25", "--quiet", "--json")   # geometry columns on
    assert rc == 0, cap.err
    rows = list(csv.DictReader(open(out / "cells.csv")))
    assert [(r["family"], r["source"], r["n_rows"], r["verified"]) for r in rows] == [
        ("vit", "synthetic:0", "17", "True"), ("vit", "synthetic:1", "17", "True")]
    assert all(float(r["kappa_upper"]) > 0 and "gamma_native" in r for r in rows)
    assert not any(k.endswith("_error") for r in rows for k in r), rows[0].keys()


def test_entry_point_restores_process_state(tmp_path, tiny_gpt2, capsys):
    """``python -m numeric`` called in-process: threads and variables as they were, whatever the exit."""
    import os

    from numeric.__main__ import main

    before = torch.get_num_threads()
    torch.set_num_threads(2)            # not the entry point's 1: a restore is visible
    env = os.environ.get("OMP_NUM_THREADS")
    try:
        assert main(["panel", "--model", str(tiny_gpt2), "--heads", "9.9", "--out", str(tmp_path)]) == 2
        assert torch.get_num_threads() == 2 and os.environ.get("OMP_NUM_THREADS") == env
        assert "outside" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)

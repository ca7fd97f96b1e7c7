"""Same input, same panel (determinism): two runs of the real MiniLM give the
same table and the same bracket files apart from timing fields, and a run whose
worker is killed (kill -9) mid-panel resumes to that same table, nothing lost
or duplicated; the cells it finished before the kill (resumed) equal those the
uninterrupted run computed. Small settings: 16 tokens, two tolerances, the quick effort."""
from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
psutil = pytest.importorskip("psutil")

from exact.errors import ExitCode

ROOT = Path(__file__).resolve().parents[1]
HEADS = "0.1"
SOURCES = 3
N_CELLS = 3                         # 1 head x 3 sources: with 2 workers, one is queued at the first kill
EPS = ("1/4", "1/2")
#: Fields that measure time, and so differ between two runs of the same cell.
TIMING = {"seconds"}
#: Seconds to wait for the first finished cell before giving up (a guard, not a measurement).
FIRST_CELL_WAIT_S = 300
POLL_S = 0.05


def panel_args(out, workers):
    return [sys.executable, "-m", "numeric", "panel", "--model", "minilm", "--heads", HEADS,
            "--sources", str(SOURCES), "--length", "16", "--eps", ",".join(EPS), "--effort", "quick",
            "--no-geometry", "--quiet", "--json", "--workers", str(workers), "--out", str(out)]


def run_panel(out, workers):
    proc = subprocess.run(panel_args(out, workers), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(out) -> list[dict]:
    with open(out / "cells.csv", newline="") as f:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(f)]


def bracket_files(out) -> dict:
    """Every bracket file as (tensor bytes, metadata without timing fields)."""
    from safetensors import safe_open

    files = {}
    for p in sorted((out / "brackets").glob("*.safetensors")):
        with safe_open(str(p), "numpy") as f:
            tensors = {k: f.get_tensor(k).tobytes() for k in f.keys()}
            doc = json.loads(f.metadata()["softrank"])
        for cell in doc["cells"]:
            for k in TIMING:
                cell["provenance"]["search"].pop(k)
        files[p.name] = (tensors, doc)
    return files


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run with one worker."""
    out = tmp_path_factory.mktemp("reference")
    summary = run_panel(out, workers=1)
    assert summary["run"] == N_CELLS and summary["all_verified"]
    return out


def test_two_runs_identical(reference, tmp_path):
    """A second run (two worker processes this time) gives the same table and files."""
    out = tmp_path / "again"
    run_panel(out, workers=2)
    rows = table(out)
    assert len(rows) == N_CELLS * len(EPS)
    assert rows == table(reference)
    assert {r["capped"] for r in rows} == {"False"} and len({r["seed"] for r in rows}) == N_CELLS
    assert bracket_files(out) == bracket_files(reference)


def test_kill_worker_mid_panel_and_resume(reference, tmp_path):
    out = tmp_path / "killed"
    rc, err, done = start_and_kill(out, "workers")
    assert rc == ExitCode.REFUTED, err     # a worker died: not every cell decided; the run stops, resumable
    assert "Traceback" not in err and "resume" in err
    resumes_to_reference(out, reference, done)


def test_kill_main_process_mid_panel_and_resume(reference, tmp_path):
    out = tmp_path / "killed"
    rc, _, done = start_and_kill(out, "main")
    assert rc == -signal.SIGKILL
    resumes_to_reference(out, reference, done)
    assert sorted(p.name for p in (out / "brackets").glob("*")) == sorted(p.name for p in (reference / "brackets").glob("*"))
    heads = sorted((out / "heads").glob("*.safetensors"))
    assert len(heads) == N_CELLS
    assert all(p.read_bytes() == (reference / "heads" / p.name).read_bytes() for p in heads)


def _workers(proc) -> list:
    """The pool's worker processes (spawned), not its resource tracker."""
    return [c for c in psutil.Process(proc.pid).children() if "spawn_main" in " ".join(c.cmdline())]


def start_and_kill(out, victim):
    """Start a two-worker panel, and kill -9 its workers or its main process after
    the first finished cell; the number of cells finished then, and stderr."""
    proc = subprocess.Popen(panel_args(out, workers=2), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + FIRST_CELL_WAIT_S
        while not list((out / "cells").glob("*.json")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(POLL_S)
        workers = _workers(proc)
        assert workers, "no worker processes to kill"
        for p in (workers if victim == "workers" else [psutil.Process(proc.pid)]):
            p.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        # orphaned workers notice their parent's death and exit (guard timeout only)
        _, alive = psutil.wait_procs(workers, timeout=60)
        assert not alive, alive
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done = len(list((out / "cells").glob("*.json")))
    assert 1 <= done < N_CELLS                  # killed mid-panel
    return proc.returncode, err, done


def resumes_to_reference(out, reference, done):
    summary = run_panel(out, workers=1)
    assert summary["skipped"] == done and summary["run"] == N_CELLS - done
    rows = table(out)
    assert len(rows) == N_CELLS * len(EPS) and len({r["cell_id"] for r in rows}) == len(rows)
    assert rows == table(reference)
    assert bracket_files(out) == bracket_files(reference)

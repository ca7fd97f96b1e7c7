"""Same input, same brackets (determinism): counted budgets, one seed per tolerance and
pinned threads make the bracket file independent of the machine's load and of the caller's
BLAS/torch thread count. Files are compared by hash, minus the timing fields."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Per-cell provenance fields that measure time, not the search: left out of the comparison.
TIMING_FIELDS = ("seconds",)

#: One search in a fresh interpreter: a fixed random 48 x 48 softmax head (logits with a sink
#: column, as in most MiniLM heads), quick effort, two tolerances, written to argv[1].
SEARCH = """
import sys
import numpy as np
from numeric.search import search_brackets
from numeric.search.export import write_bracket_file
rng = np.random.default_rng(11)
q, k = rng.normal(size=(48, 8)), rng.normal(size=(48, 8))
H = 2.0 * q @ k.T / np.sqrt(8)
H[:, 0] += 2.0
A = np.exp(H - H.max(axis=1, keepdims=True))
A /= A.sum(axis=1, keepdims=True)
out = search_brackets(A, ["1/4", "1/2"], logits=H, effort="quick", seed=5)
write_bracket_file(sys.argv[1], out.cells, out.tensors)
"""


def fingerprint(path: Path) -> dict:
    """SHA-256 of every tensor and the cell records without their timing fields."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        doc = json.loads(f.metadata()["softrank"])
        hashes = {name: hashlib.sha256(f.get_tensor(name).tobytes()).hexdigest() for name in f.keys()}
    for cell in doc["cells"]:
        for key in TIMING_FIELDS:
            cell["provenance"]["search"].pop(key)
    return {"tensors": hashes, "doc": doc}


#: Run the rest of a ``-c`` script on the one CPU named by argv[1] (where the platform can pin).
PIN = """
import os, sys
cpu = sys.argv.pop(1)
if cpu != "-" and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(cpu)})
"""


def one_cpu() -> str:
    """A CPU this process may run on, or ``-`` where processes cannot be pinned."""
    return str(min(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else "-"


def search_file(path: Path, threads: int, cpu: str = "-") -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads)}
    r = subprocess.run([sys.executable, "-c", PIN + SEARCH, cpu, str(path)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return fingerprint(path)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return search_file(tmp_path_factory.mktemp("det") / "ref.safetensors", threads=1)


def test_the_reference_search_is_not_trivial(reference):
    """The comparison has something to compare: rank > 1 witnesses of both sides, and the search's
    tolerances, budgets, seeds and versions recorded in every cell."""
    cells = reference["doc"]["cells"]
    assert len(cells) == 2 and any(c["lower"]["rank"] >= 2 for c in cells)
    assert any(c["upper"]["witness"]["kind"] == "factors" for c in cells)
    for c in cells:
        s = c["provenance"]["search"]
        assert s["effort"] == "quick" and s["seed"] == 5 and s["capped"] is False
        assert {"upper_work", "swap_work", "lp_iterations"} <= set(s["budgets"])
        assert {"lower_safety", "upper_safety"} <= set(s["tolerances"])
        assert s["versions"]["numpy"] == np.__version__
    assert len({c["provenance"]["search"]["cell_seed"] for c in cells}) == 2


def test_same_brackets_while_another_process_loads_the_cpu(reference, tmp_path):
    """The search and a CPU-burning process pinned to the same CPU (where the platform can pin): the
    search runs loaded whatever the rest of the machine, parallel test workers included, is doing."""
    cpu = one_cpu()
    burner = subprocess.Popen([sys.executable, "-c", PIN + "while True: pass", cpu])
    try:
        loaded = search_file(tmp_path / "loaded.safetensors", threads=1, cpu=cpu)
    finally:
        burner.kill()
        burner.wait()
    assert loaded == reference


def test_same_brackets_with_two_blas_and_torch_threads(reference, tmp_path):
    assert search_file(tmp_path / "two.safetensors", threads=2) == reference


def test_the_search_restores_the_callers_thread_counts():
    import torch
    from threadpoolctl import threadpool_info

    from numeric.search import search_brackets

    before_torch = torch.get_num_threads()
    before_blas = [p["num_threads"] for p in threadpool_info()]
    search_brackets(np.full((2, 2), 0.5), [0.5], effort="quick")
    assert torch.get_num_threads() == before_torch
    assert [p["num_threads"] for p in threadpool_info()] == before_blas


def test_concurrent_searches_share_one_pinning_and_restore_it():
    """Two threads inside the pinning (as the panel's Dask threads are): the one that leaves
    first does not unpin the other; the last one out restores the caller's settings."""
    import threading

    import torch

    from numeric.runtime import pinned_threads

    caller = torch.get_num_threads()
    torch.set_num_threads(2)                  # a caller's setting that the pinning must change
    inside, release, seen = threading.Event(), threading.Event(), []

    def first():
        with pinned_threads():
            inside.set()
            release.wait(30)
            seen.append(torch.get_num_threads())

    t = threading.Thread(target=first)
    t.start()
    inside.wait(30)
    with pinned_threads():
        pass                                  # the second search leaves while the first is inside
    release.set()
    t.join(30)
    after = torch.get_num_threads()
    torch.set_num_threads(caller)
    assert seen == [1]
    assert after == 2

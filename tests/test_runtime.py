"""Process state of the float tier (``numeric.runtime``, ``numeric._optional``): nothing changes on
import, the pinning restores what it found, the stop token belongs to its scope, a missing optional
package is one clear error."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from numeric import _optional, runtime
from numeric.search.budget import SafetyCap
from tests.helpers import PACKAGES

ROOT = Path(__file__).resolve().parents[1]

#: Run in a fresh interpreter: snapshot the process state, import every module of every library package
#: but the command lines' ``__main__`` (the heavy libraries first, so that what they do on their own
#: import is not charged to the project), snapshot again; then, as the negative control, change the
#: environment and snapshot once more. Without torch, its thread count is left out of the snapshot.
_PROBE = r"""
import importlib, json, os, pkgutil, signal, sys
import numpy as np, scipy, sklearn, threadpoolctl, flint
try:
    import torch
except ImportError:
    torch = None

def state():
    st1, st2 = os.fstat(1), os.fstat(2)
    return {"env": dict(os.environ), "stdout": [st1.st_dev, st1.st_ino], "stderr": [st2.st_dev, st2.st_ino],
            "torch": None if torch is None else [torch.get_num_threads(), torch.initial_seed(),
                                                 torch.are_deterministic_algorithms_enabled()],
            "sigint": repr(signal.getsignal(signal.SIGINT)),
            "handlers": [repr(signal.getsignal(s)) for s in (signal.SIGTERM, signal.SIGPIPE, signal.SIGHUP)],
            "pools": sorted((i["filepath"], i["num_threads"]) for i in threadpoolctl.threadpool_info()),
            "np_err": np.geterr(), "np_print": repr(np.get_printoptions()), "flint": [flint.ctx.prec, flint.ctx.dps],
            "recursion": sys.getrecursionlimit(), "cwd": os.getcwd()}

before = state()
names = []
for package in sys.argv[1:]:
    module = importlib.import_module(package)
    names += [package] + sorted(m.name for m in pkgutil.walk_packages(module.__path__, package + ".")
                                if not m.name.endswith("__main__"))
for name in names:
    importlib.import_module(name)
def compare(after):
    # pools: only those loaded before the imports (a library loaded by them starts with its own default)
    after["pools"] = [p for p in after["pools"] if p[0] in {q[0] for q in before["pools"]}]
    return sorted(k for k in before if before[k] != after[k])

changed = compare(state())
os.environ["OMP_NUM_THREADS"] = str(int(os.environ.get("OMP_NUM_THREADS", "1")) + 6)
print(json.dumps({"modules": len(names), "changed": changed, "control": compare(state())}))
"""


def test_importing_every_library_module_changes_no_process_state():
    """In a fresh interpreter, every module of every library package (``numeric``, the trusted core, the
    second checker, the front door, ...); the negative control (an environment variable set after the
    imports) is seen."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _PROBE, *PACKAGES], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["modules"] > 150
    assert result["changed"] == []
    assert result["control"] == ["env"]


def test_pinned_threads_restores_nested_and_rejects_another_count(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    with runtime.pinned_threads():
        with runtime.pinned_threads():           # a second user shares the pinning
            assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
        assert torch.get_num_threads() == 1      # the first user still holds it
        with pytest.raises(RuntimeError, match="pinned to 1"):
            with runtime.pinned_threads(2):
                pass
    assert torch.get_num_threads() == before
    assert os.environ["OMP_NUM_THREADS"] == "3" and "MKL_NUM_THREADS" not in os.environ


def test_a_stop_token_belongs_to_its_scope():
    with runtime.stop_scope() as outer:
        cap = SafetyCap()
        with runtime.stop_scope() as inner:
            inner.request()
            assert runtime.stop_requested() and not outer.requested
        assert not runtime.stop_requested() and not cap.expired()
        seen = []
        t = threading.Thread(target=lambda: seen.append(runtime.stop_requested()))
        outer.request()
        t.start()
        t.join()
        assert runtime.stop_requested() and cap.expired() and seen == [False]   # a plain thread has its own context
    assert not runtime.stop_requested() and runtime.current_stop_token() is None
    assert not SafetyCap().expired()             # outside every scope: never fires


def test_a_missing_optional_package_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "highspy", None)        # makes ``import highspy`` fail
    with pytest.raises(_optional.MissingExtra) as info:
        _optional.require("highspy")
    message = str(info.value)
    assert "\n" not in message and message.startswith("highspy is not installed")
    assert message.endswith("install the float extra: pip install -e '.[float]'")
    assert isinstance(info.value, _optional.UserInputError)
    assert _optional.require("torch") is sys.modules["torch"]


def test_sigint_stop_requests_then_aborts_and_restores_the_handler(capsys):
    """First SIGINT: the token is requested and the message printed; second: KeyboardInterrupt; the
    handler found on entry is back after the block."""
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with runtime.sigint_stop("probe: stopping") as token:
            assert signal.getsignal(signal.SIGINT) is not before and runtime.current_stop_token() is token
            signal.raise_signal(signal.SIGINT)
            assert token.requested and "probe: stopping" in capsys.readouterr().err
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before and runtime.current_stop_token() is None


def test_stdout_silenced_and_environment_restore_what_they_found(monkeypatch, capfd):
    os.write(1, b"seen\n")
    with runtime.stdout_silenced():
        os.write(1, b"hidden\n")
    os.write(1, b"seen again\n")
    assert capfd.readouterr().out == "seen\nseen again\n"
    monkeypatch.setenv("SOFTRANK_A", "old")
    monkeypatch.delenv("SOFTRANK_B", raising=False)
    with pytest.raises(ZeroDivisionError), runtime.environment(SOFTRANK_A="1", SOFTRANK_B="2"):
        assert os.environ["SOFTRANK_A"] == "1" and os.environ["SOFTRANK_B"] == "2"
        raise ZeroDivisionError
    assert os.environ["SOFTRANK_A"] == "old" and "SOFTRANK_B" not in os.environ


def test_deterministic_torch_seeds_and_restores():
    """Same seed, same draws (global and yielded generator); torch's generator, threads and kernel setting
    are what they were after the block."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(123)
    state, threads = torch.get_rng_state(), torch.get_num_threads()
    strict = torch.are_deterministic_algorithms_enabled()
    draws = []
    for _ in range(2):
        with runtime.deterministic_torch(7, 1) as gen:
            assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
            draws.append((torch.rand(3).tolist(), torch.rand(3, generator=gen).tolist()))
    assert draws[0] == draws[1]
    assert torch.equal(torch.get_rng_state(), state) and torch.get_num_threads() == threads
    assert torch.are_deterministic_algorithms_enabled() == strict


def test_the_trial_trace_belongs_to_its_block():
    runtime.record_trial(("outside", "svd", 1, 1, 0.0))          # no block: recorded nowhere
    with runtime.trial_trace() as outer:
        runtime.record_trial(("a", "svd", 2, 10, 0.5))
        with runtime.trial_trace() as inner:
            runtime.record_refine("log")
        runtime.record_refine("log2")
    assert outer.trials == [("a", "svd", 2, 10, 0.5)] and outer.refines == ["log2"]
    assert inner.trials == [] and inner.refines == ["log"]

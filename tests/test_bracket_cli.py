"""``python -m numeric bracket``: output, files, exit codes. The real entry point runs in a fresh
interpreter once per kind of run (a table, a JSON run, a usage error, a bad file); the many bad-input
cases call the same ``main`` in-process (a fresh interpreter imports torch: seconds of CPU each)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exact.errors import ExitCode

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    return subprocess.run([sys.executable, "-m", "numeric", "bracket", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def run_in_process(capsys, *args) -> tuple[int, str, str]:
    """``python -m numeric bracket ARGS`` through the module form's own ``main`` (thread pinning
    included): exit status, stdout, stderr."""
    from numeric.__main__ import main

    try:
        rc = main(["bracket", *map(str, args)])
    except SystemExit as exc:                 # argparse exits: the module form does the same
        rc = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return int(rc), out.out, out.err


def twobit(t, s):
    k = lambda u: u * np.eye(2) + (1 - u) * np.ones((2, 2)) / 2
    return np.kron(k(t), k(s))


def test_matrix_table_and_exact_verify(tmp_path):
    np.save(tmp_path / "a.npy", twobit(0.75, 0.5))
    out = tmp_path / "b.safetensors"
    r = run("--matrix", tmp_path / "a.npy", "--eps", "1/4,7/16,0.625", "--out", out)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "L" in lines[1] and "U" in lines[1] and "lower witness" in lines[1]
    assert len(lines) == 6 and all("verified" in ln for ln in lines[2:5])
    # the attacks' outcome in words that match --help: none succeeded (never "attack failed")
    assert lines[5].startswith("attacks at rank L-1: no attack succeeded") and "failed" not in r.stdout
    v = subprocess.run([sys.executable, "-m", "exact", "verify", str(out), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert v.returncode == 0, v.stdout + v.stderr
    doc = json.loads(v.stdout)
    assert doc["all_verified"]
    assert [(c["lower"], c["upper"]) for c in doc["cells"]] == [(4, 4), (3, 3), (2, 2)]


def test_logits_json_from_safetensors(tmp_path, capsys):
    from safetensors.numpy import save_file

    x = np.arange(10.0)
    H = -2.0 * (x[:, None] - x[None, :]) ** 2
    save_file({"logits": H, "other": np.zeros((2, 2))}, str(tmp_path / "h.safetensors"))
    out = tmp_path / "b.safetensors"
    rc, stdout, stderr = run_in_process(capsys, "--logits", tmp_path / "h.safetensors", "--tensor", "logits",
                                        "--eps", "0.1,0.25", "--out", out, "--json")
    assert rc == 0, stderr
    rows = [json.loads(ln) for ln in stdout.splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert {"eps", "lower", "upper", "lower_witness", "upper_witness"} <= set(row)
        assert row["lower"] == row["upper"] == 10 and row["verified"] and row["slack"] is not None
    assert [row["eps"] for row in rows] == ["1/10", "1/4"]


def _bad_inputs(tmp_path):
    from safetensors.numpy import save_file

    good = np.full((3, 3), 1 / 3)
    cases = {}
    np.save(tmp_path / "nonstoch.npy", np.ones((3, 3)))
    cases["nonstoch"] = (["--matrix", tmp_path / "nonstoch.npy", "--eps", "0.1"], "row-stochastic")
    nan = good.copy()
    nan[0, 0] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    cases["nan"] = (["--matrix", tmp_path / "nan.npy", "--eps", "0.1"], "NaN")
    np.save(tmp_path / "3d.npy", np.full((2, 2, 2), 0.5))
    cases["shape"] = (["--matrix", tmp_path / "3d.npy", "--eps", "0.1"], "2-D")
    np.save(tmp_path / "good.npy", good)
    cases["eps0"] = (["--matrix", tmp_path / "good.npy", "--eps", "0"], "outside (0, 1]")
    cases["eps_big"] = (["--matrix", tmp_path / "good.npy", "--eps", "0.1,1.5"], "outside (0, 1]")
    cases["eps_text"] = (["--matrix", tmp_path / "good.npy", "--eps", "abc"], "not a rational")
    cases["eps_zero_den"] = (["--matrix", tmp_path / "good.npy", "--eps", "1/0"], "not a rational")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    cases["pickle"] = (["--matrix", tmp_path / "obj.npy", "--eps", "0.1"], "not a readable .npy")
    cases["missing"] = (["--matrix", tmp_path / "nope.npy", "--eps", "0.1"], "no such file")
    (tmp_path / "junk.safetensors").write_bytes(b"\x00garbage")
    cases["junk"] = (["--matrix", tmp_path / "junk.safetensors", "--eps", "0.1"], "not a readable safetensors")
    save_file({"a": good, "b": good}, str(tmp_path / "two.safetensors"))
    cases["two"] = (["--matrix", tmp_path / "two.safetensors", "--eps", "0.1"], "--tensor")
    np.save(tmp_path / "f32.npy", good.astype(np.float32))
    cases["dtype"] = (["--matrix", tmp_path / "f32.npy", "--eps", "0.1"], "float64")
    cases["eps_repeated"] = (["--matrix", tmp_path / "good.npy", "--eps", "0.25,1/4"], "repeated")
    ok = ["--matrix", tmp_path / "good.npy", "--eps", "0.1"]
    cases["effort"] = ([*ok, "--effort", "fast"], "unknown effort 'fast'")
    cases["budget_name"] = ([*ok, "--budget", "steps=10"], "unknown budget 'steps'")
    cases["budget_zero"] = ([*ok, "--budget", "upper_work=0"], "positive integer")
    cases["budget_negative"] = ([*ok, "--budget", "upper_work=-3"], "positive integer")
    cases["budget_float"] = ([*ok, "--budget", "upper_work=2.5"], "positive integer")
    cases["seed"] = ([*ok, "--seed", "-1"], "non-negative integer")
    return cases


def test_bad_input_one_line_exit_2(tmp_path, capsys):
    for name, (args, message) in _bad_inputs(tmp_path).items():
        rc, out, err = run_in_process(capsys, *args, "--out", tmp_path / f"out_{name}.safetensors")
        assert rc == 2, (name, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, (name, err)
        assert message in lines[0], (name, lines[0])
        assert not (tmp_path / f"out_{name}.safetensors").exists()


def test_bad_input_through_the_real_entry_point(tmp_path):
    """One bad file through ``python -m numeric bracket`` itself: one line, exit 2, nothing written."""
    (tmp_path / "junk.safetensors").write_bytes(b"\x00garbage")
    r = run("--matrix", tmp_path / "junk.safetensors", "--eps", "0.1", "--out", tmp_path / "out.safetensors")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "not a readable safetensors" in r.stderr and not (tmp_path / "out.safetensors").exists()


@pytest.mark.parametrize("args", [[], ["--eps", "0.1"], ["--matrix", "x.npy", "--logits", "y.npy", "--eps", "0.1",
                                                          "--out", "o.safetensors"]])
def test_usage_errors_exit_2(args, capsys):
    rc, _, err = run_in_process(capsys, *args)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err


def test_a_usage_error_through_the_real_entry_point():
    assert run("--eps", "0.1").returncode == 2


def test_effort_seed_and_budgets_are_recorded_in_the_file(tmp_path, capsys):
    """Run provenance: the preset, every budget (with an override), the seed, the search's
    tolerances and the package versions stand in each cell's provenance."""
    from safetensors import safe_open

    np.save(tmp_path / "a.npy", twobit(0.75, 0.5))
    out = tmp_path / "b.safetensors"
    rc, stdout, stderr = run_in_process(capsys, "--matrix", tmp_path / "a.npy", "--eps", "7/16", "--out", out,
                                        "--effort", "quick", "--seed", "42", "--budget", "upper_work=1234", "--json")
    assert rc == 0, stderr
    assert json.loads(stdout)["capped"] is False
    with safe_open(str(out), framework="numpy") as f:
        doc = json.loads(f.metadata()["softrank"])
    s = doc["cells"][0]["provenance"]["search"]
    assert s["effort"] == "quick" and s["seed"] == 42 and isinstance(s["cell_seed"], int)
    assert s["budgets"]["upper_work"] == 1234 and s["budgets"]["swap_work"] > 0
    assert s["tolerances"]["upper_safety"] > 0 and s["capped"] is False
    assert {"numpy", "torch", "python-flint", "highspy"} <= set(s["versions"])


def test_ctrl_c_stops_cleanly_and_writes_what_is_certified(tmp_path, monkeypatch, capsys):
    """The first Ctrl-C (SIGINT) ends every search with the witnesses it has and writes the file
    (every cell in it verified), exit 130: delivered during the first tolerance's lower search,
    it skips the other tolerances; during the first upper search (lower sides run largest
    tolerance first, upper sides smallest first), every tolerance is written, with its upper
    side cut short. A second Ctrl-C aborts without writing."""
    import os
    import signal

    from numeric.search import cli, driver
    from numeric.runtime import stop_requested
    from exact.verify import verify_file

    rng = np.random.default_rng(0)
    H = rng.normal(size=(24, 24))
    np.save(tmp_path / "h.npy", H)
    real, real_lower = driver.search_upper, driver.lower_candidates

    def once(fn):                    # the user presses Ctrl-C once, during the first call of fn
        calls = []

        def interrupted(*a, **kw):
            if not calls:
                os.kill(os.getpid(), signal.SIGINT)
            calls.append(1)
            return fn(*a, **kw)
        return interrupted

    before = signal.getsignal(signal.SIGINT)
    for name, fn, kept in (("lower_candidates", real_lower, ["eps=0.5"]),
                           ("search_upper", real, ["eps=0.1", "eps=0.25", "eps=0.5"])):
        monkeypatch.setattr(driver, name, once(fn))
        out = tmp_path / f"b-{name}.safetensors"
        try:
            rc = cli.main(["--logits", str(tmp_path / "h.npy"), "--eps", "0.1,0.25,0.5", "--out", str(out),
                           "--no-attack", "--json"])
        finally:
            monkeypatch.setattr(driver, name, fn)
        assert not stop_requested()        # the request belonged to that run's stop scope
        err = capsys.readouterr().err
        assert rc == ExitCode.STOPPED and "stopping" in err and f"{len(kept)} of 3 tolerance(s)" in err
        reports = verify_file(out)
        assert [r.id.split("/")[-1] for r in reports] == kept and all(r.verified for r in reports)

    def twice(*a, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        return real(*a, **kw)

    monkeypatch.setattr(driver, "search_upper", twice)
    out2 = tmp_path / "c.safetensors"
    rc = cli.main(["--logits", str(tmp_path / "h.npy"), "--eps", "0.25", "--out", str(out2), "--no-attack"])
    assert rc == ExitCode.STOPPED and not out2.exists() and "aborted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) == before      # the caller's handler is back


def test_long_runs_announce_their_cost(tmp_path, capsys):
    """A run expected to take over a minute says so on stderr before it starts (4096 x 4096 at
    thorough: hours); a small one does not."""
    from numeric.search.cli import _announce

    _announce("thorough", (4096, 4096), 1)
    err = capsys.readouterr().err
    assert "4096 x 4096" in err and "expected cost" in err and "Ctrl-C" in err
    _announce("default", (24, 24), 3)
    assert capsys.readouterr().err == ""


def test_a_re_check_past_the_work_limit_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    """The command re-checks the file it wrote with the raised limit ``OWN_FILE_WORK`` (its own file:
    a 4096 x 4096 target's factors need more than the exact tier's default 2^35 units). Past that
    limit: the file stays written, one line says how to verify it, exit 1, no traceback."""
    from numeric.search import cli

    assert cli.OWN_FILE_WORK > 2**35
    np.save(tmp_path / "m.npy", twobit(0.5, 0.25))
    monkeypatch.setattr(cli, "OWN_FILE_WORK", 1)
    out = tmp_path / "b.safetensors"
    rc = cli.main(["--matrix", str(tmp_path / "m.npy"), "--eps", "1/4", "--out", str(out), "--no-attack"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and out.exists()
    assert len(err) == 1 and "work limit" in err[0] and "python -m exact verify" in err[0] and "--max-work" in err[0]


def test_attack_line_says_what_happened():
    from numeric.search.cli import _attack_line

    assert _attack_line([False, False]).startswith("attacks at rank L-1: no attack succeeded (2 of 2")
    assert _attack_line([None, None]) == "attacks at rank L-1: none run"
    assert "SUCCEEDED" in _attack_line([False, True]) and "soundness bug" in _attack_line([True])

"""Every command line, fed a bad argument and a bad file: one line on stderr, the documented exit
code (``exact.errors.ExitCode``), no traceback.

The ``python -m`` forms run in a fresh interpreter, once per module for the modules that import
torch (their other case, the float-tier commands and the ``softrank`` console dispatcher run
in-process through the same ``main`` the module form calls), so the whole file stays a few seconds
of CPU.

Every parser is an ``exact.errors.OneLineParser``: plain argparse would print its usage block first
(several lines on stderr).
"""
from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crosscheck import _errors as cc_errors
from exact.errors import ExitCode, LimitExceeded, MalformedInput, OneLineParser, UserInputError
from softrank import cli as softrank_cli
from tests.helpers import PACKAGES as LIBRARY

ROOT = Path(__file__).resolve().parents[1]


def _bad_paths(tmp_path: Path) -> dict[str, str]:
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"not a bracket file")
    empty = tmp_path / "empty"
    empty.mkdir()
    return {"garbage": str(garbage), "empty": str(empty), "under_file": str(garbage / "sub")}


def _check(rc: int, err: str, expect: int) -> None:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert rc == expect, (rc, err)


def _run_module(module: str, args: list[str]) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr


# ---- the exit-code scheme itself ----------------------------------------------------------------

def test_exit_codes_are_the_documented_values():
    assert [(c.name, int(c)) for c in ExitCode] == [("OK", 0), ("REFUTED", 1), ("MALFORMED", 2), ("STOPPED", 130)]


def test_crosscheck_constants_agree_with_the_shared_enum():
    """crosscheck restates the codes (it imports nothing from exact): the two must not drift."""
    assert (cc_errors.EXIT_OK, cc_errors.EXIT_REFUTED, cc_errors.EXIT_MALFORMED, cc_errors.EXIT_STOPPED) == (
        ExitCode.OK, ExitCode.REFUTED, ExitCode.MALFORMED, ExitCode.STOPPED)


def test_user_input_errors_share_one_base():
    from numeric.heads.zoo.common import ManifestError, TrainingError
    from softrank import UserInputError as SoftrankUserInputError

    from numeric.panel.report import ReportError
    from numeric.search.cli import InputError
    from numeric.study.data import PanelDisagreement, StudyError
    from oracles.twobit import ExportRefused

    for cls in (MalformedInput, LimitExceeded, SoftrankUserInputError, TrainingError, ManifestError, ReportError,
                InputError, StudyError, ExportRefused):
        assert issubclass(cls, UserInputError) and issubclass(cls, ValueError), cls
    assert not issubclass(ExitCode, UserInputError)          # negative control of the check above
    assert not issubclass(PanelDisagreement, UserInputError)   # a failed integrity check (exit 1), not bad input


#: Classes that may derive from ``ValueError`` directly: the project-wide input base, the exact tier's
#: certificate base, the second checker's own base (it shares no code with exact), and the errors that are
#: not the user's: a run that is not finished (exit 1), a panel that disagrees with its own exact pass
#: (exit 1), a split that would test on a fitting source (a bug).
VALUE_ERROR_BASES = {("exact/errors.py", "UserInputError"), ("exact/errors.py", "CertificateError"),
                     ("crosscheck/_errors.py", "CrosscheckError"), ("numeric/replicate/manifest.py", "RecordRefused"),
                     ("numeric/study/data.py", "PanelDisagreement"), ("numeric/study/transfer.py", "TransferError")}


def _classes_on(base: str, paths, root: Path = ROOT) -> set[tuple[str, str]]:
    """``(file, class)`` of every class in ``paths`` that names ``base`` among its bases."""
    return {(str(p.relative_to(root)), node.name) for p in paths for node in ast.walk(ast.parse(p.read_text()))
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == base for b in node.bases)}


def test_every_input_error_derives_from_the_project_base(tmp_path):
    """No library exception derives from ``ValueError`` directly but the listed ones: an input error of
    any tier is a ``UserInputError`` (one line, exit 2). Negative control: a planted class is seen."""
    paths = [p for pkg in LIBRARY for p in sorted((ROOT / pkg).rglob("*.py"))]
    assert _classes_on("ValueError", paths) == VALUE_ERROR_BASES
    (tmp_path / "m.py").write_text("class BadInput(ValueError):\n    pass\n")
    assert _classes_on("ValueError", [tmp_path / "m.py"], tmp_path) == {("m.py", "BadInput")}


def test_one_soundness_error():
    """One ``SoundnessError`` class: the float tier's and the front door's are ``exact.errors``'."""
    from exact.errors import SoundnessError
    from numeric.search.attack import SoundnessError as SearchSoundnessError
    from softrank import SoundnessError as SoftrankSoundnessError

    assert SearchSoundnessError is SoundnessError is SoftrankSoundnessError
    paths = [p for pkg in LIBRARY for p in sorted((ROOT / pkg).rglob("*.py"))]
    defined = [f for f, name in _classes_on("RuntimeError", paths) if name == "SoundnessError"]
    assert defined == ["exact/errors.py"]


def _exit_constants(paths, root: Path = ROOT) -> list[str]:
    """``file: NAME`` of every module-level assignment to a name ``EXIT_...`` in ``paths``."""
    out = []
    for p in paths:
        for node in ast.parse(p.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            out += [f"{p.relative_to(root)}: {n}" for n in names if n.startswith("EXIT_")]
    return out


def test_no_command_keeps_exit_constants_of_its_own(tmp_path):
    """Every command line returns ``ExitCode`` members: the only ``EXIT_`` constants are the closed pipe's
    status in ``exact.errors`` and the second checker's restatement (it imports nothing from exact).
    Negative control: a planted constant is seen."""
    paths = [p for pkg in (*LIBRARY, "bench") for p in sorted((ROOT / pkg).rglob("*.py"))]
    bad = [x for x in _exit_constants(paths) if not x.startswith("crosscheck/_errors.py: ")
           and x != "exact/errors.py: EXIT_CLOSED_PIPE"]
    assert not bad, bad
    (tmp_path / "m.py").write_text("EXIT_WORKER_DIED = 3\n")
    assert _exit_constants([tmp_path / "m.py"], tmp_path) == ["m.py: EXIT_WORKER_DIED"]


def test_one_line_parser_folds_the_usage_error_into_one_line(capsys):
    parser = OneLineParser(prog="prog")
    parser.add_argument("--n", type=int, required=True)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--n", "x"])
    assert exc.value.code == ExitCode.MALFORMED
    assert capsys.readouterr().err.splitlines() == ["prog: error: argument --n: invalid int value: 'x'"]


def test_console_script_is_declared():
    tomllib = pytest.importorskip("tomllib")             # Python >= 3.11
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert doc["project"]["scripts"]["softrank"] == "softrank.cli:run"
    assert set(softrank_cli.COMMANDS) == {"verify", "bracket", "panel", "report", "study", "replicate", "twobit",
                                          "proofs", "crosscheck"}


# ---- python -m forms, fresh interpreters -------------------------------------------------------

MODULE_CASES = [
    ("exact", "arg", ["verify", "--no-such-option", "x"]),
    ("exact", "file", ["verify", "{garbage}"]),
    ("crosscheck", "arg", ["--no-such-option", "x"]),
    ("crosscheck", "file", ["{garbage}"]),
    ("proofs_checks", "arg", ["--no-such-option"]),
    ("proofs_checks", "file", ["--only", "A.1", "--export", "{under_file}"]),
    ("oracles.twobit", "arg", ["--no-such-option"]),
    ("oracles.twobit", "file", ["--t", "1/2", "--s", "1/2", "--eps", "1/4", "--export", "{under_file}/x.safetensors"]),
    ("numeric.heads.zoo", "arg", ["verify", "--no-such-option", "x"]),
    ("numeric.heads.zoo", "file", ["verify", "{empty}"]),
    ("numeric.heads.zoo.corpus", "arg", ["--no-such-option"]),
    ("numeric", "arg", ["no-such-command"]),
    ("softrank", "arg", ["no-such-command"]),
    ("softrank", "file", ["verify", "{garbage}"]),
]


MODULE_CASES += [
    ("numeric.panel.arms", "arg", ["--no-such-option"]),
    ("numeric.panel.arms", "file", ["--out", "{under_file}"]),
]


def _case_id(case) -> str:
    return case.id if hasattr(case, "id") else f"{case[0]}-{case[1]}"


#: Modules whose fresh interpreter imports torch (seconds of CPU each): one case of each runs in a
#: fresh interpreter (the real entry point), the other in-process through the ``main`` its
#: ``__main__`` calls.
IN_PROCESS = {("numeric.heads.zoo", "file"): "numeric.heads.zoo.train",
              ("numeric.panel.arms", "file"): "numeric.panel.arms",
              ("softrank", "file"): "softrank.cli"}


@pytest.mark.parametrize("module,kind,args", MODULE_CASES, ids=[_case_id(c) for c in MODULE_CASES])
def test_python_m_bad_input(tmp_path, capsys, module, kind, args):
    paths = _bad_paths(tmp_path)
    argv = [a.format(**paths) for a in args]
    if (module, kind) in IN_PROCESS:
        rc, err = _in_process(importlib.import_module(IN_PROCESS[module, kind]).main, argv, capsys)
    else:
        rc, err = _run_module(module, argv)
    _check(rc, err, ExitCode.MALFORMED)


def test_every_module_runs_once_in_a_fresh_interpreter():
    """The in-process cases leave every module at least one case through ``python -m`` itself."""
    fresh = {module for module, kind, _ in MODULE_CASES if (module, kind) not in IN_PROCESS}
    assert fresh == {module for module, _, _ in MODULE_CASES}
    assert set(IN_PROCESS) <= {(module, kind) for module, kind, _ in MODULE_CASES}


def test_softrank_errors_name_the_command(tmp_path, capsys):
    paths = _bad_paths(tmp_path)
    rc, err = _in_process(softrank_cli.main, ["proofs", "--only", "no-such-label"], capsys)
    _check(rc, err, ExitCode.MALFORMED)
    assert err.startswith("softrank proofs: error: unknown label")
    rc, err = _in_process(softrank_cli.main, ["crosscheck", paths["garbage"]], capsys)
    _check(rc, err, ExitCode.MALFORMED)
    assert err.startswith("softrank crosscheck: ")


# ---- the float-tier commands and the dispatcher, in-process -------------------------------------

_FOREIGN = {"bracket": "numeric/search/cli.py", "panel": "numeric/panel/cli.py",
            "report": "numeric/panel/report.py", "study": "numeric/study/cli.py"}

FLOAT_CASES = [
    ("bracket", "file", ["--matrix", "{garbage}", "--eps", "1/4", "--out", "{empty}/out"]),
    ("panel", "file", ["--model", "{garbage}", "--demo", "--out", "{empty}/out"]),
    ("report", "file", ["{empty}"]),
    ("study", "file", ["{empty}"]),
    ("replicate", "file", ["demo", "--check", "{empty}", "--manifest", "{garbage}"]),
] + [(c, "arg", ["--no-such-option"]) for c in _FOREIGN]


def _float_params():
    for command, kind, args in FLOAT_CASES:
        for front in ("numeric", "softrank"):
            yield pytest.param(front, command, args, id=f"{front}-{command}-{kind}")


def _in_process(main, argv, capsys) -> tuple[int, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:                 # argparse exits: the module form does the same
        rc = exc.code if isinstance(exc.code, int) else 1
    return int(rc), capsys.readouterr().err


@pytest.mark.parametrize("front,command,args", list(_float_params()))
def test_float_tier_bad_input(tmp_path, capsys, front, command, args):
    pytest.importorskip("torch")
    from numeric.__main__ import main as numeric_main

    paths = _bad_paths(tmp_path)
    argv = [command, *(a.format(**paths) for a in args)]
    rc, err = _in_process(numeric_main if front == "numeric" else softrank_cli.main, argv, capsys)
    _check(rc, err, ExitCode.MALFORMED)


def test_dispatcher_reports_a_stop_as_130(monkeypatch, capsys):
    """Ctrl-C inside a command: one line naming it, exit 130 (negative control: a normal return
    passes through unchanged)."""
    import exact.cli

    def interrupted(argv, prog="x"):
        raise KeyboardInterrupt

    monkeypatch.setattr(exact.cli, "main", interrupted)
    rc, err = _in_process(softrank_cli.main, ["verify", "f"], capsys)
    assert rc == ExitCode.STOPPED and err.splitlines() == ["softrank verify: error: stopped"]
    monkeypatch.setattr(exact.cli, "main", lambda argv, prog="x": ExitCode.REFUTED)
    assert _in_process(softrank_cli.main, ["verify", "f"], capsys) == (ExitCode.REFUTED, "")


# ---- a closed pipe (``... | head -1``): quiet, the status of a writer killed by SIGPIPE ----------

class _ClosedPipe:
    """A stdout whose reader has gone: every write or flush raises ``BrokenPipeError``."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


def test_closed_pipe_status_is_the_signal_status_everywhere():
    import signal

    from exact.errors import EXIT_CLOSED_PIPE

    assert EXIT_CLOSED_PIPE == 128 + int(getattr(signal, "SIGPIPE", 13)) == cc_errors.EXIT_CLOSED_PIPE
    assert EXIT_CLOSED_PIPE not in tuple(ExitCode)


@pytest.mark.parametrize("entry", ["exact", "crosscheck", "softrank"])
def test_closed_pipe_ends_quietly_in_process(tmp_path, monkeypatch, capsys, entry):
    """The shared entry point (and the second checker's own copy of it) turns a closed stdout into 141 with
    nothing on stderr; negative control: the same run on an open stdout exits with the command's status."""
    from crosscheck._cli import run as crosscheck_run
    from exact.cli import main as exact_main
    from exact.errors import EXIT_CLOSED_PIPE, run_command

    f = tmp_path / "tb.safetensors"
    from oracles.twobit import main as twobit_main
    assert twobit_main(["--t", "1/2", "--s", "1/2", "--eps", "1/4", "--export", str(f)]) == 0
    runs = {"exact": lambda: run_command(lambda: exact_main(["verify", str(f)])),
            "crosscheck": lambda: crosscheck_run([str(f)]),
            "softrank": lambda: run_command(lambda: softrank_cli.main(["verify", str(f)]))}
    capsys.readouterr()
    with pytest.raises(SystemExit) as ok:
        runs[entry]()
    assert ok.value.code == ExitCode.OK
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    with pytest.raises(SystemExit) as closed:
        runs[entry]()
    assert closed.value.code == EXIT_CLOSED_PIPE
    assert capsys.readouterr().err == ""


def test_every_entry_point_goes_through_the_shared_runner():
    """Each ``python -m`` form of the packages and of the benchmarks ends in ``run_command`` (the second
    checker: its own ``run``)."""
    bare = []
    for pkg in (*LIBRARY, "bench"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            text = p.read_text()
            main_block = p.name == "__main__.py" or any(
                isinstance(n, ast.If) and ast.unparse(n.test) == "__name__ == '__main__'" for n in ast.parse(text).body)
            if main_block and "run_command(" not in text and "run()" not in text:
                bare.append(str(p.relative_to(ROOT)))
    assert not bare, bare


@pytest.fixture(scope="module")
def twobit_file(tmp_path_factory):
    from oracles.twobit import main as twobit_main

    f = tmp_path_factory.mktemp("pipe") / "tb.safetensors"
    assert twobit_main(["--t", "1/2", "--s", "1/2", "--eps", "1/4", "--export", str(f)]) == 0
    return str(f)


@pytest.mark.parametrize("module,args", [("exact", ["verify", "{f}"]), ("crosscheck", ["{f}"]),
                                         ("oracles.twobit", ["--t", "1/2", "--s", "1/2", "--eps", "1/4"]),
                                         ("softrank", ["verify", "{f}"])])
def test_closed_pipe_real_entry_point(module, args, twobit_file):
    """A real pipe whose read end is closed before the command writes: no traceback, exit 141."""
    from exact.errors import EXIT_CLOSED_PIPE

    args = [a.format(f=twobit_file) for a in args]
    r, w = os.pipe()
    os.close(r)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env, stdout=w,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert (proc.returncode, proc.stderr) == (EXIT_CLOSED_PIPE, "")


# ---- the study's output directory and its input: links refused or named -------------------------

def test_study_refuses_a_link_at_its_output_directory_before_any_work(tmp_path, capsys):
    """A link planted at DIR/study (the default output) is refused, one line, exit 2, and its target is
    untouched; a link loop given as the panel directory is named as one."""
    pytest.importorskip("sklearn")
    from numeric.study.cli import main

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "study.md").write_text("keep me")
    panel = tmp_path / "panel"
    panel.mkdir()
    (panel / "study").symlink_to(victim)
    rc, err = _in_process(main, [str(panel)], capsys)
    _check(rc, err, ExitCode.MALFORMED)
    assert "symbolic link" in err and sorted(p.name for p in victim.iterdir()) == ["study.md"]
    assert (victim / "study.md").read_text() == "keep me"
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    rc, err = _in_process(main, [str(loop)], capsys)
    _check(rc, err, ExitCode.MALFORMED)
    assert "symbolic link loop" in err

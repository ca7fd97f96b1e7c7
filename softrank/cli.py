"""The ``softrank`` console script: one front door to the project's command lines.

    softrank verify FILE ...        python -m exact verify FILE ...      (the trusted exact tier)
    softrank bracket ...            python -m numeric bracket ...        (search and export brackets)
    softrank panel ...              python -m numeric panel ...          (the learned-head panel)
    softrank report DIR             python -m numeric report DIR         (re-verify a panel, write its report)
    softrank study DIR              python -m numeric study DIR          (the held-out study of a panel)
    softrank replicate NAME ...     python -m numeric replicate NAME ... (rebuild a recorded run, check it)
    softrank twobit ...             python -m oracles.twobit ...         (the two-bit oracle)
    softrank proofs ...             python -m proofs_checks ...          (the appendix checks)
    softrank crosscheck FILE ...    python -m crosscheck FILE ...        (the independent second checker)

Each command is the ``python -m`` form on the right, with its options and output unchanged;
``softrank COMMAND --help`` shows them. Exit status (``exact.errors.ExitCode``): 0 ok, 1 refuted
or disagreeing, 2 malformed input or a bad argument, 130 stopped, 141 when the reader of the
output closed it (``softrank verify FILE | head -1``). Errors the dispatcher reports
itself are one line on stderr, ``softrank COMMAND: error: WHAT``.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = ["COMMANDS", "main"]

#: command -> (module whose ``main(argv)`` runs it, arguments put before the user's).
#: The float-tier commands go through ``numeric.__main__``, which pins threads once per process.
COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "verify": ("exact.cli", ("verify",)),
    "bracket": ("numeric.__main__", ("bracket",)),
    "panel": ("numeric.__main__", ("panel",)),
    "report": ("numeric.__main__", ("report",)),
    "study": ("numeric.__main__", ("study",)),
    "replicate": ("numeric.__main__", ("replicate",)),
    "twobit": ("oracles.twobit", ()),
    "proofs": ("proofs_checks.__main__", ()),
    "crosscheck": ("crosscheck._cli", ()),
}

#: Modules whose ``main(argv, prog)`` names itself after the caller: their messages then read
#: ``softrank COMMAND: ...``. (exact.cli adds its own subcommand name to its prog.)
PROG_AWARE = {"exact.cli": "softrank", "proofs_checks.__main__": "softrank proofs",
              "crosscheck._cli": "softrank crosscheck"}


HELP = ("-h", "--help")


def _errors() -> ModuleType:
    """``exact.errors`` (exit codes, one-line errors), imported on first need: importing it runs the package
    ``exact``, which loads numpy and FLINT, and ``softrank --help`` needs neither."""
    return importlib.import_module("exact.errors")


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``softrank COMMAND ARGS`` to the module of COMMAND; return its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] and args[0] in HELP:
        print(__doc__.strip())
        return 0                         # ExitCode.OK, without importing the tiers
    errors = _errors()
    ExitCode, one_line_error = errors.ExitCode, errors.one_line_error
    if not args:
        return int(one_line_error("softrank", "a command is required; see softrank --help"))
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        return int(one_line_error("softrank",
                                  f"unknown command {command[:40]!a}; commands: {', '.join(COMMANDS)}"))
    module_name, prefix = COMMANDS[command]
    prog = f"softrank {command}"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:           # the float tier without its extra installed
        return int(one_line_error(prog, f"{exc}; install the float extra: pip install 'softrank-verify[float]'"))
    try:
        if module_name in PROG_AWARE:
            return int(module.main([*prefix, *rest], prog=PROG_AWARE[module_name]))
        return int(module.main([*prefix, *rest]))
    except KeyboardInterrupt:
        print(f"{prog}: error: stopped", file=sys.stderr)
        return int(ExitCode.STOPPED)
    except errors.UserInputError as exc:  # a bad input that escaped the command's own reporting
        return int(one_line_error(prog, exc))
    except BrokenPipeError:              # output piped into `head`: not an error of the command
        return int(errors.closed_pipe())


def run() -> None:
    """Entry point of the console script (``exact.errors.run_command``: a closed pipe ends quietly).

    ``softrank --help`` is answered before the exact tier is imported (the same closed-pipe rule)."""
    if sys.argv[1:2] and sys.argv[1] in HELP:
        try:
            code = main()
            sys.stdout.flush()
        except BrokenPipeError:
            code = int(_errors().closed_pipe())
        raise SystemExit(code)
    _errors().run_command(main)

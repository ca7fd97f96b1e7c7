"""The exact tier's exceptions and the exit codes every command line of the project shares.

A ``MalformedInput`` means the file or the request cannot be read as a
bracket claim at all (exit 2). A false claim is never an exception: it is a
refuted ``Verdict`` (exit 1).

``UserInputError`` is the base of everything a user can cause (a bad file, a
bad argument, a missing model), in every tier: ``MalformedInput`` here, every
input error of the float tier and ``softrank.UserInputError`` derive from it.
``SoundnessError`` is the one class of a claim the float tier made that the
exact tier refutes, or a verified lower bound beaten by an attack (exit 1):
a bug, never the user's fault; ``numeric.search`` and ``softrank`` raise it. ``ExitCode`` is the one exit-code
scheme of the CLIs (``python -m exact``, ``python -m proofs_checks``, the
``softrank`` console script); ``crosscheck`` stays independent of this module
and keeps constants of the same values (a test asserts they agree).

``run_command`` is the entry point of every command line (each ``python -m``
form and the console script): it exits with the command's status, and when
the reader of stdout has gone (``... | head -1``) it ends quietly with
``EXIT_CLOSED_PIPE``, the status a shell reports for a writer killed by
SIGPIPE, never 1 (which means "refuted") and never a traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from enum import IntEnum
from typing import NoReturn

__all__ = ["ExitCode", "EXIT_CLOSED_PIPE", "OneLineParser", "one_line_error", "closed_pipe", "run_command",
           "UserInputError", "SoundnessError", "CertificateError", "MalformedInput",
           "LimitExceeded"]


class ExitCode(IntEnum):
    """Exit status of every command line of the project.

    >>> [int(c) for c in ExitCode]
    [0, 1, 2, 130]
    """

    OK = 0            #: every claim verified, every check passed
    REFUTED = 1       #: a claim refuted, a check failed, or two checkers disagree
    MALFORMED = 2     #: bad input: an unreadable or malformed file, a bad argument
    STOPPED = 130     #: interrupted (SIGINT), as a shell reports it (128 + 2)


#: The exit status of a command whose stdout was closed by its reader: 128 + SIGPIPE (13), what a shell
#: reports for a writer that the signal ended (Python ignores SIGPIPE and sees ``BrokenPipeError``).
EXIT_CLOSED_PIPE = 141


def closed_pipe() -> int:
    """Point stdout at the null device (the interpreter's last flush then has nowhere to fail) and return
    ``EXIT_CLOSED_PIPE``. A stdout that is not a file descriptor (a test's capture) is left as it is."""
    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
    except (AttributeError, OSError, ValueError):
        return EXIT_CLOSED_PIPE
    try:
        os.dup2(null, fd)
    except OSError:
        pass
    finally:
        os.close(null)
    return EXIT_CLOSED_PIPE


def run_command(main: Callable[[], object]) -> NoReturn:
    """Run a command line's ``main`` and exit with its status (``SystemExit`` from inside included);
    stdout is flushed here, so a closed pipe at any point ends quietly with ``EXIT_CLOSED_PIPE``."""
    try:
        try:
            code = main()
        except SystemExit as exc:
            code = exc.code
        sys.stdout.flush()
    except BrokenPipeError:
        code = closed_pipe()
    raise SystemExit(code)


class OneLineParser(argparse.ArgumentParser):
    """``argparse`` whose usage errors are one line, ``PROG: error: WHAT``, and exit ``MALFORMED``
    (plain argparse prints the usage block first: two lines or more on stderr)."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.MALFORMED, f"{self.prog}: error: {' '.join(message.split())}\n")


def one_line_error(prog: str, what: object) -> ExitCode:
    """Print ``PROG: error: WHAT`` (whitespace folded into one line) on stderr; return ``MALFORMED``."""
    print(f"{prog}: error: {' '.join(str(what).split())}", file=sys.stderr)
    return ExitCode.MALFORMED


class UserInputError(ValueError):
    """Input the user can fix (a file, an argument, a model name): reported as one line, exit 2."""


class SoundnessError(RuntimeError):
    """The exact tier refuted a claim the float tier had made, or an attack beat a verified lower bound:
    a soundness bug (exit 1), reported with the cell it concerns."""


class CertificateError(ValueError):
    """Base class of every error the exact tier raises on purpose."""


class MalformedInput(CertificateError, UserInputError):
    """Input that does not follow the bracket format or the exact-number grammar."""


class LimitExceeded(MalformedInput):
    """Input beyond a documented resource limit (``exact.limits``)."""

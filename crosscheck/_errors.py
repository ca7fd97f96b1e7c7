"""The second checker's exceptions (its own; it shares nothing with ``exact``).

``Malformed`` means a file cannot be read as a bracket claim at all (exit 2);
``LimitReached`` is a ``Malformed`` past a resource limit (``crosscheck._limits``).
A false claim is never an exception: it is a refuted side.
"""

__all__ = ["CrosscheckError", "Malformed", "LimitReached", "EXIT_OK", "EXIT_REFUTED", "EXIT_MALFORMED",
           "EXIT_STOPPED", "EXIT_CLOSED_PIPE"]

#: Exit codes: the values of ``exact.errors.ExitCode``, restated here so that the second checker
#: imports nothing from the exact tier (``tests/test_cli_errors.py`` asserts they agree).
EXIT_OK, EXIT_REFUTED, EXIT_MALFORMED, EXIT_STOPPED = 0, 1, 2, 130
#: A closed stdout (``python -m crosscheck FILE | head -1``): 128 + SIGPIPE, as ``exact.errors.EXIT_CLOSED_PIPE``.
EXIT_CLOSED_PIPE = 141


class CrosscheckError(ValueError):
    """Base class of every error the second checker raises on purpose."""


class Malformed(CrosscheckError):
    """A file that does not follow docs/bracket-format.md (or cannot be read)."""


class LimitReached(Malformed):
    """A file beyond a resource limit: refused, never left running."""

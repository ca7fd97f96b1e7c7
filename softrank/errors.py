"""The errors of the Python front door: one line each, naming the problem.

``UserInputError`` is everything a caller can cause (a bad matrix, a bad
tolerance, a model that returns no attention, a malformed bracket file);
``SoundnessError`` is a claim the exact tier refutes after the float tier
made it (a bug, never the caller's fault): the project's one class,
``exact.errors.SoundnessError``, re-exported here. ``SoftrankError`` is the base of
the errors this package defines (its ``UserInputError`` and the stops of ``bracket``).
"""
from __future__ import annotations

from exact.errors import ExitCode, SoundnessError
from exact.errors import UserInputError as _BaseUserInputError

__all__ = ["SoftrankError", "UserInputError", "SoundnessError", "ExitCode"]


class SoftrankError(Exception):
    """Base class of the errors ``softrank`` raises on purpose."""


class UserInputError(SoftrankError, _BaseUserInputError):
    """Input the caller can fix: the message is one line that names the problem. It is an
    ``exact.errors.UserInputError`` (the project-wide base), so one ``except`` catches both tiers'.

    >>> str(UserInputError("eps 3 is outside (0, 1]"))
    'eps 3 is outside (0, 1]'
    """

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


"""The float tier's optional heavy packages, imported on demand.

torch, transformers, tokenizers and HiGHS (``highspy``) come with the ``float`` extra. The
modules that need them ask this module for them inside the functions that use them, so that the
exact tier, the study (which never loads torch) and an install without the extra import cleanly;
everything else is imported at module level. A missing package is a ``MissingExtra`` (a
``UserInputError``: one line, exit 2) that says how to install it.

>>> require("numpy")
Traceback (most recent call last):
ValueError: 'numpy' is not an optional package of the float tier (torch, transformers, tokenizers, highspy)
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

from exact.errors import UserInputError

__all__ = ["OPTIONAL", "INSTALL_HINT", "MissingExtra", "require", "loaded"]

#: The packages this module hands out, each from the ``float`` extra.
OPTIONAL = ("torch", "transformers", "tokenizers", "highspy")
INSTALL_HINT = "install the float extra: pip install -e '.[float]'"


class MissingExtra(UserInputError):
    """An optional package of the float tier is not installed (exit 2)."""


def require(name: str) -> ModuleType:
    """The optional package ``name`` (one of ``OPTIONAL``), imported now if it is not yet.

    Raises ``MissingExtra`` (one line: the package and the install command) when it is missing."""
    if name not in OPTIONAL:
        raise ValueError(f"{name!r} is not an optional package of the float tier ({', '.join(OPTIONAL)})")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingExtra(f"{name} is not installed ({exc.msg}): {INSTALL_HINT}") from None


def loaded(name: str) -> ModuleType | None:
    """The optional package ``name`` if something already imported it, else None (imports nothing).

    >>> loaded("highspy") is None or loaded("highspy").__name__ == "highspy"
    True
    """
    if name not in OPTIONAL:
        raise ValueError(f"{name!r} is not an optional package of the float tier ({', '.join(OPTIONAL)})")
    return sys.modules.get(name)

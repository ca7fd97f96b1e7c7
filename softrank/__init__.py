"""softrank: certified eps-ranks of softmax attention matrices, from Python.

The public face of softrank-verify (``docs/api.md``)::

    import softrank
    b = softrank.bracket(A, eps=(0.1, 0.25, 0.5))     # A: (n, n) or (..., n, n), numpy or torch
    print(b.table())                                  # L <= r_eps(A) <= U, verified by the exact tier
    b.save("brackets.safetensors")                    # the standard bracket file
    softrank.verify("brackets.safetensors")           # the exact tier as a function

``attention`` captures heads of a ``transformers`` model object the way the
panel does; ``twobit`` and ``proofs`` run the exact oracle and the paper's
appendix checks. Errors a caller can cause are ``UserInputError`` (one line).

``import softrank`` itself loads nothing of the tiers: each name below is imported from
its module on first use (a module ``__getattr__``), so the float tier's heavy packages
are paid for by the call that needs them, not by the import (the benchmark suite ``bench/suites/import_time.py``).
"""
from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:                       # the names as the type checker sees them; at run time, __getattr__
    from numeric.heads.models import minilm_path
    from softrank.api import Proofs, TwoBit, bracket, proofs, twobit, verify
    from softrank.attention import Attention, attention
    from softrank.errors import SoftrankError, SoundnessError, UserInputError
    from softrank.inputs import ROW_SUM_ULPS, row_tolerance
    from softrank.records import Bracket, Brackets, Verdicts

#: public name -> the module that defines it, imported on first access
_LAZY: dict[str, str] = {
    **dict.fromkeys(("bracket", "verify", "twobit", "proofs", "TwoBit", "Proofs"), "softrank.api"),
    **dict.fromkeys(("attention", "Attention"), "softrank.attention"),
    **dict.fromkeys(("UserInputError", "SoundnessError", "SoftrankError"), "softrank.errors"),
    **dict.fromkeys(("row_tolerance", "ROW_SUM_ULPS"), "softrank.inputs"),
    **dict.fromkeys(("Brackets", "Bracket", "Verdicts"), "softrank.records"),
    "minilm_path": "numeric.heads.models",
}

#: the package's modules, reachable as attributes (``softrank.inputs.as_matrices``) once touched
#: (``attention`` is the function; its module is ``sys.modules["softrank.attention"]``, as with the eager package)
_SUBMODULES = ("api", "errors", "inputs", "records")

__all__ = ["bracket", "verify", "attention", "twobit", "proofs", "Brackets", "Bracket", "Verdicts", "Attention",
           "TwoBit", "Proofs", "UserInputError", "SoundnessError", "SoftrankError", "row_tolerance",
           "ROW_SUM_ULPS", "minilm_path"]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module now (and kept, so the next access is plain)."""
    if name in _SUBMODULES:             # ``softrank.api.front``, as when the package imported them eagerly
        return importlib.import_module(f"softrank.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'softrank' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _FrontDoor(types.ModuleType):
    """The package's module type: the function ``softrank.attention`` keeps its name when the submodule of the
    same name is imported (the import system binds a submodule to its parent's attribute; the eager package
    rebound the name to the function right after)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _FrontDoor

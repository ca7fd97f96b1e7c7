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
"""
from numeric.heads.models import minilm_path
from softrank.api import Proofs, TwoBit, bracket, proofs, twobit, verify
from softrank.attention import Attention, attention
from softrank.errors import SoftrankError, SoundnessError, UserInputError
from softrank.inputs import ROW_SUM_ULPS, row_tolerance
from softrank.records import Bracket, Brackets, Verdicts

__all__ = ["bracket", "verify", "attention", "twobit", "proofs", "Brackets", "Bracket", "Verdicts", "Attention",
           "TwoBit", "Proofs", "UserInputError", "SoundnessError", "SoftrankError", "row_tolerance",
           "ROW_SUM_ULPS", "minilm_path"]

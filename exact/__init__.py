"""softrank-verify's trusted core: exact re-verification of rank brackets.

Reads bracket files (``docs/bracket-format.md``) and re-derives every claim
with FLINT integers and rationals and arb enclosures. It imports no torch,
transformers, scipy or ``numeric``.
"""
from .errors import CertificateError, LimitExceeded, MalformedInput
from .matrix import ExactMatrix
from .verdict import Status, Verdict

__all__ = ["CertificateError", "LimitExceeded", "MalformedInput", "ExactMatrix", "Status", "Verdict"]

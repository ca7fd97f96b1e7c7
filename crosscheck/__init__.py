"""A second, independent checker of bracket files (docs/crosscheck.md; paper L.2 "independently re-derived").

It re-derives both sides of every bracket of a bracket file
(docs/bracket-format.md) and shares no code with the exact tier ``exact``:
its own reader of the format, exact arithmetic in Python integers and
``fractions.Fraction`` (integer matrices over a power-of-two denominator,
products on packed integers, rows chosen by exact int64 bounds), its own
norm and defect computations, and enclosures of the softmax slack's
exponentials from Taylor's theorem, evaluated in integer fixed point and with
mpmath's interval context, using only the operations mpmath documents as
correctly rounded. It imports neither ``exact``, ``numeric``, flint, torch
nor scipy; numpy does only exact operations (float decomposition, bounded
int64 arithmetic) and gives the untrusted eigenvector hint of the Frobenius
tail. So the two checkers rest on independent arithmetic.

Front door::

    results = crosscheck.verify_file(path)            # tuple of CellResult
    a = crosscheck.agreement(path, exact_verdicts)    # Agreement with the exact tier
    python -m crosscheck FILE... [--json] [--compare EXACT_JSON]

Exit status of the command: 0 every side of every cell verified; 1 a side
not verified, or a disagreement with ``--compare``; 2 a file refused.
"""
from ._agree import Agreement, agree_all, agreement, markdown, summary
from ._errors import CrosscheckError, LimitReached, Malformed
from ._limits import MAX_WORK
from ._reader import read
from ._results import CellResult, SideResult, Status
from ._verify import judge, verify_file

__all__ = ["verify_file", "judge", "read", "agreement", "agree_all", "summary", "markdown", "Agreement", "CellResult",
           "SideResult", "Status", "CrosscheckError", "Malformed", "LimitReached", "MAX_WORK"]

"""Searching witnesses: matrix -> certified bracket cells -> bracket file.

Owns: the driver (``search_brackets``), upper refinement, the lower
families, the LP helpers, attacks, slack, export and the ``bracket`` CLI.

May import: numpy, torch, scipy/HiGHS, ``exact`` and ``numeric.heads`` (for
the float softmax). Never ``numeric.geometry`` or ``numeric.panel``.
"""
from numeric.search.driver import (BracketResult, SearchOutput, parse_eps, search_brackets,  # noqa: F401
                                   validate_matrix)

__all__ = ["search_brackets", "SearchOutput", "BracketResult", "validate_matrix", "parse_eps"]

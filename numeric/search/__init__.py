"""Searching witnesses: matrix -> certified bracket cells -> bracket file.

Owns: the driver (``search_brackets``), upper refinement, one module per
lower family, the LP helpers, attacks, slack, effort budgets, export and
the ``bracket`` CLI.

May import: numpy, torch, scipy/HiGHS, ``exact`` and ``numeric.heads`` (for
the float softmax). Never ``numeric.geometry`` or ``numeric.panel``.
"""
from numeric.search.driver import BracketResult, SearchOutput, search_brackets
from numeric.search.inputs import parse_eps, parse_eps_list, validate_matrix

__all__ = ["search_brackets", "SearchOutput", "BracketResult", "validate_matrix", "parse_eps", "parse_eps_list"]

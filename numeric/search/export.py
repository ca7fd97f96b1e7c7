"""Write bracket files: the float tier's name for ``fileio.bracketwriter``.

The format (``FORMAT``, ``VERSION``, the reader) has one home, the trusted
core's ``exact.bracketfile``; the writer is ``fileio.bracketwriter``.
"""
from fileio.bracketwriter import FORMAT, VERSION, rational_string, write_bracket_file

__all__ = ["FORMAT", "VERSION", "write_bracket_file", "rational_string"]

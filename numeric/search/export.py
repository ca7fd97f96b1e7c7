"""Write bracket files: the float tier's name for ``numeric.bracketwriter``.

The format (``FORMAT``, ``VERSION``, the reader) has one home, the trusted
core's ``exact.bracketfile``; the writer is ``numeric.bracketwriter``.
"""
from numeric.bracketwriter import FORMAT, VERSION, rational_string, write_bracket_file

__all__ = ["FORMAT", "VERSION", "write_bracket_file", "rational_string"]

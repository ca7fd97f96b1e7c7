"""Write bracket files: a one-release re-export of ``exact.bracketfile``.

The bracket format (``FORMAT``, ``VERSION``, the reader and the writer) has
one home, the trusted core's ``exact.bracketfile``; import it from there.
These names stay importable from here for one release.
"""
from exact.bracketfile import FORMAT, VERSION, rational_string, write_bracket_file

__all__ = ["FORMAT", "VERSION", "write_bracket_file", "rational_string"]

"""The CLI's printing helpers at their boundaries (issue 14, items 4 and 6).

Found by the mutation run (``bench/mutation.py --only cli.py``): each test
pins a boundary that no other test reached.
"""
from __future__ import annotations

from exact.cli import _clean


def test_clean_keeps_printable_ascii_and_escapes_everything_else():
    """``_clean``: every printable ASCII character (space to tilde, the backslash and quotes included)
    is kept as it is; every other character becomes a printable escape."""
    printable = "".join(map(chr, range(0x20, 0x7F)))
    assert _clean(printable) == printable
    for c in ["\x00", "\n", "\r", "\x1b", "\x1f", "\x7f", "\x80", "\x9b", "\u2028", "\ud800", "\U0001f600"]:
        out = _clean(f"a{c}b")
        assert out != f"a{c}b" and out.startswith("a") and out.endswith("b")
        assert all(" " <= ch <= "~" for ch in out), (c, out)

"""``exact.bracketfile.show``: values from a file, shown whole up to the limit, marked when cut (a mutation-run survivor)."""
from __future__ import annotations

import numpy as np

from exact.bracketfile import show


def test_show_marks_a_cut_and_only_a_cut():
    assert show("a" * 40, 40) == ascii("a" * 40) and show("a" * 41, 40) == ascii("a" * 40) + "..."
    assert show("ab", 40) == "'ab'" and show("", 40) == "''"
    assert show([1] * 3, 9) == "[1, 1, 1]" and show([1] * 4, 9) == "[1, 1, 1,..."
    assert show(7, 9) == "7"


def test_a_short_read_is_a_truncated_file():
    """``_read_exactly`` refuses fewer bytes than asked (a file that shrinks while it is read)."""
    import io

    import pytest

    from exact.bracketfile import _read_exactly
    from exact.errors import MalformedInput

    assert _read_exactly(io.BytesIO(b"abcdefgh"), 8, "x") == b"abcdefgh"
    with pytest.raises(MalformedInput, match="truncated file: x"):
        _read_exactly(io.BytesIO(b"abc"), 8, "x")


def test_an_eight_byte_file_has_a_header_length(tmp_path):
    """Eight bytes hold the header length (0 here): the file is refused for its empty header, not
    for a missing length; seven bytes are refused for the missing length."""
    import pytest

    from exact.bracketfile import read_bracket_file
    from exact.errors import MalformedInput

    p = tmp_path / "eight.safetensors"
    p.write_bytes((0).to_bytes(8, "little"))
    with pytest.raises(MalformedInput) as err:
        read_bracket_file(p)
    assert "no header length" not in str(err.value)
    p.write_bytes(b"\0" * 7)
    with pytest.raises(MalformedInput, match="no header length"):
        read_bracket_file(p)


def test_only_f64_tensors_whatever_their_byte_count(tmp_path):
    """A tensor declared F32 (or BF16, BOOL: names that sort before "F64") whose byte range has the
    size of a float64 tensor is refused for its dtype, not read as float64."""
    import pytest

    from exact.bracketfile import read_bracket_file
    from exact.errors import MalformedInput
    from tests.bracket_files import bracket_bytes

    for dtype in ("F32", "BF16", "BOOL", "I64", "f64"):
        blob = bracket_bytes(tensors={}, tensor_entries={
            "A": {"dtype": dtype, "shape": [2, 2], "data_offsets": [0, 32]}})
        i = int.from_bytes(blob[:8], "little")
        p = tmp_path / f"{dtype}.safetensors"
        p.write_bytes(blob + np.full(4, 0.25).tobytes())
        assert i + 8 + 32 == p.stat().st_size
        with pytest.raises(MalformedInput, match="dtype"):
            read_bracket_file(p)


def _layout_error(tmp_path, entry: dict, data: bytes) -> str:
    """The one-line refusal of a file whose only tensor has the header entry ``entry``."""
    import pytest

    from exact.bracketfile import read_bracket_file
    from exact.errors import MalformedInput
    from tests.bracket_files import bracket_bytes

    p = tmp_path / "t.safetensors"
    p.write_bytes(bracket_bytes(tensors={}, tensor_entries={"A": {"dtype": "F64", **entry}}) + data)
    with pytest.raises(MalformedInput) as err:
        read_bracket_file(p)
    return str(err.value)


def test_each_layout_check_names_its_own_fault(tmp_path):
    """Shapes, offsets and byte counts: each fault is refused by its own check (so a weakened check
    cannot hand the file to a later one, or to a crash)."""
    z = b"\0" * 32
    assert "negative side" in _layout_error(tmp_path, {"shape": [-1, 2], "data_offsets": [0, 32]}, z)
    assert "negative side" in _layout_error(tmp_path, {"shape": [2, -4], "data_offsets": [0, 32]}, z)
    assert "negative" not in _layout_error(tmp_path, {"shape": [0, 2], "data_offsets": [0, 0]}, b"")
    assert "negative" not in _layout_error(tmp_path, {"shape": [2, 0], "data_offsets": [0, 0]}, b"")
    for offsets in ([0, 16, 32], [32], []):
        assert "data_offsets must be [begin, end]" in _layout_error(
            tmp_path, {"shape": [2, 2], "data_offsets": offsets}, z)
    assert "0 data bytes for shape" in _layout_error(tmp_path, {"shape": [2, 2], "data_offsets": [32, 32]}, z)
    assert "0 data bytes for shape" in _layout_error(tmp_path, {"shape": [2, 2], "data_offsets": [0, 0]}, z)
    assert "40 data bytes for shape" in _layout_error(tmp_path, {"shape": [2, 2], "data_offsets": [0, 40]},
                                                      b"\0" * 40)
    assert "24 data bytes for shape" in _layout_error(tmp_path, {"shape": [2, 2], "data_offsets": [0, 24]},
                                                      b"\0" * 24)


def test_integer_witness_fields_are_nonnegative_and_zero_is_legal(tmp_path):
    """A Frobenius witness's k: 0 is read (the claim is then judged, not refused as malformed),
    -1 is refused as malformed."""
    import pytest

    from exact.bracketfile import read_bracket_file
    from exact.errors import MalformedInput
    from tests.bracket_files import base_cell, bracket_bytes, doc

    def cell(k):
        return base_cell(lower={"rank": 1, "witness": {"kind": "frobenius", "k": k}})

    p = tmp_path / "k.safetensors"
    p.write_bytes(bracket_bytes(document=doc([cell(0)])))
    assert read_bracket_file(p).cells[0].lower.fields["k"] == 0
    p.write_bytes(bracket_bytes(document=doc([cell(-1)])))
    with pytest.raises(MalformedInput, match="must be >= 0"):
        read_bracket_file(p)


def test_format_and_version_are_exact(tmp_path):
    """The document's format must be exactly "softrank-brackets" and its version exactly 1: names
    and numbers on either side of them are refused (an older version 0 as much as a newer 2)."""
    import pytest

    from exact.bracketfile import read_bracket_file
    from exact.errors import MalformedInput
    from tests.bracket_files import bracket_bytes, doc

    p = tmp_path / "d.safetensors"
    for over, needle in (({"format": "softrank-bracket"}, "format"), ({"format": "a"}, "format"),
                         ({"format": "zz"}, "format"), ({"version": 0}, "version"), ({"version": 2}, "version")):
        p.write_bytes(bracket_bytes(document=doc(**over)))
        with pytest.raises(MalformedInput, match=needle):
            read_bracket_file(p)
    p.write_bytes(bracket_bytes(document=doc()))
    assert len(read_bracket_file(p).cells) == 1

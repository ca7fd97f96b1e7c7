"""bench/contracts_identity.py: identical outputs read as identical, and each kind of difference is found."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.contracts_identity import main

EXAMPLE = Path(__file__).parent / "data" / "example.safetensors"


def _rewrite_doc(path: Path, change) -> None:
    """Rewrite a bracket file's claim document after ``change(doc)`` (same tensors and data)."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    doc = json.loads(header["__metadata__"]["softrank"])
    change(doc)
    header["__metadata__"]["softrank"] = json.dumps(doc)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(len(head).to_bytes(8, "little") + head + raw[8 + n:])


def test_bracket_mode(tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    shutil.copy(EXAMPLE, a)
    shutil.copy(EXAMPLE, b)
    assert main(["bracket", str(a), str(b)]) == 0
    _rewrite_doc(b, lambda d: d["cells"][0]["provenance"].update(search={"seconds": 9.5, "code": {"commit": "x"}}))
    _rewrite_doc(a, lambda d: d["cells"][0]["provenance"].update(search={"seconds": 1.0, "code": {"commit": "y"}}))
    assert main(["bracket", str(a), str(b)]) == 0          # wall time and the checkout are masked
    _rewrite_doc(b, lambda d: d["cells"][0]["provenance"]["search"].update(effort="quick"))
    assert main(["bracket", str(a), str(b)]) == 1          # any other field is not
    shutil.copy(EXAMPLE, a)
    shutil.copy(EXAMPLE, b)
    raw = bytearray(b.read_bytes())
    raw[-1] ^= 1                                           # one byte of the tensor data
    b.write_bytes(bytes(raw))
    assert main(["bracket", str(a), str(b)]) == 1
    assert main(["brackets", str(a), str(b)]) == 2


def _panel(root: Path, search: dict) -> Path:
    for sub in ("brackets", "heads", "cells"):
        (root / sub).mkdir(parents=True)
    shutil.copy(EXAMPLE, root / "brackets" / "c.safetensors")
    (root / "cells.csv").write_text("cell_id,seconds\nc,1.5\n")
    (root / "cells" / "c.json").write_text(json.dumps({"rows": [], "search": search}))
    return root


def test_panel_mode_compares_the_records_search_provenance(tmp_path):
    search = {"effort": "quick", "stopped": False, "capped": [], "code": {"commit": "a", "dirty": False}}
    a = _panel(tmp_path / "a", search)
    b = _panel(tmp_path / "b", {**search, "code": {"commit": "b", "dirty": True}})
    assert main(["panel", str(a), str(b)]) == 0
    c = _panel(tmp_path / "c", {**search, "stopped": True})
    assert main(["panel", str(a), str(c)]) == 1

"""Byte identity of a refactor's outputs: two panel directories' bracket and head files, or two study.json files.

A refactor (the typed contracts: ``exact.cellspec.CellSpec``, ``numeric.panel.schema.PanelRow``) must not
change what the tools write. Run the same command with the code before (``PYTHONPATH=OLD``) and after, into
two directories, then:

    python -m bench.contracts_identity panel DIR_BEFORE DIR_AFTER
    python -m bench.contracts_identity bracket FILE_BEFORE FILE_AFTER
    python -m bench.contracts_identity study STUDY_BEFORE/study.json STUDY_AFTER/study.json

``panel``: every ``brackets/*.safetensors`` and ``heads/*.safetensors`` of both directories. Head files are
compared whole. A bracket file's tensor data section and its tensor table are compared byte for byte, and
so is its claim document, except the fields that measure wall time or name the checkout (a cell's
``provenance.search.seconds`` and ``provenance.search.code.commit`` / ``dirty``): those are set to null on
both sides, the document written again with the writer's own ``json.dumps`` settings, and the two texts
compared. The script first checks that writing the unmasked document again gives back its exact bytes, so
the masked comparison is a byte comparison of everything else.

The table ``cells.csv`` is compared too, cell by cell, but its columns that measure wall time
(:data:`TABLE_VOLATILE`), and so is the search provenance of each cell record (``cells/*.json``, its
``search`` object: the run's provenance, whether it stopped, the capped cells) but ``code.commit`` /
``dirty``.

``bracket``: two bracket files of the same ``python -m numeric bracket`` command, compared as the panel's.

``study``: the two ``study.json`` files of the same command (the same panel directory and ``--out``, run
one after the other, each result moved aside), the same way, with the keys that measure wall time or name
the checkout (:data:`STUDY_VOLATILE`, wherever they occur) masked.

Exit 0 when everything is identical, 1 on the first difference (printed), 2 on bad input.
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

#: Fields of a bracket cell's provenance that measure wall time or name the git checkout.
CELL_VOLATILE = (("search", "seconds"), ("search", "code", "commit"), ("search", "code", "dirty"))
#: Columns of cells.csv that measure wall time.
TABLE_VOLATILE = ("seconds", "geometry_seconds")
#: Keys of study.json that measure wall time or name the checkout, masked wherever they occur.
STUDY_VOLATILE = ("seconds", "commit", "dirty")


def _split(path: Path) -> tuple[bytes, dict, bytes]:
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    return raw[8:8 + n], header, raw[8 + n:]


def _mask(obj: dict, path: tuple) -> None:
    for key in path[:-1]:
        obj = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(obj, dict) and path[-1] in obj:
        obj[path[-1]] = None


def bracket_doc(path: Path) -> tuple[str, dict, bytes]:
    """(masked claim document text, tensor table, data section) of a bracket file."""
    _, header, data = _split(path)
    text = header["__metadata__"]["softrank"]
    doc = json.loads(text)
    if json.dumps(doc) != text:
        raise SystemExit(f"{path}: the claim document does not round-trip through json.dumps; cannot mask")
    for cell in doc["cells"]:
        for field in CELL_VOLATILE:
            _mask(cell.get("provenance", {}), field)
    table = {k: v for k, v in header.items() if k != "__metadata__"}
    return json.dumps(doc), table, data


def _walk_mask(obj) -> None:
    if isinstance(obj, dict):
        for k in list(obj):
            if k in STUDY_VOLATILE:
                obj[k] = None
            else:
                _walk_mask(obj[k])
    elif isinstance(obj, list):
        for v in obj:
            _walk_mask(v)


def record_search(path: Path) -> dict:
    """A cell record's ``search`` object with the code's commit and dirtiness masked."""
    search = json.loads(path.read_text()).get("search")
    if isinstance(search, dict):
        _mask(search, ("code", "commit"))
        _mask(search, ("code", "dirty"))
    return search


def compare_bracket(a: Path, b: Path) -> int:
    if bracket_doc(a) != bracket_doc(b):
        print(f"DIFFERENT: {a} and {b}")
        return 1
    print(f"identical: {a.name} and {b.name} byte for byte but the masked fields "
          f"{', '.join('.'.join(f) for f in CELL_VOLATILE)}")
    return 0


def compare_panel(a: Path, b: Path) -> int:
    files = 0
    for sub in ("brackets", "heads"):
        names_a = sorted(p.name for p in (a / sub).glob("*.safetensors"))
        names_b = sorted(p.name for p in (b / sub).glob("*.safetensors"))
        if names_a != names_b:
            print(f"{sub}/: the directories hold different files: {names_a} vs {names_b}")
            return 1
        for name in names_a:
            pa, pb = a / sub / name, b / sub / name
            if sub == "heads":
                same = pa.read_bytes() == pb.read_bytes()
            else:
                same = bracket_doc(pa) == bracket_doc(pb)
            if not same:
                print(f"DIFFERENT: {sub}/{name}")
                return 1
            files += 1
    tables = []
    for d in (a, b):
        with open(d / "cells.csv", newline="") as fh:
            rows = list(csv.reader(fh))
        masked = [i for i, name in enumerate(rows[0]) if name in TABLE_VOLATILE]
        tables.append([[v if i not in masked else "" for i, v in enumerate(r)] for r in rows])
    if tables[0] != tables[1]:
        print("DIFFERENT: cells.csv")
        return 1
    records = sorted(p.name for p in (a / "cells").glob("*.json"))
    if records != sorted(p.name for p in (b / "cells").glob("*.json")):
        print("cells/: the directories hold different records")
        return 1
    for name in records:
        if record_search(a / "cells" / name) != record_search(b / "cells" / name):
            print(f"DIFFERENT: cells/{name} (its search provenance)")
            return 1
    print(f"identical: {files} files ({len(names_a)} head files whole; bracket files byte for byte but the "
          f"masked fields {', '.join('.'.join(f) for f in CELL_VOLATILE)}); cells.csv: {len(tables[0]) - 1} rows x "
          f"{len(tables[0][0])} columns equal but {', '.join(TABLE_VOLATILE)}; the search provenance of "
          f"{len(records)} cell records equal but code.commit, code.dirty")
    return 0 if files else 1


def compare_study(a: Path, b: Path) -> int:
    ta, tb = a.read_text(), b.read_text()
    da, db = json.loads(ta), json.loads(tb)
    _walk_mask(da)
    _walk_mask(db)
    if da != db:
        print(f"DIFFERENT: {a} and {b}")
        return 1
    print(f"identical: {a.name} ({len(ta)} and {len(tb)} bytes; equal but the masked keys "
          f"{', '.join(STUDY_VOLATILE)}; byte-identical whole: {ta == tb})")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    modes = {"panel": compare_panel, "bracket": compare_bracket, "study": compare_study}
    if len(argv) != 3 or argv[0] not in modes:
        print("usage: python -m bench.contracts_identity panel|bracket|study A B", file=sys.stderr)
        return 2
    return modes[argv[0]](Path(argv[1]), Path(argv[2]))


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

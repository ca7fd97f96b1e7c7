"""The import rules of docs/architecture.md, read from the source with ``ast``; the doc's import table and
its size of the trusted core, checked against these rules and the tree."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.core_size import count
from tests.helpers import PACKAGES
from tests.helpers import imports_of as _imports

ROOT = Path(__file__).resolve().parents[1]
PROJECT = PACKAGES
#: what every float-tier package may use: its process state and the optional heavy packages
FLOAT_BASE = ("numeric.runtime", "numeric._optional")
#: package -> project packages it may import (prefix match on the imported module).
#: ``fileio`` (the safe reader and writer, the bracket writer) sits beside the trusted core: it imports
#: ``exact`` and never ``numeric``, so the exact producers (``oracles``, ``proofs_checks``) use it without
#: importing the float tier.
ALLOWED = {
    "exact": ("exact",),
    # the second checker shares no code with the exact tier or the float tier (docs/crosscheck.md)
    "crosscheck": ("crosscheck",),
    "fileio.safeio": ("exact.errors",),
    "fileio.bracketwriter": ("exact", "fileio.safeio"),
    # process state and the optional heavy packages: below every float-tier package
    "numeric._optional": ("exact.errors",),
    "numeric.runtime": ("exact.errors", "numeric._optional"),
    "oracles": ("exact", "oracles", "fileio"),
    "proofs_checks": ("exact", "proofs_checks", "fileio"),
    "numeric.heads": (*FLOAT_BASE, "exact", "numeric.heads", "fileio.safeio"),
    "numeric.search": (*FLOAT_BASE, "exact", "numeric.heads", "numeric.search", "fileio"),
    "numeric.geometry": (*FLOAT_BASE, "exact", "numeric.heads", "numeric.search.norms", "numeric.geometry",
                         "fileio.safeio"),
    "numeric.panel": (*FLOAT_BASE, "exact", "crosscheck", "numeric.heads", "numeric.search", "numeric.geometry",
                      "numeric.panel", "fileio"),
    # numeric.heads.domains: the input domains' registry (plain data, no model code), for the transfer rows;
    # numeric.search.driver: the attention-SVD budget target is recomputed by the search's own function
    "numeric.study": (*FLOAT_BASE, "exact", "numeric.panel", "numeric.geometry", "numeric.search.effort",
                      "numeric.study", "fileio.safeio", "numeric.heads.domains", "numeric.search.driver"),
    # replicate runs recorded runs through the command dispatcher, and reads panels through the audit
    "numeric.replicate": (*FLOAT_BASE, "exact", "numeric.panel", "numeric.__main__", "numeric.replicate",
                          "fileio.safeio"),
    # the Python front door sits on top: it may use every tier below it, and nothing imports it
    "softrank": (*FLOAT_BASE, "exact", "numeric.heads", "numeric.search", "fileio", "oracles", "proofs_checks",
                 "softrank"),
}
FORBIDDEN_IN_CORE = ("torch", "transformers", "scipy", "sklearn", "highspy", "numeric")


def _modules(package: str):
    folder = ROOT.joinpath(*package.split("."))
    module = folder.with_suffix(".py")
    return [module] if module.is_file() else sorted(folder.rglob("*.py"))


def _project(name: str) -> bool:
    return name.split(".")[0] in PROJECT


def _violations(package: str, paths) -> list[str]:
    return [f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name} imports {name}"
            for p in paths for name in _imports(p)
            if _project(name) and not any(name == a or name.startswith(a + ".") for a in ALLOWED[package])]


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_the_rules_allow(package):
    bad = _violations(package, _modules(package))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", ["oracles", "proofs_checks"])
def test_exact_producers_import_nothing_of_the_float_tier(package, tmp_path):
    """``oracles`` and ``proofs_checks`` write and read through ``fileio``, never ``numeric``; negative control:
    a planted import of the float tier's old home of the safe reader is a violation."""
    assert not [n for p in _modules(package) for n in _imports(p) if n.split(".")[0] == "numeric"]
    assert not any(a.split(".")[0] == "numeric" for a in ALLOWED[package])
    planted = tmp_path / "m.py"
    planted.write_text("from numeric.safeio import read_json\nfrom fileio.safeio import read_json as ok\n")
    assert _violations(package, [planted]) == ["m.py imports numeric.safeio"]


def test_trusted_core_imports_no_float_machinery():
    bad = [f"{p.relative_to(ROOT)} imports {name}" for p in _modules("exact") for name in _imports(p)
           if name.split(".")[0] in FORBIDDEN_IN_CORE]
    assert not bad, "\n".join(bad)


def test_the_writer_imports_no_float_machinery():
    """``oracles`` and ``proofs_checks`` may use ``fileio`` because it pulls in no float search."""
    bad = [name for p in _modules("fileio") for name in _imports(p) if name.split(".")[0] in FORBIDDEN_IN_CORE]
    assert not bad, bad


def test_nothing_below_the_panel_imports_it():
    bad = [f"{p.relative_to(ROOT)} imports {name}"
           for pkg in ("exact", "fileio", "oracles", "proofs_checks", "numeric.heads", "numeric.search",
                       "numeric.geometry")
           for p in _modules(pkg) for name in _imports(p)
           if name == "numeric.panel" or name.startswith("numeric.panel.")]
    assert not bad, "\n".join(bad)


def test_nothing_imports_the_front_door():
    bad = [f"{p.relative_to(ROOT)} imports {name}"
           for pkg in ("exact", "fileio", "numeric", "oracles", "proofs_checks")
           for p in _modules(pkg) for name in _imports(p) if name.split(".")[0] == "softrank"]
    assert not bad, "\n".join(bad)


def test_rules_catch_a_violation(tmp_path):
    """The checker itself sees a forbidden import (a test that could not fail would prove nothing)."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from numeric.panel import cli\n    import torch\n")
    assert set(_imports(f)) == {"numeric.panel", "torch"}


# ---- docs/architecture.md: its import table and its size of the trusted core ---------------------------------

def _architecture() -> str:
    return (ROOT / "docs" / "architecture.md").read_text()


def _doc_table(text: str) -> dict[str, set[str]]:
    """package -> the project modules its row of the import table names (backticked), itself left out."""
    rules = text.split("## Import rules", 1)[1]
    out = {}
    for line in rules.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not re.fullmatch(r"`[\w.]+`", cells[0]):
            continue
        package = cells[0].strip("`")
        out[package] = {n for n in re.findall(r"`([\w.]+)`", cells[1]) if _project(n)} - {package}
    return out


def _float_tier(package: str) -> bool:
    return package == "softrank" or (package.startswith("numeric.") and package not in FLOAT_BASE)


def _code_table() -> dict[str, set[str]]:
    """ALLOWED as the doc states it: without the package itself and the float tier's common base."""
    return {pkg: set(allowed) - {pkg} - (set(FLOAT_BASE) if _float_tier(pkg) else set())
            for pkg, allowed in ALLOWED.items()}


def test_the_docs_import_table_is_the_rules_of_this_test():
    assert _doc_table(_architecture()) == _code_table()
    rules = " ".join(_architecture().split("## Import rules", 1)[1].split())
    m = re.search(r"may also import (`[\w.]+`(?: and `[\w.]+`)*);", rules)
    assert m and tuple(re.findall(r"`([\w.]+)`", m.group(1))) == FLOAT_BASE


def test_the_docs_trusted_core_size_is_the_tree():
    """The tree's line count of ``exact/`` is what ``python -m bench.core_size`` counts today."""
    m = re.search(r"([\d,]+) lines: ([\d,]+) of code", _architecture())
    assert m, "docs/architecture.md: the trusted core's 'N lines: M of code' is gone"
    rows = [count(f) for f in sorted((ROOT / "exact").glob("*.py"))]
    stated = tuple(int(g.replace(",", "")) for g in m.groups())
    assert stated == (sum(r["lines"] for r in rows), sum(r["code"] for r in rows))


def test_the_doc_checks_can_fail():
    """Negative controls: a row that names one more module, and a row gone, are seen."""
    text = _architecture()
    assert _doc_table(text.replace("| `proofs_checks` | `exact`, `fileio`;", "| `proofs_checks` | `exact`, `fileio`, "
                                   "`numeric.search`;")) != _code_table()
    assert _doc_table(text.replace("| `numeric.heads` |", "| numeric.heads |")) != _code_table()

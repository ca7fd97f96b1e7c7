"""The import rules of docs/architecture.md, read from the source with ``ast``."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("exact", "numeric", "oracles", "proofs_checks", "softrank", "crosscheck")
#: package -> project packages it may import (prefix match on the imported module)
#: ``numeric.bracketwriter`` (numpy and safetensors only) is the one float-tier module every producer may use,
#: with ``numeric.safeio`` (the standard library only): the safe writer and reader (safe file I/O).
#: what every float-tier package may use: its process state and the optional heavy packages
FLOAT_BASE = ("numeric.runtime", "numeric._optional")
ALLOWED = {
    "exact": ("exact",),
    # the second checker shares no code with the exact tier or the float tier (docs/crosscheck.md)
    "crosscheck": ("crosscheck",),
    "numeric.safeio": (),
    # process state and the optional heavy packages: below every float-tier package
    "numeric._optional": ("exact.errors",),
    "numeric.runtime": ("exact.errors", "numeric._optional"),
    "numeric.bracketwriter": ("exact", "numeric.safeio"),
    "oracles": ("exact", "oracles", "numeric.bracketwriter", "numeric.safeio"),
    "proofs_checks": ("exact", "proofs_checks", "numeric.bracketwriter", "numeric.safeio"),
    "numeric.heads": (*FLOAT_BASE, "exact", "numeric.heads", "numeric.safeio"),
    "numeric.search": (*FLOAT_BASE, "exact", "numeric.heads", "numeric.search", "numeric.bracketwriter",
                       "numeric.safeio"),
    "numeric.geometry": (*FLOAT_BASE, "exact", "numeric.heads", "numeric.search.norms", "numeric.geometry",
                         "numeric.safeio"),
    "numeric.panel": (*FLOAT_BASE, "exact", "crosscheck", "numeric.heads", "numeric.search", "numeric.geometry",
                      "numeric.panel", "numeric.bracketwriter", "numeric.safeio"),
    # numeric.heads.domains: the input domains' registry (plain data, no model code), for the transfer rows;
    # numeric.search.driver: the attention-SVD budget target is recomputed by the search's own function
    "numeric.study": (*FLOAT_BASE, "exact", "numeric.panel", "numeric.geometry", "numeric.search.effort",
                      "numeric.study", "numeric.safeio", "numeric.heads.domains", "numeric.search.driver"),
    # replicate runs recorded runs through the command dispatcher, and reads panels through the audit
    "numeric.replicate": (*FLOAT_BASE, "exact", "numeric.panel", "numeric.__main__", "numeric.replicate",
                          "numeric.safeio"),
    # the Python front door sits on top: it may use every tier below it, and nothing imports it
    "softrank": (*FLOAT_BASE, "exact", "numeric.heads", "numeric.search", "numeric.bracketwriter", "numeric.safeio",
                 "oracles", "proofs_checks", "softrank"),
}
FORBIDDEN_IN_CORE = ("torch", "transformers", "scipy", "sklearn", "highspy", "numeric")


def _imports(path: Path):
    """Absolute module names imported anywhere in ``path`` (function-level imports included)."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            if node.module in PROJECT:      # "from numeric import search" names a submodule
                yield from (f"{node.module}.{a.name}" for a in node.names)


def _modules(package: str):
    folder = ROOT.joinpath(*package.split("."))
    module = folder.with_suffix(".py")
    return [module] if module.is_file() else sorted(folder.rglob("*.py"))


def _project(name: str) -> bool:
    return name.split(".")[0] in PROJECT


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_the_rules_allow(package):
    bad = [f"{p.relative_to(ROOT)} imports {name}"
           for p in _modules(package) for name in _imports(p)
           if _project(name) and not any(name == a or name.startswith(a + ".") for a in ALLOWED[package])]
    assert not bad, "\n".join(bad)


def test_trusted_core_imports_no_float_machinery():
    bad = [f"{p.relative_to(ROOT)} imports {name}" for p in _modules("exact") for name in _imports(p)
           if name.split(".")[0] in FORBIDDEN_IN_CORE]
    assert not bad, "\n".join(bad)


def test_the_writer_imports_no_float_machinery():
    """``oracles`` and ``proofs_checks`` may use the writer because it pulls in no float search."""
    bad = [name for pkg in ("numeric.bracketwriter", "numeric.safeio") for p in _modules(pkg) for name in _imports(p)
           if name.split(".")[0] in FORBIDDEN_IN_CORE and name != "numeric.safeio"]
    assert not bad, bad


def test_nothing_below_the_panel_imports_it():
    bad = [f"{p.relative_to(ROOT)} imports {name}"
           for pkg in ("exact", "oracles", "proofs_checks", "numeric.heads", "numeric.search", "numeric.geometry")
           for p in _modules(pkg) for name in _imports(p)
           if name == "numeric.panel" or name.startswith("numeric.panel.")]
    assert not bad, "\n".join(bad)


def test_nothing_imports_the_front_door():
    bad = [f"{p.relative_to(ROOT)} imports {name}"
           for pkg in ("exact", "numeric", "oracles", "proofs_checks")
           for p in _modules(pkg) for name in _imports(p) if name.split(".")[0] == "softrank"]
    assert not bad, "\n".join(bad)


def test_rules_catch_a_violation(tmp_path):
    """The checker itself sees a forbidden import (a test that could not fail would prove nothing)."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from numeric.panel import cli\n    import torch\n")
    assert set(_imports(f)) == {"numeric.panel", "torch"}

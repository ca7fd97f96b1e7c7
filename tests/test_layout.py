"""The tree as the docs describe it, the CI command as the README gives it, and an import graph
without cycles (function-level imports included: a cycle hidden in a function is still a cycle)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
NOT_PROJECT_DIRS = {"runs", "build", "dist", "shared", "node_modules"}

#: Packages whose module graph must stay acyclic: the whole project.
ACYCLIC = ("exact", "crosscheck", "fileio", "softrank", "proofs_checks", "oracles", "numeric", "research")
#: No cycle is tolerated (the refine <-> upper cycle went with numeric.search.device).
KNOWN_CYCLES: list[list[str]] = []


def _tree_block() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## The tree", 1)[1].split("```", 2)[1]
    return block.splitlines()


def _top_level_listed(lines: list[str]) -> set[str]:
    out = set()
    for line in lines:
        head = line.split("   ")[0].strip()
        if line and not line.startswith(" "):
            out |= {p.strip().rstrip("/") for p in head.split(",") if p.strip().endswith("/")}
    return out


def _numeric_listed(lines: list[str]) -> set[str]:
    out, inside = set(), False
    for line in lines:
        if line and not line.startswith(" "):
            inside = line.startswith("numeric/")
        elif inside and re.match(r"^  [a-z_]+/", line):
            out.add(line.split("/")[0].strip())
    return out


def _on_disk(folder: Path) -> set[str]:
    return {d.name for d in folder.iterdir()
            if d.is_dir() and not d.name.startswith((".", "_")) and not d.name.endswith(".egg-info")
            and d.name not in NOT_PROJECT_DIRS}


def _numeric_on_disk() -> set[str]:
    return {d.name for d in (ROOT / "numeric").iterdir() if (d / "__init__.py").is_file()}


def test_architecture_lists_the_top_level_folders_on_disk():
    assert _top_level_listed(_tree_block()) == _on_disk(ROOT)


def test_architecture_lists_the_numeric_subpackages_on_disk():
    assert _numeric_listed(_tree_block()) == _numeric_on_disk()


def test_readme_counts_and_names_the_numeric_subpackages():
    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"in (\w+) subpackages, (.*?) \(\[`docs/architecture\.md`\]", text)
    assert m, "README: the layout sentence 'in N subpackages, ...' is gone"
    assert WORDS[m.group(1)] == len(_numeric_on_disk())
    assert set(re.findall(r"`(\w+)/`", m.group(2))) - {"exact"} == _numeric_on_disk()


def test_layout_checks_can_fail():
    """Negative controls: a missing folder and a wrong count are seen."""
    lines = _tree_block()
    assert _numeric_listed([x for x in lines if not x.startswith("  study/")]) != _numeric_on_disk()
    assert _top_level_listed([x for x in lines if not x.startswith("crosscheck/")]) != _on_disk(ROOT)


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text().splitlines()
    ci = [x.strip() for x in (ROOT / ".ci" / "run").read_text().splitlines() if x.strip().startswith("pip ")]
    assert len(ci) == 1 and f"    {ci[0]}" in readme
    assert "ruff check ." in ci[0] and "mypy" in ci[0] and ci[0].endswith("python -m pytest")


# ---- the import graph ---------------------------------------------------------------------------

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all_modules() -> dict[str, Path]:
    out = {}
    for top in ("exact", "crosscheck", "softrank", "proofs_checks", "oracles", "numeric", "research"):
        for p in (ROOT / top).rglob("*.py"):
            if "__pycache__" not in p.parts:
                out[_module_name(p)] = p
    return out


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for t in targets:
            while t and t not in modules:          # "from pkg import name": the module pkg.name, else pkg
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _owned(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in ACYCLIC)


def _graph() -> dict[str, set[str]]:
    modules = _all_modules()
    # a package's __init__ re-exporting its submodules is not a cycle: only module -> module edges count
    return {n: {t for t in _edges(n, p, modules) if _owned(t) and not (n.startswith(t + ".") and
                                                                     modules[t].name == "__init__.py")}
            for n, p in modules.items() if _owned(n)}


def test_import_graph_of_the_project_is_acyclic():
    assert [c for c in _cycles(_graph()) if c not in KNOWN_CYCLES] == []


def test_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []

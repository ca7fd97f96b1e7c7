"""``docs/benchmarks.md`` from its template and the result files: the page is generated, never edited.

The template (``bench/benchmarks.md.in``) is the page's prose with placeholders on lines of their own:
``@@SUITE.TABLE@@`` becomes that table of the suite (``Suite.tables``, from ``bench/results/SUITE/*.json``),
``@@SUITE.machine@@`` the machine facts of the suite's results (CPU, cores, load, versions; no commit and
no date: the results files keep those), ``@@all.machine@@`` those of every suite's. A suite without results renders a line that says how to make
them, and a table that only the ``large`` size makes says so. ``python -m bench render --check`` exits 1 when the page differs from what the results give.
"""
from __future__ import annotations

import re
from pathlib import Path

from bench.runner import RESULTS, ROOT, load, read_results, suite_names

TEMPLATE = ROOT / "bench" / "benchmarks.md.in"
PAGE = ROOT / "docs" / "benchmarks.md"
PLACEHOLDER = re.compile(r"^@@([a-z0-9_]+)\.([a-z0-9_]+)@@$")


def machine_table(results: list[dict]) -> str:
    """One line of machine facts per distinct machine and version set among ``results``."""
    seen: dict[tuple, list[float]] = {}
    for r in results:
        m = r["machine"]
        key = (m["cpu_model"], m["cores"], m["python"], m["numpy"], m["torch"], m["python_flint"])
        loads = seen.setdefault(key, [])
        loads += [m["load_average"][0], *r.get("load_average_after", [])[:1]]
    lines = ["| CPU | cores | load average (1 min) | Python | numpy | torch | python-flint |",
             "|---|---:|---|---|---|---|---|"]
    for (cpu, cores, py, np_, torch, flint), loads in seen.items():
        lines.append(f"| {cpu} | {cores} | {min(loads):.1f} to {max(loads):.1f} | {py} | {np_} | {torch or '-'} "
                     f"| {flint} |")
    return "\n".join(lines)


def render(template: str, results_dir: Path = RESULTS) -> str:
    """The page: every placeholder line of ``template`` replaced by its table."""
    cache: dict[str, tuple[list[dict], dict[str, str]]] = {}
    out = []
    for line in template.splitlines():
        m = PLACEHOLDER.match(line.strip())
        if not m:
            out.append(line)
            continue
        name, table = m.groups()
        if name == "all" and table == "machine":
            everything = [r for n in suite_names() for r in read_results(results_dir, n)]
            out.append(machine_table(everything) if everything else "*No results yet: `python -m bench run`.*")
            continue
        if name not in cache:
            suite = load(name)
            results = read_results(results_dir, name)
            cache[name] = (results, suite.tables(results) if results else {})
        results, tables = cache[name]
        if not results:
            out.append(f"*No results yet: `{load(name).command}`.*")
        elif table == "machine":
            out.append(machine_table(results))
        elif table in tables:
            out.append(tables[table].rstrip("\n"))
        else:                               # a table of the large size only
            out.append(f"*Not in the shipped results: `{load(name).command} --size large`.*")
    return "\n".join(out) + "\n"


def render_page(results_dir: Path = RESULTS, template: Path = TEMPLATE) -> str:
    return render(template.read_text(), results_dir)

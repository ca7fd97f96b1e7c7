"""MkDocs hook: the CLI reference page, rendered from the command lines' own argparse parsers.

Each command's parser builder is imported and its ``--help`` text written into
``reference/cli.md`` at build time, so the page cannot drift from the code. A parser that
fails to import or build fails the build (strict mode turns the logged error into a failure).
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
from collections.abc import Callable

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.cli_reference")

PAGE = "reference/cli.md"

#: (command as typed, module, parser builder, what it is): the order of the page.
COMMANDS: list[tuple[str, str, str, str]] = [
    ("python -m exact verify", "exact.cli", "build_parser",
     "The trusted exact tier: re-verifies every claim of bracket files."),
    ("python -m crosscheck", "crosscheck._cli", "build_parser",
     "The independent second checker: its own reader and arithmetic, no code shared with `exact/`."),
    ("python -m numeric bracket", "numeric.search.cli", "build_parser",
     "Searches and exports the tightest bracket the exact tier accepts, for one matrix or logit file."),
    ("python -m numeric panel", "numeric.panel.cli", "build_parser",
     "The learned-head panel: extraction, search, export, exact verification; resumable."),
    ("python -m numeric report", "numeric.panel.report", "build_parser",
     "Re-verifies a panel directory with both checkers and writes its Markdown report."),
    ("python -m numeric study", "numeric.study.cli", "build_parser",
     "The held-out study of one or several panel directories."),
    ("python -m numeric replicate", "numeric.replicate.cli", "build_parser",
     "Rebuilds a recorded run by name, records its manifest, or checks a rebuild against it."),
    ("python -m oracles.twobit", "oracles.twobit", "build_parser",
     "The exact two-bit known-answer control (Appendix K.6)."),
    ("python -m proofs_checks", "proofs_checks.__main__", "build_parser",
     "The paper's appendix constructions as exact regression checks."),
    ("python -m numeric.heads.zoo", "numeric.heads.zoo.train", "_parser",
     "Trains or re-checks the small models shipped as presets."),
    ("python -m numeric.panel.arms", "numeric.panel.arms", "_parser",
     "The two-arm qualification of the ViT models (L.3)."),
]

HEADER = """# Command lines

Generated at build time from each command's argparse parser (`docs/_hooks/cli_reference.py`):
what follows is exactly what `--help` prints. Every command is also a subcommand of the
`softrank` console script (below), and every one exits with the codes of
[exit codes](exit-codes.md).

"""


def _help(parser: argparse.ArgumentParser) -> str:
    """The parser's help, and the help of each of its subcommands."""
    parts = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                parts.append(sub.format_help())
    return "\n".join(p.rstrip() for p in parts)


def _fence(text: str) -> str:
    return "```text\n" + text.rstrip() + "\n```\n"


def render() -> str:
    """The page's Markdown."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"           # argparse wraps to the terminal: fix the width
    try:
        out = [HEADER]
        dispatcher = importlib.import_module("softrank.cli")
        out.append("## `softrank`\n\nThe console script: one front door to the command lines below.\n\n")
        out.append(_fence((dispatcher.__doc__ or "").strip()))
        for command, module_name, builder, what in COMMANDS:
            module = importlib.import_module(module_name)
            build: Callable[[], argparse.ArgumentParser] = getattr(module, builder)
            out.append(f"\n## `{command}`\n\n{what} Module `{module_name}`.\n\n")
            out.append(_fence(_help(build())))
        return "".join(out)
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def on_files(files, config):
    """Add the generated page to the site's files."""
    files.append(File.generated(config, PAGE, content=render()))
    return files

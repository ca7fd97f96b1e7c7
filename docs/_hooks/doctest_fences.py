"""Griffe extension: the docstrings' doctest examples rendered as code.

The project's docstrings are plain text with ``>>>`` examples (run by ``--doctest-modules``).
Markdown would read ``>>>`` as nested block quotes and a bracketed output such as
``[0, 1, 2, 130]`` as a link; this wraps each example block (the ``>>>`` lines and their
output, up to a blank line) in a ``pycon`` fence before mkdocstrings renders it.
"""
from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """``text`` with every doctest block fenced; everything else unchanged."""
    out: list[str] = []
    inside = False
    indent = ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if not inside and stripped.startswith(">>>"):
            inside = True
            indent = line[: len(line) - len(stripped)]
            out.append(indent + "```pycon")
        elif inside and not stripped:
            out.append(indent + "```")
            inside = False
        out.append(line)
    if inside:
        out.append(indent + "```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences the doctest blocks of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)

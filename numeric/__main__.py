"""The float tier's command line: ``python -m numeric COMMAND ...``.

Commands:
  bracket   search and export brackets for one matrix or logit file
  panel     run the learned-head panel (extract, search, export, verify)
  report    re-verify a panel directory and write its Markdown report
  study     the held-out study of a panel directory (does geometry explain rank demand?)
  replicate rebuild a recorded run by name, record its manifest, check a rebuild against it
"""
from __future__ import annotations

import importlib
import sys

from exact.errors import ExitCode, one_line_error
from numeric.runtime import offline_hub, pinned_threads

#: Commands that never use torch: their threads are pinned without importing it.
NO_TORCH = ("study",)
COMMANDS = {
    "bracket": "numeric.search.cli",
    "panel": "numeric.panel.cli",
    "report": "numeric.panel.report",
    "study": "numeric.study.cli",
    "replicate": "numeric.replicate.cli",
}


def main(argv=None) -> int:
    """Dispatch to a command; its process state is set here, once: threads pinned
    and restored when it returns (``numeric.runtime.pinned_threads``), Hugging
    Face offline for the process (``numeric.runtime.offline_hub``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return ExitCode.OK
    if not argv:
        return one_line_error("python -m numeric", f"a command is required: {', '.join(COMMANDS)}")
    if argv[0] not in COMMANDS:
        return one_line_error("python -m numeric", f"unknown command {argv[0][:40]!a}; commands: {', '.join(COMMANDS)}")
    offline_hub()
    module = importlib.import_module(COMMANDS[argv[0]])
    with pinned_threads(torch=argv[0] not in NO_TORCH):
        return module.main(argv[1:])


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)

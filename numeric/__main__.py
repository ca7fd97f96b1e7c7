"""The float tier's command line: ``python -m numeric COMMAND ...``.

Commands:
  bracket   search and export brackets for one matrix or logit file
  panel     run the learned-head panel (extract, search, export, verify)
  report    write the Markdown report of a panel directory
"""
from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "bracket": "numeric.search.cli",
    "panel": "numeric.panel.runner",
    "report": "numeric.panel.report",
}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__.strip(), file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"python -m numeric: error: unknown command {argv[0]!r}", file=sys.stderr)
            return 2
        return 0 if argv else 2
    module = importlib.import_module(COMMANDS[argv[0]])
    return module.main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())

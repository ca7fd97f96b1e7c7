"""Running and reporting a panel: runner, table, report and figures.

Owns: the panel runner (``runner``: extraction, search, export, exact
verification, resumable), the report (``report``) and its geometry section.

May import: every other ``numeric`` subpackage and ``exact``. Nothing imports
``numeric.panel``.
"""

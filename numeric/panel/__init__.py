"""Running and reporting a panel: cells, runner, table, audit, report and figures.

Owns, one concept per module, in the order a cell flows:

- ``cli``: ``python -m numeric panel`` (arguments, run identity, summary);
- ``provenance``: the run identity and ``panel.json`` (effort, tolerances,
  versions, code); a resume with another identity is refused;
- ``runner``: serial, local worker processes, or Dask (``cluster``);
- ``cell``: one (head, source) cell: extract, search, export, verify, record;
- ``table``: cell records and ``cells.csv``, written atomically;
- ``process``: threads and descriptors, set only at the entry points;
- ``audit``: every bracket file re-verified by the exact tier, records checked;
- ``binding``: heads bound to the model (near-duplicate heads; ``--check-heads`` re-extracts each head and
  transfers its brackets);
- ``report``, ``figures``, ``report_geometry``: ``python -m numeric report``.
- ``arms``: ``python -m numeric.panel.arms``, the ViT two-arm qualification
  (Appendix L.3): one panel per arm through ``cli``, then the paired comparison.

May import: every other ``numeric`` subpackage and ``exact``. Nothing imports
``numeric.panel`` (but ``numeric.__main__``, for ``process``). Imports
inside go one way: cli -> runner -> cell -> table; report -> audit -> binding, table.
"""

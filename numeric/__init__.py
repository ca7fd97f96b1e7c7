"""The float tier of softrank-verify: searches, never judges.

The pipeline, in the order a cell flows through it::

    heads/     model -> logits and attention matrices (sources, corpus)
    search/    matrix -> witnesses -> bracket file (exported, re-checked)
    (exact/)   bracket file -> verdicts: the only source of truth
    geometry/  logits -> interaction-geometry descriptors
    panel/     runner, table and report over many cells

Import rules (``docs/architecture.md``): ``heads`` imports no other
subpackage; ``search`` may import ``heads`` only for the float softmax;
``geometry`` may import ``search.norms``-level helpers and ``heads``;
``panel`` may import all of them. Any subpackage may import ``exact``;
``exact`` never imports ``numeric``.
"""

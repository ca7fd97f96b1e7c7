"""File input and output that both tiers may use: the safe reader and writer (``fileio.safeio``) and the
bracket-file writer (``fileio.bracketwriter``).

Neither the trusted core nor the float tier: it imports ``exact`` (the format's constants, the cell record,
the exception base) and never ``numeric``, so the exact producers (``oracles``, ``proofs_checks``) write
and read through it without importing the float tier (``tests/test_architecture.py``).
"""

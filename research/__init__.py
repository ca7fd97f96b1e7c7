"""Research scripts of the odd-map lower certificates (see research/README.md); run them from the
repository root as ``python -m research.NAME``."""

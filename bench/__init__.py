"""The benchmark suite: ``python -m bench run [SUITE ...]`` measures, ``python -m bench render`` regenerates
docs/benchmarks.md (``bench.cli``). The suites are the modules of ``bench.suites``; ``bench.common`` holds what
they and the before/after tools share. Tools run as ``python -m bench.NAME`` from the repository root."""

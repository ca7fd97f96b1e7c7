"""Benchmark scripts (run as ``python bench/NAME.py``); a package so that tests import their helpers
as ``bench.NAME`` instead of editing ``sys.path``."""

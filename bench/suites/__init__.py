"""The benchmark suites: one module per suite, each defining ``SUITE`` (``bench.runner.Suite``).

To add a suite, add a module here (``bench.runner.suite_names`` finds it), a smoke test in
``tests/test_bench_smoke.py``, and its ``@@NAME.TABLE@@`` lines in ``bench/benchmarks.md.in``.
"""

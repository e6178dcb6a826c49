"""The benchmarks: scripts run as ``.venv/bin/python bench/NAME.py``, each over ``bench.harness``.

A package so that ``bench.harness`` and the scripts whose logic the tests check (``fusion_fit``,
``coverage``) import as ``bench.*`` from a script, from ``python -m bench.NAME`` and under pytest.
"""

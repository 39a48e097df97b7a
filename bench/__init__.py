"""Benchmarks: ``make bench`` (``python -m bench``). Not run by the tests."""

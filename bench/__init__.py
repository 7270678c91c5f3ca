"""Benchmarks, run as ``python -m bench.<name>`` (not part of the installed package)."""

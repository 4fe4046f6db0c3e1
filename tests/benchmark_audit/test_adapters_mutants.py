"""Mutation-directed tests of the benchmark readers (``clip_cycles/benchmark_audit/adapters.py``), issue 56.

Each test reads a hand-written file and checks the subset's comparisons, roles and counts against
values worked out by hand here, never through the reader's own helpers.
"""

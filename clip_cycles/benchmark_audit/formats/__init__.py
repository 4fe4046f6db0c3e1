"""One module per benchmark format, each declaring its fields, subsets and what one comparison is.

Every module defines ``ADAPTER`` (an :class:`~clip_cycles.benchmark_audit.adapters.Adapter`);
:data:`clip_cycles.benchmark_audit.adapters.FORMAT_MODULES` registers it lazily under its name.
"""

"""Audit any compositionality benchmark: how far a blind score gets, and its exact cycles.

Formats are registered adapters (:mod:`.adapters`): ``winoground``, ``sugarcrepe``,
``aro`` and ``comparison_table``; :func:`register_adapter` adds one. Each subset becomes
linear comparisons of image-caption scores (:mod:`.design`), audited by
:func:`audit_subset` (:mod:`.audit`): signed-degree balance and Theorem 1's witness,
caption-length rules, cross-validated caption-only and image-only probes on the model's
embeddings, the model's accuracy, and the exact cycles hidden in the design with their
CycleAcc. :func:`audit_benchmark` runs it all for a model; ``clip-cycles audit-benchmark``
and the ``audit/<format>`` tasks (clip_benchmark) call it.
"""

from clip_cycles.benchmark_audit.adapters import ADAPTERS, Adapter, get_adapter, load_benchmark, register_adapter
from clip_cycles.benchmark_audit.audit import AuditSettings, Embeddings, SubsetAudit, audit_subset, summarize
from clip_cycles.benchmark_audit.design import (
    ComparisonSet,
    ComparisonSetBuilder,
    CroppedImageItem,
    pair_crossing_comparisons,
)
from clip_cycles.benchmark_audit.run import BenchmarkAudit, audit_benchmark, embed_subsets

__all__ = [
    "ADAPTERS",
    "Adapter",
    "AuditSettings",
    "BenchmarkAudit",
    "ComparisonSet",
    "ComparisonSetBuilder",
    "CroppedImageItem",
    "Embeddings",
    "SubsetAudit",
    "audit_benchmark",
    "audit_subset",
    "embed_subsets",
    "get_adapter",
    "load_benchmark",
    "pair_crossing_comparisons",
    "register_adapter",
    "summarize",
]

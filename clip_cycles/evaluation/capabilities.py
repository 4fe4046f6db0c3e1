"""What a task needs from a model backend, checked before any data is read or encoded.

Every entry point (``clip-cycles eval``/``encode``, the clip_benchmark plugin) calls
:func:`check_backend_for_tasks` with the backend (its record, or its name) before it loads data
or a model; the check asks the record (:meth:`~clip_cycles.encoding.backends.Backend.can`), so a
backend that cannot serve a task (an image-only ``timm`` or ``hf_vision`` model on a cycle
task, a pair-scoring ``hf_vlm`` on a probe) stops with the sentence of
:func:`clip_cycles.encoding.backends_vision.require_embeddings` instead of failing after the
images were encoded.
"""

from __future__ import annotations

from typing import Sequence

from clip_cycles.encoding.backends import PAIR_SCORES, Backend, resolve_backend
from clip_cycles.encoding.backends_vision import require_embeddings
from clip_cycles.tasks.registry import AnyTask

#: Output types scored zero-shot from one score per (image, caption) pair: a pair-scoring backend serves them.
PAIR_SCORED: frozenset[str] = frozenset({"cycle_selection", "benchmark_cycles"})
#: Output types that need caption embeddings (or pair scores, for the PAIR_SCORED ones).
NEEDS_CAPTIONS: frozenset[str] = frozenset({"cycle_selection", "benchmark_cycles", "cycle_probe", "cycle_transfer", "cycle_oe"})
#: Output types that need image embeddings (caption ones too when the concept embedding is a text).
NEEDS_IMAGES: frozenset[str] = NEEDS_CAPTIONS | {"attribute_splits"}


def check_backend_for_tasks(tasks: Sequence[AnyTask], backend: Backend | str, model: str | None) -> None:
    """Raise the backend's ValueError when it lacks what one of ``tasks`` needs (nothing is loaded or read).

    ``backend`` is a record or a name (resolved once here). Output types not listed here
    (``benchmark_audit``, a third-party runner's) are not checked.
    """
    record = resolve_backend(backend)
    for task in tasks:
        if task.output_type in PAIR_SCORED and record.can(PAIR_SCORES):
            continue  # zero-shot cycle scores straight from the pair scores
        if task.output_type not in NEEDS_IMAGES:
            continue
        text_concepts = getattr(task, "embedding", "image") != "image"  # attribute tasks embedding names/definitions
        try:
            require_embeddings(record, model or "", need_text=task.output_type in NEEDS_CAPTIONS or text_concepts)
        except ValueError as error:
            raise ValueError(f"task {task.name}: {error}") from None


__all__ = ["NEEDS_CAPTIONS", "NEEDS_IMAGES", "PAIR_SCORED", "check_backend_for_tasks"]
